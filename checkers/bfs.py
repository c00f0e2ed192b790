"""Breadth-first search over fingerprints, on one core or several (hash-sharded workers).

Each shard owns the fingerprints with `fp % W == w`: their visited set (checkers/fingerprint.py,
8 bytes a slot), a parent link per state it owns (the parent's global id and the index of the
action in the parent's `enabled` list: 10 bytes), and the frontier of the states it owns, kept
pickled in chunks (siblings share most of their sub-tuples, and pickle's memo stores each
once). A level runs in two phases: every shard expands its frontier, keeps the successors it
owns and sends the others to their owners; then every shard absorbs what it was sent, in worker
order. Levels are synchronous, so the first level with a violation gives a shortest
counterexample; within it the violation with the least global id wins, and every order is fixed
(frontier order, worker order), so one configuration and one worker count give the same
counterexample on every run. The path is rebuilt from the parent links and replayed from the
initial state (action indices into `enabled`, which is deterministic).

A global id is `local_index * W + w`: unique, and it names its shard without a table.
"""
from __future__ import annotations

import multiprocessing
import pickle
import time
from array import array
from dataclasses import dataclass

from checkers.fingerprint import FingerprintSet, fingerprint
from spec.invariants import violated
from spec.symmetry import canonical

CHUNK = 2048          # states per pickled frontier chunk
# Successors seen in this level, compared as exact states before canonicalising: commuting steps
# reach one state by several paths (41% of transitions on `current --records 1`), and an exact
# hit is cheaper than a canonical form. Bounded; cleared when full (a miss only costs time).
RAW_CACHE = 200_000


@dataclass
class LevelReport:
    transitions: int = 0
    new: int = 0
    stopped: str | None = None          # "time-limit" | "state-bound"
    violation: tuple | None = None      # (gid of the parent, action index, invariant, message, is_step)


class Shard:
    """One worker's part of the search (also used in-process with W = 1)."""

    def __init__(self, model, invs, check_steps: bool, w: int, nworkers: int):
        self.model, self.invs, self.check_steps = model, invs, check_steps
        self.w, self.W = w, nworkers
        self.visited = FingerprintSet()
        self.par = array("q")           # parent gid per owned state (local index order)
        self.act = array("H")           # action index in the parent's enabled list
        self.frontier: list[bytes] = []     # pickled chunks of (gid, state)
        self._next: list[bytes] = []
        self._buf: list = []
        self._nnext = 0                 # states in the next frontier

    # -- ownership ---------------------------------------------------------------------------
    def _own(self, fp: int, pgid: int, j: int, t) -> tuple | None:
        """Admit a state this shard owns; returns a violation (parent gid, j, inv, msg, False)
        if the new state breaks an invariant, else None. Caller checked it is new."""
        gid = len(self.par) * self.W + self.w
        self.par.append(pgid)
        self.act.append(j)
        self._buf.append((gid, t))
        self._nnext += 1
        if len(self._buf) >= CHUNK:
            self._flush()
        v = violated(self.model.config, t, self.invs)
        return (gid, -1, v[0], v[1], False) if v else None

    def _flush(self) -> None:
        if self._buf:
            self._next.append(pickle.dumps(self._buf, pickle.HIGHEST_PROTOCOL))
            self._buf = []

    def seed(self, s) -> tuple | None:
        fp = fingerprint(canonical(s))
        self.visited.add(fp)
        v = self._own(fp, -1, 0, s)
        self._advance()
        return v

    def _advance(self) -> int:
        """The next frontier becomes current; returns its number of states."""
        self._flush()
        self.frontier, self._next = self._next, []
        n, self._nnext = self._nnext, 0
        return n

    # -- one level ---------------------------------------------------------------------------
    def expand(self, deadline: float, state_cap: int):
        """Phase 1: expand the frontier. Returns (report, outboxes: one pickled list per worker)."""
        model, W, w, visited = self.model, self.W, self.w, self.visited
        enabled, step, stepv = model.enabled, model.step, model.step_violation
        rep = LevelReport()
        out: list[list] = [[] for _ in range(W)]
        sent: set[int] = set()
        raw: set = set()
        n = 0
        for chunk in self.frontier:
            for gid, s in pickle.loads(chunk):
                for j, a in enumerate(enabled(s)):
                    t = step(s, a)
                    rep.transitions += 1
                    if self.check_steps:
                        sv = stepv(s, t)
                        if sv:
                            rep.violation = (gid, j, sv[0], sv[1], True)
                            return rep, [b""] * W
                    if len(raw) >= RAW_CACHE:
                        raw.clear()
                    seen = len(raw)
                    raw.add(t)          # one hash of t, not two (`in`, then `add`)
                    if len(raw) == seen:
                        continue
                    fp = fingerprint(canonical(t))
                    o = fp % W
                    if o == w:
                        if visited.add(fp):
                            rep.new += 1
                            v = self._own(fp, gid, j, t)
                            if v:
                                rep.violation = v
                                return rep, [b""] * W
                    elif fp not in sent:
                        sent.add(fp)
                        out[o].append((fp, gid, j, t))
                n += 1
                if n & 255 == 0:
                    if time.monotonic() > deadline:
                        rep.stopped = "time-limit"
                        return rep, [b""] * W
                    if len(self.par) > state_cap:
                        rep.stopped = "state-bound"
                        return rep, [b""] * W
        self.frontier = []
        return rep, [pickle.dumps(o, pickle.HIGHEST_PROTOCOL) if o else b"" for o in out]

    def absorb(self, inboxes: list[bytes]) -> LevelReport:
        """Phase 2: admit what the other shards found for this one, in worker order."""
        rep = LevelReport()
        visited = self.visited
        for box in inboxes:
            if not box:
                continue
            for fp, pgid, j, t in pickle.loads(box):
                if visited.add(fp):
                    rep.new += 1
                    v = self._own(fp, pgid, j, t)
                    if v:
                        rep.violation = v
                        return rep
        return rep

    def finish_level(self) -> int:
        return self._advance()

    def parent(self, gid: int) -> tuple[int, int]:
        k = gid // self.W
        return self.par[k], self.act[k]

    def nbytes(self) -> int:
        """Bytes held per visited state's bookkeeping: fingerprint table and parent links."""
        return (self.visited.nbytes() + self.par.itemsize * len(self.par)
                + self.act.itemsize * len(self.act))

    def frontier_bytes(self) -> int:
        return sum(len(c) for c in self.frontier)


