"""The search for a smallest failing crash state, generic over the judge.

:func:`shrink` takes a failing state's key, a predicate ``fails(key)`` (does
this state still fail the invariant?) and a :class:`Space` that says which
keys the crash model allows; it never asks ``fails`` about a key the model
forbids, and asks about each key at most once.  "Smallest" and the order of
the phases are in README.md beside this file:

1. crash point: the earliest (epoch, writes considered) whose most lossy
   state of the same kind fails (:func:`lossiest`);
2. drops: delta debugging (:func:`ddmin`) over the dropped writes, trying
   to keep them;
3. tears: ddmin over each torn write's missing units, trying to restore them;
4. then one crash point back with the same drops (the last persisted write
   not persisted), and phases 2-3 again while that still fails.

The kind of a state (prefix, reorder, torn, torn-reorder: :func:`kind_of`)
only gets simpler: phase 1 keeps it; phases 2-3 first try every dropped
write kept (every missing unit restored), and a state that fails without
its drops or its tear is searched again as the simpler kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

from harness.errors import CrashlabError
from harness.states.epochs import Epoch, merge_epochs
from harness.states.model import check_valid, compute_cut, lost_fua, write_units
from harness.states.stateid import StateKey, iter_bits

T = TypeVar("T")
Fails = Callable[[StateKey], bool]


class NotFailing(CrashlabError):
    """The state to shrink is not a failing state the model allows."""


class Space(Protocol):
    """The crash model as the search needs it."""

    def nr_writes(self, key: StateKey) -> int:
        """Writes of the (possibly merged) epoch ``key`` names."""
        ...

    def units(self, key: StateKey, write: int) -> int:
        """512-byte units of write ``write`` of ``key``'s epoch."""
        ...

    def forced(self, key: StateKey) -> int:
        """Writes a state with ``key``'s last write must keep (FUA writes
        that completed before it): 0 for a valid key."""
        ...

    def valid(self, key: StateKey) -> bool:
        """Whether the crash model allows ``key``."""
        ...


Window = tuple[int | None, int | None]


class EpochSpace:
    """:class:`Space` over a log's epochs ``0..N`` in order (as
    :func:`harness.states.epochs.iter_epochs` yields them, or made by hand),
    with the model's own :func:`check_valid`; ``window``: the entry indices
    of a check's window marks (``harness.states.resolve_window``), outside
    which no state is valid, as the check's enumeration keeps none there."""

    def __init__(self, epochs: Sequence[Epoch], window: Window = (None, None)) -> None:
        self.epochs = list(epochs)
        self.window = window
        self._merged: dict[tuple[int, int], Epoch] = {}

    def epoch(self, key: StateKey) -> Epoch:
        """The epoch ``key`` names, merged over its lost flushes."""
        if key.last is None:
            return self.epochs[key.epoch]
        span = (key.epoch, key.last)
        if span not in self._merged:
            self._merged[span] = merge_epochs(self.epochs[key.epoch : key.last + 1])
        return self._merged[span]

    def nr_writes(self, key: StateKey) -> int:
        return self.epoch(key).nr_writes

    def units(self, key: StateKey, write: int) -> int:
        ep = self.epoch(key)
        return write_units(ep.writes[write], ep.sectorsize)

    def forced(self, key: StateKey) -> int:
        return lost_fua(self.epoch(key), key.kept, key.kept | key.torn_mask)

    def valid(self, key: StateKey) -> bool:
        if key.last_epoch >= len(self.epochs):
            return False
        try:
            check_valid(self.epoch(key), key)
        except CrashlabError:
            return False
        return self.in_window(key)

    def in_window(self, key: StateKey) -> bool:
        """Whether ``key``'s crash interval lies in the window, as the
        enumeration decides it (``harness/states/enumerate.py``)."""
        a, b = self.window
        if a is None and b is None:
            return True
        cut = compute_cut(self.epoch(key), key.kept, key.torn_mask)
        return (a is None or cut.hi > a) and (b is None or cut.lo <= b)


