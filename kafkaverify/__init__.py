"""kafkaverify: the CLI, the suite, the reports and the pytest plugin.

    cli.py, __main__.py  the `kafkaverify` command (console script and `python -m kafkaverify`)
    exitcodes.py         the exit codes every command shares
    commands/            one module of click commands per area: they parse options and call
    runs/                what the model, proof, history, mining and broker commands do
    suite/               `kafkaverify check`: its stages, their budgets, the run
    reports/             a counterexample as a story; JUnit XML, JSON and HTML for CI
    plugin/, pytest_plugin.py   the pytest plugin (entry point `pytest11`) and its parts
    nemesis/             fault schedules on the real cluster; audit/  the ordering audit
    groupclient.py       one consumer-group member as its own process
"""
import os

__version__ = "0.1.0"

# polars' allocator (jemalloc, configured by _RJEM_MALLOC_CONF when it starts: so here, before
# anything imports polars) serves allocations of 8 MiB and more, i.e. every column of 10^6
# rows, from an arena that hands freed pages back to the kernel at once; the next column then
# faults in fresh zeroed pages. At 10^6 history operations that was ~375,000 page faults and
# ~40% of check-history's CPU time on one core. Without that arena the pages are reused
# (jemalloc's usual decay): ~30% fewer faults, ~15% less CPU and no higher peak RSS
# (docs/benchmarks/histories.md, check-history end to end). Freed pages are kept for up to
# 60 s instead of jemalloc's 10 s before they go back to the kernel: a chunked check of 10^7
# operations (about 30 CPU-seconds) otherwise handed back and faulted in again some 10 GiB of
# pages, ~2.5 million faults and a quarter of its CPU time; with 60 s, ~0.6 million faults and
# a peak of ~1.1 instead of ~1.0 GiB (fifth round). A setting the user made wins.
ALLOCATOR_TUNED = "_RJEM_MALLOC_CONF" not in os.environ     # set here, not by the user
os.environ.setdefault("_RJEM_MALLOC_CONF", "oversize_threshold:0,dirty_decay_ms:60000")
