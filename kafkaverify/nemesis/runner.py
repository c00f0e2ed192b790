"""Runs one fault schedule (traces/schedule.py) against a fresh real cluster with real clients and
judges it: the clients' history by checkers/history (against the producer's settings), the
brokers' traces by checkers/conformance.py. The broker and the model meet only through those
files.

    r = run_schedule(schedule, out_dir)     # -> RunResult(status, anomalies, divergences, ...)

What each fault does here:
    crash = kill -9; power-loss = kill -9 then drop unfsynced writes (isolated: see
    isolated_power_loss and traces/schedule.py); restart = start a dead
    broker again (without waiting: the schedule's clock keeps running); pause / resume = SIGSTOP /
    SIGCONT; partition / heal = nftables cuts between the sides' own addresses (needs a private
    network namespace: impl/netfault.py); session-expiry = cut the broker from the coordination
    service for its session timeout + 1.5 s; controller-failover = kill -9 the controller, restart
    it after duration_ms (default 1 s); producer-restart = close the producer, open a new one (a new
    process in the history); consumer-crash = kill -9 one group member and start another.
With a cluster file (kafkaverify/nemesis/cluster_file.py: `--cluster FILE`) the same schedule runs
against any Kafka-compatible cluster: each fault is the file's shell command for the node, a
partition its partition / heal hooks, and the cluster is known through the Kafka protocol only.
The workload's topic then gets a fresh name per run (the cluster outlives the run); conformance is
judged only where the file names the brokers' traces of ours (`traces`). A command that fails
makes the run unknown, with its output in the reason.
A fault whose target is not in a state it applies to (crash a dead broker) is skipped and logged:
shrinking produces such schedules and they must still run. At the end every fault is undone, the
cluster is awaited (bounded) with full ISRs, the producer drained, and every partition read.
"""
from __future__ import annotations

import json
import shutil
import time
import uuid
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from checkers.conformance import check_traces
from checkers.history.report_html import render
from checkers.history.result import counts
from checkers.history.oracle.check import check_history
from impl.cluster import COORD_HOST, Cluster, ClusterError
from impl.netfault import NetCuts, in_private_netns
from kafkaverify.groupclient import CLIENTS as MEMBER_CLIENTS, MemberProc, merge_histories
from kafkaverify.nemesis.cluster_file import (ClusterSpec, CommandFailed, ExternalCluster, ExternalClusterError,
                                              ExternalCuts)
from kafkaverify.nemesis.errors import HarnessError, error_text
from kafkaverify.nemesis.txn_workload import ReadCommittedPoller, TxnWorkload
from kafkaverify.nemesis.workload import ProducerWorkload, final_reads, member_histories
from traces.history import HistoryError, load
from traces.history_recorder import HistoryRecorder
from traces.schedule import Event, Schedule, save

SESSION_TIMEOUT_MS = 3000
LAG_MAX_MS = 1500
RECOVER_S = 60              # bound on the cluster's recovery after the schedule
CONTROLLER_RESTART_MS = 1000
TAIL_S = 1.0                # the producer keeps sending this long after the last fault
ISOLATE_S = 30              # bound on each wait around an isolated power loss (traces/schedule.py)


@dataclass
class RunResult:
    status: str                                   # valid / invalid / unknown
    out_dir: Path
    anomalies: dict[str, int] = field(default_factory=dict)
    permitted: dict[str, int] = field(default_factory=dict)   # notes: anomalies the settings permit
    divergences: list[dict] = field(default_factory=list)      # conformance
    applied: list[str] = field(default_factory=list)
    reason: str = ""
    seconds: float = 0.0
    first_anomaly: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "invalid"

    def to_json(self) -> dict:
        return {"status": self.status, "out_dir": str(self.out_dir), "anomalies": self.anomalies,
                "permitted": self.permitted, "divergences": self.divergences[:5], "applied": self.applied,
                "reason": self.reason, "seconds": round(self.seconds, 2), "first_anomaly": self.first_anomaly}


