"""CLI of the nemesis: `kafkaverify nemesis` (generated fault schedules on the real cluster) and
the schedule branch of `kafkaverify replay` (cmd_model.replay dispatches here on the file's
header). Thin shell: the work is in kafkaverify/nemesis/. Exit 0 every run valid, 1 a failure
(anomaly or conformance divergence), 2 unknown (a run undecided, nothing run, time limit before
any run), 3 usage or input error."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from kafkaverify import exitcodes
from kafkaverify.exitcodes import InputError

CLIENT_NAMES = {"confluent": "confluent-kafka", "confluent-kafka": "confluent-kafka", "aiokafka": "aiokafka",
                "kafka-python": "kafka-python"}


def _net_mode(console: Console, needs: bool) -> bool:
    """Enters a private network namespace when partitions are wanted (re-executes this command
    under `unshare -n`); False, with the reason printed, when real partitions are unavailable."""
    from impl.netfault import NetError, available, enter_private_netns, in_private_netns
    if not needs:
        return in_private_netns()
    if in_private_netns():
        return True
    why = available()
    if why:
        console.print(f"network faults unavailable ({why}): running without partitions / session expiry",
                      highlight=False)
        return False
    try:
        enter_private_netns(["-m", "kafkaverify", *sys.argv[1:]])
    except NetError as e:
        raise InputError(str(e)) from None
    return True       # not reached: exec


def _line(i: int, s, r) -> str:
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


def replay_schedule(file: str) -> int:
    """`kafkaverify replay SCHEDULE`: the schedule against a fresh cluster, judged as the
    nemesis judges it."""
    from kafkaverify.nemesis.runner import run_schedule
    from traces.schedule import ScheduleError, load
    try:
        s = load(file)
    except ScheduleError as e:
        raise InputError(str(e)) from None
    console = Console(width=160)
    net = _net_mode(console, s.needs_net())
    if s.needs_net() and not net:
        raise InputError("this schedule cuts the network: it needs root, nft and ip (a private network namespace)")
    out = Path(file).with_suffix("").parent / (Path(file).stem + "-replay")
    console.print(f"replaying {file}: generation={s.generation} brokers={s.brokers} "
                  f"network={'netns+nftables' if net else 'none'} -> {out}", highlight=False)
    r = run_schedule(s, out, net=net)
    console.print(_line(1, s, r), highlight=False, markup=False)
    for a in r.applied:
        console.print(f"    {a}", highlight=False, markup=False)
    if r.first_anomaly:
        console.print(f"first: {r.first_anomaly}", highlight=False, markup=False)
    console.print(f"history {out / 'history.jsonl'}  report {out / 'report.html'}  traces {out / 'cluster'}",
                  highlight=False)
    return {"valid": exitcodes.VALID, "invalid": exitcodes.VIOLATION}.get(r.status, exitcodes.UNKNOWN)


def register(group: click.Group) -> None:
    @group.command()
    @click.option("--generation", "-g", default="current", show_default=True,
                  help="broker generation: v0.10, kip-101, kip-279, kip-320, current")
    @click.option("--without", multiple=True, metavar="FIX", help="remove one fix from the brokers (debug)")
    @click.option("--brokers", type=click.IntRange(1, 9), default=3, show_default=True)
    @click.option("--schedules", type=click.IntRange(min=1), default=10, show_default=True)
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--faults", default=",".join(("crash", "pause", "partition", "power-loss", "controller-failover")),
                  show_default=True, help="comma-separated: crash, pause, partition, power-loss (isolated: "
                  "what current promises to survive), power-loss-any (unguarded: KIP-966's loss), "
                  "controller-failover, session-expiry, producer-restart, consumer-crash")
    @click.option("--clients", type=click.Choice(sorted(CLIENT_NAMES)), default="kafka-python", show_default=True)
    @click.option("--acks", type=click.Choice(["all", "1", "0"]), default="all", show_default=True)
    @click.option("--idempotence/--no-idempotence", default=None, help="default: the client's default")
    @click.option("--retries", type=click.IntRange(min=0), default=None, help="default: the client's default")
    @click.option("--max-in-flight", type=click.IntRange(min=1), default=None, help="default: the client's default")
    @click.option("--min-insync", type=click.IntRange(min=1), default=2, show_default=True)
    @click.option("--replication-factor", type=click.IntRange(min=1), default=None,
                  help="default: the number of brokers")
    @click.option("--consumers", type=click.IntRange(min=0), default=1, show_default=True)
    @click.option("--shrink-runs", type=click.IntRange(min=0), default=8, show_default=True,
                  help="bound on real runs spent shrinking a failure")
    @click.option("--out", type=click.Path(file_okay=False), default="nemesis-out", show_default=True)
    @click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=1800, show_default=True,
                  help="seconds; no new schedule starts after it")
    def nemesis(generation, without, brokers, schedules, seed, faults, clients, acks, idempotence, retries,
                max_in_flight, min_insync, replication_factor, consumers, shrink_runs, out, time_limit):
        """Generated fault schedules against a real cluster with real clients; histories judged
        against the clients' settings, broker traces against the model; failures shrunk."""
        from impl.rules import ALL_FIXES, GENERATIONS
        from kafkaverify.nemesis.explore import FAULT_CHOICES, default_workload, explore
        from traces.schedule import NEEDS_NET
        if generation not in GENERATIONS:
            raise InputError(f"unknown generation {generation!r} (one of {', '.join(GENERATIONS)})")
        bad = [w for w in without if w not in ALL_FIXES]
        if bad:
            raise InputError(f"unknown fix {bad[0]!r} (one of {', '.join(ALL_FIXES)})")
        fl = tuple(f.strip() for f in faults.split(",") if f.strip())
        unknown = [f for f in fl if f not in FAULT_CHOICES]
        if unknown or not fl:
            raise InputError(f"unknown fault {unknown[0] if unknown else faults!r} (choose from {', '.join(FAULT_CHOICES)})")
        rf = replication_factor or brokers
        if rf > brokers or min_insync > rf:
            raise InputError(f"need min-insync <= replication-factor <= brokers (got {min_insync}, {rf}, {brokers})")
        module = {"kafka-python": "kafka", "confluent-kafka": "confluent_kafka", "aiokafka": "aiokafka"}[CLIENT_NAMES[clients]]
        try:
            __import__(module)
        except ImportError:
            raise InputError(f"client {clients} is not installed (pip install {CLIENT_NAMES[clients]})") from None
        console = Console(width=160)
        net = _net_mode(console, any(f in NEEDS_NET for f in fl))
        w = default_workload(CLIENT_NAMES[clients], acks="all" if acks == "all" else int(acks), retries=retries,
                             idempotence=idempotence, max_in_flight=max_in_flight, min_insync=min_insync,
                             replication_factor=rf, consumers=consumers)
        outp = Path(out)
        outp.mkdir(parents=True, exist_ok=True)
        cmd = "kafkaverify " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        console.print(f"seed={seed} generation={generation} without={','.join(without) or '-'} brokers={brokers} "
                      f"schedules={schedules} faults={','.join(fl)} client={w['client']} acks={w['acks']} "
                      f"idempotence={w['idempotence']} retries={w['retries']} max_in_flight={w['max_in_flight']} "
                      f"min_insync={min_insync} rf={rf} network={'netns+nftables' if net else 'none'} out={outp}",
                      highlight=False)
        summ = explore(generation, brokers, schedules, seed, fl, w, outp, time_limit, without=tuple(without),
                       shrink_runs=shrink_runs, net=net,
                       progress=lambda i, s, r: console.print(_line(i, s, r), highlight=False, markup=False))
        _summary(console, summ, outp, cmd)
        if summ.failures:
            return exitcodes.VIOLATION
        if not summ.runs or summ.stopped or any(r.status != "valid" for _, r in summ.runs):
            return exitcodes.UNKNOWN          # something undecided, or the time limit cut the run short
        return exitcodes.VALID


