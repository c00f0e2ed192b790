"""Mutation testing of the protocol code: how many small bugs injected into the model's and the
broker's replication rules the suite notices. `python -m benchmarks.mutate` (or
`make mutate`).

Built on cosmic-ray (pinned in pyproject's `mutate` extra): it enumerates mutants from the AST
with a broad operator set (comparisons, boolean operators, number replacement, break/continue,
`not` removal, ...), applies one at a time to the file on disk and runs an arbitrary command as
the killer -- which we need, since a killer here is `kafkaverify check --budget quick`, not only
pytest. Its session is a sqlite file, so a long run can be resumed (`--keep DIR`).

The run never mutates this checkout: it copies the tracked (and untracked, not ignored) files to
a scratch directory and runs there with PYTHONPATH pointing at the copy (checked before the first
mutant). Killers, cheapest first, each stopping at the first failure:
- spec/: the fast model tests, then the quick check;
- impl/: the broker's rule and replication tests (real brokers).
impl/'s files other than rules.py are mutated only inside their replication functions
(FUNCTIONS; `--functions FILE=NAME,...`).
A mutant that makes the killer time out counts as killed (cosmic-ray's rule; the broker would
hang), and is listed apart. Mutants inside annotations are equivalent by construction (PEP 563:
never evaluated) and are set apart before sampling, never run. `--sample FILE=N --seed S` draws
the same N mutants of FILE in every session; `--rerun-survivors` runs a kept run's survivors
again against the checkout's tests (after writing the tests that kill them). Survivors whose
(file, line, operator) appear in the reviewed list benchmarks/mutate_equivalent.txt are
equivalent mutants, excluded from the score; an entry that matches a killed mutant is reported
as stale.

Output: per file, mutants / in annotations / sampled / killed / survived / equivalent / score and
its 95 % Wilson interval (and each family's, its files pooled); each survivor as a diff; the
command that reruns the run.
`python -m benchmarks.mutate_order DIR` times the spec/ killers' order on a kept session.
Exit 0 when every file reaches its target score (spec/ 90 %, impl/ 85 %), 1 when one does not,
2 when the killers fail unmutated (nothing can be measured), 3 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = Path(__file__).with_name("mutate_equivalent.txt")

# In the order that kills soonest (with -x the first failure ends the run): cheap files, and the
# teeth and golden traces that kill most mutants of spec/invariants.py and spec/model.py, before
# the explorations of test_model_internal.py and test_model_pruning.py and the CLI subprocesses
# of test_model_trace.py. Every file still runs for a mutant that survives.
SPEC_TESTS = ("tests/test_model_rules.py", "tests/test_model_rules_table.py", "tests/test_model_invariants.py",
              "tests/test_model_scenarios.py", "tests/test_suite_teeth.py", "tests/test_model_golden.py",
              "tests/test_model_internal.py", "tests/test_model_pruning.py", "tests/test_model_trace.py")
# impl/: the pure rule and storage tests first (seconds), then real clusters, cheapest and most
# replication-bound first: each arranges leader and ISR where a replication rule decides. Not
# run: the ZooKeeper twins of the cluster tests (the same broker code) and KIP-101's v0.10
# divergence (the same HW-truncation path as its S1 loss).
_CF = "tests/test_conformance_fixes.py::test_"
_KIP101 = "tests/test_broker_kip101.py::test_"
_CL = "tests/test_broker_cluster.py::test_"
_BOUNCE = "tests/test_broker_bounce.py::test_"
IMPL_TESTS = ("tests/test_broker_rules.py", "tests/test_broker_storage.py", f"{_BOUNCE}bounce_rules",
              "tests/test_broker_replication_rules.py",
              f"{_CF}follower_drop_normal_broker_conforms", f"{_CF}pending_shrink_normal_broker_conforms",
              f"{_CF}unseen_epoch_normal_broker_conforms",
              f"{_CF}unseen_epoch_answered_above_zero_normal_broker_conforms",
              f"{_CF}min_isr_rejoin_normal_broker_conforms",
              f"{_CF}empty_disk_rejoin_normal_broker_refuses_the_stale_epoch",
              f"{_KIP101}s1_epoch_truncation_keeps_it[current]", f"{_KIP101}s2_current_replicas_agree_after_power_loss",
              f"{_KIP101}s1_epoch_truncation_keeps_it[kip-101]", f"{_KIP101}s1_v010_loses_an_acknowledged_record",
              f"{_CL}not_enough_replicas[embedded]",
              f"{_CL}kill_leader_acks_all_loses_no_acknowledged_record[embedded]",
              f"{_BOUNCE}a_controller_elected_after_the_bounce_does_not_reinstate_the_bounced_leader",
              f"{_BOUNCE}a_controller_that_slept_through_the_bounce_handles_it",
              f"{_CF}without_truncate_on_epoch_change_caught", f"{_CF}without_fetch_epoch_fencing_caught",
              f"{_CF}without_min_isr_hw_caught", f"{_CF}without_isr_expand_epoch_start_caught",
              f"{_CF}without_epoch_end_offset_caught", f"{_CF}without_maximal_isr_caught",
              f"{_CF}without_isr_broker_epoch_caught",
              f"{_CL}paused_leader_is_replaced_and_rejoins_as_follower",
              f"{_CL}unclean_election_only_when_the_topic_allows_it")
# file -> killer family. impl/'s replication paths: the rules, the log and its epoch cache.
TARGETS: dict[str, str] = {
    "spec/rules.py": "spec", "spec/model.py": "spec", "spec/invariants.py": "spec",
    "spec/updates.py": "spec", "spec/actions.py": "spec",
    "impl/rules.py": "impl", "impl/storage/log.py": "impl",
    "impl/broker.py": "impl", "impl/controller.py": "impl", "impl/handlers.py": "impl",
    "impl/partition.py": "impl", "impl/isr.py": "impl", "impl/fetcher.py": "impl",
    "impl/broker_coordination.py": "impl",
}
# Files mutated only inside these functions (`Class.method` or a top-level name); --functions
# overrides. The replication paths of the broker: becoming leader/follower, HW advance, ISR
# shrink/expand and its write, the replica fetcher and truncation, the leader's Fetch and
# OffsetsForLeaderEpoch handling; the log's epoch cache, appends, reads and truncation; the
# controller's elections and ISR changes on broker death and bounce.
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "impl/broker.py": ("Broker.handle_leader_and_isr", "Broker._become_leader",
                       "Broker._become_follower"),
    "impl/partition.py": ("Partition.apply_state", "Partition.become_leader",
                          "Partition.become_follower", "Partition.update_hw",
                          "Partition.complete_delayed", "Partition.record_follower_fetch",
                          "Partition.truncate", "Partition.truncation_round",
                          "Partition.truncate_by_hw", "Partition.append_fetched",
                          "Partition.take_leader_hw", "Partition.out_of_range",
                          "Partition.restart_at_log_start"),
    "impl/isr.py": ("IsrManager.maybe_shrink", "IsrManager.maybe_expand", "IsrManager.propose",
                    "IsrManager.ineligible", "IsrManager.write_done"),
    "impl/fetcher.py": ("ReplicaFetcher.run", "ReplicaFetcher.truncate", "ReplicaFetcher.fetch_once",
                        "ReplicaFetcher.handle_out_of_range"),
    "impl/broker_coordination.py": ("BrokerCoordination.write_isr",),
    "impl/storage/log.py": ("EpochCache.__init__", "EpochCache._persist", "EpochCache.latest_epoch",
                            "EpochCache.assign", "EpochCache.end_offset_for", "EpochCache.start_offset_of",
                            "EpochCache.truncate_from_end", "EpochCache.clear",
                            "PartitionLog._rebuild_missing_epochs", "PartitionLog._read_hw",
                            "PartitionLog.append_as_leader", "PartitionLog.append_as_follower",
                            "PartitionLog.checkpoint_hw", "PartitionLog.read", "PartitionLog.truncate_to",
                            "PartitionLog.truncate_fully_and_start_at"),
    "impl/handlers.py": ("_fetch_pass", "_record_follower_fetch", "offsets_for_leader_epoch"),
    "impl/controller.py": ("bounced", "leader_bounced", "partition_change", "elect_leader",
                           "Controller._on_brokers", "Controller._elect_if_needed"),
}


def function_lines(path: Path, names) -> set[int]:
    """The lines of the named functions in a Python file (decorators included): `Class.method` or
    a top-level name. An unknown name is an error, not an empty scope."""
    import ast
    tree = ast.parse(path.read_text(), str(path))
    found: dict[str, range] = {}

    def visit(body, prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found[prefix + node.name] = range(first, node.end_lineno + 1)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")

    visit(tree.body, "")
    missing = [n for n in names if n not in found]
    if missing:
        raise ValueError(f"{path}: no function {', '.join(missing)}")
    return {line for n in names for line in found[n]}
TARGET_SCORE = {"spec": 0.90, "impl": 0.85}


def killer_command(family: str, quick_check: bool) -> str:
    py = shlex.quote(sys.executable)
    tests = SPEC_TESTS if family == "spec" else IMPL_TESTS
    cmd = f"{py} -m pytest -x -q -n 0 -p no:cacheprovider --timeout 300 {' '.join(shlex.quote(t) for t in tests)}"
    if family == "spec" and quick_check:
        cmd += f" && {py} -m kafkaverify check --budget quick"
    return "sh -c " + shlex.quote(cmd)


@dataclass
class Equivalent:
    path: str
    line: int
    operator: str
    reason: str
    col: int | None = None    # needed where one line holds several mutants of one operator
    used: bool = False


def load_equivalents(path: Path = EQUIVALENT) -> list[Equivalent]:
    """`path:line[:col] operator | reason` per line; '#' starts a comment."""
    out = []
    if not path.exists():
        return out
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        text = raw.split("#", 1)[0].strip() if raw.lstrip().startswith("#") else raw.strip()
        if not text:
            continue
        try:
            where, rest = text.split(None, 1)
            operator, reason = (x.strip() for x in rest.split("|", 1))
            file, *pos = where.split(":")
            out.append(Equivalent(file, int(pos[0]), operator, reason, int(pos[1]) if len(pos) > 1 else None))
        except ValueError:
            raise SystemExit(f"{path}:{n}: expected 'path:line[:col] operator | reason', got {raw!r}") from None
    if any(not e.reason for e in out):
        raise SystemExit(f"{path}: every equivalent mutant needs a reason")
    return out


@dataclass
class FileScore:
    path: str
    mutants: int = 0
    sampled: int = 0
    killed: int = 0
    timeouts: int = 0
    survived: list = field(default_factory=list)      # (job_id, line, operator, diff)
    equivalent: list = field(default_factory=list)    # (line, operator, reason)
    incompetent: int = 0
    annotations: int = 0     # mutants inside annotations: equivalent, never run (annotation_spans)

    @property
    def score(self) -> float | None:
        judged = self.killed + len(self.survived)
        return self.killed / judged if judged else None

    def interval(self) -> tuple[float, float] | None:
        """95 % Wilson interval of the score (wilson): a sample's score estimates the whole
        file's, and with tens of mutants the interval is wide."""
        n = self.killed + len(self.survived)
        return wilson(self.killed, n) if n else None


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions, as cosmic-ray gives them (line from 1, column from 0), of every
    annotation in a module that has `from __future__ import annotations` (PEP 563): there they are
    strings nobody evaluates (nothing in the project calls get_type_hints), so a mutant inside one,
    `str | None` -> `str ^ None`, is equivalent by construction. Empty for other modules."""
    import ast
    tree = ast.parse(source)
    if not any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
               and any(a.name == "annotations" for a in n.names) for n in tree.body):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            found += [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                      if x is not None and x.annotation is not None]
            if node.returns is not None:
                found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in found]


def in_annotation(spans, start: tuple[int, int], end: tuple[int, int]) -> bool:
    return any(a <= tuple(start) and tuple(end) <= b for a, b in spans)


def copy_tree(dst: Path) -> None:
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
                           check=True, capture_output=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)


def _run(cmd: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


def run(files: list[str], sample: dict[str, int], seed: int, quick_check: bool, timeout: float,
        keep: Path | None, rerun_survivors: bool = False,
        functions: dict[str, tuple[str, ...]] | None = None) -> tuple[list[FileScore], float]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="kafkaverify-mutate-"))
    work.mkdir(parents=True, exist_ok=True)
    tree = work / "tree"
    if not tree.exists():
        tree.mkdir()
        copy_tree(tree)
    elif rerun_survivors:
        # today's tests against the session's mutants: only if the mutated files are as they were
        changed = [f for f in files if (tree / f).exists() and (tree / f).read_bytes() != (ROOT / f).read_bytes()]
        if changed:
            raise SessionMismatch(f"{', '.join(changed)} changed since the session in {work} was made "
                                  "(or a run was cut short inside a mutant): its mutants no longer apply")
        copy_tree(tree)
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    env.pop("KAFKAVERIFY_REQUIRE_ALL", None)
    cr = [sys.executable, "-m", "cosmic_ray.cli"]
    t0 = time.monotonic()
    # the copy, not this checkout, is what the killers import
    probe = _run([sys.executable, "-c", "import spec, impl, sys; print(spec.__file__, impl.__file__)"], tree, env)
    if probe.returncode or not all(p.startswith(str(tree)) for p in probe.stdout.split()):
        raise RuntimeError(f"the killers would not import the mutated copy: {probe.stdout}{probe.stderr}")
    scores = []
    for family in ("spec", "impl"):
        fam_files = [f for f in files if TARGETS[f] == family]
        if not fam_files:
            continue
        cfg = work / f"{family}.toml"
        session = work / f"{family}.sqlite"
        killer = killer_command(family, quick_check)
        cfg.write_text(
            "[cosmic-ray]\n"
            f"module-path = [{', '.join(repr(f) for f in fam_files)}]\n"
            f"timeout = {timeout}\n"
            "excluded-modules = []\n"
            f"test-command = {json.dumps(killer)}\n"     # a TOML basic string: JSON escapes
            "[cosmic-ray.distributor]\nname = \"local\"\n")
        base = _run(shlex.split(killer), tree, env)
        if base.returncode:
            raise BaselineFailed(f"{family} killers fail on the unmutated copy:\n"
                                 f"{(base.stdout + base.stderr)[-3000:]}")
        if not session.exists():
            r = _run(cr + ["init", str(cfg), str(session)], tree, env)
            if r.returncode:
                raise RuntimeError(f"cosmic-ray init failed: {r.stderr[-2000:]}")
            scope = functions if functions is not None else FUNCTIONS
            lines = {f: function_lines(tree / f, scope[f]) for f in fam_files if f in scope}
            spans = {f: annotation_spans((tree / f).read_text()) for f in fam_files}
            select_mutants(session, lines, sample, seed, spans)
        elif rerun_survivors:
            _reopen_survivors(session, fam_files)
        r = subprocess.run(cr + ["exec", str(cfg), str(session)], cwd=tree, env=env)
        if r.returncode:
            raise RuntimeError("cosmic-ray exec failed")
        scores += _collect(session, fam_files)
    return scores, time.monotonic() - t0


IN_ANNOTATION = "in an annotation (PEP 563: never evaluated)"


def _reopen_survivors(session: Path, files: list[str]) -> int:
    """Forget the results of the survivors not listed as equivalent, so that `cosmic-ray exec`
    runs them again (against the tests as they are now)."""
    import sqlite3
    ids = [job for fs in _collect(session, files) for job, *_ in fs.survived]
    with sqlite3.connect(session) as db:
        db.executemany("DELETE FROM work_results WHERE job_id = ?", [(j,) for j in ids])
    return len(ids)


class SessionMismatch(RuntimeError):
    pass


def select_mutants(session: Path, lines: dict[str, set[int]], sample: dict[str, int], seed,
                   spans: dict | None = None) -> None:
    """Marks as skipped, in a fresh cosmic-ray session: the mutants of a scoped file (`lines`)
    outside its functions; the mutants inside annotations (`spans`, annotation_spans: equivalent,
    never run, counted apart); then all but a seeded sample of each sampled file's remaining ones.
    Job ids are random uuids, so the sample is drawn from the mutants in source order (operator
    and its occurrence number are stable for one file's text), each file from its own generator:
    one seed and file give one sample whatever else the run mutates. _collect leaves the first
    out of the file's mutants and the last out of its sample."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult
    spans = spans or {}
    with use_db(str(session), WorkDB.Mode.open) as db:
        by_file: dict[str, list] = {}
        outside, annotated = [], []
        for item in db.work_items:
            m = item.mutations[0]
            f = str(m.module_path)
            if f in lines and m.start_pos[0] not in lines[f]:
                outside.append(item.job_id)
            elif in_annotation(spans.get(f, ()), m.start_pos, m.end_pos):
                annotated.append(item.job_id)
            else:
                by_file.setdefault(f, []).append((m.start_pos, m.operator_name, m.occurrence, item.job_id))
        if outside:
            db.set_multiple_results(outside, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=OUT_OF_SCOPE))
        if annotated:
            db.set_multiple_results(annotated, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                          output=IN_ANNOTATION))
        for f, items in sorted(by_file.items()):
            n = sample.get(f)
            if n is not None and n < len(items):
                keep_ids = {x[-1] for x in random.Random(f"{seed}:{f}").sample(sorted(items), n)}
                skip = [x[-1] for x in items if x[-1] not in keep_ids]
                db.set_multiple_results(skip, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                         output="not in sample"))


