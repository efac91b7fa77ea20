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

import os

from harness.errors import CrashlabError
from harness.logformat import LogReader
from harness.replay import apply_entry
from harness.states.epochs import Epoch
from harness.states.model import State, item_extents


class OverlayImage:
    """An image open at ``fd`` whose durable base is epoch ``epoch``'s
    (for epoch 0: the base image itself), with at most one state's overlay
    on top.  Does not own ``fd``."""

    def __init__(self, fd: int, reader: LogReader, epoch: int = 0) -> None:
        self.fd = fd
        self.reader = reader
        self.epoch = epoch
        # Applied overlay items, each with the (offset, original bytes) it
        # overwrote, in application order.
        self._stack: list[tuple[tuple[int, int], list[tuple[int, bytes]]]] = []
        self._writes: list = []  # the Epoch.writes the stack refers to

    def goto(self, state: State) -> None:
        """Make the image hold exactly ``state``'s image."""
        if state.epoch.index != self.epoch:
            raise CrashlabError(
                f"state {state.id} is of epoch {state.epoch.index}, the image holds epoch "
                f"{self.epoch}: advance() it first"
            )
        program = state.program()
        keep = 0
        if self._writes is state.epoch.writes:
            limit = min(len(program), len(self._stack))
            while keep < limit and self._stack[keep][0] == program[keep]:
                keep += 1
        self._undo_to(keep)
        self._writes = state.epoch.writes
        fd = self.fd
        for item in program[keep:]:
            saved: list[tuple[int, bytes]] = []
            for offset, data in item_extents(self.reader, state.epoch.writes[item[0]], item[1]):
                saved.append((offset, os.pread(fd, len(data), offset)))
                os.pwrite(fd, data, offset)
            self._stack.append((item, saved))

    def reset(self) -> None:
        """Take every overlay item off: the image is the durable base again."""
        self._undo_to(0)

    def _undo_to(self, depth: int) -> None:
        fd = self.fd
        while len(self._stack) > depth:
            _, saved = self._stack.pop()
            for offset, data in reversed(saved):
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
        self._writes = []


def write_state_image(fd: int, reader: LogReader, state: State) -> None:
    """Turn the base image open at ``fd`` into ``state``'s image: apply the
    durable entries (``[0, state.durable_upto)``), then the overlay."""
    for entry in reader.entries():
        if entry.index >= state.durable_upto:
            break
        apply_entry(fd, reader, entry)
    for offset, data in state.extents(reader):
        os.pwrite(fd, data, offset)
