"""The nemesis stage of `kafkaverify check` (wired into kafkaverify/suite/stages.py): two generated schedules of crashes and pauses on `current` (acks=all,
RF 3, min ISR 2) must be valid with no conformance divergence, and a fixed schedule on a broker
built without epoch-truncation must be caught by conformance. Crash and pause need no network
namespace, so the stage runs anywhere the broker runs. About 40 s on 2 cores.

    verdict, seconds, detail = check_stage()       # verdict: pass / fail / unknown
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from kafkaverify.nemesis.explore import default_workload, explore
from kafkaverify.nemesis.errors import error_text
from kafkaverify.nemesis.runner import run_schedule
from traces.schedule import Event, Schedule, WORKLOAD_DEFAULTS

SEED = 1
# Two leader crashes under traffic: every follower truncates after each fail-over, so a broker
# truncating to its HW (no epoch-truncation) drops records the model's rule keeps.
TEETH = (Event(1000, "crash", target="leader:nemesis/0", duration_ms=1500),
         Event(2500, "crash", target="leader:nemesis/0", duration_ms=1500))


def check_stage(out_dir: str | Path | None = None) -> tuple[str, float, str]:
    """A part of the stage whose harness fails (a broker that does not start, a client that
    times out) makes the stage unknown, with the part and the cause in the detail."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kv-nemesis-") as tmp:
        out = Path(out_dir or tmp)
        w = default_workload("kafka-python", consumers=0)
        try:
            summ = explore("current", 3, 2, SEED, ("crash", "pause"), w, out / "current", time_limit_s=90,
                           shrink_runs=0)
        except Exception as e:
            return ("unknown", time.monotonic() - t0,
                    f"harness error in the schedules on current: {error_text(e)}")
        try:
            teeth = run_schedule(Schedule("current", 3, TEETH, dict(WORKLOAD_DEFAULTS, consumers=0),
                                          seed=SEED, without=("epoch-truncation",)), out / "teeth", net=False)
        except Exception as e:
            return ("unknown", time.monotonic() - t0,
                    f"harness error in the run without epoch-truncation: {error_text(e)}")
    secs = time.monotonic() - t0
    bad = [(s, r) for s, r in summ.runs if r.status != "valid"]
    detail = (f"{len(summ.runs)} schedules on current: "
              + ", ".join(r.status for _, r in summ.runs)
              + f"; without epoch-truncation: {len(teeth.divergences)} conformance divergence(s)")
    if any(r.failed for _, r in bad):
        return "fail", secs, detail + f"; first: {bad[0][1].first_anomaly}"
    if not teeth.divergences:
        return "fail", secs, detail + " (expected the broker without epoch-truncation to diverge)"
    if bad or len(summ.runs) < 2:
        why = next((r.reason for _, r in bad if r.reason), "")
        more = f"; first undecided: {why}" if why else ("" if bad else " (fewer than 2 schedules ran in the time limit)")
        return "unknown", secs, detail + more
    return "pass", secs, detail
