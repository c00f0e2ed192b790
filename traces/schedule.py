"""Fault schedules as data (STYLE.md 5): a validated, declarative list of fault events that the
nemesis runs against the real cluster (kafkaverify/nemesis/) and that maps onto model actions.

A schedule file is JSON (one object), header fields plus the events:

    {"format": "kafkaverify-schedule", "version": 1, "kind": "schedule",
     "generation": "current", "brokers": 3, "seed": 7,
     "workload": {"client": "kafka-python", "acks": "all", "retries": 5, "max_in_flight": 5,
                  "idempotence": false, "records": 400, "consumers": 0, "min_insync": 2},
     "events": [
        {"after_ms": 300, "fault": "crash", "target": "leader:t/0", "duration_ms": 1500},
        {"after_ms": 200, "fault": "partition", "between": ["1", "coord"], "duration_ms": 4000},
        {"after_ms": 0,   "fault": "producer-restart"}]}

`after_ms` is the wait after the previous event was applied (relative, so removing an event while
shrinking keeps the others' spacing). `duration_ms` (optional) undoes the fault that long after it
was applied (crash/power-loss -> restart, pause -> resume, partition -> heal); without it the fault
stays until a later event undoes it or the schedule ends (then everything is healed and restarted
before the final reads). Targets: a broker id "N", "leader:TOPIC/PARTITION" or "controller"
(resolved when applied); a partition side may also be "coord" (the coordination service).

Faults (what each does on the real cluster is kafkaverify/nemesis/runner.py's business):
    crash            kill -9
    power-loss       kill -9, then every write not fsynced is dropped; with "isolated": true it
                     is the only fault standing (ISOLATED below)
    restart          start a crashed / powered-off broker again
    pause, resume    SIGSTOP / SIGCONT
    partition, heal  drop packets both ways between two sides; heal = remove that cut
                     ("heal" without "between" removes every cut)
    session-expiry   cut one broker from the coordination service past its session timeout
    controller-failover  kill -9 the current controller (a new one is elected), then restart it
    producer-restart, consumer-crash   client events of the workload

ISOLATED power loss: what Kafka without KIP-966 (generation `current`) promises under power
failure. Kafka does not fsync; durability is replication. A committed record is lost when the
replica that lost its unflushed tail is elected while it lacks the record, which needs that
replica to be the last ISR member (KIP-966's "last replica standing"; the model finds it in 10
steps with one power failure: `kafkaverify explore --generation current --unflushed-loss
--crashes 1`). An isolated power-loss is applied only when no other fault stands (every earlier
duration over, nothing paused, cut or down) and every partition's ISR is full; the broker is
restarted only once the controller has taken it out of every ISR (its session expired), and
the next event waits until it is back in every ISR. So some other ISR member always holds
every committed record. A power-loss without "isolated" is applied as it comes (the family
that shows the KIP-966 loss in `current`).

The fault vocabulary, one set of names across the schedule format, the CLI
(`kafkaverify broker ...`, `kafkaverify nemesis --faults`) and the pytest plugin's fault handle
(kafkaverify/plugin/fault_handle.py); the older names on the right keep working everywhere (a
schedule written with them loads, with the canonical name):

    fault       schedule       broker CLI               plugin handle        older names
    crash       "crash"        broker crash TARGET      faults.crash()       kill (broker kill,
                                                                             faults.kill())
    power-loss  "power-loss"   broker power-loss TARGET faults.power_loss()  power-fail (broker
                                                                             power-fail,
                                                                             faults.power_fail())
    restart     "restart"      broker restart TARGET    faults.restart()
    pause       "pause"        broker pause TARGET      faults.pause()
    resume      "resume"       broker resume TARGET     faults.resume()

`broker drop-unflushed` is the second half of a power loss alone, on the files of a stopped
broker (`broker power-loss --data-dir D` without TARGET is its older spelling). The broker's
control channel (impl/control.py) keeps its own wire names, "kill" and "power-fail".

Errors name the event index: ScheduleError("event 2: unknown fault 'crsh' ..."). This module
imports neither spec/ nor impl/.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "kafkaverify-schedule"
VERSION = 1
KIND = "schedule"

BROKER_FAULTS = ("crash", "power-loss", "restart", "pause", "resume", "session-expiry")
NET_FAULTS = ("partition", "heal")
CLUSTER_FAULTS = ("controller-failover",)
CLIENT_FAULTS = ("producer-restart", "consumer-crash")
FAULTS = BROKER_FAULTS + NET_FAULTS + CLUSTER_FAULTS + CLIENT_FAULTS
# older name -> the vocabulary's name (the table in the docstring above)
FAULT_ALIASES = {"kill": "crash", "power-fail": "power-loss"}
# Faults a duration may undo, and the fault that undoes them.
UNDO = {"crash": "restart", "power-loss": "restart", "pause": "resume", "partition": "heal",
        "controller-failover": "restart"}
# Faults that need real network cuts (a private network namespace with nftables).
NEEDS_NET = ("partition", "heal", "session-expiry")

MAX_EVENTS = 1000
MAX_MS = 600_000            # no single wait or duration beyond 10 minutes: a typo, not a plan
# in-process Python clients, then the driver processes of other languages (docs/drivers.md)
CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka", "kafkajs", "librdkafka", "sarama")
WORKLOAD_DEFAULTS: dict[str, Any] = {
    "client": "kafka-python", "acks": "all", "retries": 5, "max_in_flight": 1, "idempotence": False,
    "records": 400, "consumers": 0, "min_insync": 2, "replication_factor": 3, "topic": "nemesis",
    "partitions": 1, "transactions": False,
}


def canonical_fault(name: str) -> str:
    """The vocabulary's name for a fault given by its name or an older alias; anything else is
    returned as given (the caller says it is unknown)."""
    return FAULT_ALIASES.get(name, name)


class ScheduleError(Exception):
    """Malformed schedule; the message names the event index or the field (a usage error)."""


@dataclass(frozen=True)
class Event:
    after_ms: int
    fault: str
    target: str | None = None
    between: tuple[str, str] | None = None
    duration_ms: int | None = None
    isolated: bool = False              # power-loss only: see ISOLATED below

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"after_ms": self.after_ms, "fault": self.fault}
        if self.target is not None:
            out["target"] = self.target
        if self.between is not None:
            out["between"] = list(self.between)
        if self.duration_ms is not None:
            out["duration_ms"] = self.duration_ms
        if self.isolated:
            out["isolated"] = True
        return out

    def describe(self) -> str:
        what = self.fault + (" (isolated)" if self.isolated else "")
        if self.target is not None:
            what += f" {self.target}"
        if self.between is not None:
            what += f" {self.between[0]}<->{self.between[1]}"
        if self.duration_ms is not None:
            what += f" for {self.duration_ms} ms"
        return f"+{self.after_ms} ms {what}"


@dataclass(frozen=True)
class Schedule:
    generation: str
    brokers: int
    events: tuple[Event, ...]
    workload: dict[str, Any] = field(default_factory=lambda: dict(WORKLOAD_DEFAULTS))
    seed: int | None = None
    without: tuple[str, ...] = ()       # fixes removed from the broker (a debug switch)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": FORMAT, "version": VERSION, "kind": KIND,
                               "generation": self.generation, "brokers": self.brokers,
                               # transactions only when on: older schedules stay byte-equal
                               "workload": {k: v for k, v in sorted(self.workload.items())
                                            if k != "transactions" or v},
                               "events": [e.to_json() for e in self.events]}
        if self.seed is not None:
            out["seed"] = self.seed
        if self.without:
            out["without"] = list(self.without)
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1)

    def needs_net(self) -> bool:
        return any(e.fault in NEEDS_NET for e in self.events)

    def describe(self) -> str:
        return "; ".join(e.describe() for e in self.events) or "(no faults)"


def _ms(where: str, name: str, v: Any, required: bool) -> int | None:
    if v is None:
        if required:
            raise ScheduleError(f"{where}: missing {name}")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_MS:
        raise ScheduleError(f"{where}: {name} must be an integer number of milliseconds in "
                            f"0..{MAX_MS}, got {v!r}")
    return v


def _target(where: str, v: Any, brokers: int, allow_coord: bool = False) -> str:
    t = str(v).strip() if isinstance(v, (str, int)) and not isinstance(v, bool) else None
    if t is None:
        raise ScheduleError(f"{where}: a target is a string, got {v!r}")
    if t.isdigit():
        if not 0 <= int(t) < brokers:
            raise ScheduleError(f"{where}: no broker {t} (brokers 0..{brokers - 1})")
        return str(int(t))
    if t == "controller" or (allow_coord and t == "coord"):
        return t
    if t.startswith("leader:") and "/" in t:
        topic, _, part = t[len("leader:"):].rpartition("/")
        if topic and part.isdigit():
            return t
    sides = "a broker id, leader:TOPIC/PARTITION, controller" + (" or coord" if allow_coord else "")
    raise ScheduleError(f"{where}: target must be {sides}, got {v!r}")


def parse_event(i: int, raw: Any, brokers: int) -> Event:
    where = f"event {i}"
    if not isinstance(raw, dict):
        raise ScheduleError(f"{where}: an event is a JSON object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"after_ms", "fault", "target", "between", "duration_ms", "isolated"})
    if unknown:
        raise ScheduleError(f"{where}: unknown field(s) {', '.join(unknown)} (times carry units: after_ms, "
                            f"duration_ms)")
    f = raw.get("fault")
    f = canonical_fault(f) if isinstance(f, str) else f
    if f not in FAULTS:
        raise ScheduleError(f"{where}: unknown fault {f!r} (one of {', '.join(FAULTS)}; older names: "
                            f"{', '.join(f'{a} = {c}' for a, c in sorted(FAULT_ALIASES.items()))})")
    after = _ms(where, "after_ms", raw.get("after_ms"), True)
    dur = _ms(where, "duration_ms", raw.get("duration_ms"), False)
    if dur is not None and f not in UNDO:
        raise ScheduleError(f"{where}: {f} takes no duration_ms (only {', '.join(sorted(UNDO))} do)")
    target = between = None
    if f in BROKER_FAULTS:
        if "target" not in raw:
            raise ScheduleError(f"{where}: {f} needs a target")
        target = _target(where, raw["target"], brokers)
    elif f in NET_FAULTS:
        b = raw.get("between")
        if b is None and f == "heal":
            pass
        elif not isinstance(b, list) or len(b) != 2:
            raise ScheduleError(f"{where}: {f} needs between: [SIDE, SIDE]")
        else:
            between = (_target(where, b[0], brokers, True), _target(where, b[1], brokers, True))
            if between[0] == between[1]:
                raise ScheduleError(f"{where}: cannot cut {between[0]} from itself")
    if f not in BROKER_FAULTS and "target" in raw:
        raise ScheduleError(f"{where}: {f} takes no target")
    if f not in NET_FAULTS and "between" in raw:
        raise ScheduleError(f"{where}: {f} takes no between")
    isolated = raw.get("isolated", False)
    if not isinstance(isolated, bool):
        raise ScheduleError(f"{where}: isolated must be true or false, got {isolated!r}")
    if isolated and f != "power-loss":
        raise ScheduleError(f"{where}: only power-loss can be isolated")
    if isolated and dur is None:
        raise ScheduleError(f"{where}: an isolated power-loss needs duration_ms (the broker must come back)")
    return Event(after_ms=after, fault=f, target=target, between=between, duration_ms=dur, isolated=isolated)


def _workload(raw: Any) -> dict[str, Any]:
    if raw is None:
        return dict(WORKLOAD_DEFAULTS)
    if not isinstance(raw, dict):
        raise ScheduleError("workload must be a JSON object")
    unknown = sorted(set(raw) - set(WORKLOAD_DEFAULTS))
    if unknown:
        raise ScheduleError(f"workload: unknown field(s) {', '.join(unknown)} "
                            f"(known: {', '.join(sorted(WORKLOAD_DEFAULTS))})")
    w = {**WORKLOAD_DEFAULTS, **raw}
    if w["client"] not in CLIENTS:
        raise ScheduleError(f"workload: client must be one of {', '.join(CLIENTS)}, got {w['client']!r}")
    if w["acks"] not in ("all", 0, 1, -1):
        raise ScheduleError(f"workload: acks must be 0, 1 or \"all\", got {w['acks']!r}")
    for k in ("retries", "records", "consumers", "min_insync", "replication_factor", "partitions"):
        if isinstance(w[k], bool) or not isinstance(w[k], int) or w[k] < 0:
            raise ScheduleError(f"workload: {k} must be a non-negative integer, got {w[k]!r}")
    if isinstance(w["max_in_flight"], bool) or not isinstance(w["max_in_flight"], int) or w["max_in_flight"] < 1:
        raise ScheduleError(f"workload: max_in_flight must be a positive integer, got {w['max_in_flight']!r}")
    if not isinstance(w["idempotence"], bool):
        raise ScheduleError(f"workload: idempotence must be true or false, got {w['idempotence']!r}")
    if not isinstance(w["transactions"], bool):
        raise ScheduleError(f"workload: transactions must be true or false, got {w['transactions']!r}")
    return w


def from_json(obj: Any) -> Schedule:
    if not isinstance(obj, dict):
        raise ScheduleError("a schedule is a JSON object")
    if obj.get("format") != FORMAT or obj.get("kind") != KIND:
        raise ScheduleError(f"not a schedule: format must be {FORMAT!r} and kind {KIND!r}")
    if obj.get("version") != VERSION:
        raise ScheduleError(f"unsupported schedule version {obj.get('version')!r} (supported: {VERSION})")
    unknown = sorted(set(obj) - {"format", "version", "kind", "generation", "brokers", "seed", "workload",
                                 "events", "without"})
    if unknown:
        raise ScheduleError(f"unknown field(s) {', '.join(unknown)}")
    gen = obj.get("generation")
    if not isinstance(gen, str) or not gen:
        raise ScheduleError("generation must be a non-empty string")
    n = obj.get("brokers")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 9:
        raise ScheduleError(f"brokers must be an integer in 1..9, got {n!r}")
    seed = obj.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ScheduleError(f"seed must be an integer, got {seed!r}")
    without = obj.get("without", [])
    if not isinstance(without, list) or not all(isinstance(x, str) for x in without):
        raise ScheduleError("without must be a list of fix names")
    evs = obj.get("events")
    if not isinstance(evs, list):
        raise ScheduleError("events must be a list")
    if len(evs) > MAX_EVENTS:
        raise ScheduleError(f"at most {MAX_EVENTS} events, got {len(evs)}")
    w = _workload(obj.get("workload"))
    if w["replication_factor"] > n:
        raise ScheduleError(f"workload: replication_factor {w['replication_factor']} exceeds brokers {n}")
    return Schedule(generation=gen, brokers=n, events=tuple(parse_event(i, e, n) for i, e in enumerate(evs)),
                    workload=w, seed=seed, without=tuple(without))


def loads(text: str) -> Schedule:
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise ScheduleError(f"not JSON: {e}") from None
    return from_json(obj)


def load(path: str | Path) -> Schedule:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ScheduleError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ScheduleError(f"{path}: not UTF-8 text") from None
    try:
        return loads(text)
    except ScheduleError as e:
        raise ScheduleError(f"{path}: {e}") from None


def is_schedule_file(path: str | Path) -> bool:
    """True when the file's JSON header says it is a schedule (replay dispatches on this)."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(4096)
    except (OSError, UnicodeDecodeError):
        return False
    return f'"{FORMAT}"' in head and f'"{KIND}"' in head


def save(path: str | Path, s: Schedule) -> None:
    Path(path).write_text(s.dumps() + "\n", encoding="utf-8")
