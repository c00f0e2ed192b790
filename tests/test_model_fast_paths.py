"""The model's speed paths against the obvious code they stand for, on every reachable state of
small bounds (no symmetry reduction: every renaming is there): the state's one-pass `_replace`
and pickling, the acting leader as a tuple, the early return of `normalize_versions`, and the
descending signature order of the symmetry reduction. tests/test_model_compiled.py runs whole
searches on both builds; this file runs on whichever build the session uses."""
import pickle

import pytest

from checkers.explore_reference import plain_bfs
from spec import Model, make_config
from spec.invariants import _acting_leaders, step_violation
from spec.model import enabled, normalize_versions, step
from spec.state import LEADER, Broker, State, Zk
from spec.symmetry import _perms, canonical, permute

CFG = make_config("current", brokers=2, records=1, crashes=1, losses=1, elections=1)


@pytest.fixture(scope="module")
def reachable():
    states = plain_bfs(Model(CFG), 12)
    assert len(states) > 2000
    return sorted(states)


def _parts(s):
    return [s, s.zk, *s.brokers]


def test_replace_equals_rebuilding_every_field(reachable):
    marker = ("marker",)
    for s in reachable[::7]:
        for x in _parts(s):
            cls = type(x)
            for k, name in enumerate(cls._fields):
                got = x._replace(**{name: marker})
                want = cls(*(marker if j == k else v for j, v in enumerate(x)))
                assert type(got) is cls and got == want and got[k] is marker
            two = x._replace(**{cls._fields[0]: 1, cls._fields[-1]: 2})
            assert two[0] == 1 and two[-1] == 2 and two[1:-1] == x[1:-1]
    with pytest.raises(ValueError, match="unexpected field names"):
        reachable[0].brokers[0]._replace(nope=1)


def test_pickled_states_come_back_equal_with_their_types(reachable):
    back = pickle.loads(pickle.dumps(reachable, pickle.HIGHEST_PROTOCOL))
    assert back == reachable
    for s in back[::11]:
        assert type(s) is State and type(s.zk) is Zk and all(type(b) is Broker for b in s.brokers)


def _acting_leaders_oracle(s):
    zk = s.zk
    return [(i, b) for i, b in enumerate(s.brokers)
            if b.alive and b.role == LEADER and i == zk.leader and b.le == zk.le]


def test_acting_leader_is_the_enumeration_of_every_broker(reachable):
    some = 0
    for s in reachable:
        got = list(_acting_leaders(s))
        assert got == _acting_leaders_oracle(s)
        some += bool(got)
    assert 0 < some < len(reachable)


def _normalize_oracle(s):
    vals = {s.zk.ver}
    for b in s.brokers:
        vals.add(b.ver)
        if b.resp >= 0:
            vals.add(b.resp)
        if b.ctl_cache:
            vals.add(b.ctl_cache[3])
    for m in s.msgs:
        vals.add(m[5])
    rank = {v: k for k, v in enumerate(sorted(vals))}
    brokers = tuple(b._replace(ver=rank[b.ver], ctl_cache=b.ctl_cache[:3] + (rank[b.ctl_cache[3]],)
                               + b.ctl_cache[4:] if b.ctl_cache else (),
                               resp=rank[b.resp] if b.resp >= 0 else b.resp) for b in s.brokers)
    msgs = tuple(sorted(m[:5] + (rank[m[5]],) for m in s.msgs))
    return s._replace(brokers=brokers, msgs=msgs, zk=s.zk._replace(ver=rank[s.zk.ver]))


def _shift_versions(s, d):
    brokers = tuple(b._replace(ver=b.ver + d, resp=b.resp + d if b.resp >= 0 else b.resp,
                               ctl_cache=b.ctl_cache[:3] + (b.ctl_cache[3] + d,) + b.ctl_cache[4:]
                               if b.ctl_cache else ()) for b in s.brokers)
    msgs = tuple(m[:5] + (m[5] + d,) for m in s.msgs)
    return s._replace(brokers=brokers, msgs=msgs, zk=s.zk._replace(ver=s.zk.ver + d))


def test_normalize_versions_equals_renumbering_always(reachable):
    for s in reachable:
        assert normalize_versions(s) == _normalize_oracle(s)
        shifted = _shift_versions(s, 3)             # never dense: the renumbering path
        assert normalize_versions(shifted) == _normalize_oracle(shifted) == _normalize_oracle(s)


def test_canonical_form_is_one_per_renaming_class(reachable):
    """Every renaming of a reachable state has its canonical form, and distinct classes keep
    distinct forms; a state whose broker 0 leads (a leader sorts first) is its own form."""
    seen = {}
    for s in reachable:
        c = canonical(s)
        for p, mt, inv in _perms(2):
            q = permute(s, p, mt, inv)
            q = State(tuple(Broker(*b) for b in q[0]), Zk(*q[1]), *q[2:])
            assert canonical(q) == c
        seen.setdefault(c, set()).add(s)
    assert all(len(group) <= 2 for group in seen.values())
    init = Model(CFG).initial()
    assert canonical(init) is init
    led_by_0 = [s for s in reachable if s.brokers[0].alive and s.brokers[0].role == LEADER
                and not s.brokers[1].alive]
    assert led_by_0 and all(canonical(s) is s for s in led_by_0)


def test_monotonic_epochs_judges_every_step_as_before(reachable):
    """The shortcut for brokers a step left alone: on every transition, the verdict is the one
    of the comparison of every broker."""
    def oracle(s, t):
        for i, (a, b) in enumerate(zip(s.brokers, t.brokers)):
            if a.alive and b.alive and a.gen == b.gen and (b.le < a.le or b.ce < a.ce):
                return i
        return None
    n = 0
    for s in reachable[::3]:
        for a in enabled(CFG, s):
            t = step(CFG, s, a)
            v = step_violation(CFG, s, t)
            assert (v is None) == (oracle(s, t) is None)
            n += 1
    assert n > 1000
