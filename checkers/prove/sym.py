"""Dual-mode operators: the same encoding code runs on Python ints/bools (concrete evaluation,
fast) and on z3 terms (symbolic). Each operator folds when its inputs are concrete, so a concrete
state is stepped by plain Python and a symbolic one builds a z3 formula, from one source text.
"""
from __future__ import annotations

import z3


def sym(x) -> bool:
    return isinstance(x, z3.ExprRef)


def ite(c, a, b):
    if not sym(c):
        return a if c else b
    if a is b:
        return a
    return z3.If(c, a, b)


def AND(*xs):
    rest = []
    for x in xs:
        if sym(x):
            rest.append(x)
        elif not x:
            return False
    if not rest:
        return True
    return rest[0] if len(rest) == 1 else z3.And(rest)


def OR(*xs):
    rest = []
    for x in xs:
        if sym(x):
            rest.append(x)
        elif x:
            return True
    if not rest:
        return False
    return rest[0] if len(rest) == 1 else z3.Or(rest)


def NOT(x):
    return z3.Not(x) if sym(x) else not x


def IMPLIES(a, b):
    return OR(NOT(a), b)


def MIN(a, b):
    if not sym(a) and not sym(b):
        return a if a <= b else b
    return ite(a <= b, a, b)


def MAX(a, b):
    if not sym(a) and not sym(b):
        return a if a >= b else b
    return ite(a >= b, a, b)


def SUM(xs):
    """Count of true booleans (or sum of ints)."""
    total = 0
    for x in xs:
        if sym(x):
            total = total + (z3.If(x, 1, 0) if z3.is_bool(x) else x)
        else:
            total = total + int(x)
    return total


def sel(lst, idx, default=0):
    """lst[idx] for a concrete or symbolic index; `default` outside the list."""
    if not sym(idx):
        return lst[idx] if 0 <= idx < len(lst) else default
    out = default
    for k in range(len(lst) - 1, -1, -1):
        out = ite(idx == k, lst[k], out)
    return out


def EQ(a, b):
    if not sym(a) and not sym(b):
        return a == b
    return a == b


def NE(a, b):
    if not sym(a) and not sym(b):
        return a != b
    return a != b
