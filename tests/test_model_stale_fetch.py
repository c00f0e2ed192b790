"""A fetch response sent before a truncation must not be applied after it. The network may
deliver a Fetch response late: the model keeps a follower's in-flight response across a
LeaderAndIsr, and drops it when the follower becomes follower with a truncation due
(spec/model.py, Deliver). This test shows what that rule prevents: on three brokers, follower
b1's response from leader b0 (epoch 0, r0 at offset 0) is still in flight while b0 dies, b2 leads
and writes r1 at offset 0, b0 comes back, truncates r0 away, takes r1, and leads again. Applied
after b1's truncation, the stale response puts r0 where the leader has r1, and the leader's HW
passes it: an ISR member that b0 counts as holding r1 holds r0 there (StrongIsr; r1 is then on
fewer than min.insync.replicas replicas). The model with the rule stops that schedule at the
stale response, which it has dropped."""
from __future__ import annotations

from checkers.golden import run_script
from spec import Model, make_config
from spec.state import FOLLOWER
from spec.updates import replace_at

STALE_RESPONSE = 23          # the script's step (from 1) that applies b1's stale response
SCRIPT = [
    ("Produce", 0, None),                 # r0@0 on b0
    ("FetchRequest", 1, None),            # b1's response (b0, epoch 0, offset 0, [r0@0]) in flight
    ("Crash", 0, 0),
    ("ControllerReact", 2, 2),            # b2 leads epoch 1
    ("Deliver", 2, None),
    ("Deliver", 1, None),                 # b1 follows b2 with a truncation due
    ("Produce", 2, None),                 # r1@1 at offset 0 on b2
    ("Restart", 0, None),
    ("ControllerReact", 2, 2),
    ("Deliver", 0, None),
    ("Truncate", 0, None),                # b0 cuts r0 (epoch 0 ends at 0 on b2)
    ("FetchRequest", 0, None),
    ("FetchResponse", 0, None),           # b0 holds r1@1
    ("FetchRequest", 0, None),
    ("ControllerAlterIsr", 2, 2),         # b0 back in the ISR
    ("AlterIsrResponse", 2, None),
    ("Crash", 2, 0),
    ("ControllerElect", 0, None),
    ("ControllerReact", 0, 0),            # b0 leads epoch 2
    ("Deliver", 0, None),
    ("Deliver", 1, None),                 # b1 follows b0 with a truncation due
    ("Truncate", 1, None),
    ("FetchResponse", 1, None),           # the response b0 sent in epoch 0, before its truncation
    ("FetchRequest", 1, None),            # b1 reports offset 1: b0's HW passes offset 0
]
assert SCRIPT[STALE_RESPONSE - 1][:2] == ("FetchResponse", 1)


class KeepsStaleFetch(Model):
    """The model without the rule: a follower keeps its in-flight response when it becomes
    follower with a truncation due."""

    def step(self, s, a):
        t = super().step(s, a)
        b = a.b
        if (a.kind == "Deliver" and s.brokers[b].fetch and not t.brokers[b].fetch
                and t.brokers[b].role == FOLLOWER and t.brokers[b].trunc):
            t = t._replace(brokers=replace_at(t.brokers, b, t.brokers[b]._replace(fetch=s.brokers[b].fetch)))
        return t


def test_applying_a_response_sent_before_a_truncation_breaks_the_isr():
    m = KeepsStaleFetch(make_config("current", brokers=3))
    n, v, actions, states = run_script(m, SCRIPT)
    assert n == len(SCRIPT) and v is not None, (n, actions[-1:])
    assert v == ("StrongIsr", "r1 at offset 0 is below leader b0's high watermark 1, but ISR member b1 "
                              "has r0 there"), v
    stale = states[STALE_RESPONSE - 1]
    assert stale.brokers[1].log[0] != stale.brokers[0].log[0]       # r0 where the leader has r1


def test_the_model_drops_it_and_the_schedule_stops_there():
    m = Model(make_config("current", brokers=3))
    n, v, actions, states = run_script(m, SCRIPT)
    assert v is None
    assert n == STALE_RESPONSE - 1, (n, actions[-1:])           # the stale FetchResponse is not enabled
    assert states[-1].brokers[1].fetch == ()                       # dropped with the truncation due
