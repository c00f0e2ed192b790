"""The vocabulary of the symbolic steps, shared by the replication encoding
(checkers/prove/encoding/) and the producers' part (checkers/prove/producers.py): an action
instance (`Inst`) and one branching of a step's outcomes (`Branching`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Inst:
    """One action instance of the encoding."""
    kind: str
    b: int
    arg: object          # spec's argument, or a message slot (dst, k) for Deliver/Lose
    guard: Callable
    step: Callable
    via: int = -1        # the leader a follower action assumes (the guard pins it)


class Branching(list):
    """One branching of a step, [(constant, condition)] in order, as Encoding.succ_cases
    records it; `when`: literals (of earlier branchings' constants) under which it matters."""
    when: tuple = ()