class BaselineFailed(RuntimeError):
    pass


OUT_OF_SCOPE = "not in the scoped functions"


def _collect(session: Path, files: list[str]) -> list[FileScore]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome
    equivalents = load_equivalents()
    out = {f: FileScore(f) for f in files}
    tree = session.parent / "tree"
    spans = {f: annotation_spans((tree / f).read_text()) if (tree / f).exists() else [] for f in files}
    with use_db(str(session), WorkDB.Mode.open) as db:
        results = dict(db.results)
        for item in db.work_items:
            m = item.mutations[0]
            fs = out[str(m.module_path)]
            res = results.get(item.job_id)
            if res is not None and res.worker_outcome == WorkerOutcome.SKIPPED and res.output == OUT_OF_SCOPE:
                continue
            fs.mutants += 1
            if res is not None and res.worker_outcome == WorkerOutcome.SKIPPED and res.output == IN_ANNOTATION:
                fs.annotations += 1
                continue
            if res is None or (res.worker_outcome == WorkerOutcome.SKIPPED and res.output == "not in sample"):
                continue
            fs.sampled += 1
            line = m.start_pos[0]
            eq = next((e for e in equivalents if e.path == fs.path and e.line == line
                       and e.operator == m.operator_name and e.col in (None, m.start_pos[1])), None)
            if res.test_outcome == TestOutcome.KILLED:
                fs.killed += 1
                fs.timeouts += res.output == "timeout"
                if eq:
                    eq.reason = f"STALE (killed): {eq.reason}"
                    fs.equivalent.append((line, m.operator_name, eq.reason))
            elif res.test_outcome == TestOutcome.SURVIVED:
                if in_annotation(spans[fs.path], m.start_pos, m.end_pos):    # a session from before
                    fs.equivalent.append((line, m.operator_name, IN_ANNOTATION))   # they were set apart
                elif eq:
                    eq.used = True
                    fs.equivalent.append((line, m.operator_name, eq.reason))
                else:
                    fs.survived.append((item.job_id, line, m.operator_name, res.diff or ""))
            else:
                fs.incompetent += 1
    return [out[f] for f in files]


