"""The documentation stays true: the front door and the benchmark summary stay short, every
relative link resolves, every `kafkaverify ...` command in a fenced sh block of README.md and
docs/*.md parses against the real CLI, and the quick ones run as written.

A command marked with a trailing comment that starts with `exit N` (`# exit 1`, `# exit 0:
...`) is run through `python -m kafkaverify` in a temporary directory, the commands of one page
in the order they appear there, and must exit with N. Only commands that take seconds carry the
mark; the page says what a longer one prints in other words ("proved (exit 0), ~30 s").
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from kafkaverify.cli import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDES = sorted((ROOT / "docs").glob("*.md"))
COMMAND_PAGES = [README, *GUIDES]
LINK_PAGES = [README, ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]

FENCE = re.compile(r"^```(\w*)\s*$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
EXIT_MARK = re.compile(r"^exit (\d)\b")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


# --- (a) sizes and links ---------------------------------------------------------------------

def test_readme_is_a_front_door():
    assert len(README.read_text().splitlines()) <= 200


def test_benchmarks_is_a_summary():
    assert len((ROOT / "BENCHMARKS.md").read_text().splitlines()) <= 300


def test_every_guide_the_readme_lists_exists():
    text = README.read_text()
    section = text[text.index("## Guides"):]
    targets = [t for t in LINK.findall(section) if "://" not in t]
    assert len(targets) >= 10, targets
    for t in targets:
        assert (README.parent / t.split("#")[0]).exists(), f"README's guide table links {t}, which does not exist"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    s = re.sub(r"[`*_]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    out, fenced = set(), False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def links(page: Path) -> list[str]:
    """Relative links outside fenced blocks."""
    found, fenced = [], False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            found += [t for t in LINK.findall(line) if not re.match(r"^[a-z]+:", t)]
    return found


@pytest.mark.parametrize("page", LINK_PAGES, ids=rel)
def test_relative_links_resolve(page):
    for target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{rel(page)} links {target}: no such file"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{rel(page)} links {target}: no such heading"


REPO_PATH = re.compile(
    r"`((?:spec|impl|checkers|traces|kafkaverify|tests|benchmarks|docs|examples)/[\w./*-]*[\w*/])")


@pytest.mark.parametrize("page", LINK_PAGES, ids=rel)
def test_every_repository_path_a_page_names_exists(page):
    """A file or folder of the repository named in backticks (`impl/rules.py`, `traces/corpus/`)
    exists, and a pattern (`traces/corpus/model-*.jsonl`) matches a file: a guide naming a moved
    or deleted module says what is no longer true."""
    def exists(p):
        return any(ROOT.glob(p)) if "*" in p else (ROOT / p).exists()
    missing = sorted({p for p in REPO_PATH.findall(page.read_text()) if not exists(p)})
    assert not missing, f"{rel(page)} names paths that do not exist: {missing}"


# --- (b) every documented command parses ------------------------------------------------------

def split_comment(line: str) -> tuple[str, str]:
    """A shell line's command and its trailing comment: a `#` outside quotes, at a word's start."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i + 1:].strip()
    return line, ""


def sh_commands(page: Path) -> list[tuple[int, str, str]]:
    """(line, command, trailing comment) for every line of the page's fenced sh blocks, with
    backslash continuations joined; comment-only lines are skipped."""
    out, lang, pending, start = [], None, "", 0
    for n, line in enumerate(page.read_text().splitlines(), 1):
        m = FENCE.match(line)
        if m:
            lang = (m.group(1) or "text") if lang is None else None
            continue
        if lang not in ("sh", "bash", "shell"):
            continue
        if not pending:
            start = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole, pending = pending + line, ""
        command, comment = split_comment(whole)
        if command.strip():
            out.append((start, shlex.join(shlex.split(command)), comment))
    return out


def kafkaverify_args(command: str) -> list[str] | None:
    """The arguments after `kafkaverify`, or None when the line runs something else."""
    tokens = shlex.split(command)
    while tokens and ENV_ASSIGNMENT.match(tokens[0]):
        tokens = tokens[1:]
    if not tokens or tokens[0] != "kafkaverify":
        return None
    return tokens[1:]


DOCUMENTED = [(page, n, cmd, comment) for page in COMMAND_PAGES for n, cmd, comment in sh_commands(page)
              if kafkaverify_args(cmd) is not None]


def test_the_pages_document_commands():
    assert len(DOCUMENTED) >= 40
    assert {rel(p) for p, *_ in DOCUMENTED} >= {"README.md", "docs/ci.md", "docs/model-checking.md",
                                                 "docs/proofs.md", "docs/histories.md", "docs/mining.md",
                                                 "docs/broker.md", "docs/nemesis.md", "docs/audit.md"}


