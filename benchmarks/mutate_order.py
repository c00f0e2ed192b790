"""What the order of the spec/ killers costs per mutant: the same mutants, each run under the
previous order and under today's (benchmarks/mutate.py SPEC_TESTS), alternating which goes
first, in one run. `python -m benchmarks.mutate_order DIR` with DIR a session kept by
`python -m benchmarks.mutate --keep DIR`.

Only the model tests are timed (`pytest -x`): the quick check that follows them for a mutant they
miss is the same command under either order. The two orders must agree on every mutant (killed
or not): an order may only change how soon a mutant dies, never whether it does.
Prints seconds per mutant under each order and the ratio; exit 0 when the orders agree, 1 when
they do not, 3 on bad arguments.
"""
from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.mutate import IN_ANNOTATION, SPEC_TESTS, copy_tree

# The order before the killers were sorted to fail soonest (test_model_invariants.py and
# test_model_pruning.py did not exist then; they go where today's order has them, so both orders
# run the same files).
PREVIOUS_SPEC_TESTS = ("tests/test_model_rules.py", "tests/test_model_rules_table.py", "tests/test_model_internal.py",
                       "tests/test_suite_teeth.py", "tests/test_model_scenarios.py", "tests/test_model_golden.py",
                       "tests/test_model_trace.py")


def _previous_with_new_files() -> tuple[str, ...]:
    extra = [f for f in SPEC_TESTS if f not in PREVIOUS_SPEC_TESTS]
    return (*PREVIOUS_SPEC_TESTS[:-1], *extra, PREVIOUS_SPEC_TESTS[-1])


def _pytest(tests, cwd: Path, env: dict) -> tuple[bool, float]:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", "--timeout", "300", *tests]
    t0 = time.monotonic()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True)
    return r.returncode == 0, time.monotonic() - t0


def main(argv=None) -> int:
    import os
    ap = argparse.ArgumentParser(prog="python -m benchmarks.mutate_order", description=__doc__.split("\n\n")[0])
    ap.add_argument("session", type=Path, help="a directory kept by mutate --keep (spec.sqlite and tree/)")
    ap.add_argument("--mutants", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    db_path, tree = a.session / "spec.sqlite", a.session / "tree"
    if not db_path.exists() or not tree.is_dir() or a.mutants < 1:
        print(f"{a.session}: no spec session kept there (or --mutants < 1)", file=sys.stderr)
        return 3
    try:
        from cosmic_ray.work_db import WorkDB, use_db
        from cosmic_ray.work_item import WorkerOutcome
    except ImportError:
        print("cosmic-ray is not installed: pip install -e '.[mutate]'", file=sys.stderr)
        return 3
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        results = dict(db.results)
        run = sorted((item.mutations[0].start_pos, item.mutations[0].operator_name, item.mutations[0].occurrence,
                      str(item.mutations[0].module_path))
                     for item in db.work_items
                     if item.job_id in results and results[item.job_id].worker_outcome != WorkerOutcome.SKIPPED
                     and results[item.job_id].output != IN_ANNOTATION)
    picked = random.Random(a.seed).sample(run, min(a.mutants, len(run)))
    orders = {"previous": _previous_with_new_files(), "today": SPEC_TESTS}
    print(f"seed={a.seed} mutants={len(picked)} session={a.session}")
    work = Path(a.session) / "order-scratch"
    totals = {k: 0.0 for k in orders}
    disagree = 0
    for n, (pos, op, occ, path) in enumerate(picked):
        if work.exists():
            shutil.rmtree(work)
        work.mkdir()
        copy_tree(work)      # this checkout (its tests), with the session's file mutated
        if (work / path).read_bytes() != (tree / path).read_bytes():
            print(f"{path} changed since the session was made: its mutants no longer apply", file=sys.stderr)
            return 3
        env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run([sys.executable, "-m", "cosmic_ray.cli", "apply", path, op, str(occ)],
                           cwd=work, env=env, capture_output=True, text=True)
        if r.returncode:
            print(f"cannot apply {path}:{pos[0]} {op} #{occ}: {r.stderr[-500:]}", file=sys.stderr)
            return 3
        names = list(orders) if n % 2 == 0 else list(reversed(orders))
        got = {}
        for name in names:
            got[name] = _pytest(orders[name], work, env)
            totals[name] += got[name][1]
        same = got["previous"][0] == got["today"][0]
        disagree += not same
        print(f"{path}:{pos[0]}:{pos[1]} {op}: {'survives' if got['today'][0] else 'killed'} "
              f"previous {got['previous'][1]:.1f} s, today {got['today'][1]:.1f} s"
              f"{'' if same else '  ORDERS DISAGREE'}")
    shutil.rmtree(work, ignore_errors=True)
    k = len(picked)
    print(f"per mutant: previous order {totals['previous'] / k:.1f} s, today's {totals['today'] / k:.1f} s, "
          f"ratio today/previous {totals['today'] / totals['previous']:.2f}")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
