"""The fused screen: the C screen (checkers/history/screens/_fused.c) driven over a history's
decoded columns, slice by slice as they are decoded, with no polars frame work. It flags
partitions (or the whole history, with a reason) as the polars screens would; a history it
flags nothing in is decided from its counts by the pipeline (pipeline/file_check.py), which
hands any other to the polars screens and then the oracle. tests/test_fused.py checks that it
never misses a partition the oracle reports an anomaly or a note in.

Entry points: `fused_screen` (one pass), `grouped_screen` (groups of partitions, for
`check-history --low-memory`)."""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from checkers.history.screens.columnar import SETTINGS


def _load():
    """The compiled fused screen, or an ImportError that says how to build it."""
    try:
        from checkers.history.screens import _fused
    except ImportError as e:        # a checkout whose extensions were built before this one
        raise ImportError("checkers.history.screens._fused (checkers/history/screens/_fused.c) is not "
                          "built: run `pip install -e .` (make setup) or "
                          "`python setup.py build_ext --inplace`") from e
    return _fused


@dataclass
class Fused:
    """What the fused screen found: `why` is the history-wide reason to hand the history to
    the polars screens (or ""), `flagged` the partitions it flags ((topic, partition, [rule,
    ...])), `counts` what the polars screens would count on a history with nothing flagged."""
    why: str
    flagged: list
    counts: dict

    @property
    def clean(self) -> bool:
        return not self.why and not self.flagged


# Whether the fused screen runs at all (tests turn it off to drive the polars screens alone):
# off, fused_screen and grouped_screen return None, as when they cannot decide.
FUSED_SCREEN = True


def fused_screen(frames, deadline: float | None = None) -> Fused | None:
    """The fused screen over `frames` (the events' NEEDED columns, slices in file order), or
    None when the time ran out, a frame is not of the schema's types, or FUSED_SCREEN is off."""
    if not FUSED_SCREEN:
        return None
    _fused = _load()
    st = _fused.new()
    frames = iter(frames)
    try:
        while (df := next(frames, None)) is not None:
            # Each frame released before the next is decoded (its pages are then reused).
            cols = [df.get_column(n) for n in _fused.COLUMNS]
            del df
            _fused.feed(st, cols)
            del cols
            if deadline is not None and time.monotonic() > deadline:
                return None
    except (TypeError, ValueError, pl.exceptions.PolarsError, OSError):
        return None
    r = _fused.finish(st)
    return Fused(r["global"] or "", r["flagged"], r)


# Above SCREEN_GROUP_EVENTS events (when set) the fused screen runs in groups of partitions, so
# that its state (about 56 bytes per offset of the log: docs/benchmarks/histories.md) is
# bounded by a group's share of the log instead of by the whole log. At most SCREEN_GROUPS_MAX
# groups: each group's state still has the screen's table of 4 bytes per operation id of the
# history, and its dense layouts need ids within 8 times the group's events (_fused.c
# DENSE_SLACK); beyond that bound the groups grow with the history. Off (None) by default:
# routing and spilling the decoded columns through polars (a filter per group, an IPC write
# and read) made the whole check 3.0x dearer in CPU at 10^7 operations (4.2x at 2*10^7) for a
# peak of 515-546 MiB instead of 970-1,578 (docs/benchmarks/histories.md);
# 1 << 22 is the setting measured, which `check-history --low-memory` passes.
SCREEN_GROUP_EVENTS: int | None = None
SCREEN_GROUPS_MAX = 8
_ALL = 255      # a settings operation's events: in every group


