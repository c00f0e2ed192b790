"""Reading a Jepsen Kafka history.edn, against a bare read of the same file in the same run:
`python -m benchmarks.jepsen_edn [--ops N] [--seed S] [--txn-rate R] [--check]`.

Writes a Jepsen-style history (seeded: clients sending single records and transactions of two
to four sends, polls of one to three keys returning runs of records, assigns, and a nemesis op
now and then) of N client operations (2N lines) and a final read of every key (as Jepsen ends
a run: the history is then valid, not unknown), then times on one core, in this
process, each stage on the same file:
  bare      the file's lines read and split into tokens by nothing (a `for line in f` loop)
  edn       traces.history_jepsen.parse_line on every line (the compiled EDN reader alone)
  edn-py    parse_line_py, the regular-expression reader it falls back to
  convert   the reader and the conversion to our events (history_jepsen.events)
  load      the reader and the conversion into a History's operations (history_jepsen.load)
  load-events  the same History the previous way: the events, then traces.history.pair
            (each event's fields checked, then paired by id)
  check     (--check) end to end, as `check-history --format jepsen` runs it
            (pipeline/file_check.py check_jepsen_file: load, the oracle's per-partition and
            transaction rules, the compiled cycle screen); its result is the verdict's status
            and each check's
  check-oracle (--check) the previous way end to end: load-events and the oracle alone (its
            networkx cycle search, bounded by 200,000 operations), no cycle screen
Each figure is CPU seconds (time.process_time) and Jepsen operations per CPU second.
Prints seed= and the options first."""
from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path


FINAL = 10                  # the final reader's process (the clients are 0..9)
FINAL_CHUNK = 1000


def write_history(path: Path, ops: int, seed: int, txn_rate: float, keys: int = 8) -> int:
    """A plausible Jepsen Kafka history of `ops` client operations, then the final reads;
    returns the lines written."""
    rng = random.Random(seed)
    logs: dict[int, list[int]] = {k: [] for k in range(keys)}
    pos: dict[tuple[int, int], int] = {}
    t, idx, val, lines = 0, 0, 0, 0
    with open(path, "w") as f:
        def w(proc, typ, fn, value, extra=""):
            nonlocal idx, t, lines
            t += rng.randint(1, 1000)
            f.write(f"#jepsen.history.Op{{:index {idx}, :time {t}, :type :{typ}, :process {proc}, "
                    f":f :{fn}, :value {value}{extra}}}\n")
            idx += 1
            lines += 1
        for i in range(ops):
            proc = rng.randrange(10)
            r = rng.random()
            if i and i % 5000 == 0:
                t += 5
                f.write(f"{{:index {idx}, :time {t}, :type :info, :process :nemesis, :f :kill, "
                        ":value {\"n1\" :killed}}\n")
                idx += 1
                lines += 1
            if r < 0.5:
                n = rng.randint(2, 4) if rng.random() < txn_rate else 1
                mops = []
                for _ in range(n):
                    k = rng.randrange(keys)
                    val += 1
                    logs[k].append(val)
                    mops.append((k, val, len(logs[k]) - 1))
                w(proc, "invoke", "send", "[" + " ".join(f"[:send {k} {v}]" for k, v, _ in mops) + "]")
                w(proc, "ok", "send", "[" + " ".join(f"[:send {k} [{o} {v}]]" for k, v, o in mops) + "]")
            elif r < 0.97:
                ks = rng.sample(range(keys), rng.randint(1, 3))
                parts = []
                for k in ks:
                    p = pos.get((proc, k), 0)
                    n = min(len(logs[k]) - p, rng.randint(0, 6))
                    recs = " ".join(f"[{o} {logs[k][o]}]" for o in range(p, p + n))
                    pos[(proc, k)] = p + n
                    parts.append(f"{k} [{recs}]")
                w(proc, "invoke", "poll", "[[:poll]]")
                w(proc, "ok", "poll", "[[:poll {" + ", ".join(parts) + "}]]")
            else:
                ks = sorted(rng.sample(range(keys), rng.randint(1, keys)))
                for k in range(keys):
                    if k not in ks:
                        pos.pop((proc, k), None)
                w(proc, "invoke", "assign", "[" + " ".join(map(str, ks)) + "]")
                w(proc, "ok", "assign", "[" + " ".join(map(str, ks)) + "]")
        # The final reads, as Jepsen ends a run: a fresh consumer assigned every key, seeking to
        # the beginning, polls each key's whole log (FINAL_CHUNK records a poll); without them
        # an acknowledged record never read could be lost or merely lagging (writes: unknown).
        every = "[" + " ".join(map(str, range(keys))) + "]"
        w(FINAL, "invoke", "assign", every, ", :seek-to-beginning? true")
        w(FINAL, "ok", "assign", every, ", :seek-to-beginning? true")
        for k in range(keys):
            for lo in range(0, len(logs[k]), FINAL_CHUNK):
                recs = " ".join(f"[{o} {logs[k][o]}]" for o in range(lo, min(lo + FINAL_CHUNK, len(logs[k]))))
                w(FINAL, "invoke", "poll", "[[:poll]]")
                w(FINAL, "ok", "poll", f"[[:poll {{{k} [{recs}]}}]]")
    return lines


