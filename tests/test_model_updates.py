"""The model's shared pieces on their own: the actions (spec/actions.py: one-line descriptions
and their JSON form for every kind the model steps) and the state updates every transition
module uses (spec/updates.py)."""
from __future__ import annotations

from spec import ACTION_KINDS, Action, initial, make_config, step
from spec.actions import GROUP_TEMPLATES, PRODUCER_TEMPLATES, TXN_TEMPLATES
from spec.updates import advance_hw, durable, is_up, replace_at


def test_every_kind_the_model_steps_has_a_description():
    broker_kinds = {"Deliver", "Lose", "ControllerReact"}
    for kind in ACTION_KINDS:
        arg = (1, 1, 0, 3, 1) if kind in ("Deliver", "Lose") else 1
        if kind == "TxnDeliver":        # a WriteTxnMarkers request in flight
            arg = (1, 0, 0, 1, 0, 1, 0)
        text = Action(kind, 0, arg).describe()
        assert text and "{b}" not in text and "{a}" not in text, (kind, text)
        if kind == "TxnDeliver":
            assert "COMMIT" in text and "d0" in text, text
        elif (kind not in broker_kinds and kind not in PRODUCER_TEMPLATES
              and kind not in GROUP_TEMPLATES and kind not in TXN_TEMPLATES):
            assert "b0" in text, (kind, text)


def test_actions_round_trip_through_json():
    for a in (Action("Crash", 1, 2), Action("Deliver", 2, (1, 3, 0, 5, 4)), Action("Restart", 0),
              Action("Send", 0, 1), Action("Poll", 1), Action("ControllerReact", 2, -1),
              Action("TxnAddPartition", 1, 0), Action("TxnDeliver", 1, (0, 1, 0, 2, 3, 0, 0))):
        assert Action.from_json(a.to_json()) == a


def test_replace_at_and_is_up():
    assert replace_at((1, 2, 3), 1, 9) == (1, 9, 3)
    b = initial(make_config("current")).brokers[0]
    assert is_up(b)
    assert not is_up(b._replace(paused=True)) and not is_up(b._replace(alive=False))


def test_durable_flushes_only_without_unflushed_loss():
    b = initial(make_config("current")).brokers[0]._replace(log=((0, 0),), flushed=0)
    assert durable(make_config("current"), b).flushed == 1
    lossy = make_config("current", unflushed_loss=True)
    assert durable(lossy, b).flushed == 0


def test_advance_hw_is_the_step_of_a_produce_on_a_single_replica():
    """On one broker a produced record is committed at once: the Produce step's HW, acks and
    exposed prefix are advance_hw's."""
    cfg = make_config("current", brokers=1, min_isr=1)
    s = step(cfg, initial(cfg), Action("Produce", 0))
    assert s.brokers[0].hw == 1 and s.exposed == (0,)
    undone = s._replace(brokers=replace_at(s.brokers, 0, s.brokers[0]._replace(hw=0, pend_acks=1)),
                        exposed=(), acked=0)
    assert advance_hw(cfg, undone, 0) == s
