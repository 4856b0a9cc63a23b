import util
from util import used

HANDLERS = [util.referenced]


def run(obj):
    obj.mystery()
    return used(1)
