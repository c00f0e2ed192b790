"""`kafkaverify broker start`: a foreground cluster a real client can use; clean SIGTERM stop;
user mistakes exit 3 without a traceback."""
from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from impl.cluster import PROJECT_ROOT, child_env
from tests.broker_fixtures import producer  # noqa: F401

pytestmark = pytest.mark.timeout(90)


def _free_base(n: int) -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        ok = True
        for i in range(n):
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", base + i))
                except OSError:
                    ok = False
        if ok:
            return base
    raise RuntimeError("no free port range")


def _cli(*args):
    return [sys.executable, "-m", "kafkaverify", "broker", *args]


def test_start_three_brokers_serves_clients_and_stops_on_sigterm(tmp_path):
    base = _free_base(3)
    proc = subprocess.Popen(_cli("start", "--brokers", "3", "--data-dir", str(tmp_path / "d"),
                                 "--base-port", str(base), "--auto-create-topics", "--min-insync", "2",
                                 "--session-timeout-ms", "3000"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), cwd=PROJECT_ROOT)
    try:
        deadline, line = time.monotonic() + 40, b""
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 0.5)[0]:
                line += os.read(proc.stdout.fileno(), 1)
            assert proc.poll() is None, proc.stderr.read().decode()
        text = line.decode().strip()
        assert text == "ready: " + ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        p = KafkaProducer(bootstrap_servers=text.split(" ", 1)[1], enable_idempotence=False, acks="all",
                          request_timeout_ms=15000)
        md = p.send("auto", b"hello").get(30)        # auto-created with RF 3, min.insync 2
        p.close()
        c = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{base}", group_id=None, enable_auto_commit=False,
                          consumer_timeout_ms=2000)
        c.assign([TopicPartition("auto", md.partition)])
        c.seek_to_beginning()
        assert [m.value for m in c] == [b"hello"]
        c.close()
        assert (tmp_path / "d" / "broker-2" / "auto-0").is_dir()    # replicated to all three
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    assert rc == 0
    err = proc.stderr.read().decode()
    assert "Traceback" not in err


@pytest.mark.parametrize("args,msg", [
    (["--brokers", "0"], "--brokers"),
    (["--generation", "v9"], "generation"),
    (["--coordinator", "etcd://x"], "--coordinator"),
    (["--min-insync", "5"], "--min-insync"),
])
def test_user_mistakes_exit_3_without_traceback(tmp_path, args, msg):
    r = subprocess.run(_cli("start", "--data-dir", str(tmp_path / "d"), *args), capture_output=True,
                       env=child_env(), cwd=PROJECT_ROOT, timeout=60)
    assert r.returncode == 3, r.stderr
    assert msg in r.stderr.decode() and "Traceback" not in r.stderr.decode()


