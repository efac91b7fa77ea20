"""Epochs: the log cut at its FLUSH entries, read in one streaming pass.

Epoch 0 starts at the first entry; every FLUSH entry ends the current epoch
and starts the next.  Entries of epochs before E are durable in every crash
state of epoch E.  A FLUSH entry that carries data (or a discard) applies its
flush first: the data is the first write of the *new* epoch, and that
epoch's ``start`` is the FLUSH entry itself.  A write is durable where it
appears if it has the FUA flag (a PREFLUSH+FUA write therefore is; a
PREFLUSH write without FUA is an ordinary volatile write of the new epoch).
Only one epoch is held in memory at a time: memory grows with the size of
the largest epoch, never with the log or the number of states.

A lost flush (``harness/faults.py``, README.md: State faults) merges the
epochs on both sides of it into one (:func:`merge_epochs`): their writes,
marks and FUA flags in log order, the FLUSH between them a no-op.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.logformat import Entry, LogReader
from harness.marks import txn_mark


@dataclass(slots=True)
class Epoch:
    """One epoch of a log.  ``writes`` are its write and discard entries in
    log order; their position in the list is the epoch-relative write number
    that state IDs use."""

    index: int
    start: int  # entry index where it starts (after its FLUSH; the FLUSH itself if it has data)
    end: int = 0  # entry index of the FLUSH that ends it, or the log's entry count
    closed: bool = False  # ended by a FLUSH (the last epoch of a log may be open)
    sectorsize: int = 512
    writes: list[Entry] = field(default_factory=list)
    fua_mask: int = 0  # bit w set: write w is FUA (durable where it appears)
    # what the position of a write in the log means (harness/states/model.py):
    # "completion" (log order is completion order) or "dm-log-writes"
    log_order: str = "completion"
    marks_before: int = 0  # marks logged before this epoch
    acked_before: int = 0  # highest txn-ack:K before this epoch (0: none)
    begun_before: int = 0  # highest txn-begin:K before this epoch (0: none)
    last_mark_before: str | None = None  # label of the last mark before this epoch
    mark_at: list[int] = field(default_factory=list)  # entry index of each mark in the epoch
    mark_labels: list[str] = field(default_factory=list)
    acked_upto: list[int] = field(default_factory=list)  # highest ack after each mark
    begun_upto: list[int] = field(default_factory=list)
    flush: int | None = None  # entry index of the FLUSH that starts it (None: epoch 0)
    # a merged epoch (lost flushes): the last epoch merged in (None: not
    # merged), the entry index of each lost FLUSH, and the write number at
    # which the writes issued after each of them begin
    last: int | None = None
    lost_flushes: tuple[int, ...] = ()
    parts: tuple[int, ...] = ()

    @property
    def last_index(self) -> int:
        """The last epoch this one spans (its own index unless merged)."""
        return self.index if self.last is None else self.last

    @property
    def nr_writes(self) -> int:
        return len(self.writes)

    @property
    def full_mask(self) -> int:
        """Bitmask of all the epoch's writes."""
        return (1 << len(self.writes)) - 1

    def _marks_upto(self, entry: int) -> int:
        """How many of the epoch's marks lie before entry index ``entry``."""
        return bisect.bisect_left(self.mark_at, entry)

    def marks_before_entry(self, entry: int) -> int:
        """Marks in the whole log before entry index ``entry`` (in this epoch's span)."""
        return self.marks_before + self._marks_upto(entry)

    def acked_at(self, entry: int) -> int:
        """Highest K of a ``txn-ack:K`` mark before entry index ``entry``."""
        n = self._marks_upto(entry)
        return self.acked_upto[n - 1] if n else self.acked_before

    def begun_at(self, entry: int) -> int:
        """Highest K of a ``txn-begin:K`` mark before entry index ``entry``."""
        n = self._marks_upto(entry)
        return self.begun_upto[n - 1] if n else self.begun_before

    def last_mark_at(self, entry: int) -> str | None:
        """Label of the last mark before entry index ``entry`` (None: none)."""
        n = self._marks_upto(entry)
        return self.mark_labels[n - 1] if n else self.last_mark_before

    def _add_mark(self, entry: Entry) -> None:
        label = entry.label or ""
        acked = self.acked_upto[-1] if self.acked_upto else self.acked_before
        begun = self.begun_upto[-1] if self.begun_upto else self.begun_before
        txn = txn_mark(label)
        if txn is not None:
            if txn[0] == "ack":
                acked = max(acked, txn[1])
            else:
                begun = max(begun, txn[1])
        self.mark_at.append(entry.index)
        self.mark_labels.append(label)
        self.acked_upto.append(acked)
        self.begun_upto.append(begun)

    def _add_write(self, entry: Entry) -> None:
        if entry.is_fua:
            self.fua_mask |= 1 << len(self.writes)
        self.writes.append(entry)

    def _next(self, start: int, flush: int) -> Epoch:
        """The epoch that follows this one, starting at entry ``start``
        after the FLUSH at entry ``flush``."""
        return Epoch(
            self.index + 1,
            start,
            flush=flush,
            sectorsize=self.sectorsize,
            log_order=self.log_order,
            marks_before=self.marks_before + len(self.mark_at),
            acked_before=self.acked_upto[-1] if self.acked_upto else self.acked_before,
            begun_before=self.begun_upto[-1] if self.begun_upto else self.begun_before,
            last_mark_before=self.mark_labels[-1] if self.mark_labels else self.last_mark_before,
        )


