"""Verdicts of the history checkers (three-valued, after Elle's result maps and Porcupine's
CheckResult): each check says valid / invalid / unknown, lists anomalies with the fewest
operations that show each and one sentence that explains it. A check that examined nothing is
unknown, never valid; a check cut short by a bound or the time limit is unknown too."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"
# The checks a verdict combines, in the order they run; the per-partition ones first, the
# cross-partition cycle search last. The oracle, the screens and the pipeline all name these.
CHECK_NAMES = ("offsets", "writes", "polls", "sends", "linearizable", "consumer-offsets", "cycles")
PER_PARTITION = CHECK_NAMES[:-1]


@dataclass(frozen=True)
class Anomaly:
    type: str
    witness: tuple[int, ...]          # op ids, the fewest that show the anomaly
    explanation: str
    partition: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "partition": self.partition, "witness": list(self.witness),
                "explanation": self.explanation}


@dataclass
class CheckResult:
    name: str
    status: str
    examined: int                     # how many things (ops, records, commits) were examined
    anomalies: list[Anomaly] = field(default_factory=list)
    # Findings that do not make a history invalid, e.g. a reordering the producer's settings
    # permit. Shown, counted, never part of the verdict.
    notes: list[Anomaly] = field(default_factory=list)
    reason: str = ""                  # why unknown (or how valid was established)
    limited: bool = False             # unknown because a bound or the time limit was hit

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "examined": self.examined,
                "reason": self.reason, "limited": self.limited,
                "anomaly_counts": counts(self.anomalies),
                "anomalies": [a.to_json() for a in self.anomalies],
                "notes": [a.to_json() for a in self.notes]}


def finish(name: str, examined: int, anomalies: list[Anomaly], notes: list[Anomaly] | None = None,
           unknown: str = "", limited: bool = False) -> CheckResult:
    """The one place that turns findings into a check's status."""
    if anomalies:
        status, reason = INVALID, ""
    elif unknown:
        status, reason = UNKNOWN, unknown
    elif examined == 0:
        status, reason = UNKNOWN, "nothing to examine"
    else:
        status, reason = VALID, ""
    return CheckResult(name, status, examined, anomalies, notes or [], reason, limited and status == UNKNOWN)


def counts(anomalies: list[Anomaly]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in anomalies:
        out[a.type] = out.get(a.type, 0) + 1
    return dict(sorted(out.items()))


@dataclass
class Verdict:
    status: str
    checks: list[CheckResult]
    ops: int

    @property
    def anomalies(self) -> list[Anomaly]:
        return [a for c in self.checks for a in c.anomalies]

    @property
    def notes(self) -> list[Anomaly]:
        return [a for c in self.checks for a in c.notes]

    def types(self) -> set[str]:
        return {a.type for a in self.anomalies}

    def to_json(self, ops_by_id: dict[int, Any] | None = None) -> dict[str, Any]:
        out = {"status": self.status, "ops": self.ops, "anomaly_counts": counts(self.anomalies),
               "checks": [c.to_json() for c in self.checks]}
        if ops_by_id is not None:
            ids = sorted({i for a in self.anomalies + self.notes for i in a.witness})
            out["witness_ops"] = {str(i): ops_by_id[i].describe() for i in ids if i in ops_by_id}
        return out


def combine(checks: list[CheckResult], ops: int) -> Verdict:
    """Invalid if any check found an anomaly. Unknown if a check was cut short by a bound, or if
    no check examined anything. A check with nothing to examine (say, no commits in the history)
    stays unknown on its own line but does not make the whole history unknown."""
    if any(c.status == INVALID for c in checks):
        status = INVALID
    elif any(c.limited for c in checks) or all(c.status == UNKNOWN for c in checks):
        status = UNKNOWN
    else:
        status = VALID
    return Verdict(status, checks, ops)
