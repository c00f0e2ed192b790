"""Whether a nemesis or audit run gets real network faults: a private network namespace with
nftables (impl/netfault.py), entered by re-executing the command under `unshare -n`. Shared by
`kafkaverify nemesis`, `kafkaverify replay SCHEDULE` and `kafkaverify audit-ordering`."""
from __future__ import annotations

import sys

from rich.console import Console

from impl.netfault import NetError, available, enter_private_netns, in_private_netns
from kafkaverify.exitcodes import InputError


def net_mode(console: Console, needs: bool) -> bool:
    """Enters a private network namespace when partitions are wanted (re-executes this command
    under `unshare -n`); False, with the reason printed, when real partitions are unavailable."""
    if not needs:
        return in_private_netns()
    if in_private_netns():
        return True
    why = available()
    if why:
        console.print(f"network faults unavailable ({why}): running without partitions / session expiry",
                      highlight=False)
        return False
    try:
        enter_private_netns(["-m", "kafkaverify", *sys.argv[1:]])
    except NetError as e:
        raise InputError(str(e)) from None
    return True       # not reached: exec
