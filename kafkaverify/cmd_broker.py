"""CLI commands of the broker area."""
import click


def register(group: click.Group) -> None:
    pass
