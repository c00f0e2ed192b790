"""`kafkaverify replay SCHEDULE`: a fault schedule run against a fresh real cluster and judged as
the nemesis judges it; and the one line that describes a schedule run (shared with
`kafkaverify nemesis`)."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console

from kafkaverify import exitcodes
from kafkaverify.exitcodes import InputError
from kafkaverify.nemesis.netns import net_mode
from kafkaverify.nemesis.runner import run_schedule
from traces.schedule import ScheduleError, load


def run_line(i: int, s, r) -> str:
    extra = ""
    if r.anomalies:
        extra = " anomalies: " + ", ".join(f"{k}×{n}" for k, n in sorted(r.anomalies.items()))
    if r.divergences:
        extra += f" divergences: {len(r.divergences)}"
    if r.permitted:
        extra += " permitted: " + ", ".join(f"{k}×{n}" for k, n in sorted(r.permitted.items()))
    if r.reason:
        extra += f" ({r.reason})"
    return f"[{i:4d}] {r.status.upper():8s} {r.seconds:6.1f}s  {s.describe()}{extra}"


def replay_schedule(file: str, cluster_file: str | None = None) -> int:
    """`kafkaverify replay SCHEDULE [--cluster FILE]`: the schedule against a fresh cluster (or
    the cluster file's), judged as the nemesis judges it."""
    try:
        s = load(file)
    except ScheduleError as e:
        raise InputError(str(e)) from None
    console = Console(width=160)
    spec = None
    if cluster_file is not None:
        from kafkaverify.nemesis.cluster_file import cluster_faults, load_cluster_file
        spec = load_cluster_file(cluster_file)
        if len(spec.nodes) != s.brokers:
            raise InputError(f"the schedule is for {s.brokers} brokers, {cluster_file} has {len(spec.nodes)} nodes")
        cluster_faults(spec, tuple(sorted({e.fault for e in s.events if e.fault not in ("restart", "resume", "heal")}
                                          )), explicit=True)
    net = False if spec else net_mode(console, s.needs_net())
    if s.needs_net() and not net and not spec:
        raise InputError("this schedule cuts the network: it needs root, nft and ip (a private network namespace)")
    out = Path(file).with_suffix("").parent / (Path(file).stem + "-replay")
    console.print(f"replaying {file}: generation={s.generation} brokers={s.brokers} "
                  f"network={'netns+nftables' if net else 'none'}{f' cluster={cluster_file}' if spec else ''} -> {out}",
                  highlight=False)
    r = run_schedule(s, out, net=net, cluster=spec)
    console.print(run_line(1, s, r), highlight=False, markup=False)
    for a in r.applied:
        console.print(f"    {a}", highlight=False, markup=False)
    if r.first_anomaly:
        console.print(f"first: {r.first_anomaly}", highlight=False, markup=False)
    console.print(f"history {out / 'history.jsonl'}  report {out / 'report.html'}  traces {out / 'cluster'}",
                  highlight=False)
    return {"valid": exitcodes.VALID, "invalid": exitcodes.VIOLATION}.get(r.status, exitcodes.UNKNOWN)
