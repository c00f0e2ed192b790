"""z3 variables for an encoded state, and reading a concrete state back out of a z3 model."""
from __future__ import annotations

import z3

from checkers.prove.encoding import Encoding


def variables(enc: Encoding, prefix: str) -> dict:
    out = {}
    for key, sort in enc.schema():
        name = prefix + "." + ".".join(str(x) for x in key)
        out[key] = z3.Bool(name) if sort == "bool" else z3.Int(name)
    return out


def concretize(m: z3.ModelRef, st: dict) -> dict:
    out = {}
    for k, v in st.items():
        if not z3.is_expr(v):
            out[k] = v
            continue
        x = m.eval(v, model_completion=True)
        out[k] = z3.is_true(x) if z3.is_bool(x) else x.as_long()
    return out