def _timed(fn):
    c0 = time.process_time()
    out = fn()
    return time.process_time() - c0, out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--txn-rate", type=float, default=0.3)
    ap.add_argument("--check", action="store_true", help="also the oracle, end to end")
    ap.add_argument("--only", default="", help="comma-separated stages to run (default: all)")
    a = ap.parse_args(argv)
    print(f"seed={a.seed} ops={a.ops} txn_rate={a.txn_rate} check={a.check}", flush=True)
    from traces import history_jepsen as hj
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "history.edn"
        lines = write_history(path, a.ops, a.seed, a.txn_rate)
        size = path.stat().st_size
        print(f"{lines} lines, {size / 2**20:.1f} MiB", flush=True)

        def bare():
            n = 0
            with open(path, encoding="utf-8") as f:
                for line in f:
                    n += len(line)
            return n

        def edn():
            with open(path, encoding="utf-8") as f:
                return sum(1 for line in f if hj.parse_line(line) is not None)

        def edn_py():
            with open(path, encoding="utf-8") as f:
                return sum(1 for line in f if hj.parse_line_py(line) is not None)

        def convert():
            _, evs = hj.events(path)
            return sum(1 for _ in evs)

        def load():
            return len(hj.load(path).ops)

        def load_events():
            from traces.history import pair
            return len(pair(str(path), *hj.events(path)).ops)

        stages = [("bare", bare), ("edn", edn), ("edn-py", edn_py), ("convert", convert), ("load", load),
                  ("load-events", load_events)]
        if a.check:
            from checkers.history.pipeline.file_check import check_jepsen_file

            def check():
                v = check_jepsen_file(str(path)).verdict
                return f"{v.status} " + " ".join(f"{c.name}={c.status}" for c in v.checks)
            stages.append(("check", check))

            def check_oracle():
                from checkers.history.oracle.check import check_history
                from traces.history import pair
                v = check_history(pair(str(path), *hj.events(path)))
                return f"{v.status} " + " ".join(f"{c.name}={c.status}" for c in v.checks)
            stages.append(("check-oracle", check_oracle))
        if a.only:
            keep = set(a.only.split(",")) | {"bare"}
            stages = [x for x in stages if x[0] in keep]
        print(f"{'stage':12} {'CPU s':>8} {'Jepsen ops/CPU-s':>17} {'x bare':>7}  result")
        base = None
        for name, fn in stages:
            secs, out = _timed(fn)
            base = base or secs
            print(f"{name:12} {secs:8.3f} {a.ops / secs:17,.0f} {secs / base:7.1f}  {out}", flush=True)
        print(f"cpu={os.cpu_count()} (single process, one core)")


if __name__ == "__main__":
    main()