# --- running shards in worker processes --------------------------------------------------------

def _serve(shard: Shard, conn) -> None:
    try:
        while True:
            cmd, arg = conn.recv()
            if cmd == "expand":
                conn.send(shard.expand(*arg))
            elif cmd == "absorb":
                conn.send(shard.absorb(arg))
            elif cmd == "finish":
                conn.send((shard.finish_level(), shard.frontier_bytes()))
            elif cmd == "seed":
                conn.send(shard.seed(arg))
            elif cmd == "parent":
                conn.send(shard.parent(arg))
            elif cmd == "nbytes":
                conn.send(shard.nbytes())
            elif cmd == "stop":
                return
    except (EOFError, KeyboardInterrupt):
        return
    finally:
        conn.close()


def _worker_main(model, invs, check_steps, w, nworkers, conn, parent_conn) -> None:
    parent_conn.close()
    _serve(Shard(model, invs, check_steps, w, nworkers), conn)


class LocalShards:
    """W = 1: the shard runs in this process, no pickling across processes."""

    def __init__(self, model, invs, check_steps):
        self.shards = [Shard(model, invs, check_steps, 0, 1)]

    def call_all(self, cmd: str, args: list):
        sh = self.shards[0]
        return [_dispatch(sh, cmd, args[0])]

    def call(self, w: int, cmd: str, arg):
        return _dispatch(self.shards[w], cmd, arg)

    def close(self) -> None:
        pass


def _dispatch(sh: Shard, cmd: str, arg):
    if cmd == "expand":
        return sh.expand(*arg)
    if cmd == "absorb":
        return sh.absorb(arg)
    if cmd == "finish":
        return sh.finish_level(), sh.frontier_bytes()
    if cmd == "seed":
        return sh.seed(arg)
    if cmd == "parent":
        return sh.parent(arg)
    if cmd == "nbytes":
        return sh.nbytes()
    raise ValueError(cmd)


class ProcessShards:
    """W > 1: one forked process per shard (the model, with any invariants a caller set on it,
    is inherited, not pickled); commands go over pipes, all shards at once."""

    def __init__(self, model, invs, check_steps, nworkers: int):
        ctx = multiprocessing.get_context("fork")
        self.conns, self.procs = [], []
        for w in range(nworkers):
            a, b = ctx.Pipe()
            p = ctx.Process(target=_worker_main, args=(model, invs, check_steps, w, nworkers, b, a),
                            daemon=True)
            p.start()
            b.close()
            self.conns.append(a)
            self.procs.append(p)

    def call_all(self, cmd: str, args: list):
        for c, a in zip(self.conns, args):
            c.send((cmd, a))
        return [c.recv() for c in self.conns]

    def call(self, w: int, cmd: str, arg):
        self.conns[w].send((cmd, arg))
        return self.conns[w].recv()

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(("stop", None))
            except (OSError, BrokenPipeError):
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        for c in self.conns:
            c.close()
