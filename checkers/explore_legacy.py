"""The former name of checkers/explore_reference.py (the reference explorer), kept so that
importers not yet renamed keep working; new code imports checkers.explore_reference."""
from checkers.explore_reference import SearchResult, explore_reference, plain_bfs, reachable

explore_legacy = explore_reference

__all__ = ["SearchResult", "explore_legacy", "explore_reference", "plain_bfs", "reachable"]
