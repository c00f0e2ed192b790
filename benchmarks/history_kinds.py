"""Valid against one-planted-anomaly histories, per anomaly kind, end to end from Parquet:
`python -m benchmarks.history_kinds [--ops N] [--seed S] [--kinds K,K...] [--dir DIR]`.

Generates one valid history (seeded, checkers/history/generate.py) and writes it as Parquet;
then for each mutation of checkers/history/seeding.py (one per plantable kind; kinds that share
a mutation are timed once) a copy with exactly one site of that anomaly planted (rate 1e-12:
one site, the first of a seeded shuffle), also as Parquet (none of this is timed). Then each
file is checked by `check_file` (what `check-history` runs) in a fresh subprocess pinned to one
core (taskset -c 0, POLARS_MAX_THREADS=1) and its CPU seconds reported next to the valid
history's, which is timed first and again last in the same run (the baseline: the lower of the
two). Each row: the kind, CPU seconds, the ratio to the valid history, the verdict's status,
the path the pipeline took (its engine line), and the kinds found. Prints seed= and the
options first."""
from __future__ import annotations

import copy
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click


def _one(path: str) -> dict:
    c0 = time.process_time()
    from checkers.history.pipeline.file_check import check_file
    r = check_file(path)
    return {"cpu_s": time.process_time() - c0, "status": r.verdict.status, "engine": r.engine,
            "ops": r.ops, "types": sorted(r.verdict.types())}


def _copy_ops(ops: list) -> list:
    """Copies of the operations a mutation may change (lists included), not of the history."""
    out = []
    for o in ops:
        c = copy.copy(o)
        if c.offsets is not None:
            c.offsets, c.values = list(c.offsets), list(c.values)
        out.append(c)
    return out


@click.command()
@click.option("--ops", type=int, default=1_000_000, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--partitions", type=int, default=8, show_default=True)
@click.option("--kinds", default="", help="comma-separated kinds (default: every plantable kind)")
@click.option("--dir", "workdir", type=click.Path(file_okay=False), default=None,
              help="where to write the histories (default: a temporary directory, removed after)")
@click.option("--one", type=str, default=None, hidden=True)
def main(ops, seed, partitions, kinds, workdir, one):
    """Valid against one-planted-anomaly histories, per anomaly kind."""
    if one is not None:
        print(json.dumps(_one(one)))
        return
    from checkers.history.generate import Params, generate_valid
    from checkers.history.seeding import SEEDABLE, plant
    from traces.history import History, history_events, write
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    # Kinds sharing a mutation are one history (the first name in sorted order).
    chosen = [k for k in sorted(SEEDABLE) if not kinds or k in kinds.split(",")]
    by_fn: dict = {}
    for k in chosen:
        by_fn.setdefault(SEEDABLE[k], []).append(k)
    print(f"seed={seed} ops={ops} partitions={partitions} kinds={','.join(chosen)} "
          f"pinned={'one core' if pin else 'no'} python={platform.python_version()} "
          f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}", flush=True)
    d = Path(workdir or tempfile.mkdtemp(prefix="kv-kinds-")).resolve()
    d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, POLARS_MAX_THREADS="1")
    h = generate_valid(Params(seed=seed, ops=ops, partitions=partitions))
    files = {"valid": d / "valid.parquet"}
    write(files["valid"], h.header, history_events(h.ops))
    for fn, names in by_fn.items():
        hk = History(header=h.header, ops=_copy_ops(h.ops))
        plant(hk, names[0], 1e-12, random.Random(seed))
        name = "/".join(names)
        files[name] = d / f"{names[0]}.parquet"
        write(files[name], hk.header, history_events(hk.ops))
        del hk
    del h

    def run(p: Path) -> dict:
        out = subprocess.run(pin + [sys.executable, "-m", "benchmarks.history_kinds", "--one", str(p)],
                             capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(out.stderr)
        return json.loads(out.stdout)

    first = run(files["valid"])
    rows = [(name, run(p)) for name, p in files.items() if name != "valid"]
    last = run(files["valid"])
    base = min(first["cpu_s"], last["cpu_s"])
    print(f"{'history':38} {'CPU s':>7} {'x valid':>8}  {'status':8} engine; kinds found")
    print(f"{'valid (first, last)':38} {base:7.2f} {1:8.2f}  {first['status']:8} {first['engine']}; "
          f"{first['cpu_s']:.2f}, {last['cpu_s']:.2f} CPU-s", flush=True)
    for name, r in rows:
        print(f"{name:38} {r['cpu_s']:7.2f} {r['cpu_s'] / base:8.2f}  {r['status']:8} {r['engine']}; "
              f"{','.join(r['types'])}", flush=True)
    if not workdir:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