def wilson(killed: int, judged: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion killed/judged: a sampled score is an
    estimate of the whole file's, and a small sample's interval is wide (and never past 0 or 1)."""
    if judged == 0:
        return 0.0, 1.0
    p, n = killed / judged, judged
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def print_intervals(scores: list[FileScore]) -> None:
    """Per family with more than one file, all its files' judged mutants pooled: score and 95 %
    interval (each file's own are in the table)."""
    for fam in ("spec", "impl"):
        fs = [s for s in scores if TARGETS[s.path] == fam]
        killed, judged = sum(s.killed for s in fs), sum(s.killed + len(s.survived) for s in fs)
        if len(fs) > 1 and judged:
            lo, hi = wilson(killed, judged)
            print(f"  {fam}/ (all files): {killed}/{judged} killed = {100 * killed / judged:.1f}%, "
                  f"95% Wilson interval {100 * lo:.1f}-{100 * hi:.1f}%")


def report(scores: list[FileScore], seconds: float, command: str) -> int:
    failed = False
    print(f"{'file':<22}{'mutants':>8}{'annot':>6}{'sampled':>8}{'killed':>8}{'timeout':>8}{'survived':>9}"
          f"{'equiv':>7}{'incomp':>7}{'score':>8}  95 % interval")
    for s in scores:
        score, ci = s.score, s.interval()
        target = TARGET_SCORE[TARGETS[s.path]]
        failed |= score is None or score < target
        shown = f"{100 * score:.1f}%" if score is not None else "n/a"
        shown_ci = f"{100 * ci[0]:.1f}-{100 * ci[1]:.1f}%" if ci else ""
        print(f"{s.path:<22}{s.mutants:>8}{s.annotations:>6}{s.sampled:>8}{s.killed:>8}{s.timeouts:>8}"
              f"{len(s.survived):>9}{len(s.equivalent):>7}{s.incompetent:>7}{shown:>8}  {shown_ci}")
    print("annot: mutants inside annotations, equivalent and not run; equiv: reviewed equivalent "
          "survivors; score: killed / (killed + survived)")
    print_intervals(scores)
    for s in scores:
        for job, line, op, diff in sorted(s.survived, key=lambda x: x[1]):
            print(f"\nSURVIVED {s.path}:{line} {op} ({job})\n{diff.rstrip()}")
        for line, op, reason in s.equivalent:
            print(f"equivalent {s.path}:{line} {op}: {reason}")
    print(f"\n{seconds:.0f} s; rerun: {command}")
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.mutate", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help=f"files to mutate (default: all of {', '.join(TARGETS)})")
    ap.add_argument("--sample", action="append", default=[], metavar="FILE=N",
                    help="test a seeded random sample of N mutants of FILE")
    ap.add_argument("--functions", action="append", default=[], metavar="FILE=NAME,...",
                    help="mutate FILE only inside these functions (`Class.method` or a top-level name); "
                         f"default for {', '.join(FUNCTIONS)}: the replication paths (FUNCTIONS in this file)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-quick-check", action="store_true",
                    help="spec/ killers: the model tests only, without `kafkaverify check --budget quick`")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant's killers")
    ap.add_argument("--keep", type=Path, help="work directory to keep (and resume a run from)")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="with --keep DIR of a finished run: run its survivors (those not listed as "
                         "equivalent) again against this checkout's tests, after printing the first pass")
    ap.add_argument("--report", type=Path, metavar="DIR",
                    help="only report what the sessions kept in DIR hold so far (a run cut short)")
    a = ap.parse_args(argv)
    files = a.files or list(TARGETS)
    bad = [f for f in files if f not in TARGETS]
    sample: dict[str, int] = {}
    for s in a.sample:
        f, _, n = s.partition("=")
        if f not in files or not n.isdigit() or int(n) < 1:
            bad.append(f"--sample {s}")
        else:
            sample[f] = int(n)
    if a.rerun_survivors and not (a.keep and (a.keep / "tree").is_dir()):
        print("--rerun-survivors needs --keep DIR of an earlier run", file=sys.stderr)
        return 3
    functions = dict(FUNCTIONS)
    for s in a.functions:
        f, _, names = s.partition("=")
        picked = tuple(n.strip() for n in names.split(",") if n.strip())
        if f not in files or not picked:
            bad.append(f"--functions {s}")
            continue
        try:
            function_lines(ROOT / f, picked)
        except ValueError as e:
            print(str(e), file=sys.stderr)
            return 3
        functions[f] = picked
    if bad:
        print(f"not a target: {', '.join(bad)} (targets: {', '.join(TARGETS)}; --sample FILE=N; "
              "--functions FILE=NAME,...)", file=sys.stderr)
        return 3
    try:
        import cosmic_ray  # noqa: F401
    except ImportError:
        print("cosmic-ray is not installed: pip install -e '.[mutate]' (or make mutate)", file=sys.stderr)
        return 3
    if a.report:
        sessions = [(a.report / f"{fam}.sqlite", [f for f in files if TARGETS[f] == fam]) for fam in ("spec", "impl")]
        sessions = [(p, fs) for p, fs in sessions if fs and p.exists()]
        if not sessions:
            print(f"no session for {', '.join(files)} in {a.report}", file=sys.stderr)
            return 3
        scores = [sc for p, fs in sessions for sc in _collect(p, fs)]
        return report(scores, 0.0, f"python -m benchmarks.mutate --report {a.report} {' '.join(files)}")
    command = "python -m benchmarks.mutate " + " ".join(
        [*files, *(f"--sample {f}={n}" for f, n in sample.items()), f"--seed {a.seed}",
         *(["--no-quick-check"] if a.no_quick_check else [])])
    print(f"seed={a.seed} files={' '.join(files)} sample={sample or 'all'} "
          f"quick_check={not a.no_quick_check} timeout={a.timeout:g}s", flush=True)
    if a.rerun_survivors:
        print("first pass:")
        report([sc for fam in ("spec", "impl") if (a.keep / f"{fam}.sqlite").exists()
                for sc in _collect(a.keep / f"{fam}.sqlite", [f for f in files if TARGETS[f] == fam])],
               0.0, command + f" --keep {a.keep}")
        print("\nsurvivors again, against this checkout's tests:", flush=True)
    try:
        scores, secs = run(files, sample, a.seed, not a.no_quick_check, a.timeout, a.keep, a.rerun_survivors,
                           functions)
    except BaselineFailed as e:
        print(str(e), file=sys.stderr)
        return 2
    except SessionMismatch as e:
        print(str(e), file=sys.stderr)
        return 3
    return report(scores, secs, command)


if __name__ == "__main__":
    sys.exit(main())