def merge_epochs(epochs: list[Epoch]) -> Epoch:
    """Consecutive epochs as one, the FLUSHes between them lost: writes,
    FUA flags and marks concatenated in log order; its index is the first
    epoch's, ``last`` the last one's.  A FLUSH that carried data keeps its
    data as a write (the first of the epoch after it)."""
    first, final = epochs[0], epochs[-1]
    if any(
        b.index != a.index + 1 or not a.closed for a, b in zip(epochs, epochs[1:], strict=False)
    ):
        raise ValueError("merge_epochs: the epochs must be consecutive and closed")
    m = Epoch(
        first.index,
        first.start,
        final.end,
        final.closed,
        first.sectorsize,
        log_order=first.log_order,
        marks_before=first.marks_before,
        acked_before=first.acked_before,
        begun_before=first.begun_before,
        last_mark_before=first.last_mark_before,
        last=final.index,
    )
    lost: list[int] = []
    parts: list[int] = []
    for e in epochs:
        if e is not first:
            assert e.flush is not None
            lost.append(e.flush)
            parts.append(len(m.writes))
        m.fua_mask |= e.fua_mask << len(m.writes)
        m.writes.extend(e.writes)
        m.mark_at.extend(e.mark_at)
        m.mark_labels.extend(e.mark_labels)
        m.acked_upto.extend(e.acked_upto)
        m.begun_upto.extend(e.begun_upto)
    m.lost_flushes, m.parts = tuple(lost), tuple(parts)
    return m


def iter_epochs(reader: LogReader, log_order: str = "completion") -> Iterator[Epoch]:
    """Yield the log's epochs in order, each once it is complete.  The last
    one (possibly empty, if the log ends with a FLUSH) has ``closed`` False
    and ``end`` = the number of entries.  ``log_order``: see :class:`Epoch`."""
    epoch = Epoch(0, 0, sectorsize=reader.sectorsize, log_order=log_order)
    count = 0
    for entry in reader.entries():
        count = entry.index + 1
        if entry.is_flush:
            epoch.end = entry.index
            epoch.closed = True
            nxt = epoch._next(entry.index if entry.is_write else entry.index + 1, entry.index)
            yield epoch
            epoch = nxt
            if entry.is_write:
                epoch._add_write(entry)
        elif entry.is_mark:
            epoch._add_mark(entry)
        elif entry.is_write:
            epoch._add_write(entry)
    epoch.end = count
    yield epoch
