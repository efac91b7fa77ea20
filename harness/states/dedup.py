"""Folding states that would be checked identically.

The *overlay* of a state is what it writes on top of its epoch's durable
base: for every 512-byte unit its kept and torn writes touch, the content
the last of them leaves there (discards leave zeros).  Its digest is the
sum modulo 2^128 of ``xxh3_128(unit address, xxh3_128(unit content))`` over
those units: it depends on content, not on which write carried it, and it
can be updated unit by unit, so a state's digest is computed from a nearby
state's (the previous one, or the whole epoch) at the cost of the writes
in which they differ: one write per state for ``prefix``, k for drop-k.
(An additive hash is weak only against inputs crafted to collide, which a
recorded log is not.)

Two states fold only if they are of the same epoch (the same durable base),
have the same overlay digest, and see the same marks at both ends of their
cut (``marks_lo``, ``marks_hi``): then the image and everything a checker
may look at are the same.  One fold crosses epochs: keeping every write of
epoch E gives exactly the durable base of E+1, so that state and ``p0`` of
E+1 fold too when their marks agree.  Memory: the unit hashes of one epoch
and the digests of its states (plus one carried to the next), never of the
whole enumeration.
"""

from __future__ import annotations

import bisect

import xxhash

from harness.logformat import LogReader
from harness.states.epochs import Epoch
from harness.states.model import State
from harness.states.stateid import UNIT, iter_bits

EMPTY_DIGEST = 0
# a state of the epoch as a digest reference: (kept mask, torn units, digest)
_Ref = tuple[int, dict[int, int], int]
_MOD = (1 << 128) - 1
_ZERO_UNIT = xxhash.xxh3_128_digest(bytes(UNIT))


