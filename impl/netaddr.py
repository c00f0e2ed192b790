"""This process's own network address, for clusters whose nodes each have one (a private network
namespace where every node owns an address in 127.0.0.0/8, so that a partition is an nftables
rule on addresses: impl/netfault.py). Every outgoing connection of the broker and its
coordination client binds to it; None (the default) lets the kernel choose, as before."""
from __future__ import annotations

_SOURCE: str | None = None


def set_source(host: str | None) -> None:
    global _SOURCE
    _SOURCE = host or None


def source_address() -> tuple[str, int] | None:
    """For socket.create_connection(source_address=...) and asyncio's local_addr=..."""
    return (_SOURCE, 0) if _SOURCE else None
