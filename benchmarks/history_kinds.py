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
an earlier run left in `--dir`. Prints seed= and the options first.

The transactional kinds (checkers/history/generate_txn.py PLANTABLE: G1a, precommitted-read,
txn-atomicity) are planted into a transactional history (format version 2) of `--txn-ops`
operations and timed against a valid transactional history of the same size and seed, timed
first and last in the same way (`--txn-ops 0`: not run). The summary gives each kind's ratio
to its own baseline, whether it is within WITHIN (3x), and, for a kind that is not, why (what
the pipeline did: its engine line and the flagged partitions' share of the history)."""
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
            "ops": r.ops, "types": sorted(r.verdict.types()),
            "partitions": sorted({a.partition for a in r.verdict.anomalies + r.verdict.notes
                                  if a.partition is not None})}


# A one-anomaly history should cost at most this many times the valid one.
WITHIN = 3.0


def _why(r: dict, valid: dict) -> str:
    """Why a one-anomaly history is not within WITHIN of the valid one, from what the pipeline
    did with each (their engine lines)."""
    if r["engine"].startswith("object") and valid["engine"].startswith("object"):
        return ("both go to the oracle whole (" + r["engine"].split(": ", 1)[-1] + "); the "
                "anomaly's witnesses cost the difference")
    if r["engine"].startswith("object"):
        return "the history went to the oracle whole (" + r["engine"].split(": ", 1)[-1] + ")"
    return (f"the partition(s) holding the anomaly ({', '.join(r['partitions'])}) are judged whole by "
            "the oracle (Op objects and every rule over them), not a window around the anomaly")


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
@click.option("--txn-ops", type=int, default=100_000, show_default=True,
              help="operations of the transactional histories (0: no transactional kinds)")
@click.option("--one", type=str, default=None, hidden=True)
def main(ops, seed, partitions, kinds, workdir, reuse, txn_ops, one):
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
    from checkers.history.generate_txn import PLANTABLE, generate_txn
    txn_kinds = [k for k in PLANTABLE if txn_ops and (not kinds or k in kinds.split(","))]
    print(f"seed={seed} ops={ops} partitions={partitions} kinds={','.join(chosen)} "
          f"txn_ops={txn_ops} txn_kinds={','.join(txn_kinds)} "
          f"pinned={'one core' if pin else 'no'} python={platform.python_version()} "
          f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}", flush=True)
    d = Path(workdir or tempfile.mkdtemp(prefix="kv-kinds-")).resolve()
    d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, POLARS_MAX_THREADS="1")
    files = {"valid": d / "valid.parquet"}
    files.update({"/".join(names): d / f"{names[0]}.parquet" for names in by_fn.values()})
    txn_files = {"valid": d / "txn-valid.parquet"} if txn_kinds else {}
    txn_files.update({k: d / f"txn-{k}.parquet" for k in txn_kinds})
    if reuse:
        missing = [str(p) for p in [*files.values(), *txn_files.values()] if not p.exists()]
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
        for k, p in txn_files.items():
            ht = generate_txn(seed, ops=txn_ops, partitions=partitions, planted="" if k == "valid" else k)
            write(p, ht.header, history_events(ht.ops))
            del ht

    def run(p: Path) -> dict:
        out = subprocess.run(pin + [sys.executable, "-m", "benchmarks.history_kinds", "--one", str(p)],
                             capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(out.stderr)
        return json.loads(out.stdout)

    summary = []
    for label, group in (("", files), ("transactional ", txn_files)):
        if not group:
            continue
        first = run(group["valid"])
        print(f"\n{label + 'history':38} {'CPU s':>7}  {'status':8} engine; kinds found")
        print(f"{label + 'valid (first)':38} {first['cpu_s']:7.2f}  {first['status']:8} {first['engine']}",
              flush=True)
        rows = []
        for name, p in group.items():
            if name != "valid":
                r = run(p)
                rows.append((name, r))
                print(f"{label + name:38} {r['cpu_s']:7.2f}  {r['status']:8} {r['engine']}; "
                      f"{','.join(r['types'])}", flush=True)
        last = run(group["valid"])
        base = min(first["cpu_s"], last["cpu_s"])
        print(f"{label + 'valid (last)':38} {last['cpu_s']:7.2f}  {last['status']:8} {last['engine']}")
        summary += [(label, name, r, base, last) for name, r in rows]
    print(f"\n{'history':52} {'x valid':>8}  within {WITHIN:g}x; why not")
    for label, name, r, base, valid in sorted(summary, key=lambda x: -x[2]["cpu_s"] / x[3]):
        x = r["cpu_s"] / base
        why = "" if x <= WITHIN else _why(r, valid)
        print(f"{label + name:52} {x:8.2f}  {'yes' if x <= WITHIN else 'no'}"
              + (f"; {why}" if why else ""), flush=True)
    for label in sorted({s[0] for s in summary}):
        print(f"baseline ({label or 'non-transactional '}valid history, the lower of its two runs): "
              f"{next(s[3] for s in summary if s[0] == label):.2f} CPU-s")
    if not workdir:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
