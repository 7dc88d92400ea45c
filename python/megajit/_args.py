"""Argument conversion shared by the classes: C ints that cannot wrap around."""

import operator

from .errors import invalid

INT_MAX = 2**31 - 1


def c_int(value, name, lo=-(2**31), hi=INT_MAX):
    """`value` as a Python int inside [lo, hi]: TypeError for a non-integer (a float
    or a string), InvalidArgument outside the range (ctypes would wrap it)."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"megajit: {name} must be an integer, not {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise invalid(f"megajit: {name} {v} outside {lo}..{hi}")
    return v


def c_float(value, name):
    """`value` as a Python float (TypeError for a non-number)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"megajit: {name} must be a number, not {type(value).__name__}") from None