def test_power_loss_command_truncates_unflushed_writes(tmp_path):
    from impl.storage.log import LogConfig, PartitionLog
    from tests.test_broker_storage import batch
    d = tmp_path / "data" / "broker-1" / "t-0"
    lg = PartitionLog(d, LogConfig(flush_messages=2))
    lg.append_as_leader(batch([b"a", b"b"]), 0)
    lg.append_as_leader(batch([b"c"]), 0)
    lg.close()
    r = subprocess.run(_cli("power-loss", "--data-dir", str(tmp_path / "data"), "--broker", "1"),
                       capture_output=True, env=child_env(), cwd=PROJECT_ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert b"broker-1:" in r.stdout and b"1 segment(s)" in r.stdout
    assert PartitionLog(d).leo == 2
    r = subprocess.run(_cli("power-loss", "--data-dir", str(tmp_path / "data"), "--broker", "7"),
                       capture_output=True, env=child_env(), cwd=PROJECT_ROOT, timeout=60)
    assert r.returncode == 3 and b"Traceback" not in r.stderr


def test_impl_never_imports_the_model_or_checkers():
    code = ("import sys, impl.broker, impl.cluster, impl.controller, impl.handlers, impl.storage.log, "
            "impl.protocol.codec, kafkaverify.commands.broker, kafkaverify.runs.broker;"
            "bad=[m for m in sys.modules if m.split('.')[0] in ('spec', 'checkers')];"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=child_env(), cwd=PROJECT_ROOT,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_unreachable_zookeeper_is_a_user_error(tmp_path):
    base = _free_base(1)
    r = subprocess.run(_cli("start", "--data-dir", str(tmp_path / "d"), "--base-port", str(base),
                            "--coordinator", f"zk://127.0.0.1:{_free_base(1)}"),
                       capture_output=True, env=child_env(), cwd=PROJECT_ROOT, timeout=60)
    assert r.returncode == 3 and b"cluster did not start" in r.stderr and b"Traceback" not in r.stderr


def _start_cli_cluster(tmp_path, n: int):
    base = _free_base(n)
    proc = subprocess.Popen(_cli("start", "--brokers", str(n), "--data-dir", str(tmp_path / "d"),
                                 "--base-port", str(base), "--auto-create-topics", "--min-insync", "2",
                                 "--session-timeout-ms", "2500"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), cwd=PROJECT_ROOT)
    deadline, line = time.monotonic() + 40, b""
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            line += os.read(proc.stdout.fileno(), 1)
        assert proc.poll() is None, proc.stderr.read().decode()
    assert line.startswith(b"ready: ")
    return proc, line.decode().split(" ", 1)[1].strip()


def _ctl(tmp_path, *args):
    return subprocess.run(_cli(*args, "--data-dir", str(tmp_path / "d")), capture_output=True, text=True,
                          env=child_env(), cwd=PROJECT_ROOT, timeout=90)


def test_killed_leader_is_reported_others_keep_serving_restart_on_request(tmp_path):
    """kill -9 the leader through the control channel: `start` keeps running and reports it,
    `status` shows it dead and a new leader, a default (idempotent) producer keeps writing, and
    `restart` brings it back only when asked."""
    import json
    from kafka import KafkaProducer
    proc, bootstrap = _start_cli_cluster(tmp_path, 3)
    try:
        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=15000)
        assert p.send("f", b"before", partition=0).get(30).offset == 0
        st = json.loads(_ctl(tmp_path, "status", "--json").stdout)
        old = next(x["leader"] for x in st["partitions"] if x["topic"] == "f")
        r = _ctl(tmp_path, "kill", "leader:f/0")
        assert r.returncode == 0 and r.stdout.strip() == f"kill: broker {old}", r.stderr
        assert p.send("f", b"after", partition=0).get(60).offset == 1    # fail-over under the client
        st = json.loads(_ctl(tmp_path, "status", "--json").stdout)
        states = {b["id"]: b["state"] for b in st["brokers"]}
        assert states[old] == "dead" and sorted(s for i, s in states.items() if i != old) == ["running"] * 2
        new = next(x for x in st["partitions"] if x["topic"] == "f")
        assert new["leader"] not in (old, -1) and old not in new["isr"]
        assert proc.poll() is None                                       # the cluster keeps running
        text = _ctl(tmp_path, "status").stdout
        assert f"broker {old} port" in text and "dead" in text and "f/0: leader" in text
        # usage errors: exit 3, no traceback
        for args in (("kill", "leader:nope/0"), ("kill", "9"), ("pause", "x:y"), ("kill", str(old))):
            r = _ctl(tmp_path, *args)
            assert r.returncode == 3 and "Traceback" not in r.stderr, (args, r.stderr)
        assert _ctl(tmp_path, "restart", str(old)).returncode == 0
        st = json.loads(_ctl(tmp_path, "status", "--json").stdout)
        assert all(b["state"] == "running" for b in st["brokers"])
        assert _ctl(tmp_path, "pause", str(old)).returncode == 0
        assert json.loads(_ctl(tmp_path, "status", "--json").stdout)["brokers"][old]["state"] == "paused"
        assert _ctl(tmp_path, "resume", str(old)).returncode == 0
        r = _ctl(tmp_path, "power-fail", str(old))
        assert r.returncode == 0 and "unflushed bytes dropped" in r.stdout, r.stderr
        assert json.loads(_ctl(tmp_path, "status", "--json").stdout)["brokers"][old]["state"] == "dead"
        assert _ctl(tmp_path, "restart", str(old)).returncode == 0
        assert p.send("f", b"last", partition=0).get(60).offset == 2
        p.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    err = proc.stderr.read().decode()
    assert rc == 0 and "Traceback" not in err
    assert f"broker {old} exited with code -9" in err and "the others keep running" in err
    assert not (tmp_path / "d" / "control.json").exists()


def test_control_channel_acts_on_nothing_once_stopped(tmp_path):
    """Control requests run on daemon threads that the server's shutdown does not wait for; one
    that reaches the cluster lock after stop() must be refused, not act on (restart a broker of)
    a cluster being stopped. No broker process is started here."""
    import threading

    from impl.cluster import Cluster
    from impl.control import ControlServer, request

    cluster = Cluster(1, tmp_path)
    control = ControlServer(cluster, tmp_path, threading.Lock())
    control.start()
    assert request(tmp_path, {"op": "status"}, timeout_s=10)["ok"]
    control.stop()
    assert not (tmp_path / "control.json").exists()
    for body in (b'{"op": "status"}\n', b'{"fault": "restart", "target": "0"}\n'):
        assert control.handle(body) == {"ok": False, "error": "the cluster is stopping"}
    assert cluster.procs == {}
