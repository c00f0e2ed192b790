"""Valid against one-planted-anomaly histories, per anomaly kind, end to end from Parquet:
`python -m benchmarks.history_kinds [--ops N] [--seed S] [--kinds K,K...] [--dir DIR]`.

Generates one valid history (seeded, checkers/history/generate.py) and writes it as Parquet;
then for each mutation of checkers/history/seeding.py (one per plantable kind; kinds that share
a mutation are timed once) a copy with exactly one site of that anomaly planted (rate 1e-12:
one site, the first of a seeded shuffle), also as Parquet (none of this is timed). Then each
file is checked by `check_file` (what `check-history` runs) in a fresh subprocess pinned to one
core (taskset -c 0, POLARS_MAX_THREADS=1) and its CPU seconds (imports included) reported,
with the verdict's status, the path the pipeline took (its engine line) and the kinds found,
as each finishes; the valid history is timed first and again last in the same run, and the
lower of the two is the baseline of the ratios printed at the end. `--reuse` times the files
an earlier run left in `--dir`. Prints seed= and the options first."""
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
@click.option("--reuse", is_flag=True, help="time the histories already in --dir (written by an "
              "earlier run with the same options) instead of generating them again")
@click.option("--one", type=str, default=None, hidden=True)
def main(ops, seed, partitions, kinds, workdir, reuse, one):
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
    files = {"valid": d / "valid.parquet"}
    files.update({"/".join(names): d / f"{names[0]}.parquet" for names in by_fn.values()})
    if reuse:
        missing = [str(p) for p in files.values() if not p.exists()]
        if missing:
            raise SystemExit(f"--reuse: not in {d}: {', '.join(missing)}")
    else:
        h = generate_valid(Params(seed=seed, ops=ops, partitions=partitions))
        write(files["valid"], h.header, history_events(h.ops))
        for fn, names in by_fn.items():
            hk = History(header=h.header, ops=_copy_ops(h.ops))
            plant(hk, names[0], 1e-12, random.Random(seed))
            write(files["/".join(names)], hk.header, history_events(hk.ops))
            del hk
        del h

    def run(p: Path) -> dict:
        out = subprocess.run(pin + [sys.executable, "-m", "benchmarks.history_kinds", "--one", str(p)],
                             capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(out.stderr)
        return json.loads(out.stdout)

    first = run(files["valid"])
    print(f"{'history':38} {'CPU s':>7}  {'status':8} engine; kinds found")
    print(f"{'valid (first)':38} {first['cpu_s']:7.2f}  {first['status']:8} {first['engine']}", flush=True)
    rows = []
    for name, p in files.items():
        if name != "valid":
            r = run(p)
            rows.append((name, r))
            print(f"{name:38} {r['cpu_s']:7.2f}  {r['status']:8} {r['engine']}; {','.join(r['types'])}",
                  flush=True)
    last = run(files["valid"])
    base = min(first["cpu_s"], last["cpu_s"])
    print(f"{'valid (last)':38} {last['cpu_s']:7.2f}  {last['status']:8} {last['engine']}")
    print(f"\nbaseline (the valid history, the lower of its two runs): {base:.2f} CPU-s")
    print(f"{'history':38} {'x valid':>8}")
    for name, r in sorted(rows, key=lambda x: -x[1]["cpu_s"]):
        print(f"{name:38} {r['cpu_s'] / base:8.2f}", flush=True)
    if not workdir:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
