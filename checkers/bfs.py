"""Breadth-first search over fingerprints, on one core or several (hash-sharded workers).

Each shard owns the fingerprints with `fp % W == w`: their visited set (checkers/fingerprint.py,
8 bytes a slot). A state is kept by the shard that discovered it: its parent link (the parent's
global id and the index of the action in the parent's `enabled` list: 10 bytes) and its place in
that shard's frontier, kept pickled in chunks (siblings share most of their sub-tuples, and
pickle's memo stores each once). Only fingerprints cross between processes, never states
(pickling a state across costs about what expanding it does). A level runs in rounds (with one
shard: one round), each of three phases:

1. expand: every shard expands its part of the round (about ROUND_CHUNKS frontier chunks:
   a level has as many rounds as it takes, every shard the same share); a successor whose
   fingerprint it owns is judged at once; the others wait in memory while their fingerprints go
   to their owners (the round bounds how many wait);
2. judge: every owner adds the fingerprints it was sent, in worker order, and answers which
   were new (its own discoveries of phase 1 came first);
3. admit: every shard keeps the successors its owners called new.

Then the frontiers are balanced by moving whole pickled chunks (bytes, not states) from the
fullest shard to the emptiest, so a shard's share of the work does not depend on where the
search started. Levels are synchronous, so the first level with a violation gives a shortest
counterexample; within it the violation with the least global id wins, and every order is fixed
(frontier order, worker order, the balancing plan), so one configuration and one worker count
give the same counterexample on every run. The path is rebuilt from the parent links and
replayed from the initial state (action indices into `enabled`, which is deterministic).

A global id is `local_index * W + w`: unique, and it names the shard holding its parent link
without a table, wherever its state is expanded.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import time
from array import array
from dataclasses import dataclass

from checkers.fingerprint import FingerprintSet, fingerprint
from spec.invariants import violated
from spec.symmetry import canonical

CHUNK = 2048          # most states per pickled frontier chunk
MIN_CHUNK = 32        # fewest (a chunk is the unit of balancing: a level's frontier is cut into
                      # about 16 chunks a shard, so a small level still splits evenly)
ROUND_CHUNKS = 4      # chunks a shard expands per exchange round (about) with several shards
# Successors seen in this level, compared as exact states before canonicalising: commuting steps
# reach one state by several paths (41% of transitions on `current --records 1`), and an exact
# hit is cheaper than a canonical form. Bounded; cleared when full (a miss only costs time). Most
# hits are near (two orders of two steps from one state): at `current` default bounds 10,000
# entries cost 2.5% more CPU than 200,000 and 69 fewer bytes of memory per state.
RAW_CACHE = 20_000
# Each worker process starts a session of its own. Linux's autogroup scheduling (on by default)
# shares the CPU between sessions, not processes: workers left in the caller's session would
# share one session's slice of a busy machine, so two got no more CPU than one beside another
# job. (The workers still end with the caller: they exit when its pipe closes.)
SESSION_PER_WORKER = os.environ.get("KAFKAVERIFY_WORKER_SESSION", "1") != "0"


@dataclass
class LevelReport:
    transitions: int = 0
    new: int = 0
    stopped: str | None = None          # "time-limit" | "state-bound"
    violation: tuple | None = None      # (gid of the parent, action index, invariant, message, is_step)
    more: bool = False                  # frontier chunks left for another round of this level


class Shard:
    """One worker's part of the search (also used in-process with W = 1)."""

    def __init__(self, model, invs, check_steps: bool, w: int, nworkers: int):
        self.model, self.invs, self.check_steps = model, invs, check_steps
        self.w, self.W = w, nworkers
        self.visited = FingerprintSet()
        self.par = array("q")           # parent gid per owned state (local index order)
        self.act = array("H")           # action index in the parent's enabled list
        self.frontier: list[bytes] = []     # pickled chunks of (gid, state)
        self.sizes: list[int] = []          # states per chunk of the frontier
        self._next: list[bytes] = []
        self._nsizes: list[int] = []
        self._buf: list = []
        self._nnext = 0                 # states in the next frontier
        self._chunk = MIN_CHUNK         # states per chunk of the next frontier
        self._pos = 0                   # chunks of the frontier expanded in earlier rounds
        # successors owned by another shard, waiting for its answer: (parent gid, j, state) and
        # their fingerprints, per owner
        self._pend: list[list] = [[] for _ in range(nworkers)]
        self._pfp: list[array] = [array("Q") for _ in range(nworkers)]

    # -- ownership ---------------------------------------------------------------------------
    def _own(self, fp: int, pgid: int, j: int, t) -> tuple | None:
        """Admit a state this shard owns; returns a violation (parent gid, j, inv, msg, False)
        if the new state breaks an invariant, else None. Caller checked it is new."""
        gid = len(self.par) * self.W + self.w
        self.par.append(pgid)
        self.act.append(j)
        self._buf.append((gid, t))
        self._nnext += 1
        if len(self._buf) >= self._chunk:
            self._flush()
        v = violated(self.model.config, t, self.invs)
        return (gid, -1, v[0], v[1], False) if v else None

    def _flush(self) -> None:
        if self._buf:
            self._next.append(pickle.dumps(self._buf, pickle.HIGHEST_PROTOCOL))
            self._nsizes.append(len(self._buf))
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
        self.sizes, self._nsizes = self._nsizes, []
        n, self._nnext = self._nnext, 0
        self._chunk = max(MIN_CHUNK, min(CHUNK, n // 16))
        return n

    # -- one level ---------------------------------------------------------------------------
    def _round(self, k: int, rounds: int):
        """The frontier's chunks for round k of `rounds` (an equal part of them: the shards'
        frontiers are balanced, so every shard's part of a round is alike), each released as
        it is taken."""
        end = len(self.frontier) if k + 1 >= rounds else (k + 1) * len(self.frontier) // rounds
        while self._pos < end:
            chunk, self.frontier[self._pos] = self.frontier[self._pos], b""
            self._pos += 1
            yield chunk

    def expand(self, deadline: float, state_cap: int, k: int = 0, rounds: int = 1):
        """Phase 1: expand the frontier, or its part for round k of `rounds` (the successors
        waiting for their owners' answers are held in memory, so a round bounds them). Returns
        (report, outboxes: per worker, the fingerprints (array('Q') bytes) of the successors it
        owns that wait here for its answer)."""
        model, W, w, visited = self.model, self.W, self.w, self.visited
        enabled, step, stepv = model.enabled, model.step, model.step_violation
        rep = LevelReport()
        pend, pfp = self._pend, self._pfp
        sent: set[int] = set()
        raw: set = set()
        n = 0
        for chunk in self._round(k, rounds):
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
                        pend[o].append((gid, j, t))
                        pfp[o].append(fp)
                n += 1
                if n & 255 == 0:
                    if time.monotonic() > deadline:
                        rep.stopped = "time-limit"
                        return rep, [b""] * W
                    if len(self.par) > state_cap:
                        rep.stopped = "state-bound"
                        return rep, [b""] * W
        rep.more = self._pos < len(self.frontier)
        if not rep.more:
            self.frontier, self.sizes, self._pos = [], [], 0
        return rep, [pfp[o].tobytes() for o in range(W)]

    def judge(self, inboxes: list[bytes]) -> list[bytes]:
        """Phase 2: add the fingerprints the other shards found for this one, in worker order;
        answers each sender with one byte per fingerprint, 1 where it was new."""
        visited = self.visited
        answers = []
        for box in inboxes:
            fps = array("Q")
            fps.frombytes(box)
            answers.append(bytes([1 if visited.add(fp) else 0 for fp in fps]))
        return answers

    def admit(self, answers: list[bytes]) -> LevelReport:
        """Phase 3: keep the waiting successors their owners called new, in worker order."""
        rep = LevelReport()
        pend = self._pend
        try:
            for o, ans in enumerate(answers):
                for new, (pgid, j, t) in zip(ans, pend[o]):
                    if new:
                        rep.new += 1
                        v = self._own(0, pgid, j, t)
                        if v:
                            rep.violation = v
                            return rep
        finally:
            self._pend = [[] for _ in range(self.W)]
            self._pfp = [array("Q") for _ in range(self.W)]
        return rep

    # -- balancing -----------------------------------------------------------------------------
    def take(self, k: int) -> tuple[list[bytes], list[int]]:
        """Gives up the last k chunks of the frontier (and their sizes)."""
        cut = len(self.frontier) - k
        chunks, sizes = self.frontier[cut:], self.sizes[cut:]
        del self.frontier[cut:], self.sizes[cut:]
        return chunks, sizes

    def give(self, got: tuple[list[bytes], list[int]]) -> None:
        self.frontier.extend(got[0])
        self.sizes.extend(got[1])

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


def balance_plan(sizes: list[list[int]]) -> list[tuple[int, int, int]]:
    """Moves (from shard, to shard, chunks) that even out the shards' frontiers: the last chunk
    of the fullest shard goes to the emptiest while that narrows their gap. Depends only on the
    chunk sizes, so it is the same on every run."""
    load = [sum(z) for z in sizes]
    left = [list(z) for z in sizes]
    moves: dict[tuple[int, int], int] = {}
    while True:
        hi = max(range(len(load)), key=lambda i: (load[i], -i))
        lo = min(range(len(load)), key=lambda i: (load[i], i))
        if not left[hi]:
            break
        c = left[hi][-1]
        if abs((load[hi] - c) - (load[lo] + c)) >= load[hi] - load[lo]:
            break
        left[hi].pop()
        load[hi] -= c
        load[lo] += c
        moves[(hi, lo)] = moves.get((hi, lo), 0) + 1
    return [(a, b, k) for (a, b), k in moves.items()]


# --- running shards in worker processes --------------------------------------------------------

def _serve(shard: Shard, conn) -> None:
    try:
        while True:
            cmd, arg = conn.recv()
            if cmd == "expand":
                conn.send(shard.expand(*arg))
            elif cmd in ("judge", "admit", "take", "give"):
                conn.send(getattr(shard, cmd)(arg))
            elif cmd == "finish":
                shard.finish_level()
                conn.send((shard.sizes, shard.frontier_bytes()))
            elif cmd == "seed":
                conn.send(shard.seed(arg))
            elif cmd == "parent":
                conn.send(shard.parent(arg))
            elif cmd == "nbytes":
                conn.send(shard.nbytes())
            elif cmd == "stop":
                return
    except (EOFError, OSError, KeyboardInterrupt):     # the parent is gone (closed or broken pipe)
        return
    finally:
        conn.close()


def _worker_main(model, invs, check_steps, w, nworkers, conn, parent_conn) -> None:
    parent_conn.close()
    gc.disable()        # the search makes no reference cycles; collections only cost time
    if SESSION_PER_WORKER:
        try:
            os.setsid()
        except OSError:
            pass
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
    if cmd in ("judge", "admit", "take", "give"):
        return getattr(sh, cmd)(arg)
    if cmd == "finish":
        sh.finish_level()
        return sh.sizes, sh.frontier_bytes()
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
