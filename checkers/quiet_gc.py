"""No cyclic garbage collection during a long pass that builds no reference cycles.

The checkers and the explorer allocate millions of tuples and objects that never form a cycle;
every full collection would walk them all again (measured: 10^6-operation history checks 5.3 s ->
3.5 s; a tenth of a compiled model search's CPU). The collector's state is restored afterwards."""
from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def quiet_gc():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