class EpochContent:
    """Per-unit hashes of one epoch's writes (each payload read once, when
    first needed) and the incremental overlay digest."""

    # A state's digest is computed from scratch when that touches at most
    # this many times the units the incremental way would (which costs
    # about that much more per unit); tests set 0 to force the latter.
    direct_factor = 4

    def __init__(self, reader: LogReader, epoch: Epoch) -> None:
        self.reader = reader
        self.epoch = epoch
        s = reader.sectorsize
        self.first = [w.sector * s // UNIT for w in epoch.writes]
        self.count = [w.nr_sectors * s // UNIT for w in epoch.writes]
        self._contrib: dict[int, list[int]] = {}
        self._writers: dict[int, list[int]] | None = None
        self._overlaps: list[int] | None = None
        self._sums: dict[int, int] = {}
        self._full: int | None = None
        self._prev: _Ref | None = None

    def contributions(self, w: int) -> list[int]:
        """Digest terms of write ``w``'s units, in order."""
        cs = self._contrib.get(w)
        if cs is None:
            entry = self.epoch.writes[w]
            h128 = xxhash.xxh3_128_digest
            if entry.is_discard:
                contents = [_ZERO_UNIT] * self.count[w]
            else:
                data = self.reader.payload(entry)
                contents = [h128(data[i : i + UNIT]) for i in range(0, len(data), UNIT)]
            first = self.first[w]
            hi = xxhash.xxh3_128_intdigest
            cs = [hi((first + i).to_bytes(8, "little") + c) for i, c in enumerate(contents)]
            self._contrib[w] = cs
        return cs

    def writers(self) -> dict[int, list[int]]:
        """Unit address → the writes touching it, ascending."""
        if self._writers is None:
            ws: dict[int, list[int]] = {}
            for w, (first, n) in enumerate(zip(self.first, self.count, strict=True)):
                for u in range(first, first + n):
                    ws.setdefault(u, []).append(w)
            self._writers = ws
        return self._writers

    def _term(self, u: int, ws: list[int], kept: int, torn: dict[int, int], top: int) -> int:
        """Digest term of unit ``u`` (whose writers are ``ws``) in the state
        (kept, torn) whose writes all lie below ``top``: its last writer's,
        or 0 if none touches it."""
        for j in range(bisect.bisect_left(ws, top) - 1, -1, -1):
            w = ws[j]
            i = u - self.first[w]
            if kept >> w & 1 or torn.get(w, 0) >> i & 1:
                return self.contributions(w)[i]
        return 0

    def overlaps(self) -> list[int]:
        """Per write, the mask of the other writes that touch a unit it
        touches."""
        if self._overlaps is None:
            ov = [0] * len(self.first)
            for ws in self.writers().values():
                if len(ws) > 1:
                    m = 0
                    for w in ws:
                        m |= 1 << w
                    for w in ws:
                        ov[w] |= m & ~(1 << w)
            self._overlaps = ov
        return self._overlaps

    def direct(self, kept: int, torn: dict[int, int]) -> int:
        """Digest of (kept, torn) from scratch: cost = the state's units,
        or its writes where they are whole and touch no unit twice (each
        unit's term is then its one writer's: the sum of each write's)."""
        if not torn:
            ov = self.overlaps()
            total = 0
            for w in iter_bits(kept):
                if ov[w] & kept:
                    break
                t = self._sums.get(w)
                if t is None:
                    t = self._sums[w] = sum(self.contributions(w))
                total += t
            else:
                return total & _MOD
        final: dict[int, int] = {}
        for w in iter_bits(kept | _mask(torn)):
            cs = self.contributions(w)
            first = self.first[w]
            units = torn.get(w)
            if units is None:
                final.update(zip(range(first, first + len(cs)), cs, strict=True))
            else:
                for i in iter_bits(units):
                    final[first + i] = cs[i]
        return sum(final.values()) & _MOD

    def full_digest(self) -> int:
        """Digest of the state keeping every write of the epoch."""
        if self._full is None:
            d = 0
            for u, ws in self.writers().items():
                w = ws[-1]
                d += self.contributions(w)[u - self.first[w]]
            self._full = d & _MOD
        return self._full

    def digest(self, state: State) -> int:
        """The overlay digest of ``state`` (a state of this epoch), derived
        from the cheapest of: the previous state, the empty state, the
        whole epoch."""
        kept, torn = state.key.kept, dict(state.key.torn)
        # Costs counted in writes (popcounts): counting units would itself
        # cost a walk over every write of the state.
        direct_cost = (kept | _mask(torn)).bit_count()
        full = self.epoch.full_mask
        best_ref: _Ref = (0, {}, 0)
        best_cost, best_changed = -1, 0
        for ref in (self._prev, (0, {}, EMPTY_DIGEST), (full, {}, -1)):
            if ref is None:
                continue
            changed = _changed(ref, kept, torn)
            cost = changed.bit_count()
            if best_cost < 0 or cost < best_cost:
                best_cost, best_ref, best_changed = cost, ref, changed
        if direct_cost <= self.direct_factor * best_cost:  # small states: from scratch
            d = self.direct(kept, torn)
            self._prev = (kept, torn, d)
            return d
        writers = self.writers()
        if best_ref[2] == -1:
            best_ref = (full, {}, self.full_digest())
        rkept, rtorn, d = best_ref
        top = max((kept | _mask(torn)).bit_length(), (rkept | _mask(rtorn)).bit_length())
        spans = [(self.first[w], self.first[w] + self.count[w]) for w in iter_bits(best_changed)]
        units: range | set[int]
        if len(spans) == 1:
            units = range(*spans[0])
        else:  # each unit once, even where changed writes overlap
            units = set()
            for a, b in spans:
                units.update(range(a, b))
        for u in units:
            ws = writers[u]
            d += self._term(u, ws, kept, torn, top) - self._term(u, ws, rkept, rtorn, top)
        d &= _MOD
        self._prev = (kept, torn, d)
        return d


def direct_digest(content: EpochContent, state: State) -> int:
    """The overlay digest from its definition (the final content of each
    unit, summed): the reference the incremental :meth:`EpochContent.digest`
    must match."""
    torn = dict(state.key.torn)
    final: dict[int, int] = {}
    for w in iter_bits(state.key.kept | state.key.torn_mask):
        cs = content.contributions(w)
        for i in range(content.count[w]):
            if w not in torn or torn[w] >> i & 1:
                final[content.first[w] + i] = cs[i]
    return sum(final.values()) & _MOD


def _changed(ref: _Ref, kept: int, torn: dict[int, int]) -> int:
    """Writes whose part in the state differs between ``ref`` and (kept, torn)."""
    rkept, rtorn, _ = ref
    changed = (kept ^ rkept) | _mask(torn) | _mask(rtorn)
    for w, units in torn.items():
        if rtorn.get(w) == units:
            changed &= ~(1 << w)
    return changed


def _mask(torn: dict[int, int]) -> int:
    m = 0
    for w in torn:
        m |= 1 << w
    return m


class Folder:
    """Remembers the states seen in the current epoch; :meth:`fold` says
    which earlier state (by ID) a new one folds into."""

    def __init__(self, reader: LogReader) -> None:
        self.reader = reader
        self._epoch = -1
        self._content: EpochContent | None = None
        # (overlay digest, marks_lo, marks_hi) -> the first state's ID
        self._seen: dict[tuple[int, int, int], str] = {}
        self._carry: dict[tuple[int, int, int], str] = {}

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