def members(key: StateKey) -> int:
    """The writes a state persisted, wholly or in part."""
    return key.kept | key.torn_mask


def dropped(key: StateKey) -> int:
    """Writes issued before the state's last write that it lacks entirely."""
    m = members(key)
    return ((1 << m.bit_length()) - 1) & ~m


def kind_of(key: StateKey) -> str:
    """``prefix``, ``reorder`` (writes dropped), ``torn`` or ``torn-reorder``."""
    if key.torn:
        return "torn-reorder" if dropped(key) else "torn"
    return "reorder" if dropped(key) else "prefix"


@dataclass
class Judge:
    """``fails`` with the model's filter and a memo: a key the model
    forbids is no failure and is not judged; :attr:`judged` counts the
    distinct keys judged."""

    fails: Fails
    space: Space
    # phase 1 looks at every epoch before the state's (False: its own only)
    whole_log: bool = True
    memo: dict[StateKey, bool] = field(default_factory=dict)
    # states already shrunk -> their minimal state: a search that reaches
    # one stops there (shared by the searches of one run and invariant)
    known: dict[StateKey, StateKey] = field(default_factory=dict)

    @property
    def judged(self) -> int:
        return len(self.memo)

    def __call__(self, key: StateKey) -> bool:
        if key not in self.memo:
            if not self.space.valid(key):
                return False
            self.memo[key] = self.fails(key)
        return self.memo[key]