def grouped_screen(frames, k: int, deadline: float | None = None) -> Fused | None:
    """The fused screen in `k` groups of partitions: one pass over `frames` (the NEEDED
    columns, slices in file order) writes each event to its group's spill files (Arrow IPC,
    uncompressed, in a temporary directory): an invoke by its (topic, partition), round robin
    in order of first appearance; a completion by its invoke's group (a table of one byte per
    operation id); a settings operation (producers' configurations, assigns, subscribes: the
    groups, generations and modes the consumer rules consult) to every group, as the kernel's
    chunked path has them. Then each group is screened with a state of its own, released
    before the next, and the results merged: every rule of the screen is per partition or
    reads only the settings, so the flags, counts and history-wide reasons are those of one
    pass, except for the reasons that compare events of different partitions (row fields,
    time order, invokes at one time in id order, an id invoked twice, ids too sparse), which
    the routing tests itself on the whole history. None as for fused_screen."""
    if not FUSED_SCREEN:
        return None
    _fused = _load()
    c = pl.col
    tmp = Path(tempfile.mkdtemp(prefix="kv-screen-"))
    try:
        files: list[list[Path]] = [[] for _ in range(k)]
        home = pl.Series("home", [], pl.UInt8)      # per id: 0 no invoke yet, group + 1, or _ALL
        keys: dict[tuple, int] = {}
        rows = n_settings = 0
        last_t, last_inv = None, None               # (mono_ns), (mono_ns, id) of the last invoke
        frames = iter(frames)
        while (df := next(frames, None)) is not None:
            if df.height == 0:
                continue
            rows += df.height
            if any(df.get_column(n).null_count() for n in ("id", "type", "process", "f", "mono_ns")):
                return Fused("a row lacks a required field", [], {})
            ids, t = df.get_column("id"), df.get_column("mono_ns")
            if ids.min() < 0 or ids.max() >= 8 * rows + (1 << 20):      # _fused.c's bound
                return Fused("ids too sparse for the dense layout", [], {})
            if (last_t is not None and t[0] < last_t) or not t.is_sorted():
                return Fused("events not in time order", [], {})
            last_t = t[-1]
            is_inv = c("type") == "invoke"
            inv = df.lazy().filter(is_inv).select("id", "f", "topic", "partition", "mono_ns").collect()
            if inv.height:
                it, iid = inv.get_column("mono_ns"), inv.get_column("id")
                if ((it == it.shift(1)) & (iid < iid.shift(1))).any() or (
                        last_inv is not None and it[0] == last_inv[0] and iid[0] < last_inv[1]):
                    return Fused("invokes at one time not in id order", [], {})
                last_inv = (it[-1], iid[-1])
                setting = inv.get_column("f").is_in(SETTINGS)
                n_settings += int(setting.sum())
                for tp in inv.filter(~setting).select("topic", "partition").unique(maintain_order=True).iter_rows():
                    if tp not in keys:
                        keys[tp] = len(keys) % k
                tab = pl.DataFrame({"topic": [tp[0] for tp in keys], "partition": [tp[1] for tp in keys],
                                    "g": list(keys.values())},
                                   schema={"topic": inv.schema["topic"], "partition": inv.schema["partition"],
                                           "g": pl.UInt8})
                g = (inv.select("topic", "partition").join(tab, on=["topic", "partition"], how="left",
                                                          maintain_order="left")
                     .get_column("g").fill_null(0) + 1).cast(pl.UInt8)
                g = pl.select(pl.when(setting).then(pl.lit(_ALL, pl.UInt8)).otherwise(g)).to_series()
                top = iid.max()
                if top >= home.len():
                    home = home.extend_constant(0, max(top + 1, 2 * home.len()) - home.len())
                if iid.n_unique() != iid.len() or (home.gather(iid) != 0).any():
                    return Fused("an id invoked twice", [], {})
                home.scatter(iid, g)
            del inv
            # An event whose id has no invoke yet goes to group 0, whose screen flags it.
            idx = ids.clip(upper_bound=max(home.len() - 1, 0))
            g = home.gather(idx) if home.len() else pl.zeros(df.height, pl.UInt8, eager=True)
            g = pl.select(pl.when(ids < home.len()).then(g).otherwise(pl.lit(0, pl.UInt8))).to_series()
            for j in range(k):
                part = df.filter(g.is_in([j + 1, _ALL] + ([0] if j == 0 else [])))
                if part.height:
                    f = tmp / f"g{j}-{len(files[j])}.arrow"
                    part.write_ipc(f, compression="uncompressed")
                    files[j].append(f)
                del part
            del df, g, ids, t
            if deadline is not None and time.monotonic() > deadline:
                return None
        del home
        merged, groups = None, 0
        flags: dict[tuple, list] = {}
        parts: dict[tuple, tuple] = {}
        for j in range(k):
            if not files[j]:
                continue
            groups += 1
            st = _fused.new()
            for f in files[j]:
                df = pl.read_ipc(f)
                cols = [df.get_column(n) for n in _fused.COLUMNS]
                del df
                _fused.feed(st, cols)
                del cols
                f.unlink()
                if deadline is not None and time.monotonic() > deadline:
                    return None
            r = _fused.finish(st)
            del st
            if r["global"]:
                return Fused(r["global"], [], r)
            # A partition an assign names is known to every group (with no log in the groups
            # that do not own it): its counts and flags are the sum and union over groups.
            for t, p, why in r["flagged"]:
                flags.setdefault((t, p), [])
                flags[t, p] += [w for w in why if w not in flags[t, p]]
            for t, p, n, u in r["parts"]:
                a, b = parts.get((t, p), (0, 0))
                parts[t, p] = (a + n, b + u)
            if merged is None:
                merged = r
            else:
                merged["pool"] = max(merged["pool"], r["pool"])
                for n in ("ops", "sends", "polls", "records", "undecided", "consumer_examined", "evidence"):
                    merged[n] += r[n]
        if merged is None:
            return None
        merged["flagged"] = [(t, p, why) for (t, p), why in flags.items()]
        merged["parts"] = [(t, p, n, u) for (t, p), (n, u) in parts.items()]
        # Settings operations were screened in every group: counted once.
        merged["ops"] -= (groups - 1) * n_settings
        return Fused("", merged["flagged"], merged)
    except (TypeError, ValueError, pl.exceptions.PolarsError, OSError):
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
