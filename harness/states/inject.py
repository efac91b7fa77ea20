"""State faults: what the enumeration does with ``lost-flush``,
``misdirect`` and ``corrupt`` (their grammar is ``harness/faults.py``;
README.md, State faults, says what they model).

* :func:`lost_flush_states`: the states a FLUSH acknowledged but not
  performed adds: the strategy's states of the two epochs merged, of which
  only those a lying device alone can leave (they lack a write issued
  before the lost FLUSH and may crash after it).
* :class:`Targets` picks, for one state, which write is misdirected and
  where it lands, or which bits flip: from a :class:`random.Random` seeded
  with the fault and the state's ID (a str seed is hashed with SHA-512, so
  the pick is the same on every machine), among the database file's blocks
  when the run's block map is known (``harness/filetrace.py``:
  :func:`database_map`), else among every block the run writes.  The
  misdirected write is one of the last :data:`RECENT` writes to the
  database file the state persisted (its own kept writes and the durable
  ones before them: a recently committed page is the one whose loss
  matters); it lands on another block the run writes to the database file.
  The result is part of the state's ID, so a faulted state is looked up by
  its ID alone, without the seed or the map.  With ``file=wal`` the same
  holds of the database's write-ahead log in place of the database file
  (its map: ``harness/filetrace.py``, :func:`fault_targets`).
"""

from __future__ import annotations

import bisect
import random
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from harness.errors import CrashlabError
from harness.faults import STATE, Fault
from harness.logformat import Entry
from harness.states.epochs import Epoch
from harness.states.model import State, compute_cut, loses_to_flush
from harness.states.stateid import SECTOR_BITS, UNIT, StateKey, iter_bits

Spans = tuple[tuple[int, int, int], ...]  # harness.fs.BlockMap.spans: (dev start, end, file off)
Write = tuple[int, int, int]  # a database write: (log entry, device offset, length)
RECENT = 16  # misdirect: the victim is one of the state's last this many database writes


@dataclass(frozen=True)
class StateFaults:
    """The state faults of one enumeration, at most one of each kind."""

    lost_flush: Fault | None = None
    misdirect: Fault | None = None
    corrupt: Fault | None = None

    @classmethod
    def of(cls, faults: Iterable[Fault]) -> StateFaults:
        """The state faults among ``faults`` (parsed: ``harness/faults.py``);
        one-line CrashlabError for a device or process fault (those are
        injected while recording) or two faults of one kind."""
        found: dict[str, Fault] = {}
        for f in faults:
            if f.where != STATE:
                raise CrashlabError(
                    f"{f} is a {f.where} fault: it is injected while "
                    "recording, give it to `crashlab record --fault`"
                )
            if f.kind in found:
                raise CrashlabError(
                    f"two {f.kind} faults ({found[f.kind]}, {f}): give one of each kind"
                )
            found[f.kind] = f
        aims = {f.aim for f in found.values() if f.kind in ("misdirect", "corrupt")}
        if len(aims) > 1:
            raise CrashlabError(
                f"{found['misdirect']} and {found['corrupt']} aim at different files: "
                "give them one file="
            )
        return cls(found.get("lost-flush"), found.get("misdirect"), found.get("corrupt"))

    @property
    def targeted(self) -> bool:
        """Whether a fault needs a target picked per state."""
        return self.misdirect is not None or self.corrupt is not None

    @property
    def aim(self) -> str:
        """The file the targeted faults aim at ("db" or "wal")."""
        return next((f.aim for f in (self.misdirect, self.corrupt) if f is not None), "db")

    def __bool__(self) -> bool:
        return any((self.lost_flush, self.misdirect, self.corrupt))


def lost_flush_states(
    merged: Epoch, pairs: Iterator[tuple[int, tuple[tuple[int, int], ...]]]
) -> Iterator[tuple[int, tuple[tuple[int, int], ...]]]:
    """Of the strategy's ``(kept, torn)`` pairs for the merged epoch, those
    a lying device alone leaves (:func:`harness.states.model.loses_to_flush`)."""
    for kept, torn in pairs:
        torn_mask = 0
        for w, _ in torn:
            torn_mask |= 1 << w
        if loses_to_flush(merged, kept, compute_cut(merged, kept, torn_mask).hi):
            yield kept, torn


def _pieces(entry: Entry, sectorsize: int, spans: Spans | None) -> list[tuple[int, int]]:
    """``(device offset, length)`` of the parts of a write that hold
    database-file bytes (all of it without a map; none for a discard)."""
    if entry.is_discard or not entry.has_payload:
        return []
    start = entry.sector * sectorsize
    end = start + entry.nr_sectors * sectorsize
    if spans is None:
        return [(start, end - start)]
    out = []
    i = max(0, bisect.bisect_right([s[0] for s in spans], start) - 1)
    while i < len(spans) and spans[i][0] < end:
        lo, hi = max(spans[i][0], start), min(spans[i][1], end)
        if lo < hi:
            out.append((lo, hi - lo))
        i += 1
    return out


