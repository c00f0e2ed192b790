"""A model counterexample as a numbered story (STYLE 11: one trace, many views): each step in
one line, then the coordination store and every broker after it. Shared by the model commands,
the z3 refutations, the suite's CI reports and the audit."""
from __future__ import annotations

import click

from spec.state import summary


def story_lines(actions, states, invariant: str, message: str) -> list[str]:
    """A counterexample as a numbered story: each step, then the store and every broker."""
    out = [f"VIOLATION of {invariant}: {message}", f"counterexample ({len(actions)} steps):"]
    for i, (a, s) in enumerate(zip(actions, states), 1):
        out.append(f"  {i:>3}. {a.describe()}")
        sm = summary(s)
        out += [f"         {line}" for line in [sm["zk"]] + sm["brokers"] + sm.get("clients", [])]
    return out


def print_story(actions, states, invariant: str, message: str) -> None:
    for line in story_lines(actions, states, invariant, message):
        click.echo(line)
