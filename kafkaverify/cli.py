"""The `kafkaverify` command line (the console script `kafkaverify = kafkaverify.cli:main`, and
`python -m kafkaverify`). Each area registers its commands from its own module under
kafkaverify/commands/, so the model, history and broker commands evolve independently. Exit
codes: kafkaverify.exitcodes."""
from __future__ import annotations

import importlib
import sys

import click

from kafkaverify import exitcodes

# Modules that contribute commands; each defines `register(group: click.Group)`.
COMMAND_MODULES = (
    "kafkaverify.commands.model",
    "kafkaverify.commands.history",
    "kafkaverify.commands.broker",
    "kafkaverify.commands.mine",
    "kafkaverify.commands.nemesis",
    "kafkaverify.commands.prove",
    "kafkaverify.commands.audit",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kafkaverify")
def cli() -> None:
    """Verification suite for Kafka-style replicated logs."""


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(cli)


def main(argv: list[str] | None = None) -> None:
    """Entry point: click usage errors exit 3 (not click's 2, which means 'unknown' here)."""
    try:
        rv = cli.main(args=argv, prog_name="kafkaverify", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(exitcodes.USAGE)
    except click.ClickException as e:
        e.show()
        sys.exit(exitcodes.USAGE)
    except exitcodes.InputError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(exitcodes.USAGE)
    sys.exit(rv if isinstance(rv, int) else 0)
