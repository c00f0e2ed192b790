"""A counterexample to induction says which clauses of a lemma it breaks, and its story shows
what the lemmas speak of beyond the explorer's one-line summaries: each leader's follower
positions, the epochs led so far and every LeaderAndIsr request in flight with its slot (the
slot a clause's name gives, as in `b2 m1`)."""
import re

from checkers.prove import induction
from checkers.prove.differential import draw_states
from checkers.prove.encoding import Encoding
from checkers.prove.strengthen import NEEDS, zombie_parts
from kafkaverify.runs.prove import prove_config
from spec import Model, make_config
from spec.state import LEADER, bits, mask_str


def _request_lines(enc, d):
    out = []
    for dst in range(enc.n):
        for k in range(enc.K):
            if d[("m", dst, k, "v")]:
                isr = sum(1 << j for j in range(enc.n) if d[("m", dst, k, "isr", j)])
                out.append(f"in flight to b{dst} (m{k}): LeaderAndIsr(controller epoch "
                           f"{d[('m', dst, k, 'ce')]}, leader {d[('m', dst, k, 'leader')]}, epoch "
                           f"{d[('m', dst, k, 'le')]}, isr {mask_str(isr)}, version "
                           f"{d[('m', dst, k, 'ver')]})")
    return out


def test_a_cti_names_the_zombie_clauses_it_breaks():
    """StrongIsr with one pause at 2 replicas without HwExposed: the CTI breaks Zombie, and the
    note names exactly the first clauses the post-state breaks (the pre-state breaks none)."""
    cfg = prove_config("current", (), 2, 2, pauses=1)
    lemmas = tuple(x for x in NEEDS["StrongIsr"] if x != "HwExposed")
    r = induction.prove(Model(cfg), "StrongIsr", strengthening=lemmas, time_limit=300)
    assert r.verdict == "unknown" and r.cti, (r.verdict, r.failing)
    enc, pre, post = induction.LAST
    assert not [tag for tag, c in zombie_parts(enc, pre) if not c]
    broken = [tag for tag, c in zombie_parts(enc, post) if not c]
    m = re.search(r"Zombie \(([^)]*)\)", r.failing)
    assert broken and m, r.failing
    named = m.group(1).split("; ")
    assert named[:3] == broken[:3], (named, broken)
    assert named[3:] == ([f"{len(broken) - 3} more"] if len(broken) > 3 else [])
    for line in _request_lines(enc, pre) + _request_lines(enc, post):
        assert line in r.cti, (line, r.cti)


def test_the_story_lists_positions_epochs_led_and_requests_in_flight():
    """On reachable 3-broker states: every leader's positions, the epochs led and each request
    in flight (by slot) appear in the story, and nothing else is added."""
    cfg = make_config("current", brokers=3)
    enc = Encoding(cfg)
    seen_requests = seen_positions = 0
    for st in draw_states(Model(cfg), 7, 400, walk_length=60):
        d = enc.from_state(st)
        story = induction.path_story(enc, [d], [])
        want = _request_lines(enc, d)
        seen_requests += len(want)
        for i, b in enumerate(st.brokers):
            pos = [f"b{x} at {p}" for x, p in enumerate(b.pos) if x != i and p >= 0]
            if b.alive and b.role == LEADER and pos:
                want.append(f"b{i} positions: " + ", ".join(pos))
                seen_positions += 1
        led = [f"{e} by " + "/".join(f"b{x}" for x in bits(m_))
               for e, m_ in enumerate(st.epoch_leaders) if m_]
        if led:
            want.append("epochs led: " + ", ".join(led))
        got = [x.strip() for x in story.splitlines()[3 + len(st.brokers):]]
        assert sorted(got) == sorted(want), (got, want)
    assert seen_requests > 50 and seen_positions > 50, (seen_requests, seen_positions)
