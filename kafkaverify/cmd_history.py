"""CLI commands of the history area."""
import click


def register(group: click.Group) -> None:
    pass
