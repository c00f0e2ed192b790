"""Model traces: counterexamples and simulations written in the traces/ format, and replay.

A model trace is a header (format version, generation, fixes, the full model config, search
bounds, seed), one "step" record per action with the state summary after it, and a closing
"verdict" naming the violated invariant (or null). Replay re-executes the actions against the
model and says, step by step, where the trace is no longer possible.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spec import Action, Config, ConfigError, Model, State, summary
from traces.trace import TraceError, dump, load, make_header


def write_trace(path: str | Path, cfg: Config, actions: list[Action], states: list[State],
                violation: tuple[str, str] | None, *, bounds: dict | None = None,
                seed: int | None = None, command: str | None = None) -> None:
    header = make_header("model", generation=cfg.generation, fixes=sorted(cfg.fixes),
                         config=cfg.to_json(), bounds=bounds or {}, seed=seed, command=command)
    records = [{"kind": "step", "i": i + 1, "action": a.to_json(), "text": a.describe(),
                "state": summary(s)} for i, (a, s) in enumerate(zip(actions, states))]
    records.append({"kind": "verdict", "violation": violation[0] if violation else None,
                    "text": violation[1] if violation else "no invariant violated"})
    dump(path, header, records)


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


def replay(path: str | Path, *, rewrite: bool = False) -> ReplayResult:
    """Re-execute a model trace. Raises TraceError for a file that is not a valid trace."""
    tr = load(path)
    p = str(path)
    if tr.header.get("source") != "model":
        raise TraceError(p, 1, f"a {tr.header.get('source')!r} trace cannot be replayed against the model")
    try:
        cfg = Config.from_json(tr.header.get("config") or {})
    except (ConfigError, TypeError) as e:
        raise TraceError(p, 1, f"bad model config in header: {e}") from None
    model = Model(cfg)
    s = model.initial()
    verdicts = [r for r in tr.records if r["kind"] == "verdict"]
    recorded = verdicts[-1].get("violation") if verdicts else None
    steps = [(r, ln) for r, ln in zip(tr.records, tr.lines) if r["kind"] == "step"]
    found = model.violation(s)
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
        found = model.step_violation(s, t) or model.violation(t)
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
                    command=h.get("command"))
    return ReplayResult(len(steps), found, recorded)
