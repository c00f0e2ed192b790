"""CLI commands of the broker area: `kafkaverify broker start` runs a real cluster in the
foreground (Ctrl-C / SIGTERM stop it cleanly); a broker that dies is reported and the others keep
running. `broker crash|pause|resume|restart|power-loss TARGET` and `broker status` talk to that
running `start` through its control channel (impl/control.py, `<data-dir>/control.json`);
`broker drop-unflushed` drops a stopped broker's unfsynced writes from its files.

The fault names are the schedule vocabulary (traces/schedule.py, FAULT_VOCABULARY); the older
`broker kill` and `broker power-fail` stay as aliases of `crash` and `power-loss`, and
`broker power-loss` without TARGET is the older spelling of `drop-unflushed`."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import click

from impl.control import FaultError, request
from kafkaverify.exitcodes import InputError
from traces.schedule import FAULT_ALIASES

GENERATIONS = ("v0.10", "kip-101", "kip-279", "kip-320", "current")


def register(group: click.Group) -> None:
    group.add_command(broker)


@click.group()
def broker() -> None:
    """Run the compact real broker."""


def _check_port_free(port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise InputError(f"port {port} on 127.0.0.1 is not free ({e.strerror})") from None


@broker.command()
@click.option("--brokers", type=int, default=1, show_default=True, help="Number of broker processes.")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False), help="Directory for logs, traces, state.")
@click.option("--base-port", type=int, default=9092, show_default=True, help="Broker N listens on base-port + N.")
@click.option("--generation", default="current", show_default=True,
              help="Protocol generation: " + ", ".join(GENERATIONS) + ".")
@click.option("--coordinator", default="embedded", show_default=True,
              help="'embedded' (starts our coordination server) or zk://HOST:PORT[/chroot].")
@click.option("--auto-create-topics", is_flag=True, help="Create unknown topics on Metadata requests.")
@click.option("--replication-factor", type=int, default=None,
              help="Default replication factor for auto-created topics (default: min(3, brokers)).")
@click.option("--min-insync", type=int, default=1, show_default=True, help="Default min.insync.replicas.")
@click.option("--flush-messages", type=int, default=None, help="fsync each log after this many records.")
@click.option("--flush-ms", type=int, default=None, help="fsync each log when its oldest unflushed write is this old.")
@click.option("--session-timeout-ms", type=int, default=6000, show_default=True)
def start(brokers, data_dir, base_port, generation, coordinator, auto_create_topics, replication_factor,
          min_insync, flush_messages, flush_ms, session_timeout_ms):
    """Start a cluster and print `ready: <bootstrap list>` once every broker is registered and a
    controller is elected."""
    if brokers < 1 or brokers > 64:
        raise InputError(f"--brokers must be between 1 and 64, got {brokers}")
    if generation not in GENERATIONS:
        raise InputError(f"unknown --generation {generation!r} (one of {', '.join(GENERATIONS)})")
    if not (1 <= base_port and base_port + brokers - 1 <= 65535):
        raise InputError(f"--base-port {base_port} leaves no room for {brokers} brokers")
    if coordinator != "embedded" and not coordinator.startswith("zk://"):
        raise InputError(f"--coordinator must be 'embedded' or zk://HOST:PORT, got {coordinator!r}")
    rf = replication_factor if replication_factor is not None else min(3, brokers)
    if not 1 <= rf <= brokers:
        raise InputError(f"--replication-factor must be between 1 and {brokers}")
    if not 1 <= min_insync <= rf:
        raise InputError(f"--min-insync must be between 1 and the replication factor ({rf})")
    for n in (flush_messages, flush_ms):
        if n is not None and n <= 0:
            raise InputError("--flush-messages / --flush-ms must be positive")
    try:
        Path(data_dir).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create --data-dir {data_dir}: {e.strerror}") from None
    for i in range(brokers):
        _check_port_free(base_port + i)
    # lazy: the cluster imports kafka-python's protocol codecs (CLI start-up)
    from kafkaverify.runs.broker import serve
    return serve(brokers, data_dir, base_port, generation, coordinator, auto_create_topics, rf,
                 min_insync, flush_messages, flush_ms, session_timeout_ms)


def _control(data_dir: str, body: dict) -> dict:
    try:
        r = request(data_dir, body)
    except FaultError as e:
        raise InputError(str(e)) from None
    if not r.get("ok"):
        raise InputError(r.get("error", "the cluster refused the request"))
    return r


# The control channel's own names for the faults (impl/control.py FAULTS), by the name of the
# schedule vocabulary (traces/schedule.py) the commands use.
WIRE = {"crash": "kill", "pause": "pause", "resume": "resume", "restart": "restart",
        "power-loss": "power-fail"}


def _apply(name: str, target: str, data_dir: str) -> int:
    """One fault on a running `broker start`; prints `NAME: broker N` under the name typed."""
    r = _control(data_dir, {"fault": WIRE[FAULT_ALIASES.get(name, name)], "target": target})
    extra = f" ({r['lost_bytes']} unflushed bytes dropped)" if "lost_bytes" in r else ""
    click.echo(f"{name}: broker {r['broker']}{extra}")
    return 0


_TARGET_HELP = "TARGET: a broker id or leader:TOPIC/PARTITION (its leader now)."
_DATA_DIR_HELP = "The data directory of a running `kafkaverify broker start`."


def _fault_command(name: str, what: str):
    @click.argument("target")
    @click.option("--data-dir", required=True, type=click.Path(file_okay=False), help=_DATA_DIR_HELP)
    def cmd(target, data_dir):
        return _apply(name, target, data_dir)
    cmd.__doc__ = f"""{what} {_TARGET_HELP}"""
    broker.command(name)(cmd)


for _name, _what in (("crash", "kill -9"), ("kill", "kill -9 (the older name of `crash`)"),
                     ("pause", "SIGSTOP (continue with `resume`)"),
                     ("resume", "SIGCONT a paused broker"), ("restart", "Start a dead or stopped broker again"),
                     ("power-fail", "kill -9 and drop every write not yet fsynced (the older name of "
                                    "`power-loss TARGET`)")):
    _fault_command(_name, _what)


@broker.command("status")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False),
              help="The data directory of a running `kafkaverify broker start`.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_cmd(data_dir, as_json):
    """Which brokers are alive, and each partition's leader and ISR."""
    r = _control(data_dir, {"op": "status"})
    if as_json:
        r.pop("ok", None)
        click.echo(json.dumps(r, sort_keys=True, indent=1))
        return 0
    click.echo(f"controller: {r['controller']}")
    for b in r["brokers"]:
        code = f" (exit code {b['exit_code']})" if b["state"] == "dead" else ""
        click.echo(f"broker {b['id']} port {b['port']}: {b['state']}{code}"
                   f"{'' if b['registered'] else ', not registered'}")
    for p in r["partitions"]:
        click.echo(f"{p['topic']}/{p['partition']}: leader {p['leader']} epoch {p['leader_epoch']} "
                   f"isr {p['isr']} replicas {p['replicas']}")
    return 0


