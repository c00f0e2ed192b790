"""Differential test: random operation sequences run in lockstep on the embedded backend and on
real ZooKeeper; every result and every error class must agree (ZooKeeper is the oracle for
versions, NodeExists/NoNode/BadVersion/NotEmpty, makepath, ephemerals ending with a session)."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from impl import coord
from impl.coord import CoordError

pytestmark = [pytest.mark.timeout(120), pytest.mark.zookeeper]

NAMES = ["/a", "/a/b", "/a/b/c", "/b"]
VERSIONS = st.sampled_from([-1, 0, 1, 2])
DATA = st.sampled_from([b"", b"1", b"\x00\xff", b"leader=2"])


def _outcome(fn):
    try:
        return ("ok", fn())
    except CoordError as e:
        return ("err", type(e).__name__)


class Lockstep(RuleBasedStateMachine):
    urls: dict[str, str] = {}
    examples = itertools.count()

    def __init__(self):
        super().__init__()
        # A fresh subtree per example keeps examples independent on the shared servers.
        self.prefix = f"/ex{next(self.examples)}"
        self.clients = {name: coord.connect(url, session_timeout_ms=5000)
                        for name, url in self.urls.items()}

    def both(self, op):
        results = {name: _outcome(lambda: op(c)) for name, c in self.clients.items()}
        assert results["embedded"] == results["zookeeper"], results
        return results["embedded"]

    def p(self, name: str) -> str:
        return self.prefix + name

    @rule(name=st.sampled_from(NAMES), data=DATA, ephemeral=st.booleans(), makepath=st.booleans())
    def create(self, name, data, ephemeral, makepath):
        self.both(lambda c: c.create(self.p(name), data, ephemeral=ephemeral, makepath=makepath))

    @rule(name=st.sampled_from(NAMES), data=DATA, version=VERSIONS)
    def set(self, name, data, version):
        self.both(lambda c: c.set(self.p(name), data, version))

    @rule(name=st.sampled_from(NAMES), version=VERSIONS)
    def delete(self, name, version):
        self.both(lambda c: c.delete(self.p(name), version))

    @rule(name=st.sampled_from(NAMES))
    def increment(self, name):
        self.both(lambda c: c.increment(self.p(name)))

    @rule()
    def new_session(self):
        """End the session and open another: ephemerals must vanish on both."""
        for name, c in self.clients.items():
            c.close()
            self.clients[name] = coord.connect(self.urls[name], session_timeout_ms=5000)

    @invariant()
    def same_tree(self):
        # get() covers existence, data and version; children of the inner nodes cover the links.
        for name in NAMES:
            self.both(lambda c: c.get(self.p(name)))
        for path in (self.prefix, self.p("/a"), self.p("/a/b")):
            self.both(lambda c: c.get_children(path))

    def teardown(self):
        for c in self.clients.values():
            c.close()


def test_embedded_agrees_with_zookeeper(embedded_coord_url, zookeeper_url):
    Lockstep.urls = {"embedded": embedded_coord_url, "zookeeper": zookeeper_url}
    run_state_machine_as_test(Lockstep, settings=settings(
        max_examples=20, stateful_step_count=20, deadline=None, derandomize=True,
        suppress_health_check=list(HealthCheck)))
