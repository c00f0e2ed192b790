"""Helpers for the history tests: build small histories by hand, one line per operation."""
from __future__ import annotations

from traces.history import History, Op, make_header


class B:
    """Builder: b.send(p, value, inv, comp, offset=..., type='ok'), b.poll(...), ..."""

    def __init__(self):
        self.ops: list[Op] = []

    def _op(self, **kw) -> Op:
        kind = kw.pop("type", "ok")
        comp = kw.pop("comp")
        op = Op(id=len(self.ops), type=kind, comp=None if kind == "info" else comp, end=comp, **kw)
        self.ops.append(op)
        return op

    def send(self, proc, value, inv, comp, offset=None, type="ok", part=0):
        return self._op(process=proc, f="send", inv=inv, comp=comp, topic="t", partition=part,
                        value=value, offset=offset if type == "ok" else None, type=type)

    def poll(self, proc, recs, inv, comp, part=0, final=False, type="ok"):
        return self._op(process=proc, f="poll", inv=inv, comp=comp, topic="t", partition=part,
                        offsets=[o for o, _ in recs], values=[v for _, v in recs], final=final,
                        type=type)

    def config(self, proc, inv, **cfg):
        op = self._op(process=proc, f="producer_config", inv=inv, comp=inv + 1)
        op.config = cfg
        return op

    def assign(self, proc, inv, comp, gen, group="g", part=0, offset=0, delivery=None):
        return self._op(process=proc, f="assign", inv=inv, comp=comp, topic="t", partition=part,
                        group=group, generation=gen, offset=offset, delivery=delivery)

    def commit(self, proc, inv, comp, gen, offset, group="g", part=0, type="ok"):
        return self._op(process=proc, f="commit", inv=inv, comp=comp, topic="t", partition=part,
                        group=group, generation=gen, offset=offset, type=type)

    def history(self) -> History:
        return History(make_header("test"), sorted(self.ops, key=lambda o: (o.inv, o.id)))
