from main import run


def entry():
    return run(None)