def ddmin(items: Sequence[T], test: Callable[[Sequence[T]], bool]) -> list[T]:
    """A 1-minimal sub-list of ``items`` (which fails: ``test`` is true of
    it) on which ``test`` is still true: Zeller's delta debugging.  Never
    tests the empty list; keeps the order of ``items``."""
    items = list(items)
    n = 2
    while len(items) >= 2:
        chunks = [items[len(items) * i // n : len(items) * (i + 1) // n] for i in range(n)]
        chunk = next((c for c in chunks if test(c)), None)
        if chunk is not None:
            items, n = chunk, 2
            continue
        rests = [[x for x in items if x not in c] for c in chunks] if n > 2 else []
        rest = next((r for r in rests if test(r)), None)
        if rest is not None:
            items, n = rest, max(n - 1, 2)
        elif n >= len(items):
            break
        else:
            n = min(2 * n, len(items))
    return items


def lossiest(space: Space, like: StateKey, at: StateKey) -> StateKey | None:
    """The state of ``like``'s kind at the crash point of ``at`` (its epoch,
    and its ``kept`` as the writes ``0..m-1`` considered) that loses the
    most: a prefix keeps them all; a reorder state keeps write m-1 alone;
    a torn one tears write m-1 to its first unit (torn: over the others
    kept, torn-reorder: alone); the writes the model forces are kept too.
    The faults of ``like`` are carried over.  None: the kind has no state
    at that point."""
    m = at.kept.bit_length()
    kind = kind_of(like)
    if kind == "prefix":
        return replace(like, epoch=at.epoch, kept=at.kept, torn=())
    if m == 0:
        return None
    torn = ((m - 1, 1),) if kind in ("torn", "torn-reorder") else ()
    if torn and space.units(at, m - 1) < 2:
        return None
    kept = {"torn": (1 << (m - 1)) - 1, "reorder": 1 << (m - 1)}.get(kind, 0)
    base = replace(like, epoch=at.epoch, kept=kept, torn=torn)
    key = replace(base, kept=kept | space.forced(base))
    return key if kind_of(key) == kind else None


def crash_points(space: Space, key: StateKey, whole_log: bool = True) -> Iterator[StateKey]:
    """The crash points before ``key``'s, earliest first, each as the
    prefix key ``p m`` of its epoch: every epoch from 0 (``whole_log``,
    and a key without faults), else only ``key``'s own (possibly merged)
    epoch."""
    last = members(key).bit_length()
    own = key.faulted or not whole_log
    epochs = range(key.epoch, key.epoch + 1) if own else range(key.epoch + 1)
    for e in epochs:
        probe = replace(key, epoch=e, kept=0, torn=())
        n = last - 1 if e == key.epoch else space.nr_writes(probe)
        for m in range(n + 1):
            yield replace(probe, kept=(1 << m) - 1)


def earliest(judge: Judge, key: StateKey) -> StateKey:
    """Phase 1: the lossiest state of ``key``'s kind at the earliest crash
    point where it fails (``key`` itself when none before its own does)."""
    for point in crash_points(judge.space, key, judge.whole_log):
        cand = lossiest(judge.space, key, point)
        if cand is not None and judge(cand):
            return cand
    return key


def mask_of(bits: Sequence[int]) -> int:
    """The bitmask with ``bits`` set."""
    m = 0
    for b in bits:
        m |= 1 << b
    return m


def with_drops(key: StateKey, drops: Sequence[int]) -> StateKey:
    """``key`` with exactly ``drops`` of the writes before its last dropped
    (the others kept), its torn writes as they are."""
    full = (1 << members(key).bit_length()) - 1
    return replace(key, kept=full & ~key.torn_mask & ~mask_of(drops))


def fewest_drops(judge: Judge, key: StateKey) -> StateKey:
    """Phase 2: ddmin over the dropped writes, restoring (keeping) them;
    every one of them first (the state's failure may need no reordering)."""
    drops = list(iter_bits(dropped(key)))
    if drops and judge(with_drops(key, [])):
        return with_drops(key, [])
    return with_drops(key, ddmin(drops, lambda ds: judge(with_drops(key, ds))))


def with_missing(key: StateKey, i: int, full: int, missing: Sequence[int]) -> StateKey:
    """``key`` with its ``i``-th torn write (of ``full`` units) missing
    exactly the units ``missing``."""
    torn = list(key.torn)
    write = torn[i][0]
    if not missing:  # wholly restored: kept
        return replace(key, kept=key.kept | 1 << write, torn=tuple(torn[:i] + torn[i + 1 :]))
    torn[i] = (write, full & ~mask_of(missing))
    return replace(key, torn=tuple(torn))


def smallest_tears(judge: Judge, key: StateKey) -> StateKey:
    """Phase 3: ddmin over each torn write's missing units, restoring them;
    all of them first (the failure may need no tear: the write is kept)."""
    i = 0
    while i < len(key.torn):
        full = (1 << judge.space.units(key, key.torn[i][0])) - 1
        missing = _fewest_missing(judge, key, i, full)
        key = with_missing(key, i, full, missing)
        i += bool(missing)
    return key


def _fewest_missing(judge: Judge, key: StateKey, i: int, full: int) -> list[int]:
    """The units left missing of ``key``'s ``i``-th torn write: none when
    the state fails with the write whole, else what ddmin leaves."""
    if judge(with_missing(key, i, full, [])):
        return []
    missing = list(iter_bits(full & ~key.torn[i][1]))
    return ddmin(missing, lambda ms: judge(with_missing(key, i, full, ms)))


def step_back(key: StateKey) -> StateKey | None:
    """``key`` one crash point back with the same drops: its last write
    not persisted (None: that write is torn, or there is none)."""
    last = members(key).bit_length() - 1
    if last < 0 or not key.kept >> last & 1:
        return None
    return replace(key, kept=key.kept & ~(1 << last))


@dataclass(frozen=True)
class Shrunk:
    """What :func:`shrink` found: the minimal key and how many distinct
    candidate states it judged (the original included)."""

    original: StateKey
    minimal: StateKey
    judged: int


def shrink_with(judge: Judge, key: StateKey) -> StateKey:
    """The phases of :func:`shrink` on a key ``judge`` finds failing.  Each
    round makes (crash point, drops, missing units) smaller or stops; a
    state that turned out not to need its drops or tear is of a simpler
    kind, and the search over crash points starts again for that kind.
    Every state the search passes through is then known to shrink to the
    result (``judge.known``), and a search that reaches a known one stops."""
    path = [key]
    key = earliest(judge, key)
    while key not in judge.known:
        path.append(key)
        new = smallest_tears(judge, fewest_drops(judge, key))
        back = step_back(new)
        if back is not None and judge(back):
            new = back
        if new == key:
            break
        key = new if kind_of(new) == kind_of(key) else earliest(judge, new)
    result = judge.known.get(key, key)
    for k in path:
        judge.known[k] = result
    return result


def shrink(key: StateKey, fails: Fails, space: Space, *, whole_log: bool = True) -> Shrunk:
    """A smallest state of ``key``'s kind that still ``fails`` (README.md),
    its crash point searched over the whole log or (not ``whole_log``)
    over ``key``'s epoch; :class:`NotFailing` (one line) when ``key``
    itself is not a failing state the model allows."""
    judge = Judge(fails, space, whole_log)
    if not judge(key):
        raise NotFailing(f"state {key}: not a failing state of the crash model")
    return Shrunk(key, shrink_with(judge, key), judge.judged)


Keys = tuple[StateKey, ...]


@dataclass
class PartSpace:
    """The space of part ``i`` of a composite state ``keys``: part ``i``'s
    own (the continuation after the parts before it), and a candidate is
    valid only when every later part is valid in the continuation after
    it too (``space_of`` of a prefix of parts; None: none recorded)."""

    space_of: Callable[[Keys], Space | None]
    keys: Keys
    i: int

    @property
    def own(self) -> Space:
        space = self.space_of(self.keys[: self.i])
        assert space is not None  # the composite being shrunk is valid
        return space

    def nr_writes(self, key: StateKey) -> int:
        return self.own.nr_writes(key)

    def units(self, key: StateKey, write: int) -> int:
        return self.own.units(key, write)

    def forced(self, key: StateKey) -> int:
        return self.own.forced(key)

    def valid(self, key: StateKey) -> bool:
        keys = self.keys[: self.i] + (key,) + self.keys[self.i + 1 :]
        for j in range(self.i, len(keys)):
            space = self.space_of(keys[:j])
            if space is None or not space.valid(keys[j]):
                return False
        return True


def shrink_composite(
    keys: Keys,
    fails: Callable[[Keys], bool],
    space_of: Callable[[Keys], Space | None],
    *,
    whole_log: bool = True,
    memo: dict[Keys, bool] | None = None,
    known: dict[Keys, Keys] | None = None,
) -> tuple[Keys, int]:
    """A composite state (crash, recover and continue, crash ...) shrunk
    one crash at a time, first to last, each by :func:`shrink`'s phases
    with the others fixed; ``space_of(prefix)`` is the space of the crash
    after the crashes ``prefix`` (None: that continuation was not
    recorded, so no candidate lies there).  Returns the minimal keys and
    the distinct composite states judged (``whole_log``: as :func:`shrink`).
    ``memo`` (composite state -> fails) and, for a one-crash state,
    ``known`` (state -> its minimal state) may be shared by the searches
    of one run and invariant, which then judge no state twice."""
    memo = {} if memo is None else memo

    def judged(ks: Keys) -> bool:
        if ks not in memo:
            memo[ks] = fails(ks)
        return memo[ks]

    if not PartSpace(space_of, keys, 0).valid(keys[0]) or not judged(keys):
        raise NotFailing(
            f"state {'/'.join(map(str, keys))}: not a failing state of the crash model"
        )
    single: dict[StateKey, StateKey] = {}
    if known is not None and len(keys) == 1:
        single = {k[0]: v[0] for k, v in known.items() if len(k) == 1}
    for i in range(len(keys)):
        part = PartSpace(space_of, keys, i)
        at = keys

        def fails_i(key: StateKey, at: Keys = at, i: int = i) -> bool:
            return judged(at[:i] + (key,) + at[i + 1 :])

        judge = Judge(fails_i, part, whole_log, known=single if len(keys) == 1 else {})
        keys = keys[:i] + (shrink_with(judge, keys[i]),) + keys[i + 1 :]
    if known is not None and len(keys) == 1:
        known.update({(k,): (v,) for k, v in single.items()})
    return keys, len(memo)
