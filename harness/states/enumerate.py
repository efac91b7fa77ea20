"""Streaming enumeration of a log's crash states: epochs → strategy →
window → dedup → state faults.

Window of marks: with ``window_start`` = A, only states whose crash interval
reaches past the first mark A are kept (``cut.hi > index(A)``); with
``window_end`` = B, only states whose interval starts no later than the
first mark B after A (``cut.lo <= index(B)``), and the walk stops after B's
epoch.  A mark is named by its whole label, or by its name without the
payload (``txn-ack:1`` for ``txn-ack:1;op=sync``).  A named mark missing
from the log, or a name several different labels share, is an error, found
by a cheap header-only pass before any state is produced.

State faults (``Options.faults``, ``harness/states/inject.py``): with
``lost-flush`` the epochs walked are the merged pairs around each FLUSH of
the window (or only the Nth), each with only the states a lying device
alone leaves; ``misdirect`` and ``corrupt`` then place their fault on each
state that dedup kept (one faulted variant per distinct image), and a state
where a fault has no place is left out (``Stats.unplaced``).  With state
faults only faulted states are enumerated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from harness.errors import CrashlabError
from harness.logformat import LogReader
from harness.marks import names_mark
from harness.states.coverage import EpochCoverage, possible_kept_sets
from harness.states.dedup import Folder
from harness.states.epochs import Epoch, iter_epochs, merge_epochs
from harness.states.inject import Spans, StateFaults, Targets, lost_flush_states
from harness.states.model import State
from harness.states.stateid import StateKey
from harness.states.strategies import BUDGETED, DEFAULT_BUDGET, Options, epoch_states


@dataclass(slots=True)
class Stats:
    """Counts of an enumeration so far."""

    epochs: int = 0  # epochs walked
    generated: int = 0  # states the strategy produced inside the window
    folded: int = 0  # of those, folded into an earlier identical state
    emitted: int = 0  # generated - folded - unplaced
    unplaced: int = 0  # of those, left out: a state fault had no place in them
    coverage: list[EpochCoverage] = field(default_factory=list)  # epochs walked in full


def resolve_window(reader: LogReader, opts: Options) -> tuple[int | None, int | None]:
    """Entry indices of the window's marks (None where not asked for); a
    mark is named by its whole label or, without a payload, by its name
    (:func:`harness.marks.names_mark`)."""
    want_a, want_b = opts.window_start, opts.window_end
    if want_a is None and want_b is None:
        return None, None
    marks = [(e.index, e.label) for e in reader.entries() if e.is_mark and e.label is not None]
    a = _find(reader, marks, want_a, "window start") if want_a is not None else None
    if want_b is None:
        return a, None
    after = [m for m in marks if a is None or m[0] > a]
    where = f" after {want_a!r}" if want_a is not None else ""
    return a, _find(reader, after, want_b, "window end", where)


def _find(
    reader: LogReader, marks: list[tuple[int, str]], want: str, what: str, where: str = ""
) -> int:
    """The entry of the first mark ``want`` names: the first whose whole
    label it is, else the first whose name it is when every such mark has
    the same label; CrashlabError when none, or when marks of different
    labels share that name (ambiguous: give the whole label)."""
    exact = [e for e, label in marks if label == want]
    if exact:
        return exact[0]
    named = [(e, label) for e, label in marks if names_mark(label, want)]
    if not named:
        raise CrashlabError(f"{reader.path}: no mark named {want!r}{where} ({what})")
    labels = list(dict.fromkeys(label for _, label in named))
    if len(labels) > 1:
        shown = ", ".join(repr(x) for x in labels[:3]) + (", ..." if len(labels) > 3 else "")
        raise CrashlabError(
            f"{reader.path}: {want!r}{where} ({what}) names {len(labels)} different marks "
            f"({shown}): give the whole label"
        )
    return named[0][0]


def plan_quotas(spaces: list[tuple[int, int, int]], budget: int) -> dict[int, int]:
    """Each epoch's quota of non-prefix kept sets under ``budget`` (states
    in all): ``spaces`` holds (epoch, prefixes, other valid kept sets) per
    epoch of the window.  The prefixes are always in; when every other set
    fits in what is left, every epoch gets all of its own (exhaustive);
    else what is left is shared out, smallest epochs first, each taking
    all of its own or an equal share of the rest (a sample)."""
    left = max(budget - sum(p for _, p, _ in spaces), 0)
    quotas: dict[int, int] = {}
    todo = sorted(spaces, key=lambda s: (s[2], s[0]))
    for i, (epoch, _, other) in enumerate(todo):
        share = left // (len(todo) - i)
        quotas[epoch] = min(other, share)
        left -= quotas[epoch]
    return quotas


class Enumeration:
    """The crash states of one log under ``opts``, deterministic and
    streaming.  Iterate it for the states, or :meth:`epochs` for
    ``(epoch, states)`` pairs (consume each epoch's states before asking for
    the next epoch).  ``on_fold(state, into_id)`` hears of every folded state.
    ``targets``: the database file's device spans, where misdirect and
    corrupt faults aim (None: every block the run writes).
    An Enumeration can be iterated once."""

    def __init__(
        self,
        reader: LogReader,
        opts: Options | None = None,
        *,
        on_fold: Callable[[State, str], None] | None = None,
        targets: Spans | None = None,
    ) -> None:
        self.reader = reader
        self.opts = opts or Options()
        self.opts.validate()
        self.on_fold = on_fold
        self.stats = Stats()
        self._window = resolve_window(reader, self.opts)
        self._folder = Folder(reader) if self.opts.dedup else None
        self.faults = StateFaults.of(self.opts.faults)
        self._targets = Targets(self.faults, targets) if self.faults.targeted else None
        self.quotas = self._plan()

    def _plan(self) -> dict[int, int] | None:
        """Each walked epoch's quota of the budget (None: no budget, or a
        strategy it does not plan), from a first walk of the log."""
        opts = self.opts
        if opts.budget is None or opts.strategy not in BUDGETED:
            return None
        a, _ = self._window
        spaces = [
            (e.index, e.nr_writes + 1, possible_kept_sets(e) - (e.nr_writes + 1))
            for e, _ in self._walk()
            if e is not None and (a is None or e.end > a)
        ]
        return plan_quotas(spaces, opts.budget or DEFAULT_BUDGET)

    @property
    def sampled(self) -> bool:
        """Whether the budget left some epoch's kept sets to a sample."""
        return self.quotas is not None and any(
            c.kept_checked < c.kept_possible for c in self.stats.coverage
        )

    def epochs(self) -> Iterator[tuple[Epoch, Iterator[State]]]:
        """Every epoch of the log up to the window's end, with the
        iterator of its states (empty for epochs outside the window); with
        a lost flush, the merged epochs instead."""
        for epoch, seen in self._walk():
            self.stats.epochs += 1
            if self._targets is not None:
                self._targets.see(seen)
            if epoch is not None:
                yield epoch, self._states(epoch)

    def _walk(self) -> Iterator[tuple[Epoch | None, Epoch]]:
        """The epochs walked up to the window's end: (the epoch whose states
        are enumerated or None, the epoch the fault targets see) — each
        epoch itself; with a lost flush, the merged epochs, and the others
        with no states."""
        if self.faults.lost_flush is not None:
            yield from self._merged_epochs()
            return
        _, b = self._window
        for epoch in iter_epochs(self.reader, self.opts.log_order):
            if b is not None and epoch.start > b:
                return
            yield epoch, epoch

    def _merged_epochs(self) -> Iterator[tuple[Epoch | None, Epoch]]:
        """For each FLUSH of the window (after the start mark, at or before
        the end mark), or only the Nth, the two epochs around it merged
        (walked with its states); every other epoch is walked without."""
        assert self.faults.lost_flush is not None
        nth = self.faults.lost_flush.get("nth")
        a, b = self._window
        prev: Epoch | None = None
        count = 0
        for epoch in iter_epochs(self.reader, self.opts.log_order):
            if b is not None and epoch.start > b:
                return
            flush = epoch.flush
            if (
                prev is not None
                and flush is not None
                and (a is None or flush > a)
                and (b is None or flush <= b)
            ):
                count += 1
                if nth is None or count == nth:
                    merged = merge_epochs([prev, epoch])
                    yield merged, merged
                    prev = epoch
                    continue
            yield None, epoch
            prev = epoch

    def _states(self, epoch: Epoch) -> Iterator[State]:
        a, b = self._window
        if a is not None and epoch.end <= a:
            return
        opts = self.opts
        stats = self.stats
        folder = self._folder
        quota = self.quotas.get(epoch.index, 0) if self.quotas is not None else None
        pairs = epoch_states(epoch, opts, quota)
        if epoch.lost_flushes:
            pairs = lost_flush_states(epoch, pairs)
            # a merged epoch shares its writes with its neighbours, not its
            # durable base: fold its states among themselves only
            folder = Folder(self.reader) if folder is not None else None
        kept_sets: set[int] = set()
        generated = 0
        for kept, torn in pairs:
            state = State(StateKey(epoch.index, kept, torn, epoch.last), epoch, stats.generated)
            cut = state.cut
            if (a is not None and cut.hi <= a) or (b is not None and cut.lo > b):
                continue
            stats.generated += 1
            generated += 1
            kept_sets.add(kept)
            if folder is not None:
                into = folder.fold(state)
                if into is not None:
                    stats.folded += 1
                    if self.on_fold is not None:
                        self.on_fold(state, into)
                    continue
            if self._targets is not None:
                key = self._targets.apply(state)
                if key is None:
                    stats.unplaced += 1
                    continue
                state = State(key, epoch, state.ordinal)
            stats.emitted += 1
            yield state
        if generated:
            stats.coverage.append(
                EpochCoverage(
                    epoch.index,
                    epoch.nr_writes,
                    len(kept_sets),
                    possible_kept_sets(epoch),
                    generated,
                )
            )

    def __iter__(self) -> Iterator[State]:
        for _, states in self.epochs():
            yield from states


def enumerate_states(reader: LogReader, opts: Options | None = None) -> Iterator[State]:
    """Shorthand: the states of ``reader``'s log under ``opts``."""
    return iter(Enumeration(reader, opts))
