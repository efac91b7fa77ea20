"""Folding states that would be checked identically.

The *overlay* of a state is what it writes on top of its epoch's durable
base: for every 512-byte unit its kept and torn writes touch, the content
the last of them leaves there (discards leave zeros).  Its digest is
xxh3-128 over the sorted ``(unit address, xxh3-64 of the unit's content)``
pairs, so it depends on content, not on which write carried it.

Two states fold only if they are of the same epoch (the same durable base),
have the same overlay digest, and see the same marks at both ends of their
cut (``marks_lo``, ``marks_hi``): then the image and everything a checker
may look at are the same.  One fold crosses epochs: keeping every write of
epoch E gives exactly the durable base of E+1, so that state and ``p0`` of
E+1 fold too when their marks agree.  Memory: the digests of one epoch's
states (plus one carried to the next), never of the whole enumeration.
"""

from __future__ import annotations

from array import array
from itertools import chain

import xxhash

from harness.logformat import LogReader
from harness.states.epochs import Epoch
from harness.states.model import State
from harness.states.stateid import UNIT, iter_bits

EMPTY_DIGEST = xxhash.xxh3_128_digest(b"")
_ZERO_UNIT = xxhash.xxh3_64_intdigest(bytes(UNIT))


class EpochContent:
    """Per-unit content hashes of one epoch's writes, read lazily (each
    payload once)."""

    def __init__(self, reader: LogReader, epoch: Epoch) -> None:
        self.reader = reader
        self.epoch = epoch
        self._hashes: dict[int, list[int]] = {}

    def unit_hashes(self, w: int) -> list[int]:
        hs = self._hashes.get(w)
        if hs is None:
            entry = self.epoch.writes[w]
            units = entry.nr_sectors * self.reader.sectorsize // UNIT
            if entry.is_discard:
                hs = [_ZERO_UNIT] * units
            else:
                data = self.reader.payload(entry)
                h = xxhash.xxh3_64_intdigest
                hs = [h(data[i : i + UNIT]) for i in range(0, units * UNIT, UNIT)]
            self._hashes[w] = hs
        return hs

    def digest(self, state: State) -> bytes:
        """The overlay digest of ``state`` (a state of this epoch)."""
        key = state.key
        members = key.kept | key.torn_mask
        if not members:
            return EMPTY_DIGEST
        torn = dict(key.torn)
        overlay: dict[int, int] = {}
        s = self.reader.sectorsize
        writes = self.epoch.writes
        for w in iter_bits(members):
            hs = self.unit_hashes(w)
            base = writes[w].sector * s // UNIT
            units = torn.get(w)
            if units is None:
                overlay.update(zip(range(base, base + len(hs)), hs, strict=True))
            else:
                for i in iter_bits(units):
                    overlay[base + i] = hs[i]
        flat = array("Q", chain.from_iterable(sorted(overlay.items())))
        return xxhash.xxh3_128_digest(flat.tobytes())


class Folder:
    """Remembers the states seen in the current epoch; :meth:`fold` says
    which earlier state (by ID) a new one folds into."""

    def __init__(self, reader: LogReader) -> None:
        self.reader = reader
        self._epoch = -1
        self._content: EpochContent | None = None
        self._seen: dict[tuple[bytes, int, int], str] = {}
        self._carry: dict[tuple[bytes, int, int], str] = {}

    def fold(self, state: State) -> str | None:
        """None if ``state`` is new (it is remembered), else the ID of the
        state it folds into."""
        ep = state.epoch
        if ep.index != self._epoch:
            self._seen = self._carry if ep.index == self._epoch + 1 else {}
            self._carry = {}
            self._epoch = ep.index
            self._content = EpochContent(self.reader, ep)
        assert self._content is not None
        cut = state.cut
        key = (self._content.digest(state), cut.marks_lo, cut.marks_hi)
        into = self._seen.get(key)
        if into is None:
            self._seen[key] = state.id
        self._maybe_carry(state, into)
        return into

    def _maybe_carry(self, state: State, into: str | None) -> None:
        # Keeping all of epoch E is the durable base of E+1 (empty overlay).
        ep = state.epoch
        if ep.closed and not state.key.torn and state.key.kept == ep.full_mask:
            cut = state.cut
            self._carry.setdefault((EMPTY_DIGEST, cut.marks_lo, cut.marks_hi), into or state.id)
