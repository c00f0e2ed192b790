"""Hypothesis drives the model of the newest generation through fault schedules — crash,
restart, pause, lost control message, unflushed-write loss, elections — and checks every
invariant after every step (STYLE §8: RuleBasedStateMachine, @precondition, @invariant)."""
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from spec import Model, make_config

MODEL = Model(make_config("current", brokers=3, records=4, crashes=4, pauses=2, elections=4,
                          losses=2, unflushed_loss=True))
FAULTS = {"Crash", "Restart", "Pause", "Resume", "SessionExpire", "Lose"}
ELECTIONS = {"ControllerElect", "ControllerReact", "ControllerAlterIsr", "ZombieElect"}


class CurrentGeneration(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.state = MODEL.initial()
        self.steps = []

    def _of(self, kinds):
        return [a for a in MODEL.enabled(self.state) if a.kind in kinds]

    def _take(self, data, kinds):
        acts = self._of(kinds)
        a = data.draw(st.sampled_from(acts), label="action")
        nxt = MODEL.step(self.state, a)
        sv = MODEL.step_violation(self.state, nxt)
        assert sv is None, sv
        self.state = nxt
        self.steps.append(a.describe())

    @precondition(lambda self: self._of(FAULTS))
    @rule(data=st.data())
    def fault(self, data):
        self._take(data, FAULTS)

    @precondition(lambda self: self._of(ELECTIONS))
    @rule(data=st.data())
    def controller(self, data):
        self._take(data, ELECTIONS)

    @precondition(lambda self: self._of({"Deliver"}))
    @rule(data=st.data())
    def deliver(self, data):
        self._take(data, {"Deliver"})

    @precondition(lambda self: self._of({"Produce", "FetchRequest", "FetchResponse", "Truncate",
                                         "Flush", "ProposeShrink", "Reregister"}))
    @rule(data=st.data())
    def progress(self, data):
        self._take(data, {"Produce", "FetchRequest", "FetchResponse", "Truncate", "Flush",
                          "ProposeShrink", "Reregister"})

    @precondition(lambda self: not MODEL.enabled(self.state))
    @rule()
    def quiescent_start_over(self):
        # Every bound is used up and nothing is in flight: the run is over; begin another.
        self.state = MODEL.initial()
        self.steps.append("-- start over --")

    @invariant()
    def every_invariant_holds(self):
        v = MODEL.violation(self.state)
        assert v is None, f"{v[0]}: {v[1]} after: " + " / ".join(self.steps)


CurrentGeneration.TestCase.settings = settings(max_examples=60, stateful_step_count=50,
                                               deadline=None, derandomize=True)
TestCurrentGeneration = CurrentGeneration.TestCase
