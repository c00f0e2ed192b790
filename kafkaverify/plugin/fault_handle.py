"""The fault handle the pytest plugin gives a test: break a running Cluster (impl/cluster.py) by
broker number or by "the leader of topic-partition", then heal it. A thin layer: each fault is
one call of the Cluster's own controls (kill, pause, resume, power_loss, start_broker), so the
handle follows the cluster's control surface as it grows. Every fault is logged with its time
(the log is printed when a test fails) and targets chosen at random come from the run's seed.

    faults.crash(leader_of=("t", 0))   # kill -9 the partition's current leader; returns its id
    faults.pause(1); faults.resume(1)  # SIGSTOP / SIGCONT
    faults.power_loss(2)               # kill -9 and lose every unflushed write
    faults.restart(2)                  # start a stopped broker again
    faults.stall_replication(1)        # broker 1 stops fetching from leaders (clients still reach it)
    faults.heal()                      # resume the paused, restart the dead, wait for a controller

The names are the fault vocabulary of the schedules and the CLI (traces/schedule.py);
`kill` and `power_fail` are the older names of `crash` and `power_loss` and keep working.
"""
from __future__ import annotations

import random
import time
from typing import Any


class FaultError(Exception):
    pass


class FaultHandle:
    def __init__(self, cluster: Any, seed: int = 0, timeout_s: float = 30.0):
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.timeout_s = timeout_s
        self.paused: set[int] = set()
        self.stalled: set[int] = set()
        self.log: list[str] = []
        self._t0 = time.monotonic()

    def _note(self, what: str) -> None:
        self.log.append(f"+{time.monotonic() - self._t0:7.3f}s {what}")

    def target(self, broker: int | None = None, leader_of: tuple[str, int] | None = None) -> int:
        """Broker `broker`, the current leader of `leader_of`, or (neither given) a live broker
        chosen with the seed."""
        if broker is not None and leader_of is not None:
            raise ValueError("give a broker or leader_of, not both")
        if leader_of is not None:
            leader = self.cluster.leader_of(*leader_of)
            if leader is None:
                raise FaultError(f"{leader_of[0]}-{leader_of[1]} has no leader now")
            return leader
        if broker is None:
            alive = [b for b in self.cluster.alive() if b not in self.paused]
            if not alive:
                raise FaultError("no live broker to break")
            return self.rng.choice(alive)
        if not 0 <= broker < self.cluster.n:
            raise ValueError(f"broker {broker} does not exist (0..{self.cluster.n - 1})")
        return broker

    def crash(self, broker: int | None = None, leader_of: tuple[str, int] | None = None) -> int:
        """kill -9 the broker (no flush; its session lingers until it expires). Returns its id."""
        b = self.target(broker, leader_of)
        self.cluster.kill(b)
        self.paused.discard(b)
        self._note(f"crash: kill -9 broker {b}")
        return b

    def pause(self, broker: int | None = None, leader_of: tuple[str, int] | None = None) -> int:
        b = self.target(broker, leader_of)
        self.cluster.pause(b)
        self.paused.add(b)
        self._note(f"pause (SIGSTOP) broker {b}")
        return b

    def resume(self, broker: int) -> None:
        self.cluster.resume(broker)
        self.paused.discard(broker)
        self._note(f"resume (SIGCONT) broker {broker}")

    def power_loss(self, broker: int | None = None, leader_of: tuple[str, int] | None = None) -> int:
        """kill -9 the broker and drop every write it had not fsynced. Returns its id."""
        b = self.target(broker, leader_of)
        lost = self.cluster.power_loss(b)
        self.paused.discard(b)
        self._note(f"power loss of broker {b} (unflushed bytes lost: {sum(lost.values()) if lost else 0})")
        return b

    kill = crash                # the older names (traces/schedule.py FAULT_ALIASES)
    power_fail = power_loss

    def stall_replication(self, broker: int | None = None, leader_of: tuple[str, int] | None = None) -> int:
        """Cuts the broker's replication link: its replica fetchers stop (Cluster.pause_replication),
        so as a follower it falls behind while clients still reach it."""
        b = self.target(broker, leader_of)
        self.cluster.pause_replication(b)
        self.stalled.add(b)
        self._note(f"stall replication of broker {b}")
        return b

    def unstall_replication(self, broker: int) -> None:
        self.cluster.resume_replication(broker)
        self.stalled.discard(broker)
        self._note(f"replication of broker {broker} resumed")

    def restart(self, broker: int) -> None:
        self.cluster.start_broker(broker, wait=True, timeout_s=self.timeout_s)
        self._note(f"restart broker {broker}")

    def status(self) -> dict[str, Any]:
        return {"alive": self.cluster.alive(), "paused": sorted(self.paused), "stalled": sorted(self.stalled),
                "controller": self.cluster.controller()}

    def heal(self, topics: tuple[str, ...] = ()) -> None:
        """Undo every fault: resume paused brokers, restart dead ones, wait until the cluster
        has a controller and every partition of `topics` a serving leader (bounded)."""
        for b in sorted(self.paused):
            self.resume(b)
        for b in sorted(self.stalled):
            self.unstall_replication(b)
        for b in range(self.cluster.n):
            if b not in self.cluster.alive():
                self.restart(b)
        self.cluster.wait_ready(self.timeout_s)
        for t in topics:
            self.cluster.wait_for_leaders(t, timeout_s=self.timeout_s)
        self._note("healed")
