"""`kafkaverify nemesis --cluster FILE`: the nemesis against a cluster it knows only through a
TOML file of shell commands and the Kafka protocol. The cluster here is our own broker driven
strictly as an outside system -- processes started by tests/outside/cluster.sh with pid files,
faulted by kill -9 / SIGSTOP / SIGCONT, no Python API of the harness touching them:
- generated crash / pause / controller fail-over schedules run, are judged, and are valid (exit
  0); the brokers' traces, which the file names, are judged by conformance too;
- a fault command that fails ends the run unknown (exit 2) with the command and its output;
- a malformed file, an unknown key or placeholder, and a fault the file cannot apply exit 3
  naming the key."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from impl.cluster import free_ports
from kafkaverify.nemesis.cluster_file import ClusterFileError, parse_cluster
from tests.conftest import ROOT, subprocess_env

pytestmark = pytest.mark.timeout(400)

SCRIPT = ROOT / "tests" / "outside" / "cluster.sh"
BROKER_CONFIG = {"session_timeout_ms": 3000, "replica_lag_time_max_ms": 1500,
                 "group_initial_rebalance_delay_ms": 0, "offsets_topic_num_partitions": 3}


def kv(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "kafkaverify", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=subprocess_env())


def outside_cluster(tmp: Path, n: int = 3, kill: str | None = None, hosts: list[str] | None = None) -> Path:
    """The cluster file and the script's environment for n brokers of ours on fresh ports; with
    hosts (one address each, inside a private network namespace) partition / heal hooks too."""
    ports = free_ports(n + 1)
    d = tmp / "outside"
    d.mkdir()
    (d / "env").write_text(f"PYTHON={shlex.quote(sys.executable)}\nCOORD_PORT={ports[0]}\n"
                           f"PORTS='{' '.join(map(str, ports[1:]))}'\n"
                           f"BROKER_CONFIG={shlex.quote(json.dumps(BROKER_CONFIG))}\n"
                           + (f"HOSTS='{' '.join(hosts)}'\n" if hosts else "") +
                           f"export PYTHONPATH={shlex.quote(str(ROOT))}\n")
    sh = f"{shlex.quote(str(SCRIPT))} {shlex.quote(str(d))}"
    cuts = f"""partition = "{sh} partition {{index}} {{peer_index}}"
heal = "{sh} heal {{index}} {{peer_index}}"
""" if hosts else ""
    nodes = "".join(f"""
[[node]]
id = {i}
kill = "{kill or sh + ' kill {index}'}"
start = "{sh} start {{index}}"
pause = "{sh} pause {{index}}"
resume = "{sh} resume {{index}}"
{cuts}""" for i in range(n))
    f = tmp / "cluster.toml"
    addrs = hosts or ["127.0.0.1"] * n
    f.write_text(f"""bootstrap = "{','.join(f'{h}:{p}' for h, p in zip(addrs, ports[1:]))}"
