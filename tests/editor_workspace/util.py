"""Helpers used by main.py (a small workspace for the editor-client tests)."""

import functools

__all__ = ["used", "exported_unused"]


def used(x):
    return x + 1


def unused_helper(x):
    return x * 2


def exported_unused():
    return 1


@functools.cache
def cached_unused():
    return 2


def mystery():
    return 3


def referenced():
    return 4


class Box:
    def __init__(self, v):
        self.v = v

    def __repr__(self):
        return f"Box({self.v})"

    def spare(self):
        return self.v


def test_like():
    return 5


def only_named_elsewhere():
    return 6
