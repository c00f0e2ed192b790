"""Hypothesis drives the model of the newest generations through fault schedules — crash,
restart, pause, lost control message, unflushed-write loss, elections — and checks the
invariants after every step (house style §8: RuleBasedStateMachine, @precondition, @invariant).

Three machines: `current` with power failures checks what Kafka 3.x keeps under them (log
matching, epochs, the maximal ISR) — its durability is broken by a single power failure of the
last ISR member (KIP-966's case); `current` without power failures checks every invariant; and
`kip-966` checks every invariant through one power failure (ELR's promise)."""
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from spec import Model, make_config
from spec.invariants import violated

BOUNDS = dict(brokers=3, records=4, crashes=4, pauses=2, elections=4, losses=2)
MODEL = Model(make_config("current", unflushed_loss=True, **BOUNDS))
NOT_DURABLE_UNDER_POWER_LOSS = tuple(i for i in MODEL.invariants if not i.scoped and not i.counts_copies)
FAULTS = {"Crash", "Restart", "Pause", "Resume", "SessionExpire", "Lose"}
ELECTIONS = {"ControllerElect", "ControllerReact", "ControllerAlterIsr", "AlterIsrResponse", "ZombieElect"}


class CurrentGeneration(RuleBasedStateMachine):
    model = MODEL
    checked = NOT_DURABLE_UNDER_POWER_LOSS

    def __init__(self):
        super().__init__()
        self.state = self.model.initial()
        self.steps = []

    def _of(self, kinds):
        return [a for a in self.model.enabled(self.state) if a.kind in kinds]

    def _take(self, data, kinds):
        acts = self._of(kinds)
        a = data.draw(st.sampled_from(acts), label="action")
        nxt = self.model.step(self.state, a)
        sv = self.model.step_violation(self.state, nxt)
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

    @precondition(lambda self: not self.model.enabled(self.state))
    @rule()
    def quiescent_start_over(self):
        # Every bound is used up and nothing is in flight: the run is over; begin another.
        self.state = self.model.initial()
        self.steps.append("-- start over --")

    @invariant()
    def every_invariant_holds(self):
        v = violated(self.model.config, self.state, self.checked)
        assert v is None, f"{v[0]}: {v[1]} after: " + " / ".join(self.steps)


class CurrentWithoutPowerLoss(CurrentGeneration):
    model = Model(make_config("current", **BOUNDS))
    checked = model.invariants


class Kip966OnePowerFailure(CurrentGeneration):
    model = Model(make_config("kip-966", unflushed_loss=True, **{**BOUNDS, "crashes": 1}))
    checked = model.invariants


SETTINGS = settings(max_examples=60, stateful_step_count=50, deadline=None, derandomize=True)
CurrentGeneration.TestCase.settings = SETTINGS
CurrentWithoutPowerLoss.TestCase.settings = SETTINGS
Kip966OnePowerFailure.TestCase.settings = SETTINGS
TestCurrentGeneration = CurrentGeneration.TestCase
TestCurrentWithoutPowerLoss = CurrentWithoutPowerLoss.TestCase
TestKip966OnePowerFailure = Kip966OnePowerFailure.TestCase
