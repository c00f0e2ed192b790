"""CLI commands of the model area: explore, simulate, replay, check."""
import click


def register(group: click.Group) -> None:
    pass
