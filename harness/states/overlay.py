"""Applying a state's overlay to an image, and taking it off again.

:class:`OverlayImage` wraps a file descriptor holding the durable base of an
epoch.  :meth:`~OverlayImage.goto` puts a state of that epoch on it, saving
the bytes it overwrites; moving to the next state first undoes only the
items the two states do not share (states come out of the strategies with
long common prefixes: ``p3`` → ``p4`` is one write), then applies the rest.
:meth:`~OverlayImage.advance` turns the image into the next epoch's durable
base.  One image thus serves every state of a log; nothing is copied per
state.  Recovery writes to an image: hand recovery a copy, not this one.
"""

from __future__ import annotations

import bisect
import os

from harness.errors import CrashlabError
from harness.logformat import Entry, LogReader
from harness.replay import apply_entry
from harness.states.epochs import Epoch
from harness.states.model import State, item_extents
from harness.states.stateid import iter_bits


def _torn_mask(torn: dict[int, int]) -> int:
    m = 0
    for w in torn:
        m |= 1 << w
    return m


class OverlayImage:
    """An image open at ``fd`` whose durable base is epoch ``epoch``'s
    (for epoch 0: the base image itself), with at most one state's overlay
    on top.  Does not own ``fd``."""

    def __init__(self, fd: int, reader: LogReader, epoch: int = 0) -> None:
        self.fd = fd
        self.reader = reader
        self.epoch = epoch
        # The applied state: its kept mask and torn writes, the write number
        # of each applied item (ascending) and the (offset, original bytes)
        # each item overwrote, in application order.
        self._writes: list[Entry] | None = None  # the Epoch.writes they refer to
        self._kept = 0
        self._torn: dict[int, int] = {}
        self._items: list[int] = []
        self._saved: list[list[tuple[int, bytes]]] = []

    def goto(self, state: State) -> None:
        """Make the image hold exactly ``state``'s image.  Costs the items
        from the first write where the two states differ onwards."""
        if state.epoch.index != self.epoch:
            raise CrashlabError(
                f"state {state.id} is of epoch {state.epoch.index}, the image holds epoch "
                f"{self.epoch}: advance() it first"
            )
        kept, torn = state.key.kept, dict(state.key.torn)
        if self._writes is state.epoch.writes:
            diff = (kept ^ self._kept) | _torn_mask(torn) | _torn_mask(self._torn)
            for w, units in torn.items():
                if self._torn.get(w) == units:
                    diff &= ~(1 << w)
            if not diff:
                return
            first = (diff & -diff).bit_length() - 1
        else:
            first = 0
        self._undo_to(bisect.bisect_left(self._items, first))
        self._writes = state.epoch.writes
        self._kept, self._torn = kept, torn
        fd = self.fd
        for w in iter_bits((kept | _torn_mask(torn)) >> first << first):
            saved: list[tuple[int, bytes]] = []
            for offset, data in item_extents(self.reader, self._writes[w], torn.get(w, -1)):
                saved.append((offset, os.pread(fd, len(data), offset)))
                os.pwrite(fd, data, offset)
            self._items.append(w)
            self._saved.append(saved)

    def reset(self) -> None:
        """Take every overlay item off: the image is the durable base again."""
        self._undo_to(0)
        self._kept, self._torn = 0, {}

    def _undo_to(self, depth: int) -> None:
        fd = self.fd
        while len(self._items) > depth:
            self._items.pop()
            for offset, data in reversed(self._saved.pop()):
                os.pwrite(fd, data, offset)

    def advance(self, epoch: Epoch) -> None:
        """Apply all of ``epoch`` (the one the image is at) for good: the
        image becomes the durable base of the next epoch."""
        if epoch.index != self.epoch:
            raise CrashlabError(f"advance from epoch {epoch.index}: the image is at {self.epoch}")
        self.reset()
        for entry in epoch.writes:
            apply_entry(self.fd, self.reader, entry)
        self.epoch += 1
        self._writes = None
        self._kept, self._torn = 0, {}


def write_state_image(fd: int, reader: LogReader, state: State) -> None:
    """Turn the base image open at ``fd`` into ``state``'s image: apply the
    durable entries (``[0, state.durable_upto)``), then the overlay."""
    for entry in reader.entries():
        if entry.index >= state.durable_upto:
            break
        apply_entry(fd, reader, entry)
    for offset, data in state.extents(reader):
        os.pwrite(fd, data, offset)