def _drop_unflushed(data_dir: str, broker_id: int | None) -> int:
    # lazy: the log's batch codec imports kafka-python (CLI start-up)
    from impl.storage.log import power_loss
    root = Path(data_dir)
    dirs = [root / f"broker-{broker_id}"] if broker_id is not None else sorted(root.glob("broker-*"))
    dirs = [d for d in dirs if d.is_dir()]
    if not dirs:
        raise InputError(f"no broker data directory under {data_dir}"
                         + (f" for broker {broker_id}" if broker_id is not None else ""))
    for d in dirs:
        lost = power_loss(d)
        click.echo(f"{d.name}: {sum(lost.values())} unflushed bytes dropped in {len(lost)} segment(s)")
    return 0


@broker.command("drop-unflushed")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False),
              help="The cluster's data directory (as given to `broker start`).")
@click.option("--broker", "broker_id", type=int, default=None, help="Only this broker (default: all).")
def drop_unflushed_cmd(data_dir, broker_id):
    """Drop every write a stopped broker had not fsynced (the second half of a power loss).

    Run it only on brokers that are dead (kill -9): it truncates each log segment to the length
    recorded in its partition's flushed.json sidecar."""
    return _drop_unflushed(data_dir, broker_id)


@broker.command("power-loss")
@click.argument("target", required=False)
@click.option("--data-dir", required=True, type=click.Path(file_okay=False),
              help="The data directory of the cluster (as given to `broker start`).")
@click.option("--broker", "broker_id", type=int, default=None,
              help="Without TARGET: only this broker's files (default: all).")
def power_loss_cmd(target, data_dir, broker_id):
    """kill -9 TARGET and drop every write it had not fsynced, on a running `broker start`.
    TARGET: a broker id or leader:TOPIC/PARTITION (its leader now).

    Without TARGET (the older use of this command, kept): as `drop-unflushed`, drop the
    unfsynced writes of stopped brokers from their files."""
    if target is None:
        return _drop_unflushed(data_dir, broker_id)
    if broker_id is not None:
        raise InputError("power-loss takes TARGET or --broker, not both (--broker is for the "
                         "files of stopped brokers: see drop-unflushed)")
    return _apply("power-loss", target, data_dir)
