"""Dual-mode operators: the same encoding code runs on Python ints/bools (concrete evaluation,
fast) and on z3 terms (symbolic). Each operator folds when its inputs are concrete, so a concrete
state is stepped by plain Python and a symbolic one builds a z3 formula, from one source text.
"""
from __future__ import annotations

from contextlib import contextmanager

import z3

# Integer fields are z3 Ints, or, inside `bitvectors(width)`, signed bit-vectors of that width:
# bounded BMC then bit-blasts to SAT, measured many times faster on deep producer unrollings
# (docs/benchmarks/proofs.md). Sound while no value leaves the width's range: every field moves by
# at most one per step or is set to a bounded value, so a width of 16 holds any depth below
# thousands of steps.
_WIDTH = [0]


@contextmanager
def bitvectors(width: int):
    old = _WIDTH[0]
    _WIDTH[0] = width
    try:
        yield
    finally:
        _WIDTH[0] = old


def _lift(x, other=None):
    """A Python constant as a z3 term of the sort it meets (bit-vector mode only)."""
    if not _WIDTH[0] or sym(x):
        return x
    if isinstance(x, bool) or (other is not None and sym(other) and z3.is_bool(other)):
        return z3.BoolVal(bool(x))
    return z3.BitVecVal(x, _WIDTH[0])


def IF(c, a, b):
    """z3.If over fields (constants lifted to the fields' sort)."""
    return z3.If(c, _lift(a, b), _lift(b, a))


def int_var(name: str):
    return z3.BitVec(name, _WIDTH[0]) if _WIDTH[0] else z3.Int(name)


def value(x):
    """A model's value of a field as a Python bool or int."""
    if z3.is_bool(x):
        return z3.is_true(x)
    return x.as_signed_long() if z3.is_bv(x) else x.as_long()


def sym(x) -> bool:
    return isinstance(x, z3.ExprRef)


def ite(c, a, b):
    if not sym(c):
        return a if c else b
    if a is b:
        return a
    return IF(c, a, b) if _WIDTH[0] else z3.If(c, a, b)


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


def as_bool(x):
    """x as a z3 Boolean term: a formula as it is, a Python truth value as BoolVal (for solver
    calls, which take terms only)."""
    return x if z3.is_expr(x) else z3.BoolVal(bool(x))


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
            total = total + (IF(x, 1, 0) if z3.is_bool(x) else x)
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
