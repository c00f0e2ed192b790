"""Model traces: counterexamples and simulations written in the traces/ format, and replay.

A model trace is a header (format version, generation, fixes, the full model config, search
bounds, seed; optionally `invariants`, the names the search was restricted to, and
`demonstrates`, the fix whose bug the trace shows), one "step" record per action with the state
summary after it, and a closing "verdict" naming the violated invariant (or null). Replay
re-executes the actions against the model (checking the recorded invariants, or all) and says,
step by step, where the trace is no longer possible.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from spec import Action, Config, ConfigError, Model, State, summary
from traces.trace import TraceError, dump, load, make_header


def write_trace(path: str | Path, cfg: Config, actions: list[Action], states: list[State],
                violation: tuple[str, str] | None, *, bounds: dict | None = None,
                seed: int | None = None, command: str | None = None,
                invariants: tuple[str, ...] | None = None, demonstrates: str | None = None,
                story: str | None = None) -> None:
    extra = {}
    if story:
        extra["story"] = story
    if invariants:
        extra["invariants"] = sorted(invariants)
    if demonstrates:
        extra["demonstrates"] = demonstrates
    header = make_header("model", generation=cfg.generation, fixes=sorted(cfg.fixes),
                         config=cfg.to_json(), bounds=bounds or {}, seed=seed, command=command,
                         **extra)
    records = [{"kind": "step", "i": i + 1, "action": a.to_json(), "text": a.describe(),
                "state": summary(s)} for i, (a, s) in enumerate(zip(actions, states))]
    records.append({"kind": "verdict", "violation": violation[0] if violation else None,
                    "text": violation[1] if violation else "no invariant violated"})
    dump(path, header, records)


# The command line's defaults with three or more brokers: the bounds at which breadth-first
# search plus swarm walks find every fix's bug of `current` within minutes (figures in
# BENCHMARKS.md, `python -m benchmarks.model --skip-exhaustive`). With two brokers the model's own (smaller) defaults
# hold, which `current` exhausts.
DEFAULTS_3 = {"records": 2, "crashes": 3, "pauses": 1, "elections": 3, "losses": 1}


# With --transactions: the replicated partition is __transaction_state on one broker (its
# fail-over is asked for with --brokers 2 --crashes 1 --elections 1), and the transactional
# bounds at which kip-966 exhausts in seconds while each removed fix's bug is found (figures in
# docs/model-checking.md).
TXN_DEFAULTS = {"brokers": 1, "min_isr": 1, "records": 0, "crashes": 0, "elections": 0,
                "losses": 0, "txn_partitions": 2, "txn_rounds": 2, "txn_timeouts": 1,
                "txn_dups": 1, "zombies": 1}


def cli_defaults(brokers: int | None, transactions: int = 0) -> dict:
    """Bounds the command line fills in when not given, for this many brokers (None: not given)
    and transactional.ids."""
    if transactions:
        out = dict(TXN_DEFAULTS)
        if brokers is not None and brokers >= 2:
            out["min_isr"] = 2 if brokers >= 3 else 1
        return out
    return dict(DEFAULTS_3) if (brokers or 2) >= 3 else {}


def config_args(cfg: Config) -> str:
    """The command-line options that reproduce `cfg` (defaults left out)."""
    from spec import GENERATIONS
    from spec.config import TXN_FIXES
    d = Config(**cli_defaults(cfg.brokers, cfg.transactions))
    parts = [f"--generation {cfg.generation}"]
    base = set(GENERATIONS[cfg.generation])
    if not cfg.producers:
        base.discard("idempotent-producer")     # a client fix is left out without its clients
    if not cfg.consumers:
        base.discard("group-generation-fencing")
    if not cfg.transactions:
        base -= TXN_FIXES
    for f in sorted(base - cfg.fixes):
        parts.append(f"--without {f}")
    for name in ("brokers", "records", "crashes", "pauses", "elections", "losses", "min_isr", "acks",
                 "producers", "max_in_flight", "retries", "consumers", "commit", "transactions",
                 "txn_partitions", "isolation", "txn_rounds", "txn_timeouts", "txn_dups", "zombies"):
        if getattr(cfg, name) != getattr(d, name):
            parts.append(f"--{name.replace('_', '-')} {getattr(cfg, name)}")
    for flag in ("unclean", "unflushed_loss", "disk_loss", "consume_transform_produce"):
        if getattr(cfg, flag):
            parts.append("--" + flag.replace("_", "-"))
    return " ".join(parts)


@dataclass
class ReplayResult:
    steps: int
    violation: tuple[str, str] | None       # what the model finds now
    recorded: str | None                    # what the trace says
    problem: str | None = None              # set when the trace is no longer possible / matching
    line: int = 0

    @property
    def reproduced(self) -> bool:
        return self.problem is None and self.violation is not None and self.violation[0] == self.recorded


def replay(path: str | Path, *, rewrite: bool = False, fixes: frozenset | None = None) -> ReplayResult:
    """Re-execute a model trace. Raises TraceError for a file that is not a valid trace.
    `fixes` replaces the recorded set of fixes (to replay a counterexample with its fix on)."""
    from spec import INVARIANT_NAMES
    from spec.invariants import selected, violated
    tr = load(path)
    p = str(path)
    if tr.header.get("source") != "model":
        raise TraceError(p, 1, f"a {tr.header.get('source')!r} trace cannot be replayed against the model")
    try:
        cfg = Config.from_json(tr.header.get("config") or {})
    except (ConfigError, TypeError) as e:
        raise TraceError(p, 1, f"bad model config in header: {e}") from None
    if fixes is not None:
        cfg = replace(cfg, fixes=frozenset(fixes))
    only = tr.header.get("invariants")
    if only is not None and (not isinstance(only, list) or not set(only) <= set(INVARIANT_NAMES) | {"MonotonicEpochs"}):
        raise TraceError(p, 1, f"bad 'invariants' in header: {only!r}")
    model = Model(cfg)
    invs = model.invariants if only is None else selected(cfg, tuple(only))
    check_steps = only is None or "MonotonicEpochs" in only
    s = model.initial()
    verdicts = [r for r in tr.records if r["kind"] == "verdict"]
    recorded = verdicts[-1].get("violation") if verdicts else None
    steps = [(r, ln) for r, ln in zip(tr.records, tr.lines) if r["kind"] == "step"]
    found = violated(cfg, s, invs)
    actions, states = [], []
    for n, (rec, ln) in enumerate(steps, 1):
        if rec["i"] != n:
            raise TraceError(p, ln, f"step numbered {rec['i']}, expected {n}")
        try:
            a = Action.from_json(rec["action"])
        except ValueError as e:
            raise TraceError(p, ln, f"step {n}: {e}") from None
        if a not in model.enabled(s):
            return ReplayResult(n - 1, found, recorded,
                                f"step {n} is no longer possible: '{a.describe()}' is not enabled "
                                f"in the state reached by the steps before it", ln)
        t = model.step(s, a)
        found = (model.step_violation(s, t) if check_steps else None) or violated(cfg, t, invs)
        s = t
        actions.append(a)
        states.append(s)
        if not rewrite and "state" in rec and rec["state"] != summary(s):
            return ReplayResult(n, found, recorded,
                                f"step {n} leads to a different state than recorded "
                                f"(re-record with --rewrite if the model changed on purpose)", ln)
        if found and n < len(steps):
            return ReplayResult(n, found, recorded,
                                f"the model finds {found[0]} already at step {n} of {len(steps)}", ln)
    if rewrite:
        h = tr.header
        write_trace(path, cfg, actions, states, found, bounds=h.get("bounds"), seed=h.get("seed"),
                    command=h.get("command"), invariants=h.get("invariants"),
                    demonstrates=h.get("demonstrates"), story=h.get("story"))
    return ReplayResult(len(steps), found, recorded)
