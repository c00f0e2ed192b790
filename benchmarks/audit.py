"""Ordering-audit benchmark: the full default matrix of `kafkaverify audit-ordering` (6 clients ×
24 settings, 5 fault schedules per supported cell, model searches of at most 120 s) on this machine, or
a slice of it.

    python -m benchmarks.audit [--clients confluent,aiokafka,kafka-python,kafkajs,librdkafka,sarama] [--acks 1,all]
        [--retries 0,5] [--max-in-flight 1,2,5] [--idempotence on,off] [--schedules 5] [--seed 0]
        [--model-time-limit 120] [--out DIR] [--json]

Prints the wall time, broker runs and seconds per run, model seconds per setting, the verdict
counts, and a same-run baseline: one fault-free run of the same workload (ratio = seconds per
faulted run / seconds of the fault-free run). For a slice it also extrapolates the full default
matrix from the slice's per-run and per-setting figures. Needs root, nft and ip (partitions);
re-executes itself under `unshare -n`.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from impl.netfault import enter_private_netns
from kafkaverify.audit.settings import CLIENTS, client_refusal, matrix, parse_list
from kafkaverify.commands.audit import DEFAULTS


def full_matrix_cells() -> tuple[int, int, int]:
    """(settings, model settings searched, supported client × setting cells) of the default
    matrix; a model setting is searched unless the model refuses it (idempotence with acks=1)."""
    from kafkaverify.audit.model import effective
    ss = matrix(("1", "all"), (0, 5), (1, 2, 5), (True, False))
    searched = {effective(s) for s in ss if not (s.idempotence and s.acks != "all")}
    return len(ss), len(searched), sum(1 for c in CLIENTS for s in ss if client_refusal(c, s) is None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m benchmarks.audit")
    for k, v in DEFAULTS.items():
        ap.add_argument("--" + k.replace("_", "-"), default=v)
    ap.add_argument("--schedules", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--generation", default="current")
    ap.add_argument("--model-time-limit", type=float, default=120)
    ap.add_argument("--time-limit", type=float, default=3600)
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    enter_private_netns(["-m", "benchmarks.audit", *argv])
    from kafkaverify.audit.broker import run_one
    from kafkaverify.audit.matrix import run_audit
    from kafkaverify.audit.report import markdown, write
    from kafkaverify.audit.settings import Setting
    clients = parse_list(a.clients, "--clients", str, CLIENTS)
    settings = matrix(parse_list(a.acks, "--acks", str, ("1", "all")), parse_list(a.retries, "--retries", int),
                      parse_list(a.max_in_flight, "--max-in-flight", int),
                      tuple(x == "on" for x in parse_list(a.idempotence, "--idempotence", str, ("on", "off"))))
    with tempfile.TemporaryDirectory(prefix="kv-bench-audit-") as tmp:
        out = Path(a.out) if a.out else Path(tmp)
        base = run_one(clients[0], Setting("all", 5, 1, False), (), 0, out / "baseline", a.generation, True)
        t0 = time.monotonic()
        cmd = "python -m benchmarks.audit " + " ".join(argv)
        au = run_audit(a.generation, clients, settings, a.schedules, a.seed, out, a.time_limit, True,
                       model_time_limit=a.model_time_limit, command=cmd,
                       progress=lambda line: print(line, file=sys.stderr, flush=True))
        wall = time.monotonic() - t0
        write(au, out)
        runs = [r for c in au.cells for r in c.runs]
        run_s = sum(r.seconds for r in runs)
        per_run = run_s / max(1, len(runs))
        model_s = list(au.model_seconds.values())
        per_setting = sum(model_s) / max(1, len(model_s))
        n_set, n_model, n_cells = full_matrix_cells()
        # the model runs beside the brokers (its own process): the full matrix takes the longer of the two
        est = max(n_cells * 5 * per_run, n_model * per_setting)
        res = {"machine": f"{platform.machine()} {platform.python_version()}", "seed": a.seed,
               "clients": list(clients), "settings": len(settings), "schedules": a.schedules,
               "wall_seconds": round(wall, 1), "broker_runs": len(runs),
               "seconds_per_run": round(per_run, 2), "baseline_run_seconds": round(base.seconds, 2),
               "baseline_status": base.status,
               "ratio_to_baseline": round(per_run / base.seconds, 2) if base.seconds else None,
               "run_verdicts": {s: sum(1 for r in runs if r.status == s) for s in sorted({r.status for r in runs})},
               "promises_broken": len(au.broken()), "incomplete": au.incomplete,
               "model_seconds_per_model_setting": round(per_setting, 1),
               "full_matrix": {"settings": n_set, "model_settings": n_model, "supported_cells": n_cells,
                               "schedules_per_cell": 5,
                               "estimated_seconds": round(est, 0)}}
        print(markdown(au))
    print(json.dumps(res, indent=1) if a.json else "\n".join(f"{k}: {v}" for k, v in res.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