def _summary(console: Console, summ, out: Path, cmd: str) -> None:
    t = Table(title=f"{len(summ.runs)} schedule runs in {summ.seconds:.0f} s" +
              (f" ({summ.stopped})" if summ.stopped else ""))
    for col in ("verdict", "runs", "anomalies", "permitted by settings"):
        t.add_column(col)
    by: dict[str, list] = {}
    for s, r in summ.runs:
        by.setdefault(r.status, []).append(r)
    for status in sorted(by):
        an: dict[str, int] = {}
        pm: dict[str, int] = {}
        for r in by[status]:
            for k, n in r.anomalies.items():
                an[k] = an.get(k, 0) + n
            if r.divergences:
                an["conformance"] = an.get("conformance", 0) + len(r.divergences)
            for k, n in r.permitted.items():
                pm[k] = pm.get(k, 0) + n
        t.add_row(status, str(len(by[status])), ", ".join(f"{k}: {n}" for k, n in sorted(an.items())),
                  ", ".join(f"{k}: {n}" for k, n in sorted(pm.items())))
    console.print(t)
    if summ.smallest is not None:
        s, r = summ.smallest
        console.print(f"[bold]failure[/bold] ({len(summ.failures)} failing run(s); smallest shown): "
                      f"{r.first_anomaly}", highlight=False)
        console.print(f"  shrunk schedule: {s.describe()}", highlight=False, markup=False)
        console.print(f"  schedule file:   {out / 'shrunk-schedule.json'}", highlight=False)
        console.print(f"  its run:         {r.out_dir} (history.jsonl, report.html, verdict.json, cluster/broker-*/trace-*.jsonl)",
                      highlight=False)
        console.print(f"  reproduce:       kafkaverify replay {shlex.quote(str(out / 'shrunk-schedule.json'))}",
                      highlight=False)
        console.print(f"  regenerate:      {cmd}", highlight=False, markup=False)
        _ask_model(console, s, r, out)


def _ask_model(console: Console, s, r, out: Path) -> None:
    """The shrunk schedule asked of the model (kafkaverify/nemesis/model_map.py), for the
    invariant the broker's divergence named if it named one; the answer and the model's story
    are saved next to the schedule."""
    import re
    from kafkaverify.nemesis.model_map import ask_model
    from spec import INVARIANT_NAMES
    named = [m for d in r.divergences for m in re.findall(r"\((\w+)\)", d["text"]) if m in INVARIANT_NAMES]
    try:
        a = ask_model(s, time_limit_s=60, invariants=tuple(named[:1]) or None)
    except ValueError as e:           # a generation or fix the model does not know
        console.print(f"  model:           not asked ({e})", highlight=False, markup=False)
        return
    text = [f"faults: {', '.join(f.describe() for f in a.faults) or 'none'}",
            f"no model counterpart: {'; '.join(a.unmapped) or 'none'}"]
    if a.status == "violation":
        head = f"reproduces on the model: {a.invariant} in {len(a.path)} steps ({a.message})"
        text += [head, *a.story()]
    elif a.status == "none":
        head = f"the model finds no violation with these faults ({a.states:,} states, exhausted)"
        text.append(head)
    else:
        head = f"the model's search hit its bound ({a.states:,} states, {a.seconds:.0f} s): unknown"
        text.append(head)
    (out / "shrunk-schedule.model.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    console.print(f"  model:           {head}; story in {out / 'shrunk-schedule.model.txt'}",
                  highlight=False, markup=False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m kafkaverify nemesis ...")
