"""Streaming enumeration of a log's crash states: epochs → strategy →
window → dedup.

Window of marks: with ``window_start`` = A, only states whose crash interval
reaches past the first mark A are kept (``cut.hi > index(A)``); with
``window_end`` = B, only states whose interval starts no later than the
first mark B after A (``cut.lo <= index(B)``), and the walk stops after B's
epoch.  A named mark missing from the log is an error, found by a cheap
header-only pass before any state is produced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from harness.errors import CrashlabError
from harness.logformat import LogReader
from harness.states.coverage import EpochCoverage, possible_kept_sets
from harness.states.dedup import Folder
from harness.states.epochs import Epoch, iter_epochs
from harness.states.model import State
from harness.states.stateid import StateKey
from harness.states.strategies import Options, epoch_states


@dataclass(slots=True)
class Stats:
    """Counts of an enumeration so far."""

    epochs: int = 0  # epochs walked
    generated: int = 0  # states the strategy produced inside the window
    folded: int = 0  # of those, folded into an earlier identical state
    emitted: int = 0  # generated - folded
    coverage: list[EpochCoverage] = field(default_factory=list)  # epochs walked in full


def resolve_window(reader: LogReader, opts: Options) -> tuple[int | None, int | None]:
    """Entry indices of the window's marks (None where not asked for)."""
    want_a, want_b = opts.window_start, opts.window_end
    if want_a is None and want_b is None:
        return None, None
    a = b = None
    for entry in reader.entries():
        if not entry.is_mark:
            continue
        if a is None and want_a is not None:
            if entry.label == want_a:
                a = entry.index
            continue
        if want_b is not None and entry.label == want_b:
            b = entry.index
            break
    if want_a is not None and a is None:
        raise CrashlabError(f"{reader.path}: no mark named {want_a!r} (window start)")
    if want_b is not None and b is None:
        after = f" after {want_a!r}" if want_a is not None else ""
        raise CrashlabError(f"{reader.path}: no mark named {want_b!r}{after} (window end)")
    return a, b


class Enumeration:
    """The crash states of one log under ``opts``, deterministic and
    streaming.  Iterate it for the states, or :meth:`epochs` for
    ``(epoch, states)`` pairs (consume each epoch's states before asking for
    the next epoch).  ``on_fold(state, into_id)`` hears of every folded state.
    An Enumeration can be iterated once."""

    def __init__(
        self,
        reader: LogReader,
        opts: Options | None = None,
        *,
        on_fold: Callable[[State, str], None] | None = None,
    ) -> None:
        self.reader = reader
        self.opts = opts or Options()
        self.opts.validate()
        self.on_fold = on_fold
        self.stats = Stats()
        self._window = resolve_window(reader, self.opts)
        self._folder = Folder(reader) if self.opts.dedup else None

    def epochs(self) -> Iterator[tuple[Epoch, Iterator[State]]]:
        """Every epoch of the log up to the window's end, with the
        iterator of its states (empty for epochs outside the window)."""
        a, b = self._window
        for epoch in iter_epochs(self.reader, self.opts.log_order):
            if b is not None and epoch.start > b:
                return
            self.stats.epochs += 1
            yield epoch, self._states(epoch)

    def _states(self, epoch: Epoch) -> Iterator[State]:
        a, b = self._window
        if a is not None and epoch.end <= a:
            return
        opts = self.opts
        stats = self.stats
        folder = self._folder
        kept_sets: set[int] = set()
        generated = 0
        for kept, torn in epoch_states(epoch, opts):
            state = State(StateKey(epoch.index, kept, torn), epoch, stats.generated)
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
            stats.emitted += 1
            yield state
        if generated:
            stats.coverage.append(EpochCoverage(epoch.index, epoch.nr_writes, len(kept_sets),
                                                possible_kept_sets(epoch), generated))

    def __iter__(self) -> Iterator[State]:
        for _, states in self.epochs():
            yield from states


def enumerate_states(reader: LogReader, opts: Options | None = None) -> Iterator[State]:
    """Shorthand: the states of ``reader``'s log under ``opts``."""
    return iter(Enumeration(reader, opts))
