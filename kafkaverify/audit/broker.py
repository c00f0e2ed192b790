"""The broker column: one client at one setting under the nemesis's fault schedules, on real
3-broker clusters (kafkaverify/nemesis/runner.run_schedule does each run and judges its
history). The schedules come from the nemesis's own Hypothesis strategy, drawn once from the
seed, so every cell of the matrix meets the same faults and one seed reproduces the matrix.

A run's findings are sorted into the audit's questions by anomaly type, whether the history
checkers called them anomalies or notes the settings permit; whether a finding breaks a promise
is the setting's question (settings.Setting.promises), not the checker's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings

from kafkaverify.audit.settings import CLIENT_PACKAGES
from kafkaverify.nemesis.explore import default_workload, schedules, size
from kafkaverify.nemesis.runner import RunResult, run_schedule
from traces.schedule import Schedule

# history anomaly type -> audit question
QUESTION_OF = {"send-reorder": "reorder", "nonmonotonic-send": "reorder", "duplicate": "duplicate",
               "lost-write": "loss", "unseen-write": "loss", "lost-read": "loss"}
FAULTS = ("crash", "pause", "partition")        # leader kills, pauses, partitions during produce
TOPIC = "audit"


def draw_schedules(n: int, seed: int, generation: str, faults: tuple[str, ...] = FAULTS,
                   brokers: int = 3) -> list[tuple]:
    """n distinct fault-event lists from the nemesis's strategy, the same for one seed."""
    got: list[tuple] = []
    w = {"topic": TOPIC}

    @settings(max_examples=max(1, n) * 4, database=None, deadline=None, phases=(Phase.generate,),
              suppress_health_check=list(HealthCheck), print_blob=False)
    @hyp_seed(seed)
    @given(schedules(generation, brokers, faults, w))
    def draw(s):
        if len(got) < n and s.events not in got:
            got.append(s.events)
    draw()
    return got[:n]


def workload(client: str, s) -> dict:
    return default_workload(CLIENT_PACKAGES[client], acks="all" if s.acks == "all" else int(s.acks),
                            retries=s.retries, idempotence=s.idempotence, max_in_flight=s.max_in_flight,
                            min_insync=2, replication_factor=3, consumers=0, topic=TOPIC)


@dataclass
class Finding:
    question: str
    type: str
    permitted_by_checker: bool
    explanation: str
    ops: list[str]
    witness: tuple[int, ...] = ()


@dataclass
class BrokerRun:
    index: int
    status: str                      # the run's verdict: valid / invalid / unknown
    out_dir: Path
    schedule: Schedule
    seconds: float
    findings: list[Finding] = field(default_factory=list)
    other: dict[str, int] = field(default_factory=dict)     # anomalies outside the three questions
    divergences: int = 0
    reason: str = ""

    def questions(self) -> set[str]:
        return {f.question for f in self.findings}

    def size(self) -> tuple[int, int]:
        return size(self.schedule)


class RunsTally:
    """What an audit cell's runs say, for a cell with `runs`, `refusal` and `planned`."""

    runs: list[BrokerRun]
    refusal: str | None
    planned: int

    @property
    def decided(self) -> list[BrokerRun]:
        return [r for r in self.runs if r.status in ("valid", "invalid")]

    def count(self, q: str) -> int:
        return sum(1 for r in self.decided if q in r.questions())

    def broken(self, q: str) -> bool:
        raise NotImplementedError

    @property
    def incomplete(self) -> bool:
        return self.refusal is None and len(self.runs) < self.planned

    def summary(self, questions, short: dict[str, str]) -> str:
        """The cell in a table: the refusal's first words, or per question "<short> k/n" (BROKEN
        where the cell's promise is broken) and the runs done if not all."""
        if self.refusal:
            return self.refusal.split(":", 1)[0]
        n = len(self.decided)
        parts = [f"{short[q]} {self.count(q)}/{n}" + (" BROKEN" if self.broken(q) else "") for q in questions]
        if self.incomplete:
            parts.append(f"({len(self.runs)}/{self.planned} runs)")
        return " · ".join(parts)


def run_one(client: str, s, events: tuple, index: int, out_dir: Path, generation: str, net: bool,
            cluster=None) -> BrokerRun:
    """cluster: a cluster file's ClusterSpec (kafkaverify/nemesis/cluster_file.py) to run on."""
    sched = Schedule(generation, len(cluster.nodes) if cluster else 3, events, workload(client, s), seed=index)
    run = judged_run(sched, index, out_dir, net, QUESTION_OF, cluster)
    _loss_not_reorder(run.findings)
    return run


def judged_run(sched: Schedule, index: int, out_dir: Path, net: bool, question_of: dict,
               cluster=None) -> BrokerRun:
    """Runs one schedule and reads its verdict: each anomaly the audit asks about (`question_of`:
    anomaly type -> question) a finding, the others counted, conformance divergences too."""
    try:
        r = run_schedule(sched, out_dir, net=net, cluster=cluster)
    except Exception as e:           # the harness failed: this run decides nothing
        r = RunResult("unknown", out_dir, reason=f"harness error: {e.__class__.__name__}: {e}")
    run = BrokerRun(index, r.status, out_dir, sched, r.seconds, divergences=len(r.divergences), reason=r.reason)
    vpath = out_dir / "verdict.json"
    if vpath.exists():
        v = json.loads(vpath.read_text())
        ops = v.get("witness_ops", {})
        for c in v.get("checks", []):
            for kind, permitted in (("anomalies", False), ("notes", True)):
                for a in c.get(kind, []):
                    q = question_of.get(a["type"])
                    if q is None:
                        if not permitted:
                            run.other[a["type"]] = run.other.get(a["type"], 0) + 1
                        continue
                    run.findings.append(Finding(q, a["type"], permitted, a["explanation"],
                                                [ops.get(str(i), f"#{i}") for i in a["witness"]],
                                                tuple(a["witness"])))
    if run.divergences:
        run.other["conformance"] = run.divergences
    return run


def _loss_not_reorder(findings: list[Finding]) -> None:
    """An acknowledged record that was lost frees its offset, and the producer's next record is
    acknowledged at it: the history checkers see a later send at an earlier offset
    (nonmonotonic-send) although the log keeps every surviving record in send order. Such a
    finding, whose witness includes a send that a loss finding names, is the face of the loss
    (acks=1 loses by design), so it is counted under loss, not reordering."""
    lost = {i for f in findings if f.question == "loss" for i in f.witness}
    for f in findings:
        if f.question == "reorder" and lost & set(f.witness):
            f.question = "loss"
            f.explanation += " (the earlier record was lost and its offset reused: counted as loss)"
