"""One-line views of the clients' state (producers, the consumer group) for traces and stories
(spec/state.summary). Formatting only: it reads the state's fields and imports nothing of the
model but the answer codes' names, so the state module can use it."""
from __future__ import annotations

from spec.codes import CODE_NAMES, TXN_PHASES, TXN_STATES


def _out(o: int) -> str:
    return {-1: "open", -2: "failed", -3: "unknown"}.get(o, f"@{o}")


def producer_line(i: int, p) -> str:
    s = f"p{i}"
    if p.pe >= 0:
        s += f" epoch={p.pe} next-seq={p.seqn}"
    if p.bump == -2:
        s += " epoch-bump-required"
    elif p.bump >= 0:
        s += f" unresolved-seq={p.bump}"
    s += " sent=[" + " ".join(f"{k}:{_out(o)}" for k, o in enumerate(p.out)) + "]"
    if p.batches:
        s += " batches=[" + " ".join(
            f"{k}" + (f"#{seq}" if seq >= 0 else "") + ("(in flight)" if fl else "(queued)")
            + (f"x{t}" if t else "") for k, seq, t, fl in p.batches) + "]"
    if p.reqs:
        s += " requests=[" + " ".join(
            f"{k}->b{b}" + ("" if w < 0 else f"(appended@{off}, awaiting HW)")
            for k, _, _, b, _, w, off in p.reqs) + "]"
    if p.resps:
        s += " answers=[" + " ".join(f"{k}:{CODE_NAMES[c]}" + (f"@{o}" if o >= 0 else "")
                                    for k, c, o in p.resps) + "]"
    return s


def client_lines(s) -> list[str]:
    out = [producer_line(i, p) for i, p in enumerate(s.prods)]
    if s.grp:
        out += group_lines(s)
    if s.txn:
        out += txn_lines(s)
    return out


_ENTRY = {0: "", 1: "COMMIT", 2: "ABORT"}
_OUTCOME = ("open", "committed", "aborted")


def txn_lines(s) -> list[str]:
    """Transactional producers, the data partitions (batches as t<id>/e<epoch>/T<transaction>,
    markers), their LSO, and each transaction's outcome."""
    t = s.txn
    offsets = any(g[4] >= 0 for g in t.ghosts)     # consume-transform-produce: inputs consumed
    lines = []
    for ci, c in enumerate(t.clients):
        line = f"x{ci} t{c.tid}#{c.inst} {TXN_PHASES[c.phase]}"
        if c.pe >= 0:
            line += f" epoch={c.pe}"
        if c.g >= 0:
            line += f" in T{c.g} added={_parts(c.added)} sent={_parts(c.sent)}"
        if c.waiting:
            line += f" awaiting={_parts(c.waiting)}"
        if c.req:
            line += " awaiting the coordinator"
        lines.append(line)
    for d, log in enumerate(t.logs):
        ents = " ".join(f"t{tid}/e{e}/T{a}" + ("(fenced instance)" if b else "") if k == 0
                        else f"{_ENTRY[k]}(t{tid}/e{e}/ce{a})" for k, tid, e, a, b in log)
        name = f"d{d}" + (" (__consumer_offsets)" if d == len(t.logs) - 1 and offsets else "")
        lines.append(f"{name} [{ents}] lso={t.lso[d]}")
    if t.ghosts:
        lines.append("transactions: " + " ".join(
            f"T{g}=t{tid}#{inst}:{_OUTCOME[o]}" + (f"(input {i})" if i >= 0 else "")
            for g, (tid, inst, o, _, i) in enumerate(t.ghosts)))
    if t.net:
        lines.append(f"in flight: {len(t.net)} request(s)")
    return lines


def _parts(mask: int) -> str:
    return "{" + ",".join(f"d{d}" for d in range(8) if (mask >> d) & 1) + "}"


def group_lines(s) -> list[str]:
    g = s.grp
    lines = [f"group generation={g.gen} owner=" + (f"c{g.owner}" if g.owner >= 0 else "none")
             + f" committed-acknowledged={g.hi} processed={list(g.processed)}"]
    for ci, c in enumerate(g.cons):
        if not c.alive:
            lines.append(f"c{ci} down")
            continue
        t = f"c{ci} " + (f"gen={c.gen}" if c.gen >= 0 else "not a member")
        if c.pos >= 0:
            t += f" pos={c.pos}"
        if c.held >= 0:
            t += f" holds d{c.held}" + {1: "", 2: " (processed)", 3: " (committed)"}.get(c.stage, "")
        if c.commit:
            gen, off, b, _, w, _, _ = c.commit
            t += f" commit(offset {off}, gen {gen}) -> b{b}" + (" appended, awaiting HW" if w >= 0 else "")
        lines.append(t)
    return lines