class _Run:
    def __init__(self, s: Schedule, out: Path, net: bool, spec: ClusterSpec | None = None):
        self.s, self.out, self.net = s, out, net
        self.external = spec is not None
        self.w = dict(s.workload)
        self.undo: list[tuple[float, Event, object]] = []
        self.applied: list[str] = []
        self.members: list = []
        self.poller = None
        self.next_member = 100
        self.t0 = 0.0
        self.cuts = None
        if spec is not None:
            # the cluster outlives the run: a topic of its own, named for this run
            self.w["topic"] = f"{self.w['topic']}-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}"
            self.cluster = ExternalCluster(spec, out / "cluster")
            if spec.can_partition:
                self.cuts = ExternalCuts(self.cluster)
            return
        # groups join at once (no initial rebalance delay) and a small offsets topic: the runs
        # are seconds long
        cfg = {"replica_lag_time_max_ms": LAG_MAX_MS, "group_initial_rebalance_delay_ms": 0,
               "offsets_topic_num_partitions": 3}
        if s.without:
            cfg["without_fixes"] = list(s.without)
        self.cluster = Cluster(s.brokers, out / "cluster", generation=s.generation, addresses=net,
                               session_timeout_ms=SESSION_TIMEOUT_MS, broker_config=cfg)
        if net:
            self.cuts = NetCuts()
            self.cuts.setup()

    # --- targets ---------------------------------------------------------------------------------
    def broker(self, target: str) -> int | None:
        c = self.cluster
        if target.isdigit():
            return int(target)
        if target == "controller":
            return c.controller()
        topic, _, part = target[len("leader:"):].rpartition("/")
        if topic == self.s.workload["topic"]:
            topic = self.w["topic"]          # renamed for this run on an outside cluster
        return c.leader_of(topic, int(part))

    def addr(self, side: str) -> str | None:
        if side == "coord":
            return None if self.external else COORD_HOST
        b = self.broker(side)
        return None if b is None else self.cluster.hosts[b]

    def log(self, text: str) -> None:
        self.applied.append(f"{time.monotonic() - self.t0:7.2f}s {text}")

    # --- faults ----------------------------------------------------------------------------------
    def apply(self, e: Event) -> None:
        c, f = self.cluster, e.fault
        if f in ("producer-restart", "consumer-crash"):
            return self.client_event(e)
        if f == "heal" and e.between is None:
            self.cuts.heal_all()
            return self.log("heal all")
        if f in ("partition", "heal"):
            a, b = self.addr(e.between[0]), self.addr(e.between[1])
            if a is None or b is None or a == b:
                return self.log(f"skip {e.describe()}: side not resolvable")
            if f == "partition":
                self.cuts.cut(a, b)
                self.later(e, (a, b))
            else:
                self.cuts.heal(a, b)
            return self.log(f"{f} {a}<->{b}")
        if f == "power-loss" and e.isolated:
            return self.isolated_power_loss(e)
        i = self.broker(e.target) if e.target is not None else c.controller()
        if i is None:
            return self.log(f"skip {e.describe()}: no such broker now")
        alive = i in c.alive()
        if f == "restart":
            if alive:
                return self.log(f"skip restart {i}: running")
            c.mark_dead_expected(i)
            c.start_broker(i, wait=False)
            return self.log(f"restart {i}")
        if not alive:
            return self.log(f"skip {f} {i}: not running")
        if f in ("crash", "controller-failover"):
            c.kill(i)
            if f == "controller-failover":
                self.later(e, i, e.duration_ms if e.duration_ms is not None else CONTROLLER_RESTART_MS)
            else:
                self.later(e, i)
        elif f == "power-loss":
            lost = c.power_loss(i)
            self.later(e, i)
            return self.log(f"power-loss {i}{_dropped(lost)}")
        elif f == "pause":
            if i in c.paused:
                return self.log(f"skip pause {i}: paused")
            c.pause(i)
            self.later(e, i)
        elif f == "resume":
            if i not in c.paused:
                return self.log(f"skip resume {i}: not paused")
            c.resume(i)
        elif f == "session-expiry":
            a = c.hosts[i]
            self.cuts.cut(a, COORD_HOST)
            self.undo.append((time.monotonic() + (SESSION_TIMEOUT_MS + 1500) / 1000, e, (a, COORD_HOST)))
        self.log(f"{f} {i}")

    def whole(self) -> bool:
        """No fault stands (no pending undo, nothing paused, cut or down), every partition has a
        leader and its full ISR in the coordination store, and every replica, asked itself,
        serves the partition in its current role with a log reaching the leader's HW. (The
        store alone can be stale: a killed broker stays registered and in the ISR until its
        session expires, and a restarted one may not have caught up.)"""
        c = self.cluster
        if self.undo or c.paused or len(c.alive()) != c.n or (self.cuts is not None and self.cuts.active()):
            return False
        return c.is_whole()

    def wait_whole(self, bound_s: float) -> bool:
        """Lets every standing fault run its course, then waits for whole() (bounded)."""
        if self.undo:
            self.pump(max(u[0] for u in self.undo))
        deadline = time.monotonic() + bound_s
        while not self.whole():
            if time.monotonic() > deadline:
                return False
            self.pump(time.monotonic() + 0.1)
        return True

    def isolated_power_loss(self, e: Event) -> None:
        """traces/schedule.py ISOLATED: only fault standing, full ISRs before; the broker comes
        back only after the controller took it out of every ISR, and the schedule goes on only
        once it is back in every ISR. Every wait is bounded (ISOLATE_S); a power loss whose
        precondition is not met in time is skipped, never applied unguarded."""
        c = self.cluster
        if not self.wait_whole(ISOLATE_S):
            return self.log(f"skip {e.describe()}: the cluster was not whole within {ISOLATE_S}s")
        i = self.broker(e.target)
        if i is None:
            return self.log(f"skip {e.describe()}: no such broker now")
        lost = c.power_loss(i)
        back_at = time.monotonic() + (e.duration_ms or 0) / 1000
        self.log(f"power-loss (isolated) {i}{_dropped(lost)}")
        deadline = time.monotonic() + ISOLATE_S

        def still_counted() -> bool:
            return i in c.registered() or any(i in p["isr"] for p in c.status()["partitions"])
        while still_counted():
            if time.monotonic() > deadline:
                self.log(f"broker {i} still registered or in an ISR after {ISOLATE_S}s")
                break
            self.pump(time.monotonic() + 0.05)
        self.pump(max(back_at, time.monotonic()))
        c.mark_dead_expected(i)
        c.start_broker(i, wait=False)
        self.log(f"restart {i}")
        if not self.wait_whole(RECOVER_S):
            self.log(f"broker {i} not back in every ISR within {RECOVER_S}s")

    def later(self, e: Event, what, ms: int | None = None) -> None:
        ms = e.duration_ms if ms is None else ms
        if ms is not None:
            self.undo.append((time.monotonic() + ms / 1000, e, what))

    def run_undo(self, e: Event, what) -> None:
        c = self.cluster
        if e.fault in ("partition", "session-expiry"):
            self.cuts.heal(*what)
            return self.log(f"heal {what[0]}<->{what[1]}")
        if e.fault in ("crash", "power-loss", "controller-failover"):
            if what not in c.alive():
                c.mark_dead_expected(what)
                c.start_broker(what, wait=False)
                return self.log(f"restart {what}")
        if e.fault == "pause" and what in c.paused:
            c.resume(what)
            return self.log(f"resume {what}")

    def client_event(self, e: Event) -> None:
        if e.fault == "producer-restart":
            self.producer.restart()
            return self.log("producer-restart")
        live = [m for m in self.members if m.proc.poll() is None]
        if not live:
            return self.log("skip consumer-crash: no member")
        live[0].kill()
        self.start_member()
        self.log(f"consumer-crash {live[0].process}")

    def start_member(self) -> None:
        w = self.w
        # group members are Python clients (kafkaverify.groupclient); a driver's run records its
        # producer through the driver and its members with kafka-python
        client = w["client"] if w["client"] in MEMBER_CLIENTS else "kafka-python"
        m = MemberProc(client, self.cluster.bootstrap, w["topic"], "nemesis", self.next_member,
                       self.out / f"member-{self.next_member}.jsonl", session_timeout_ms=6000,
                       log=self.out / f"member-{self.next_member}.log")
        self.next_member += 1
        self.members.append(m)

    def pump(self, until: float) -> None:
        """Sleeps until `until`, running due undos on the way."""
        while True:
            now = time.monotonic()
            due = sorted((u for u in self.undo if u[0] <= now), key=lambda u: u[0])
            for u in due:
                self.undo.remove(u)
                self.run_undo(u[1], u[2])
            if now >= until:
                return
            nxt = min([u[0] for u in self.undo] + [until])
            time.sleep(max(0.0, min(0.05, nxt - now)))

    def heal_everything(self) -> None:
        for _, e, what in sorted(self.undo, key=lambda u: u[0]):
            self.run_undo(e, what)
        self.undo = []
        c = self.cluster
        if self.cuts is not None and self.cuts.active():
            self.cuts.heal_all()
            self.log("heal all")
        for i in sorted(c.paused):
            c.resume(i)
            self.log(f"resume {i}")
        for i in range(c.n):
            if i not in c.alive():
                c.mark_dead_expected(i)
                c.start_broker(i, wait=False)
                self.log(f"restart {i}")


