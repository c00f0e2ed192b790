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
            "impl.protocol.codec, kafkaverify.cmd_broker;"
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
