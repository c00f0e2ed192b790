"""What `current` (Kafka 3.x without KIP-966) promises under power loss, asked of the model, and
the discipline the nemesis's isolated power loss follows (traces/schedule.py ISOLATED).

Kafka does not fsync: a committed record survives power loss through its other replicas. The
model (spec/, per-record durability) loses one exactly when a replica that lost its unflushed
tail is elected while lacking it, which needs it to be the controller's last ISR member:
KIP-966's "last replica standing" (`kafkaverify explore --generation current --unflushed-loss
--crashes 1`, 10 steps: the ISR shrank to the leader, the leader lost power and came back as the
whole ISR). The discipline below keeps another ISR member holding every committed record:

    a power loss (Crash with lose_unflushed) only when the cluster is whole: every broker up and
        registered, a leader, the controller's ISR full;
    the power-lost broker restarts only once the controller has taken it out of the ISR;
    after a power loss, no fault of any kind until the cluster is whole again (the broker is
        back in the ISR). This is stricter than the runner, which lets faults overlap freely
        once the broker has rejoined (the model cannot tell "since the power loss" without a
        ghost variable); between power losses the model's faults are unconstrained.

`python -m kafkaverify.nemesis.power_policy` explores `current` with --unflushed-loss under the
discipline and without it, at the same bounds, and prints both verdicts:

    python -m kafkaverify.nemesis.power_policy [--brokers 2] [--crashes 2] [--losses 1] [--time-limit 300]
"""
from __future__ import annotations

import argparse
import sys

from checkers.explore import default_workers, explore
from spec import Model, make_config
from spec.model import Action
from spec.state import State

FAULTS = ("Crash", "Pause", "SessionExpire", "Lose")


def whole(s: State) -> bool:
    n = len(s.brokers)
    zk = s.zk
    return (all(b.alive and not b.paused for b in s.brokers) and all(zk.sessions) and zk.leader >= 0
            and zk.isr == (1 << n) - 1)


def allowed(s: State, a: Action) -> bool:
    if a.kind == "Crash" and a.arg == 1:
        return whole(s)
    if a.kind in FAULTS and s.lossy and not whole(s):
        return False
    if a.kind == "Restart" and s.lossy and (s.zk.isr >> a.b) & 1:
        return False
    return True


class IsolatedPowerLoss(Model):
    """The model with power losses restricted to the discipline above (a filter on enabled)."""

    def enabled(self, s: State) -> list[Action]:
        return [a for a in super().enabled(s) if allowed(s, a)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kafkaverify.nemesis.power_policy")
    ap.add_argument("--brokers", type=int, default=2)
    ap.add_argument("--records", type=int, default=2)
    ap.add_argument("--crashes", type=int, default=2)
    ap.add_argument("--losses", type=int, default=1)
    ap.add_argument("--elections", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=300)
    ap.add_argument("--workers", type=int, default=default_workers())
    a = ap.parse_args(argv)
    cfg = make_config("current", brokers=a.brokers, records=a.records, crashes=a.crashes, losses=a.losses,
                      elections=a.elections, unflushed_loss=True)
    print(f"current --unflushed-loss brokers={a.brokers} records={a.records} crashes={a.crashes} "
          f"losses={a.losses} elections={a.elections} min_isr={cfg.min_isr} (invariant AckedDurable)", flush=True)
    rc = 0
    for name, model in (("isolated power loss", IsolatedPowerLoss(cfg)), ("any power loss", Model(cfg))):
        r = explore(model, time_limit=a.time_limit, invariants=("AckedDurable",), workers=a.workers)
        what = f"{r.invariant} in {len(r.path)} steps" if r.status == "violation" else "no violation"
        print(f"{name:20s} {r.status:12s} {what}; {r.distinct:,} states, depth {r.depth}, {r.seconds:.0f} s",
              flush=True)
        if name.startswith("isolated") and r.status == "violation":
            rc = 1
            for k, (act, st) in enumerate(zip(r.path, r.states), 1):
                print(f"  {k:3d}. {act.describe()}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