def _write(entry: Entry, sectorsize: int) -> Write:
    return entry.index, entry.sector * sectorsize, entry.nr_sectors * sectorsize


class Targets:
    """Where misdirected writes land and which bits flip, for the states of
    one log, whose epochs are shown in order (:meth:`see`).  ``spans``: the
    device ranges of the database file (None: unknown, every write counts)."""

    def __init__(self, faults: StateFaults, spans: Spans | None) -> None:
        self.faults = faults
        self.spans = spans
        self._before: dict[int, int] = {}  # piece start -> longest length, epochs before
        # epoch -> its pieces and its database writes (entry index), not yet before
        self._pending: dict[int, tuple[dict[int, int], list[Write]]] = {}
        self._recent: deque[Write] = deque(maxlen=RECENT)  # database writes of epochs before
        self._landing: list[tuple[int, int]] = []

    def see(self, epoch: Epoch) -> None:
        """Enumeration moves to ``epoch`` (merged or not; never back): the
        epochs before its first become history."""
        bounds = [0, *epoch.parts, epoch.nr_writes]
        for i in range(epoch.last_index - epoch.index + 1):
            if epoch.index + i in self._pending:
                continue
            here: dict[int, int] = {}
            writes: list[Write] = []
            for e in epoch.writes[bounds[i] : bounds[i + 1]]:
                pieces = _pieces(e, epoch.sectorsize, self.spans)
                for off, n in pieces:
                    here[off] = max(n, here.get(off, 0))
                if pieces:
                    writes.append(_write(e, epoch.sectorsize))
            self._pending[epoch.index + i] = (here, writes)
        for idx in sorted(i for i in self._pending if i < epoch.index):
            landed, writes = self._pending.pop(idx)
            for off, n in landed.items():
                self._before[off] = max(n, self._before.get(off, 0))
            self._recent.extend(writes)
        both = dict(self._before)
        for here, _ in self._pending.values():
            for off, n in here.items():
                both[off] = max(n, both.get(off, 0))
        self._landing = sorted(both.items())

    def apply(self, state: State) -> StateKey | None:
        """``state``'s key with the misdirect and corrupt faults placed, or
        None when one has no place: misdirect needs a kept write of the
        database file and another of its blocks; corrupt a database-file
        sector the image holds (what the state's own writes persisted first,
        else what earlier epochs did)."""
        key = state.key
        mis = cor = None
        if self.faults.misdirect is not None:
            rng = random.Random(f"{self.faults.misdirect}:{state.id}")
            mis = self._misdirect(state, rng)
            if mis is None:
                return None
        corrupt = self.faults.corrupt
        if corrupt is not None:
            rng = random.Random(f"{corrupt}:{state.id}")
            cor = self._corrupt(state, rng, corrupt.get_int("bits") or 1)
            if cor is None:
                return None
        return StateKey(key.epoch, key.kept, key.torn, key.last, mis, cor)

    def _kept_pieces(self, state: State) -> list[tuple[int, list[tuple[int, int]]]]:
        """``(write, database pieces)`` of the state's kept writes that have any."""
        ep = state.epoch
        out = []
        for w in iter_bits(state.key.kept):
            p = _pieces(ep.writes[w], ep.sectorsize, self.spans)
            if p:
                out.append((w, p))
        return out

    def _misdirect(self, state: State, rng: random.Random) -> tuple[int, int] | None:
        ep = state.epoch
        own = [_write(ep.writes[w], ep.sectorsize) for w, _ in self._kept_pieces(state)]
        victims = ([*self._recent] + own)[-RECENT:]
        if not victims:
            return None
        index, at, length = rng.choice(victims)
        places = [off for off, _ in self._landing if off != at]
        if not places:
            return None
        fits = [off for off, n in self._landing if off != at and n >= length]
        return index, rng.choice(fits or places) // UNIT

    def _corrupt(self, state: State, rng: random.Random, nbits: int) -> tuple[int, int] | None:
        pieces = [p for _, ps in self._kept_pieces(state) for p in ps]
        if not pieces:
            pieces = sorted(self._before.items())
        if not pieces:
            return None
        off, n = rng.choice(pieces)
        sector = off // UNIT + rng.randrange(max(1, n // UNIT))
        bits = 0
        for b in rng.sample(range(SECTOR_BITS), min(nbits, SECTOR_BITS)):
            bits |= 1 << b
        return sector, bits
