"""A seeded generator of client histories: concurrent producers and a consumer group over a
correct in-memory log, with timeouts that leave operations `info` (applied or not), failures,
producer crashes (operations never completed), rebalances that bump the group generation, and
final reads of every partition. Its histories are valid by construction, of any size; each
anomaly type can then be seeded at a chosen rate by a mutation that plants one instance per
site. Every random choice flows from one `random.Random(seed)`. Imports neither spec/ nor impl/.
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from traces.history import History, Op, make_header

TOPIC = "t"
GROUP = "g1"
WALL_BASE_NS = 1_700_000_000_000_000_000   # fixed, so that a seed reproduces wall times too
P_INFO = 0.02
P_FAIL = 0.02
P_RETRY = 0.02         # sends whose first attempt times out inside the client and is retried
P_CRASH = 0.3          # share of info sends whose producer crashes (no completion at all)
FINAL_CHUNK = 100      # records per final read


@dataclass
class Params:
    seed: int = 0
    ops: int = 1000
    partitions: int = 4
    producers: int = 3
    consumers: int = 3
    max_poll: int = 5


class _Sim:
    """Discrete-event simulation; each client is a sequential process (one op at a time), whose
    next operation begins strictly after the previous one completed (ties in time would leave
    real-time order undecided)."""

    def __init__(self, p: Params):
        self.p = p
        self.rng = random.Random(p.seed)
        self.ops: list[Op] = []
        self.heap: list[tuple[int, int, str, int, object]] = []
        self.seq = 0
        self.log: list[list[str]] = [[] for _ in range(p.partitions)]
        self.committed = [0] * p.partitions
        self.generation = 0
        self.assignment: dict[int, list[int]] = {}
        self.started = 0
        self.next_pid = 0
        self.sent = 0
        # consumer state
        self.c_gen: dict[int, int] = {}
        self.c_pos: dict[int, dict[int, int]] = {}
        self.c_todo: dict[int, list[int]] = {}      # partitions still to assign
        self.c_commit: dict[int, list[int]] = {}    # partitions polled and not yet committed
        self.first_attempt: dict[int, int] = {}     # send id -> offset its first attempt took

    def pid(self) -> int:
        self.next_pid += 1
        return self.next_pid - 1

    def push(self, t: int, kind: str, proc: int, data: object = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, proc, data))

    def new_op(self, t: int, proc: int, f: str, **kw) -> Op:
        op = Op(id=len(self.ops), process=proc, f=f, type="info", inv=t, comp=None, end=None,
                inv_wall=WALL_BASE_NS + t, **kw)
        self.ops.append(op)
        self.started += 1
        return op

    def delay(self) -> int:
        return self.rng.randint(1_000, 1_000_000)

    def run(self) -> list[Op]:
        p, rng = self.p, self.rng
        self.rebalance()
        self.rebalance_every = max(50, p.ops // 20)
        for _ in range(p.producers):
            self.push(rng.randint(0, 10_000), "start-producer", self.pid())
        for _ in range(p.consumers):
            c = self.pid()
            self.c_gen[c], self.c_pos[c], self.c_todo[c], self.c_commit[c] = 0, {}, [], []
            self.push(rng.randint(0, 10_000), "start-consumer", c)
        self.consumer_ids = sorted(self.c_gen)
        self.rebalance()
        now = 0
        while self.heap:
            now, _, kind, proc, data = heapq.heappop(self.heap)
            getattr(self, "on_" + kind.replace("-", "_"))(now, proc, data)
        self.final_reads(now + 1_000_000)
        return self.ops

    # -- group coordinator
    def rebalance(self) -> None:
        if not getattr(self, "consumer_ids", None):
            return
        self.generation += 1
        cs = list(self.consumer_ids)
        self.rng.shuffle(cs)
        self.assignment = {c: [] for c in cs}
        for part in range(self.p.partitions):
            self.assignment[cs[part % len(cs)]].append(part)

    def budget_left(self) -> bool:
        return self.started < self.p.ops

    def complete(self, op: Op, t: int, kind: str, error: str | None = None) -> None:
        op.type = kind
        op.end, op.end_wall = t, WALL_BASE_NS + t
        op.comp = t if kind != "info" else None
        op.error = error

    # -- producers
    def on_start_producer(self, t: int, proc: int, _: object) -> None:
        if not self.budget_left():
            return
        op = self.new_op(t, proc, "producer_config")
        op.config = {"acks": "all", "idempotence": True, "max_in_flight": 5, "retries": 5}
        self.complete(op, t + 1_000, "ok")
        self.push(t + 2_000, "send", proc)

    def on_send(self, t: int, proc: int, _: object) -> None:
        if not self.budget_left():
            return
        if self.started % self.rebalance_every == 0:
            self.rebalance()
        part = self.rng.randrange(self.p.partitions)
        self.sent += 1
        op = self.new_op(t, proc, "send", topic=TOPIC, partition=part, key=f"k{self.sent % 7}",
                         value=f"v{self.sent}")
        self.push(t + self.delay(), "send-effect", proc, op)

    def on_send_effect(self, t: int, proc: int, op: Op) -> None:
        r = self.rng.random()
        log = self.log[op.partition]
        done = t + self.delay()
        if r < P_FAIL:
            self.complete(op, done, "fail", "NOT_ENOUGH_REPLICAS")
        elif r < P_FAIL + P_INFO:
            if self.rng.random() < 0.5:
                log.append(op.value)           # applied, but the client never learns it
            if self.rng.random() < P_CRASH:
                # The producer crashed with the request in flight: no completion; a fresh
                # process takes over (a crashed process id is never reused).
                self.push(done, "start-producer", self.pid())
                return
            self.complete(op, done, "info", "REQUEST_TIMED_OUT")
        elif r < P_FAIL + P_INFO + P_RETRY:
            # The request timed out inside the client, which retries (retries=5). The first
            # attempt may have been appended; the idempotent broker then answers the retry
            # with the original offset instead of appending again (KIP-98).
            if self.rng.random() < 0.5:
                self.first_attempt[op.id] = len(log)
                log.append(op.value)
            self.push(done, "send-retry", proc, op)
            return
        else:
            op.offset = len(log)
            log.append(op.value)
            self.complete(op, done, "ok")
        self.push(done + self.rng.randint(1, 500_000), "send", proc)

    def on_send_retry(self, t: int, proc: int, op: Op) -> None:
        log = self.log[op.partition]
        first = self.first_attempt.pop(op.id, None)
        if first is not None:
            op.offset = first             # deduplicated: the original offset
        else:
            op.offset = len(log)
            log.append(op.value)
        done = t + self.delay()
        self.complete(op, done, "ok")
        self.push(done + self.rng.randint(1, 500_000), "send", proc)

    # -- consumers
    def on_start_consumer(self, t: int, c: int, _: object) -> None:
        if not self.budget_left():
            return
        if self.c_gen[c] < self.generation:
            self.c_gen[c] = self.generation
            self.c_pos[c] = {}
            self.c_commit[c] = []
            self.c_todo[c] = list(self.assignment.get(c, []))
        todo = self.c_todo[c]
        if todo:
            part = todo.pop(0)
            op = self.new_op(t, c, "assign", topic=TOPIC, partition=part, group=GROUP,
                             delivery="at-least-once")
            op.generation = self.c_gen[c]
            self.push(t + self.delay(), "assign-effect", c, op)
            return
        if self.c_commit[c]:
            part = self.c_commit[c].pop(0)
            op = self.new_op(t, c, "commit", topic=TOPIC, partition=part, group=GROUP,
                             generation=self.c_gen[c], offset=self.c_pos[c][part])
            self.push(t + self.delay(), "commit-effect", c, op)
            return
        mine = sorted(self.c_pos[c])
        if not mine:
            self.push(t + 200_000, "start-consumer", c)
            return
        part = self.rng.choice(mine)
        op = self.new_op(t, c, "poll", topic=TOPIC, partition=part)
        self.push(t + self.delay(), "poll-effect", c, op)

    def on_assign_effect(self, t: int, c: int, op: Op) -> None:
        done = t + self.delay()
        pos = self.committed[op.partition]
        self.c_pos[c][op.partition] = pos
        op.offset = pos
        self.complete(op, done, "ok")
        self.push(done + 1_000, "start-consumer", c)

    def on_commit_effect(self, t: int, c: int, op: Op) -> None:
        done = t + self.delay()
        current = op.generation == self.generation
        r = self.rng.random()
        if r < P_INFO:
            if current and self.rng.random() < 0.5:
                self.committed[op.partition] = op.offset
            self.complete(op, done, "info", "REQUEST_TIMED_OUT")
        elif current:
            self.committed[op.partition] = op.offset
            self.complete(op, done, "ok")
        else:
            self.complete(op, done, "fail", "ILLEGAL_GENERATION")
        self.push(done + 1_000, "start-consumer", c)

    def on_poll_effect(self, t: int, c: int, op: Op) -> None:
        done = t + self.delay()
        if self.rng.random() < P_INFO:
            self.complete(op, done, "info", "REQUEST_TIMED_OUT")
        else:
            pos = self.c_pos[c][op.partition]
            log = self.log[op.partition]
            k = self.rng.randint(1, self.p.max_poll)
            vals = log[pos:pos + k]
            op.offsets = list(range(pos, pos + len(vals)))
            op.values = vals
            self.c_pos[c][op.partition] = pos + len(vals)
            if vals and op.partition not in self.c_commit[c]:
                self.c_commit[c].append(op.partition)
            self.complete(op, done, "ok")
        self.push(done + self.rng.randint(1, 300_000), "start-consumer", c)

    # -- final reads: from offset 0 of every partition, after everything else completed
    def final_reads(self, t: int) -> None:
        proc = self.pid()
        for part in range(self.p.partitions):
            log = self.log[part]
            pos = 0
            while True:
                op = Op(id=len(self.ops), process=proc, f="poll", type="ok", inv=t, comp=None,
                        end=None, topic=TOPIC, partition=part, final=True, inv_wall=WALL_BASE_NS + t)
                self.ops.append(op)
                vals = log[pos:pos + FINAL_CHUNK]
                op.offsets, op.values = list(range(pos, pos + len(vals))), vals
                self.complete(op, t + 50_000, "ok")
                t += 100_000
                pos += len(vals)
                if pos >= len(log):
                    break


def generate_valid(p: Params) -> History:
    from checkers.quiet_gc import quiet_gc
    with quiet_gc():
        ops = _Sim(p).run()
    ops.sort(key=lambda o: (o.inv, o.id))
    return History(make_header(trace_id=f"gen-{p.seed}", generator="kafkaverify.gen-history",
                               seed=p.seed, ops=p.ops, partitions=p.partitions), ops)


def generate(p: Params, seed_anomalies: dict[str, float] | None = None) -> History:
    """A valid history, then each requested anomaly planted at `rate` of its eligible sites
    (at least one site when rate > 0), mutations applied in sorted type order."""
    from checkers.history.seeding import plant
    h = generate_valid(p)
    if seed_anomalies:
        rng = random.Random(p.seed * 1_000_003 + 17)
        for kind in sorted(seed_anomalies):
            plant(h, kind, seed_anomalies[kind], rng)
        h.ops.sort(key=lambda o: (o.inv, o.id))
        h.header.setdefault("meta", {})
        h.header["meta"]["seeded"] = {k: seed_anomalies[k] for k in sorted(seed_anomalies)}
    return h


def small_log_history(seed: int, n_ops: int, mutate: int = 0, overlap: int = 6) -> History:
    """A one-partition history of 3 processes over a correct log, each op's effect at a random
    point of its interval (longer `overlap`, more concurrency), then `mutate` random
    perturbations (times moved, offsets or values changed, outcomes flipped), so that both
    verdicts occur. For the differential test and the exhaustive checker's growth benchmark."""
    rng = random.Random(seed)
    log: list[str] = []
    timed = []
    t = 0
    for i in range(n_ops):
        inv = t + rng.randint(0, 4)
        eff = inv + rng.randint(0, overlap)
        comp = eff + rng.randint(0, overlap)
        timed.append((eff, i, inv, comp))
        t += rng.randint(0, 5)
    ops: list[Op] = []
    for eff, i, inv, comp in sorted(timed):
        common = dict(id=len(ops), process=i % 3, inv=inv, end=comp, topic=TOPIC, partition=0)
        if rng.random() < 0.55:
            kind = rng.choices(["ok", "info", "fail"], [0.7, 0.2, 0.1])[0]
            v = f"v{i}"
            if kind == "ok" or (kind == "info" and rng.random() < 0.5):
                log.append(v)
            ops.append(Op(f="send", type=kind, comp=None if kind == "info" else comp, value=v,
                          offset=len(log) - 1 if kind == "ok" else None, **common))
        else:
            lo = rng.randint(0, len(log)) if log else 0
            hi = min(len(log), lo + rng.randint(0, 3))
            ops.append(Op(f="poll", type="ok", comp=comp, offsets=list(range(lo, hi)),
                          values=log[lo:hi], **common))
    for _ in range(mutate):
        op = rng.choice(ops)
        r = rng.random()
        if r < 0.3:
            d = rng.randint(-15, 15)
            op.inv = max(0, op.inv + d)
            op.end = max(op.inv, op.end + d)      # a completion never precedes its invoke
            if op.comp is not None:
                op.comp = op.end
        elif r < 0.5 and op.f == "send" and op.type == "ok":
            op.offset = max(0, op.offset + rng.choice([-1, 1]))
        elif r < 0.7 and op.f == "poll" and op.values:
            j = rng.randrange(len(op.values))
            op.values[j] = rng.choice([o.value for o in ops if o.f == "send"])
        elif r < 0.85 and op.f == "send":
            op.type = rng.choice(["ok", "info", "fail"])
            op.comp = None if op.type == "info" else op.end
            op.offset = ((op.offset if op.offset is not None else rng.randint(0, 3))
                         if op.type == "ok" else None)
        elif op.f == "poll" and op.offsets:
            # offsets are never negative: the format refuses them as bad input
            op.offsets[0] = max(0, op.offsets[0] + rng.choice([-1, 1]))
    ops.sort(key=lambda o: (o.inv, o.id))
    return History(make_header(trace_id=f"small-{seed}"), ops)
