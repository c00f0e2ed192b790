"""64-bit fingerprints of canonical model states, and a compact set of them.

A fingerprint is blake2b-64 over the marshal (version 2: no back-references, so equal tuples give
equal bytes whatever objects they share) of the state as plain tuples. Generic over the State
tuple: any field of ints, bools and (nested) tuples is covered without change here; a field of
NamedTuples below the top level falls back to a recursive conversion. Python's own tuple hash is
not used: it maps -1 and -2 to the same value, and the model uses both (AlterIsr `resp`), so
it would merge distinct states.

As TLC, the checker keeps only fingerprints of visited states: two distinct states colliding on
64 bits (probability about n^2 / 2^65: 3e-6 at 10 M states) would hide one of them.
"""
from __future__ import annotations

import marshal
from array import array
from hashlib import blake2b


def _plain(x):
    return tuple(_plain(y) for y in x) if isinstance(x, tuple) else x


def fingerprint(c: tuple) -> int:
    """The 64-bit fingerprint of a canonical state (a State or the plain tuple it stands for)."""
    try:
        # Field 0 (brokers) and 1 (coordination store) are NamedTuples; the rest plain tuples.
        t = c[17] if len(c) > 17 else ()
        if t:       # transactions: the client list is the one field of NamedTuples inside
            b = marshal.dumps((tuple(map(tuple, c[0])), tuple(c[1])) + tuple(c[2:17])
                              + (((tuple(map(tuple, t[0])),) + tuple(t[1:])),), 2)
        else:
            b = marshal.dumps((tuple(map(tuple, c[0])), tuple(c[1])) + tuple(c[2:]), 2)
    except ValueError:          # a NamedTuple further down (a field added later): go generic
        b = marshal.dumps(_plain(c), 2)
    return int.from_bytes(blake2b(b, digest_size=8).digest(), "little") or 1   # 0 marks a free slot


class FingerprintSet:
    """An open-addressing hash set of non-zero 64-bit fingerprints in one array('Q'): 8 bytes a
    slot, kept at most 2/3 full (12 bytes or less per member, against ~80 for a Python set of
    ints). Linear probing on the low bits (the fingerprint is already uniformly mixed)."""

    __slots__ = ("_t", "_mask", "n")

    def __init__(self, capacity: int = 1 << 16):
        size = 1 << max(4, (capacity * 3 // 2).bit_length())
        self._t = array("Q", bytes(8 * size))
        self._mask = size - 1
        self.n = 0

    def add(self, fp: int) -> bool:
        """Adds fp; True if it was not there."""
        t, mask = self._t, self._mask
        i = fp & mask
        while True:
            v = t[i]
            if v == fp:
                return False
            if v == 0:
                t[i] = fp
                self.n += 1
                if self.n * 3 > len(t) * 2:
                    self._grow()
                return True
            i = (i + 1) & mask

    def __contains__(self, fp: int) -> bool:
        t, mask = self._t, self._mask
        i = fp & mask
        while True:
            v = t[i]
            if v == fp:
                return True
            if v == 0:
                return False
            i = (i + 1) & mask

    def __len__(self) -> int:
        return self.n

    def _grow(self) -> None:
        old = self._t
        size = len(old) * 2
        t = array("Q", bytes(8 * size))
        mask = size - 1
        for fp in old:
            if fp:
                i = fp & mask
                while t[i]:
                    i = (i + 1) & mask
                t[i] = fp
        self._t, self._mask = t, mask

    def nbytes(self) -> int:
        return len(self._t) * 8
