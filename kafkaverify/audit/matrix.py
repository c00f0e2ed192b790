"""Runs the audit's matrix: model verdicts once per setting (in a worker process, while the
brokers run), then every client × setting cell on real clusters under the same drawn schedules;
joins them into agreements and the exit code. Bounded by a wall-clock deadline: no run or search
starts after it, and what was left is reported as incomplete.
"""
from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kafkaverify.audit.broker import BrokerRun, RunsTally, draw_schedules, run_one
from kafkaverify.audit.explained import explain
from kafkaverify.audit.model import ModelVerdict, effective, verdicts
from kafkaverify.audit.settings import QUESTIONS, Setting, client_refusal
from kafkaverify.audit.txn import TXN_QUESTIONS, TxnCell, model_verdicts as txn_model_verdicts, run_txn, txn_refusal


@dataclass
class Cell(RunsTally):
    client: str
    setting: Setting
    refusal: str | None
    planned: int
    runs: list[BrokerRun] = field(default_factory=list)

    def witness(self, q: str) -> BrokerRun | None:
        """The smallest run (fewest events, then least fault time) showing q."""
        shown = [r for r in self.decided if q in r.questions()]
        return min(shown, key=lambda r: (r.size(), r.index)) if shown else None

    def broken(self, q: str) -> bool:
        return self.setting.promises()[q] is None and self.count(q) > 0

    def other(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.runs:
            for k, n in r.other.items():
                out[k] = out.get(k, 0) + n
        return dict(sorted(out.items()))


@dataclass
class Audit:
    generation: str
    seed: int
    clients: tuple[str, ...]
    settings: list[Setting]
    schedules: list[tuple]
    model: dict[Setting, dict[str, ModelVerdict]] = field(default_factory=dict)
    model_seconds: dict[tuple, float] = field(default_factory=dict)   # per model setting (model.effective)
    cells: list[Cell] = field(default_factory=list)
    stopped: str = ""
    seconds: float = 0.0
    net: bool = False
    command: str = ""
    model_time_limit: float = 120.0
    # the transactional column (--transactions on): one cell per client, the model's answer
    txn_cells: list[TxnCell] = field(default_factory=list)
    txn_model: dict = field(default_factory=dict)
    transactions: bool = False

    def cell(self, client: str, s: Setting) -> Cell:
        return next(c for c in self.cells if c.client == client and c.setting == s)

    def agreement(self, c: Cell, q: str) -> tuple[str, str]:
        """(kind, sentence): agree / disagree / coverage / refused / model-unknown / no-runs."""
        if c.refusal:
            return "refused", c.refusal
        m = self.model.get(c.setting, {}).get(q)
        n, k = len(c.decided), c.count(q)
        if not n:
            return "no-runs", "no decided broker run"
        if m is None or m.status in ("unknown", "refused"):
            why = "not run (time limit)" if m is None else (m.why or m.status)
            return "model-unknown", f"model: {why}; broker: {k}/{n} runs"
        if m.status == "found" and k:
            return "agree", f"both show it (model {m.steps} steps; broker {k}/{n} runs)"
        if m.status == "none" and not k:
            return "agree", f"neither shows it (model exhausted its bounds; broker 0/{n} runs)"
        if m.status == "none":
            why = explain(c.client, q, c.setting)
            return "disagree", (f"the broker shows it in {k}/{n} runs, which the model rules out within its "
                                "bounds: " + (f"explained: {why}" if why else
                                              "a bug in the broker or the model, or a fault beyond the model's bounds"))
        return "coverage", f"the model finds it in {m.steps} steps; the broker did not show it in {n} runs"

    def broken(self) -> list[tuple[str, Setting, str, str]]:
        """Promises broken: (who, setting, question, where), by the broker or by the model."""
        out = []
        for c in self.cells:
            for q in QUESTIONS:
                if c.broken(q):
                    w = c.witness(q)
                    out.append((c.client, c.setting, q, str(w.out_dir) if w else ""))
        for s, vs in sorted(self.model.items()):
            for q, v in vs.items():
                if v.status == "found" and s.promises()[q] is None:
                    out.append(("model", s, q, v.command))
        for c in self.txn_cells:
            for q in TXN_QUESTIONS:
                if c.broken(q):
                    w = min((r for r in c.decided if q in r.questions()), key=lambda r: (r.size(), r.index))
                    out.append((c.client, "transactions", q, str(w.out_dir)))
        for q, v in self.txn_model.items():
            if v.status == "found":
                out.append(("model", "transactions", q, v.command))
        return out

    @property
    def incomplete(self) -> bool:
        cells = [*self.cells, *self.txn_cells]
        return bool(self.stopped) or any(c.incomplete for c in cells) or \
            any(r.status not in ("valid", "invalid") for c in cells for r in c.runs)


def _model_job(generation: str, s: Setting, limit: float, deadline: float):
    left = deadline - time.time()
    if left <= 1:
        return None
    t0 = time.monotonic()
    vs = verdicts(generation, s, time_limit_s=min(limit, left))
    return vs, time.monotonic() - t0


def _txn_model_job(generation: str, limit: float, deadline: float):
    left = deadline - time.time()
    if left <= 1:
        return None
    return txn_model_verdicts(generation, time_limit_s=min(limit, left))


def run_audit(generation: str, clients: tuple[str, ...], settings: list[Setting], n_schedules: int,
              seed: int, out: Path, time_limit_s: float, net: bool, model_time_limit: float = 120.0,
              progress: Callable[[str], None] = lambda line: None, command: str = "", cluster=None,
              transactions: bool = False) -> Audit:
    """cluster: a cluster file's ClusterSpec: every cell runs on that outside cluster, partitions
    through its hooks when it has them (kafkaverify/nemesis/cluster_file.py). `settings` may be
    empty (only the transactional column, `transactions`)."""
    t0 = time.monotonic()
    deadline_wall = time.time() + time_limit_s
    deadline = t0 + time_limit_s
    faults = ("crash", "pause", "partition") if net or (cluster and cluster.can_partition) else ("crash", "pause")
    brokers = len(cluster.nodes) if cluster else 3
    a = Audit(generation, seed, clients, settings, draw_schedules(n_schedules, seed, generation, faults, brokers),
              net=net, command=command, model_time_limit=model_time_limit, transactions=transactions)
    for i, ev in enumerate(a.schedules, 1):
        progress(f"schedule {i}: {' ; '.join(e.describe() for e in ev)}")
    pool = ProcessPoolExecutor(max_workers=1)
    by_key: dict[tuple, object] = {}
    futs = {}
    for s in settings:          # one search per setting as the model sees it (model.effective)
        k = effective(s)
        if k not in by_key:
            by_key[k] = pool.submit(_model_job, generation, s, model_time_limit, deadline_wall)
        futs[s] = by_key[k]

    def said(f, s):
        if not f.cancelled() and f.exception() is None and f.result() is not None:
            vs, secs = f.result()
            progress(f"model {s.label()}: " + ", ".join(f"{q} {v.short()}" for q, v in vs.items()) + f" ({secs:.0f} s)")
    for s, f in futs.items():
        f.add_done_callback(lambda f, s=s: said(f, s))     # run at once for a shared, finished future
    txn_fut = pool.submit(_txn_model_job, generation, model_time_limit, deadline_wall) if transactions else None
    try:
        for s in settings:
            for client in clients:
                refusal = client_refusal(client, s)
                c = Cell(client, s, refusal, 0 if refusal else len(a.schedules))
                a.cells.append(c)
                if refusal:
                    progress(f"{client:12s} {s.label()}: {refusal}")
        for c in a.cells:
            if c.refusal:
                continue
            for i, ev in enumerate(a.schedules, 1):
                if time.monotonic() >= deadline:
                    a.stopped = f"time limit {time_limit_s:g}s reached"
                    break
                d = out / "runs" / c.client / c.setting.key / f"run-{i:02d}"
                r = run_one(c.client, c.setting, ev, i, d, generation, net, cluster)
                c.runs.append(r)
                found = ", ".join(sorted(f"{f.question}{'' if f.permitted_by_checker else '!'}" for f in r.findings))
                progress(f"{c.client:12s} {c.setting.label()} run {i}/{len(a.schedules)}: {r.status.upper()} "
                         f"{r.seconds:.1f}s {found or '-'}{' (' + r.reason + ')' if r.reason else ''}  "
                         f"reproduce: kafkaverify replay {d / 'schedule.json'}")
            if a.stopped:
                break
        if transactions:
            for client in clients:
                refusal = txn_refusal(client)
                c = TxnCell(client, refusal, 0 if refusal else len(a.schedules))
                a.txn_cells.append(c)
                if refusal:
                    progress(f"{client:12s} transactions: {refusal}")
        for c in a.txn_cells:
            if c.refusal or a.stopped:
                continue
            for i, ev in enumerate(a.schedules, 1):
                if time.monotonic() >= deadline:
                    a.stopped = f"time limit {time_limit_s:g}s reached"
                    break
                d = out / "runs" / c.client / "transactions" / f"run-{i:02d}"
                r = run_txn(c.client, ev, i, d, generation, net)
                c.runs.append(r)
                found = ", ".join(sorted(f.question for f in r.findings))
                progress(f"{c.client:12s} transactions run {i}/{len(a.schedules)}: {r.status.upper()} "
                         f"{r.seconds:.1f}s {found or '-'}{' (' + r.reason + ')' if r.reason else ''}  "
                         f"reproduce: kafkaverify replay {d / 'schedule.json'}")
        if txn_fut is not None:
            if a.stopped:
                txn_fut.cancel()
            if not txn_fut.cancelled():
                got = txn_fut.result()
                if got is None:
                    a.stopped = a.stopped or f"time limit {time_limit_s:g}s reached (model)"
                else:
                    a.txn_model = got
                    progress("model transactions: " + ", ".join(f"{q} {v.short()}" for q, v in got.items()))
        for s, f in futs.items():
            if a.stopped:
                f.cancel()
            if f.cancelled():
                continue
            got = f.result()
            if got is None:
                a.stopped = a.stopped or f"time limit {time_limit_s:g}s reached (model)"
                continue
            a.model[s], a.model_seconds[effective(s)] = got
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    a.seconds = time.monotonic() - t0
    return a