def resolve(args: list[str]) -> tuple[click.Command, str, list[str]]:
    """Walk the click groups down to the subcommand, as the CLI would."""
    cmd, name = cli, "kafkaverify"
    while isinstance(cmd, click.Group):
        assert args, f"`{name}` needs a subcommand"
        sub = cmd.get_command(click.Context(cmd, info_name=name), args[0])
        assert sub is not None, f"`{name}` has no subcommand {args[0]!r}"
        cmd, name, args = sub, args[0], args[1:]
    return cmd, name, args


@pytest.mark.parametrize("page,line,command,comment", DOCUMENTED,
                         ids=[f"{rel(p)}:{n}" for p, n, *_ in DOCUMENTED])
def test_documented_command_parses(page, line, command, comment, monkeypatch):
    cmd, name, args = resolve(kafkaverify_args(command))
    # The pages name example paths (a data directory, an input file) that need not exist here:
    # parse the options, not the file system.
    for p in cmd.params:
        if isinstance(p.type, click.Path):
            monkeypatch.setattr(p.type, "exists", False)
    try:
        cmd.make_context(name, list(args))
    except click.ClickException as e:
        pytest.fail(f"{rel(page)}:{line}: `{command}` does not parse: {e.format_message()}")


# --- (c) the quick commands run as written -----------------------------------------------------

def marked(page: Path) -> list[tuple[int, str, int]]:
    out = []
    for n, cmd, comment in sh_commands(page):
        m = EXIT_MARK.match(comment)
        if m and kafkaverify_args(cmd) is not None:
            out.append((n, cmd, int(m.group(1))))
    return out


RUNNABLE = [p for p in COMMAND_PAGES if marked(p)]


def test_quick_commands_are_marked():
    assert {rel(p) for p in RUNNABLE} >= {"README.md", "docs/model-checking.md", "docs/histories.md"}


@pytest.mark.parametrize("page", RUNNABLE, ids=rel)
def test_marked_commands_exit_as_documented(page, tmp_path):
    # Pages name the golden corpus by its path from the repository's root.
    (tmp_path / "traces").symlink_to(ROOT / "traces")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for line, command, expected in marked(page):
        args = kafkaverify_args(command)
        r = subprocess.run([sys.executable, "-m", "kafkaverify", *args], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == expected, (
            f"{rel(page)}:{line}: `{command}` exited {r.returncode}, the page says {expected}\n"
            f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}")


# --- (d) docs/rules.md names what exists -------------------------------------------------------

RULES_PAGE = ROOT / "docs" / "rules.md"
DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)`")
TEST_NAME = re.compile(r"`(test_\w+)`")
ROOMS = ("spec", "impl", "checkers.prove", "checkers", "kafkaverify")


def _room_modules():
    import importlib
    import pkgutil
    found = {}
    for room in ("spec", "impl", "checkers"):
        package = importlib.import_module(room)
        found[room] = package
        for info in pkgutil.walk_packages(package.__path__, room + "."):
            if info.name.endswith(("__main__", "spark_job")):
                continue
            found[info.name] = importlib.import_module(info.name)
    return found


def _resolves(dotted: str, modules: dict) -> bool:
    head, *rest = dotted.split(".")
    owners = [modules[f"{room}.{head}"] for room in ("spec", "impl", "impl.storage", "checkers",
                                                       "checkers.prove", "checkers.prove.encoding")
              if f"{room}.{head}" in modules]
    owners += [getattr(m, head) for m in modules.values()
               if isinstance(getattr(m, head, None), type)]
    for owner in owners:
        obj = owner
        for name in rest:
            obj = getattr(obj, name, None)
            if obj is None:
                break
        else:
            return True
    return False


def test_every_function_rules_md_names_exists():
    """Each `module.function` or `Class.method` in the rule index names something the model, the
    broker or the proofs define, and each test it names is a test of tests/: a rename that leaves
    the index behind fails here."""
    text = RULES_PAGE.read_text()
    modules = _room_modules()
    names = sorted({d for d in DOTTED.findall(text) if not d.endswith((".py", ".jsonl", ".txt", ".md"))})
    assert len(names) >= 30, names
    missing = [d for d in names if not _resolves(d, modules)]
    assert not missing, f"docs/rules.md names what does not exist: {missing}"
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    unknown = sorted({t for t in TEST_NAME.findall(text) if f"def {t}(" not in tests})
    assert not unknown, f"docs/rules.md names tests that do not exist: {unknown}"
