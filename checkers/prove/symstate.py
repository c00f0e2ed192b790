"""z3 variables for an encoded state, and reading a concrete state back out of a z3 model."""
from __future__ import annotations

import z3

from checkers.prove.encoding import Encoding
from checkers.prove.sym import int_var, value


def variables(enc: Encoding, prefix: str) -> dict:
    out = {}
    for key, sort in enc.schema():
        name = prefix + "." + ".".join(str(x) for x in key)
        out[key] = z3.Bool(name) if sort == "bool" else int_var(name)
    return out


def concretize(m: z3.ModelRef, st: dict) -> dict:
    out = {}
    for k, v in st.items():
        if not z3.is_expr(v):
            out[k] = v
            continue
        out[k] = value(m.eval(v, model_completion=True))
    return out