timeout_s = 60
setup = "{sh} setup"
teardown = "{sh} teardown"
traces = "{d}/data/broker-*/trace-*.jsonl"
{nodes}""")
    return f


def test_our_broker_as_an_outside_cluster_runs_valid_schedules(tmp_path):
    f = outside_cluster(tmp_path)
    out = tmp_path / "nem"
    r = kv("nemesis", "--cluster", str(f), "--schedules", "2", "--seed", "3", "--consumers", "1",
           "--faults", "crash,pause,controller-failover", "--out", str(out), "--time-limit", "200")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    assert f"cluster={f}" in r.stdout.replace("\n", "") and "conformance=traces" in r.stdout.replace("\n", "")
    lines = [line for line in r.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 2 and all("VALID" in line for line in lines), lines
    runs = sorted(out.glob("run-*/result.json"))
    assert len(runs) == 2
    for p in runs:
        res = json.loads(p.read_text())
        assert res["status"] == "valid" and not res["divergences"]
        log = (p.parent / "cluster" / "commands.log").read_text()
        # the cluster was set up and torn down by the file's commands, and faulted by them
        assert f"{SCRIPT}" in log and " setup\n" in log and " teardown\n" in log
        assert any(f" {op} " in log for op in ("kill", "pause")), log[-2000:]
        # its brokers' traces were judged: copied into the run
        assert list((p.parent / "cluster" / "traces").glob("*trace-*.jsonl"))
        ops = [json.loads(line) for line in (p.parent / "history.jsonl").read_text().splitlines()[1:]]
        # records were acknowledged through the faults and read back by the final reads
        assert sum(1 for o in ops if o.get("f") == "send" and o.get("type") == "ok") > 10
        finals = {o["id"] for o in ops if o.get("f") == "poll" and o.get("final")}
        assert finals and any(o["id"] in finals and o["type"] == "ok" and o["values"] for o in ops)
    # a saved schedule replays on the same outside cluster
    rr = kv("replay", str(runs[0].parent / "schedule.json"), "--cluster", str(f))
    assert rr.returncode == 0 and f"cluster={f}" in rr.stdout.replace("\n", "") and "VALID" in rr.stdout, \
        rr.stdout[-3000:] + rr.stderr[-2000:]


def test_a_failing_fault_command_ends_the_run_unknown_with_its_output(tmp_path):
    f = outside_cluster(tmp_path, kill="echo cannot reach the node {node} >&2; exit 7")
    out = tmp_path / "nem"
    r = kv("nemesis", "--cluster", str(f), "--schedules", "1", "--seed", "1", "--consumers", "0",
           "--faults", "crash", "--out", str(out), "--time-limit", "120")
    assert r.returncode == 2, r.stdout[-4000:] + r.stderr[-3000:]
    text = r.stdout.replace("\n", " ")
    assert "UNKNOWN" in text and "exited 7" in text and "cannot reach the node" in text
    [res] = [json.loads(p.read_text()) for p in out.glob("run-*/result.json")]
    assert res["status"] == "unknown" and "cannot reach the node" in res["reason"]
    # the teardown still ran: no broker of the outside cluster is left behind
    log = next(out.glob("run-*/cluster/commands.log")).read_text()
    assert " teardown\n# teardown: exit 0" in log


def test_bad_cluster_files_exit_3_naming_the_key(tmp_path):
    good = outside_cluster(tmp_path).read_text()
    cases = {
        "typo.toml": (good.replace("timeout_s = 60", "timeout = 60"), "unknown key 'timeout'"),
        "placeholder.toml": (good.replace("kill {index}", "kill {pid}", 1), "node[0].kill: unknown placeholder {pid}"),
        "notoml.toml": ("bootstrap = [", "not TOML"),
        "nonode.toml": ('bootstrap = "127.0.0.1:1"\n', "node: required"),
    }
    for name, (text, want) in cases.items():
        (tmp_path / name).write_text(text)
        r = kv("nemesis", "--cluster", str(tmp_path / name), "--out", str(tmp_path / "o"), timeout=60)
        assert r.returncode == 3 and want in r.stderr and "Traceback" not in r.stderr, (name, r.stderr)
    r = kv("nemesis", "--cluster", str(tmp_path / "cluster.toml"), "--faults", "crash,partition",
           "--out", str(tmp_path / "o"), timeout=60)
    assert r.returncode == 3 and "fault partition needs partition and heal hooks" in r.stderr, r.stderr


def test_parse_cluster_rules():
    base = {"bootstrap": ["h:1", "h:2"], "node": [
        {"id": 5, "kill": "k {node}", "start": "s", "pause": "p", "resume": "r",
         "partition": "cut {node} {peer}", "heal": "heal {peer_index}", "power_loss": "pl {index}", "timeout_s": 3}]}
    s = parse_cluster(base)
    assert s.bootstrap == "h:1,h:2" and s.nodes[0].timeout_s == 3 and s.timeout_s == 60
    assert s.can_partition and s.can_power_loss and {"partition", "power-loss"} <= s.faults()
    assert "session-expiry" not in s.faults()
    bad = [({**base, "node": [{**base["node"][0], "heal": None}]}, "node[0].heal"),
           ({**base, "node": [{k: v for k, v in base["node"][0].items() if k != "heal"}]}, "partition and heal"),
           ({**base, "node": [{**base["node"][0], "kill": "k {peer}"}]}, "node[0].kill: unknown placeholder {peer}"),
           ({**base, "node": [{**base["node"][0], "id": "x"}]}, "node[0].id"),
           ({**base, "node": base["node"] * 2}, "node[1].id: 5 appears twice"),
           ({**base, "bootstrap": "nohostport"}, "bootstrap"),
           ({**base, "timeout_s": 0}, "timeout_s"),
           ({**base, "setup": "x {node}"}, "setup: unknown placeholder {node}")]
    for data, want in bad:
        with pytest.raises(ClusterFileError, match=want.replace("{", r"\{").replace("}", r"\}").replace("[", r"\[")
                           .replace("]", r"\]").replace(".", r"\.")):
            parse_cluster(data)


PLUGIN_TEST = '''
from kafka import KafkaProducer


def test_outside_leader_crash(kafka_cluster, kafka_faults, kafka_history, kafka_topic):
    assert type(kafka_cluster).__name__ == "ExternalCluster" and kafka_cluster.n == 3
    topic = kafka_topic(replication_factor=3, min_insync=2)
    p = kafka_history.producer(KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap, acks="all",
                                             retries=10, request_timeout_ms=5000))
    for i in range(5):
        p.send(topic, f"a{i}".encode(), partition=0).get(30)
    victim = kafka_faults.crash(leader_of=(topic, 0))
    assert victim not in kafka_cluster.alive()
    for i in range(5):
        p.send(topic, f"b{i}".encode(), partition=0).get(60)
    p.close()
    print("VICTIM", victim)


def test_healed_for_the_next_test(kafka_cluster):
    assert kafka_cluster.alive() == [0, 1, 2]
'''


def test_pytest_plugin_on_an_outside_cluster(tmp_path):
    f = outside_cluster(tmp_path)
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "test_outside.py").write_text(PLUGIN_TEST)
    env = subprocess_env()
    env.pop("PYTEST_ADDOPTS", None)
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", "-W",
                        "ignore::DeprecationWarning", "--basetemp", str(tmp_path / "bt"), "--kafkaverify-cluster", str(f)],
                       capture_output=True, text=True, cwd=tmp_path / "proj", timeout=300, env=env)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]
    assert "VICTIM" in r.stdout
    # the crash and the heal were the file's commands
    log = tmp_path / "bt" / "outside-cluster0" / "commands.log"
    assert " kill " in log.read_text() and " start " in log.read_text() and " teardown" in log.read_text()
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--co",
                        "--kafkaverify-cluster", str(tmp_path / "missing.toml")],
                       capture_output=True, text=True, cwd=tmp_path / "proj", timeout=120, env=env)
    assert r.returncode == 4 and "--kafkaverify-cluster" in r.stderr and "Traceback" not in r.stderr


def test_the_cluster_file_mode_needs_nothing_of_our_broker():
    code = ("import sys, kafkaverify.nemesis.cluster_file as m; m.ExternalCluster; "
            "print(sorted({n.split('.')[0] for n in sys.modules} & {'impl', 'checkers', 'spec'}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env=subprocess_env(), timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


@pytest.mark.slow
def test_audit_ordering_on_an_outside_cluster(tmp_path):
    f = outside_cluster(tmp_path)
    out = tmp_path / "audit"
    r = kv("audit-ordering", "--cluster", str(f), "--clients", "kafka-python", "--acks", "all", "--retries", "5",
           "--max-in-flight", "1", "--idempotence", "on", "--schedules", "2", "--model-time-limit", "20",
           "--time-limit", "300", "--out", str(out))
    # the model's searches may stop at their limit (exit 2); the broker column must be decided
    assert r.returncode in (0, 2), r.stdout[-4000:] + r.stderr[-3000:]
    assert f"cluster={f}" in r.stderr.replace("\n", "") + r.stdout.replace("\n", "")
    assert "reorder 0/2 · dup 0/2 · loss 0/2" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    logs = sorted(out.glob("runs/kafka-python/*/run-*/cluster/commands.log"))
    assert len(logs) == 2 and all(" setup\n" in p.read_text() for p in logs)


def test_hooks_get_their_placeholders_and_failures_carry_their_output(tmp_path):
    from kafkaverify.nemesis.cluster_file import CommandFailed, ExternalCluster, ExternalCuts
    log = tmp_path / "hooks.txt"
    rec = f"echo {{}} >> {shlex.quote(str(log))}"
    node = {"kill": rec.format("kill {node} {index}"), "start": rec.format("start {node}"),
            "pause": rec.format("pause {node}"), "resume": rec.format("resume {node}"),
            "partition": rec.format("cut {node} {peer} {peer_index}"), "heal": rec.format("heal {node} {peer}"),
            "power_loss": rec.format("power {node} {out}")}
    spec = parse_cluster({"bootstrap": "127.0.0.1:1", "timeout_s": 5,
                          "node": [{"id": 7, **node}, {"id": 9, **node, "kill": "echo no such host >&2; exit 4",
                                                       "pause": "sleep 5", "timeout_s": 0.5}]})
    c = ExternalCluster(spec, tmp_path / "run")
    cuts = ExternalCuts(c)
    cuts.cut("0", "1")
    assert cuts.active()
    cuts.heal("1", "0")                 # either side heals a cut: it is undone by its own node's hook
    assert not cuts.active()
    cuts.cut("1", "0")
    cuts.heal_all()
    c.power_loss(0)
    assert c.alive() == [1]
    c.start_broker(0)
    assert c.alive() == [0, 1]
    assert log.read_text().splitlines() == ["cut 7 9 1", "heal 7 9", "cut 9 7 0", "heal 9 7",
                                            f"power 7 {(tmp_path / 'run').resolve()}", "start 7"]
    with pytest.raises(CommandFailed, match=r"kill \(node 9\) exited 4: .*\nits output: no such host"):
        c.kill(1)
    with pytest.raises(CommandFailed, match=r"pause \(node 9\) did not finish within 0.5s"):
        c.pause(1)
    assert c.alive() == [0, 1] and not c.paused     # a failed command changes nothing the harness tracks
    assert "# kill (node 9): exit 4" in (tmp_path / "run" / "commands.log").read_text()


def test_partition_hooks_cut_our_brokers_in_a_private_network_namespace(tmp_path):
    """The whole run -- harness, clients and the outside cluster -- in one private network
    namespace (unshare -n), each broker on its own address; the file's partition / heal hooks
    are nftables rules there (tests/outside/cluster.sh), which touch nothing on the machine."""
    from impl.netfault import available
    assert available() is None, f"real partitions unavailable: {available()}"
    f = outside_cluster(tmp_path, hosts=[f"127.0.0.{11 + i}" for i in range(3)])
    out = tmp_path / "nem"
    inner = " ".join(shlex.quote(a) for a in [
        sys.executable, "-m", "kafkaverify", "nemesis", "--cluster", str(f), "--schedules", "2", "--seed", "4",
        "--consumers", "0", "--faults", "partition,crash", "--out", str(out), "--time-limit", "200"])
    r = subprocess.run(["unshare", "-n", "sh", "-c", f"ip link set lo up && exec {inner}"], capture_output=True,
                       text=True, timeout=300, cwd=ROOT, env=subprocess_env())
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    assert "faults=partition,crash" in r.stdout and "network=none" in r.stdout
    logs = "".join(p.read_text() for p in sorted(out.glob("run-*/cluster/commands.log")))
    cuts = re.findall(r" partition (\d) (\d)\n# partition \(node \d\): exit 0", logs)
    heals = re.findall(r" heal (\d) (\d)\n# heal \(node \d\): exit 0", logs)
    assert cuts and sorted(cuts) == sorted(heals), logs[-3000:]

