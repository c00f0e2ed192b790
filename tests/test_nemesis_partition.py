"""Partitions are real: a follower cut from its leader by nftables leaves the ISR; a
leader cut from the coordination service loses its session and another broker leads; no packet
crosses either cut (the rules' counters dropped some, a direct connect times out) while the
uncut path still connects. Runs kafkaverify.nemesis.partition_demo in a private network
namespace. Without root / nft / ip this FAILS (never skips): CI runs as root with the Debian
packages from `make system-deps`."""
from __future__ import annotations

import json
import subprocess
import sys

from impl.netfault import available
from tests.conftest import ROOT, subprocess_env


def test_partition_is_real(tmp_path):
    why = available()
    assert why is None, f"real partitions unavailable: {why} (run as root after `make system-deps`)"
    r = subprocess.run([sys.executable, "-m", "kafkaverify.nemesis.partition_demo", str(tmp_path / "c")],
                       capture_output=True, text=True, timeout=180, cwd=ROOT, env=subprocess_env())
    assert r.stdout.strip(), f"no result; stderr:\n{r.stderr[-3000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    f, l = out["follower_cut"], out["leader_cut"]
    assert f["follower"] not in f["isr_after"] and f["leader"] in f["isr_after"]
    assert f["dropped_packets"] > 0 and not f["crosses"] and f["control_crosses"]
    assert l["new_leader"] != l["leader"] and l["new_epoch"] > l["old_epoch"]
    assert l["old_leader_alive"] and l["dropped_packets"] > 0 and not l["crosses"]
    assert out["ok"] and r.returncode == 0, r.stderr[-3000:]
