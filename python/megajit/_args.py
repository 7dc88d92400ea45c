"""Argument conversion shared by the classes: C ints that cannot wrap around, C
strings, a config dataclass from what a constructor was given, and its C struct."""

import dataclasses
import operator
import os

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


def c_str(value, name):
    """bytes for a C string argument from a str, bytes or path (None stays NULL);
    TypeError for anything else, InvalidArgument for an embedded NUL."""
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        value = value.encode()
    if not isinstance(value, bytes):
        raise TypeError(f"megajit: {name} must be a str or path, not {type(value).__name__}")
    if b"\0" in value:
        raise invalid(f"megajit: {name} contains a NUL character")
    return value


def c_float(value, name):
    """`value` as a Python float (TypeError for a non-number)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"megajit: {name} must be a number, not {type(value).__name__}") from None


def enum_member(enum_cls, value, what):
    """A member of enum_cls from a member, its int or its name in lower case
    ("mega_moe", "swiglu", "gate"); InvalidArgument naming the known ones."""
    if isinstance(value, str):
        by_name = {m.name.lower(): m for m in enum_cls}
        if value.lower() in by_name:
            return by_name[value.lower()]
        raise invalid(f"megajit: unknown {what} {value!r} (known: {', '.join(by_name)})")
    try:
        return enum_cls(value)
    except ValueError:
        raise invalid(f"megajit: unknown {what} {value!r}") from None


def config_of(cls, config, fields):
    """The `cls` dataclass a constructor was given: `config` (an instance of cls),
    with the keyword `fields` replaced, or made of the fields alone."""
    if config is not None and not isinstance(config, cls):
        raise TypeError(f"megajit: config must be a megajit.{cls.__name__}, not {type(config).__name__}")
    try:
        if config is None:
            return cls(**fields)
        return dataclasses.replace(config, **fields) if fields else config
    except TypeError as e:
        raise TypeError(f"megajit: {e}") from None


def c_struct(ctype, plain, **given):
    """The ctypes struct `ctype` from the dataclass `plain`, field by field (same
    names, each a C int through c_int), with the fields in `given` as given."""
    return ctype(**{
        f.name: given[f.name] if f.name in given else c_int(getattr(plain, f.name), f.name)
        for f in dataclasses.fields(plain)
    })
