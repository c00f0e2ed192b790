"""`kafkaverify broker start`'s work once its options are checked: a real cluster
(impl/cluster.py) in the foreground with its control channel (impl/control.py) open, a broker
that dies reported once while the others keep running, SIGINT / SIGTERM stopping it cleanly."""
from __future__ import annotations

import signal
import threading

import click

from impl.cluster import Cluster, ClusterError
from impl.control import ControlServer
from impl.coord.base import CoordError
from kafkaverify.exitcodes import InputError


def serve(brokers, data_dir, base_port, generation, coordinator, auto_create_topics, rf,
          min_insync, flush_messages, flush_ms, session_timeout_ms) -> int:
    """Runs the cluster until a signal; prints `ready: <bootstrap list>` once every broker is
    registered and a controller is elected. Returns the exit code (0)."""
    log_cfg = {k: v for k, v in (("flush_messages", flush_messages), ("flush_ms", flush_ms)) if v is not None}
    cfg = {"auto_create_topics": auto_create_topics, "default_replication_factor": rf,
           "default_min_insync": min_insync, "log": log_cfg}
    cluster = Cluster(brokers, data_dir, generation=generation, coordinator=coordinator, base_port=base_port,
                      broker_config=cfg, session_timeout_ms=session_timeout_ms, coord_root="")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    lock = threading.Lock()
    control = None
    try:
        try:
            cluster.start()
        except (ClusterError, ValueError, CoordError, OSError) as e:
            raise InputError(f"cluster did not start: {e}") from None
        control = ControlServer(cluster, data_dir, lock)
        control.start()
        click.echo(f"ready: {cluster.bootstrap}", nl=True)
        reported: dict[int, object] = {}
        while not stop.wait(0.5):
            # a dead broker is reported once per death; the others keep running, and it is
            # restarted only when asked (`kafkaverify broker restart`)
            with lock:
                for i, p in sorted(cluster.procs.items()):
                    if p.poll() is not None and reported.get(i) is not p:
                        reported[i] = p
                        cluster.mark_dead_expected(i)
                        click.echo(f"broker {i} exited with code {p.returncode}; see {data_dir}/broker-{i}.log; "
                                   f"the others keep running", err=True)
    finally:
        if control is not None:
            control.stop()    # waits for a request being served; none acts on the cluster after it
        cluster.stop()
        click.echo("stopped", err=True)
    return 0
