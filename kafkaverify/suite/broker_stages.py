"""The broker's stages of `kafkaverify check`: the arranged conformance scenarios
(kafkaverify/nemesis/scenarios.py) on real brokers, judged by checkers/conformance.py.

- a **tooth** per switchable fix: the scenario where that fix's rule decides, on brokers built
  without it; conformance must report the divergence the fix prevents, named by the words of
  its report ("expected X, found Y" otherwise, or when another divergence shows as well);
- a **clean** stage per scenario: every fix on, and no divergence. A broker that lost one of its
  fixes (or weakened one) fails the clean stage of that fix's scenario, naming the divergence.

Every fix the broker can be built without has its tooth here (controller-epoch-fencing through
the control_request event: each LeaderAndIsr's acceptance inputs and decision, traced by the
receiving broker). epoch-truncation (KIP-101) is also the nemesis stage's tooth (kafkaverify/nemesis/stage.py).
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from kafkaverify.nemesis.scenarios import SCENARIOS, Clusters, divergences

# (stage name, fix the brokers are built without, scenario, what the divergence says: every
# divergence must say one of them, and the first must show)
BROKER_TEETH: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("real brokers without truncate-on-epoch-change (follower-drop)", "truncate-on-epoch-change", "follower-drop",
     ("kept its log without truncating",)),
    ("real brokers without fetch-epoch-fencing (follower-drop)", "fetch-epoch-fencing", "follower-drop",
     ("served a Fetch",)),
    ("real brokers without min-isr-hw (min-isr-shrink)", "min-isr-hw", "min-isr-shrink",
     ("below min.insync.replicas 2",)),
    # the restarted leader's follower cuts to its HW, not to the leader's epoch end (KIP-101)
    ("real brokers without epoch-truncation (min-isr-rejoin)", "epoch-truncation", "min-isr-rejoin",
     ("(hw); the model's rule for this state truncates to",)),
    ("real brokers without isr-expand-epoch-start (min-isr-rejoin)", "isr-expand-epoch-start", "min-isr-rejoin",
     ("below the start offset 6 of its epoch",)),
    ("real brokers without epoch-end-offset (unseen-epoch)", "epoch-end-offset", "unseen-epoch",
     ("answered OffsetsForLeaderEpoch",)),
    ("real brokers without maximal-isr (pending-shrink)", "maximal-isr", "pending-shrink", ("past ISR member",)),
    # the ineligible addition, then what it lets happen: the empty replica, electable, is elected
    ("real brokers without isr-broker-epoch (empty-disk-rejoin)", "isr-broker-epoch", "empty-disk-rejoin",
     ("into the ISR on a fetch made with broker epoch", "(LeaderCandidateCompleteness)",
      "(LeaderCompleteness)")),
    # the deposed controller's request for the next leader epoch is applied by the follower
    ("real brokers without controller-epoch-fencing (deposed-controller)", "controller-epoch-fencing",
     "deposed-controller", ("accepted a LeaderAndIsr of controller epoch",)),
    # the aborted transaction's late batch appended unverified: a hanging transaction (KIP-890 part 1)
    ("real brokers without txn-partition-verification (late-produce)", "txn-partition-verification",
     "late-produce", ("did not ask the coordinator", "decided append")),
]
# (stage name, scenario): every fix on
# (min-isr-rejoin runs min-isr-shrink's steps first: its clean stage judges both fixes' decisions)
BROKER_CLEAN: list[tuple[str, str]] = [
    (f"real brokers clean: {name}", name) for name in ("follower-drop", "min-isr-rejoin", "unseen-epoch",
                                                 "pending-shrink", "empty-disk-rejoin",
                                                 "deposed-controller", "late-produce")
]


def _run(scenario: str, without: str | None):
    """Runs the scenario on fresh brokers in a scratch folder; returns (divergence texts,
    folder). The brokers are stopped either way; the folder is the caller's to keep or remove."""
    run, min_insync = SCENARIOS[scenario]
    root = Path(tempfile.mkdtemp(prefix=f"kv-broker-{scenario}-"))
    try:
        with Clusters(root) as make:
            c = run(make, without)
            return divergences(c, min_insync), root
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _finish(verdict: str, t0: float, detail: str, root: Path) -> tuple[str, float, str]:
    """(verdict, seconds, detail); a failing run's folder is kept and named in the detail."""
    if verdict == "pass":
        shutil.rmtree(root, ignore_errors=True)
    else:
        detail += f" (the brokers' logs and traces: {root})"
    return verdict, time.monotonic() - t0, detail


def _short(text: str, n: int = 240) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def broker_tooth(without: str, scenario: str, expect: tuple[str, ...]) -> tuple[str, float, str]:
    """The scenario on brokers without `without`: passes when conformance reports the expected
    divergence and nothing else. Returns (verdict, seconds, detail)."""
    t0 = time.monotonic()
    ds, root = _run(scenario, without)
    want = " or ".join(repr(e) for e in expect)
    other = [d for d in ds if not any(e in d for e in expect)]
    if not ds:
        return _finish("fail", t0, f"expected a divergence saying {want}, found none: "
                       f"conformance no longer catches a broker without {without}", root)
    if not any(expect[0] in d for d in ds):
        return _finish("fail", t0, f"expected a divergence saying {expect[0]!r}, found "
                       f"{_short(ds[0])}", root)
    if other:
        return _finish("fail", t0, f"expected only divergences saying {want}, found "
                       f"{_short(other[0])}", root)
    return _finish("pass", t0, f"{len(ds)} divergence(s) without {without}: {_short(ds[0])}", root)


def broker_clean(scenario: str, without: str | None = None) -> tuple[str, float, str]:
    """The scenario with every fix on (`without`: a fix removed, to show what the stage reports
    for a broker that lost it): passes when conformance reports no divergence. Returns
    (verdict, seconds, detail)."""
    t0 = time.monotonic()
    ds, root = _run(scenario, without)
    if ds:
        return _finish("fail", t0, f"expected no divergence, found {len(ds)}: {_short(ds[0])}", root)
    return _finish("pass", t0, f"every traced step conforms ({scenario}, every fix on)", root)
