"""Real partitions, shown: in a private network namespace, a follower cut from its leader leaves
the ISR, and a leader cut from the coordination service loses its session (its registration
disappears and the controller elects another leader while the old one still runs). The cuts'
nftables counters show packets were dropped, and a direct connection across each cut times out.

    python -m kafkaverify.nemesis.partition_demo DIR      # prints one JSON line, exit 0 / 1 / 3

Re-executes itself under `unshare -n` (root, nft, ip); tests/test_nemesis_partition.py runs it.
"""
from __future__ import annotations

import json
import socket
import sys
import time

from impl.cluster import COORD_HOST, Cluster
from impl.netfault import NetCuts, NetError, enter_private_netns

WAIT_S = 30          # each condition is awaited at most this long


def _wait(what: str, cond, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise TimeoutError(f"not within {timeout_s}s: {what}")


def _crosses(src: str, dst: tuple[str, int]) -> bool:
    """True when a TCP connection from src reaches dst within a second."""
    s = socket.socket()
    s.settimeout(1.0)
    try:
        s.bind((src, 0))
        s.connect(dst)
        return True
    except OSError:
        return False
    finally:
        s.close()


def run(data_dir: str) -> dict:
    net = NetCuts()
    net.setup()
    out: dict = {}
    c = Cluster(3, data_dir, generation="current", addresses=True, session_timeout_ms=3000,
                broker_config={"replica_lag_time_max_ms": 1500})
    c.start()
    try:
        c.create_topic("t", replication_factor=3, min_insync=2)
        c.wait_for_leaders("t", timeout_s=WAIT_S, isr_size=3)
        leader = c.leader_of("t", 0)
        follower = min(b for b in range(3) if b != leader)
        # 1. follower <-> leader: the follower leaves the ISR
        cut = net.cut(c.hosts[leader], c.hosts[follower])
        st = _wait(f"broker {follower} leaves the ISR",
                   lambda: (s := c.partition_state("t", 0)) and follower not in s["isr"] and s)
        out["follower_cut"] = {"leader": leader, "follower": follower, "isr_after": st["isr"],
                               "dropped_packets": net.dropped(cut),
                               "crosses": _crosses(c.hosts[follower], c.address(leader)),
                               "control_crosses": _crosses(c.hosts[follower], c.address(
                                   next(b for b in range(3) if b not in (leader, follower))))}
        net.heal_all()
        c.wait_for_leaders("t", timeout_s=WAIT_S, isr_size=3)
        # 2. leader <-> coordination service: the leader's session expires
        leader = c.leader_of("t", 0)
        epoch = c.partition_state("t", 0)["leader_epoch"]
        cut = net.cut(c.hosts[leader], COORD_HOST)
        _wait(f"broker {leader}'s registration expires", lambda: leader not in c.registered())
        st = _wait("another leader is elected",
                   lambda: (s := c.partition_state("t", 0)) and s["leader"] not in (leader, -1) and s)
        out["leader_cut"] = {"leader": leader, "old_epoch": epoch, "new_leader": st["leader"],
                             "new_epoch": st["leader_epoch"], "old_leader_alive": leader in c.alive(),
                             "dropped_packets": net.dropped(cut),
                             "crosses": _crosses(c.hosts[leader], (COORD_HOST, int(c.coord_url.rsplit(":", 1)[1])))}
        net.heal_all()
    finally:
        net.heal_all()
        c.stop()
    f, l = out["follower_cut"], out["leader_cut"]
    out["ok"] = bool(f["dropped_packets"] > 0 and not f["crosses"] and f["control_crosses"]
                     and l["dropped_packets"] > 0 and not l["crosses"] and l["old_leader_alive"]
                     and l["new_epoch"] > l["old_epoch"])
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m kafkaverify.nemesis.partition_demo DIR", file=sys.stderr)
        return 3
    try:
        enter_private_netns(["-m", "kafkaverify.nemesis.partition_demo", *argv])
        out = run(argv[0])
    except NetError as e:
        print(json.dumps({"ok": False, "error": str(e)}))
        return 3
    print(json.dumps(out, sort_keys=True))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
