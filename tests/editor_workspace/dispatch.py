def cmd_hello():
    return "hello"


def run(name):
    return globals()["cmd_" + name]()
