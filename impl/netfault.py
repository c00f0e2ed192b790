"""Real network partitions on one machine: a private network namespace in which every node of
the cluster has its own loopback address (Cluster(addresses=True)), and nftables drop rules
between addresses (reference: /work/shared/reference/faults.md). Packets really stop: a
connection across a cut times out silently, as in a real partition; nothing inside the broker
knows. Needs root and the `nft` and `ip` commands (Debian: nftables, iproute2).

    enter_private_netns(argv)      # re-exec this program under `unshare -n` (once)
    net = NetCuts(); net.setup()
    h = net.cut("127.0.0.11", "127.0.0.12")      # both directions
    net.dropped(h) -> packets dropped by that cut so far
    net.heal(h) / net.heal_all()

The namespace is the process's own (unshare -n): every child inherits it, it disappears with the
last process in it, and the rules touch nothing else on the machine.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

TABLE = "kv"
ENV_MARK = "KAFKAVERIFY_PRIVATE_NETNS"


class NetError(Exception):
    """Real partitions are unavailable here (not root, no nft/ip/unshare) or a rule failed."""


def _run(args: list[str]) -> str:
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise NetError(f"{args[0]} not found (Debian packages: nftables, iproute2, util-linux)") from None
    if r.returncode != 0:
        raise NetError(f"{' '.join(args)} failed: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


def available() -> str | None:
    """None when real partitions can be made here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "real network partitions need root (network namespace + nftables)"
    for tool in ("nft", "ip", "unshare"):
        if shutil.which(tool) is None:
            return f"`{tool}` not found (Debian packages: nftables, iproute2, util-linux)"
    return None


def in_private_netns() -> bool:
    return os.environ.get(ENV_MARK) == str(os.getpid())


def enter_private_netns(argv: list[str]) -> None:
    """Re-executes `python argv...` in a fresh network namespace (does not return) unless this
    process already is that re-executed one; there, brings `lo` up (all of 127.0.0.0/8)."""
    if in_private_netns():
        return
    why = available()
    if why:
        raise NetError(why)
    env = dict(os.environ)
    # the child's pid is unknown before exec; `unshare` execs python directly, so the mark is
    # checked against os.getpid() by a small shell hop that exports it
    cmd = ["unshare", "-n", "--", "sh", "-c",
           f'ip link set lo up && export {ENV_MARK}=$$ && exec "$@"', "sh", sys.executable, *argv]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe("unshare", cmd, env)


class NetCuts:
    """nftables cuts between addresses in the current (private) namespace. Each cut is two
    rules (both directions) with counters; handles let a heal remove exactly that cut."""

    def __init__(self) -> None:
        self.cuts: dict[tuple[str, str], list[int]] = {}

    def setup(self) -> None:
        why = available()
        if why:
            raise NetError(why)
        if not in_private_netns():
            # refusing protects the machine: rules on 127.0.0.0/8 in the host namespace would
            # cut colleagues' processes
            raise NetError("refusing nftables rules outside a private network namespace "
                           "(call enter_private_netns first)")
        _run(["nft", "add", "table", "inet", TABLE])
        _run(["nft", "add", "chain", "inet", TABLE, "out", "{ type filter hook output priority 0; }"])

    def _add(self, src: str, dst: str) -> int:
        out = _run(["nft", "--echo", "--handle", "--json", "add", "rule", "inet", TABLE, "out",
                    "ip", "saddr", src, "ip", "daddr", dst, "counter", "drop"])
        for item in json.loads(out).get("nftables", []):
            rule = item.get("add", {}).get("rule")
            if rule and "handle" in rule:
                return int(rule["handle"])
        raise NetError(f"nft gave no handle for the rule {src} -> {dst}")

    def cut(self, a: str, b: str) -> tuple[str, str]:
        """Drop every packet between a and b, both ways. Idempotent per pair."""
        key = tuple(sorted((a, b)))
        if key not in self.cuts:
            self.cuts[key] = [self._add(a, b), self._add(b, a)]
        return key

    def dropped(self, key: tuple[str, str]) -> int:
        """Packets the cut has dropped so far (both directions)."""
        data = json.loads(_run(["nft", "--json", "--handle", "list", "chain", "inet", TABLE, "out"]))
        handles = set(self.cuts.get(tuple(sorted(key)), []))
        total = 0
        for item in data.get("nftables", []):
            rule = item.get("rule")
            if rule and rule.get("handle") in handles:
                for e in rule.get("expr", []):
                    if "counter" in e:
                        total += int(e["counter"]["packets"])
        return total

    def heal(self, a: str, b: str) -> None:
        for h in self.cuts.pop(tuple(sorted((a, b))), []):
            _run(["nft", "delete", "rule", "inet", TABLE, "out", "handle", str(h)])

    def heal_all(self) -> None:
        for key in sorted(self.cuts):
            self.heal(*key)

    def active(self) -> list[tuple[str, str]]:
        return sorted(self.cuts)
