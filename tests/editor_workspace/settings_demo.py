# names a function by string, without importing its module
ROUTES = {"hello": "util:only_named_elsewhere"}
