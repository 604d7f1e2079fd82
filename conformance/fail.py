"""How every module of the suite reports a broken promise: Fail, raised by check."""


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)