def _dropped(lost: dict[str, int] | None) -> str:
    """What a power loss dropped, when the harness knows (its own brokers: unflushed bytes)."""
    return "" if lost is None else f" ({sum(lost.values())} unflushed bytes dropped)"


def run_schedule(s: Schedule, out_dir: str | Path, net: bool | None = None,
                 cluster: ClusterSpec | None = None) -> RunResult:
    """cluster: run against the outside cluster a cluster file describes (never in a private
    network namespace: its partitions are the file's hooks)."""

    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    save(out / "schedule.json", s)
    net = False if cluster is not None else in_private_netns() if net is None else net
    if s.needs_net() and not net and not (cluster is not None and cluster.can_partition
                                          and "session-expiry" not in {e.fault for e in s.events}):
        raise RuntimeError("this schedule cuts the network: run it in a private network namespace "
                           "(kafkaverify nemesis / replay do so by themselves)")
    t_start = time.monotonic()
    r = _Run(s, out, net, cluster)
    w = r.w
    c = r.cluster
    rec = None
    status, reason = "unknown", ""
    command_failed = False
    try:
        c.start()
        _create_topic(c, w)
        c.wait_for_leaders(w["topic"], timeout_s=30, isr_size=w["replication_factor"])
        txn = bool(w.get("transactions"))
        rec = HistoryRecorder(out / "producer.jsonl", trace_id="producer", client=w["client"],
                              version=2 if txn else 1)
        if txn:
            # transactions: a transactional producer and a read_committed poller (no group members)
            r.producer = TxnWorkload(rec, w["client"], c.bootstrap, w, seed=s.seed or 0)
            r.poller = ReadCommittedPoller(rec, c.bootstrap, w["topic"], w["partitions"])
            r.poller.start()
        else:
            r.producer = ProducerWorkload(rec, w["client"], c.bootstrap, w, driver_log=out / "driver.log")
            for _ in range(w["consumers"]):
                r.start_member()
        r.producer.start()
        if txn:     # faults begin once InitProducerId is done: they are to meet transactions
            r.producer.ready.wait(RECOVER_S)
        r.t0 = time.monotonic()
        at = r.t0 + 0.5                        # let the clients connect first
        for e in s.events:
            at += e.after_ms / 1000
            r.pump(at)
            try:
                r.apply(e)
            except CommandFailed:
                raise                         # its command and output are the reason
            except (ClusterError, OSError, RuntimeError) as ex:
                raise HarnessError(f"the fault {e.describe()} could not be applied: "
                                   f"{error_text(ex)}") from ex
            at = max(at, time.monotonic())
        # every duration runs its course (a session expiry needs its full cut), then a tail of
        # traffic before the faults still standing are undone
        r.pump(max([u[0] for u in r.undo] + [time.monotonic()]) + TAIL_S)
        r.heal_everything()
        recovered = _recover(c, w, RECOVER_S)
        r.producer._stop.set()
        r.producer.finish(60)
        if not recovered:
            reason = f"the cluster did not recover within {RECOVER_S}s (full ISR, leaders): the run is unknown"
        if txn:
            r.poller.stop()
        if r.producer.errors:          # no producer, no question asked: the run decides nothing
            reason = "; ".join(r.producer.errors)
        final = HistoryRecorder(out / "final.jsonl", trace_id="final", version=2 if txn else 1)
        try:
            unread = final_reads(final, c.bootstrap, w["topic"], w["partitions"],
                                 isolation="read_committed" if txn else None)
        finally:
            final.close()
        if unread:
            reason = "; ".join(x for x in (reason, "final read failed on " + "; ".join(unread)) if x)
        for m in r.members:
            try:
                m.stop(20)
            except RuntimeError:
                m.kill()
    except (ClusterError, ExternalClusterError) as e:
        reason = f"cluster error: {e}"
    except HarnessError as e:
        reason = str(e)
        command_failed = isinstance(e, CommandFailed)
    except Exception as e:      # a client or harness failure: the run is undecided, never a crash
        reason = f"harness error: {error_text(e)}"
    finally:
        prod = getattr(r, "producer", None)
        if prod is not None:
            prod._stop.set()            # a run cut short by an error leaves no sender behind
        if getattr(r, "poller", None) is not None:
            r.poller.stop(5)
        for m in r.members:
            m.kill()
        try:
            if r.cuts is not None:
                r.cuts.heal_all()
        except CommandFailed as e:            # an outside cluster's heal hook failed
            reason = "; ".join(x for x in (reason, str(e)) if x)
            command_failed = True
        c.stop()
        if rec is not None:
            rec.close()
    res = RunResult(status="unknown", out_dir=out, applied=r.applied, reason=reason)
    hist = out / "history.jsonl"
    parts = [p for p in [out / "producer.jsonl", *member_histories(out), out / "final.jsonl"] if p.exists()]
    try:
        merge_histories(parts, hist, trace_id=f"nemesis-{s.seed}", client=w["client"],
                        generation=s.generation)
        h = load(str(hist))
        v = check_history(h, time_limit=60)
        (out / "verdict.json").write_text(json.dumps(v.to_json(h.by_id()), indent=1))
        (out / "report.html").write_text(render(h, v, title=f"nemesis {out.name}"), encoding="utf-8")
        status = v.status
        res.anomalies, res.permitted = counts(v.anomalies), counts(v.notes)
        if v.anomalies:
            res.first_anomaly = f"{v.anomalies[0].type}: {v.anomalies[0].explanation}"
    except (HistoryError, OSError, ValueError) as e:
        status = "unknown"
        res.reason = "; ".join(x for x in (res.reason, f"history unreadable: {e}") if x)
    try:
        if cluster is None:
            res.divergences = _conformance(out, s)
        elif cluster.traces:
            res.divergences = _conformance(out, s, _external_traces(cluster.traces, out), w["topic"])
        else:
            res.applied.append("conformance not judged: the cluster file names no traces of ours")
    except Exception as e:      # unreadable traces: conformance undecided, the run unknown
        status = "unknown" if status == "valid" else status
        res.reason = "; ".join(x for x in (res.reason, f"conformance not judged: {error_text(e)}") if x)
    _report_divergences(out / "report.html", res.divergences, s)
    if res.divergences:
        status = "invalid"
        res.first_anomaly = res.first_anomaly or f"conformance: {res.divergences[0]['text']}"
    if res.reason and status == "valid":
        status = "unknown"
    if command_failed:
        # the faults applied are not the schedule's: whatever the history shows decides nothing
        status = "unknown"
    res.status = status
    res.seconds = time.monotonic() - t_start
    (out / "result.json").write_text(json.dumps(res.to_json(), indent=1))
    return res


