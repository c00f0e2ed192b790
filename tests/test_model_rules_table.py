"""Every protocol rule of spec/rules.py pinned by the data-driven table tests/testdata/rules.txt
(one line per case, with the Kafka source it follows)."""
import ast
import re
from pathlib import Path

import pytest

from spec import initial, make_config, rules
from spec.state import FOLLOWER, LEADER

TABLE = Path(__file__).parent / "testdata" / "rules.txt"
_ARG = re.compile(r"(\w+)=")


def _broker(fields: dict, role):
    b = initial(make_config(brokers=3)).brokers[1]._replace(role=role, isr=0, pending=-1, pos=())
    return b._replace(**fields)


def _parse(line: str):
    rule, rest = line.split(None, 1)
    args_text, expected_text = rest.split("->", 1)
    expected_text = expected_text.split("#", 1)[0].strip()
    names = list(_ARG.finditer(args_text))
    args = {}
    for k, m in enumerate(names):
        end = names[k + 1].start() if k + 1 < len(names) else len(args_text)
        args[m.group(1)] = ast.literal_eval(args_text[m.end():end].strip())
    for k, v in list(args.items()):
        if k == "fixes":
            args[k] = frozenset(v)
        elif isinstance(v, dict):
            args[k] = _broker(v, LEADER if k == "leader" else FOLLOWER)
        elif isinstance(v, tuple) and v and all(isinstance(x, dict) for x in v):
            args[k] = tuple(_broker(x, FOLLOWER) for x in v)
    return rule, args, ast.literal_eval(expected_text)


def _cases():
    for n, line in enumerate(TABLE.read_text().splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            yield pytest.param(line, id=f"line{n}")


@pytest.mark.parametrize("line", list(_cases()))
def test_rule_table(line):
    rule, args, expected = _parse(line)
    assert getattr(rules, rule)(**args) == expected, line


def test_table_covers_every_rule():
    names = {line.split(None, 1)[0] for line in TABLE.read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")}
    public = {n for n, f in vars(rules).items() if callable(f) and not n.startswith("_")
              and f.__module__ == rules.__name__ and n != "popcount"}
    assert public <= names, f"rules without a table line: {sorted(public - names)}"
