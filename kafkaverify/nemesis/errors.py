"""How the real-broker harness reports its own failures: a run or a stage whose harness fails (a
fault command, a client timeout, a broker that does not start) is undecided, with the cause as
one line of text (kafkaverify/nemesis/runner.py, stage.py; kafkaverify/suite/)."""
from __future__ import annotations


def error_text(e: BaseException) -> str:
    """`Type: message` of an exception, on one line (kafka-python's errors already name their
    type in their message: not twice)."""
    lines = str(e).strip().splitlines()
    text = lines[0] if lines else ""
    name = type(e).__name__
    if text.startswith(f"{name}: ") or text == name:
        text = text[len(name) + 2:]
    return f"{name}: {text}" if text else name


class HarnessError(Exception):
    """The harness could not do what the schedule asks (a fault command failed): the run is
    undecided, with this as its reason."""