def _report_divergences(html: Path, divs: list[dict], s: Schedule) -> None:
    """Adds the schedule and the conformance divergences (event, mapped model state, what the
    model allowed) to the run's HTML report (checkers/history/report_html.py renders the rest)."""
    if not html.exists():
        return
    parts = [f"<h2>Fault schedule</h2><p>{escape(s.describe())}</p>"]
    if divs:
        parts.append(f"<h2>Conformance divergences ({len(divs)})</h2>")
        for d in divs[:20]:
            parts.append("<div><p><b>" + escape(d["text"]) + "</b></p><pre>" + escape(json.dumps(d["event"]))
                         + "\nmodel state:\n" + escape("\n".join(d["model_state"]))
                         + "\nthe model allowed:\n" + escape("\n".join(d["allowed"])) + "</pre></div>")
    else:
        parts.append("<h2>Conformance</h2><p>every mapped broker step is one the model allows</p>")
    text = html.read_text(encoding="utf-8")
    at = text.rfind("</body>")
    text = text[:at] + "".join(parts) + text[at:] if at >= 0 else text + "".join(parts)
    html.write_text(text, encoding="utf-8")


def _create_topic(c, w: dict, attempts: int = 20) -> None:
    """CreateTopics, retried while the answering broker has not yet seen every registration
    (INVALID_REPLICATION_FACTOR, 38: its watch lags under load). Bounded: 20 tries, 0.5 s apart."""
    for k in range(attempts):
        try:
            return c.create_topic(w["topic"], partitions=w["partitions"], replication_factor=w["replication_factor"],
                                  min_insync=w["min_insync"])
        except ClusterError as e:
            if "error 38" not in str(e) or k == attempts - 1:
                raise
            time.sleep(0.5)


def _recover(c, w: dict, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    try:
        c.wait_ready(timeout_s)
        c.wait_for_leaders(w["topic"], timeout_s=max(1.0, deadline - time.monotonic()),
                           isr_size=w["replication_factor"])
        return True
    except (ClusterError, ExternalClusterError):
        return False


def _external_traces(pattern: str, out: Path) -> list[Path]:
    """The trace files an outside cluster's brokers wrote (the file's `traces` glob), copied into
    the run's directory so the run keeps what was judged."""
    import glob
    dest = out / "cluster" / "traces"
    dest.mkdir(parents=True, exist_ok=True)
    got = []
    for k, src in enumerate(sorted(glob.glob(pattern, recursive=True))):
        to = dest / f"{k:02d}-{Path(src).name}"
        shutil.copyfile(src, to)
        got.append(to)
    if not got:
        raise FileNotFoundError(f"no trace file matches {pattern}")
    return got


def _conformance(out: Path, s: Schedule, traces: list[Path] | None = None, topic: str | None = None) -> list[dict]:
    """Divergences of the brokers' traces from the model (checkers/conformance.py)."""
    if traces is None:
        traces = sorted((out / "cluster").glob("broker-*/trace-*.jsonl"))
    # judged against the generation's full fixes: a broker built without one must diverge
    return [d.to_json() for d in check_traces(traces, generation=s.generation,
                                              min_insync={topic or s.workload["topic"]: s.workload["min_insync"]})]
