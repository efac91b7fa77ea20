"""One crash state's image from the base image, the simplest way: every
durable entry, then the state's overlay — the reference the faster
:class:`~harness.materialize.durable.DurableImage` is tested against."""

from __future__ import annotations

import os
from pathlib import Path

from harness.errors import CrashlabError
from harness.logformat import LogReader
from harness.materialize.faults import misdirect_extents
from harness.materialize.replay import apply_entry, apply_flips
from harness.states.model import State


def write_state_image(fd: int, reader: LogReader, state: State, base: Path | None = None) -> None:
    """Turn the base image open (read-write) at ``fd`` into ``state``'s
    image: apply the durable entries (``[0, state.durable_upto)``), then the
    overlay, then the state faults (a misdirected write needs ``base``, the
    base image's path: its places' content is worked out from it)."""
    fixes = []
    if state.key.misdirect is not None:
        if base is None:
            raise CrashlabError(f"state {state.id}: a misdirected write needs the base image")
        fixes = misdirect_extents(reader, base, state)
    for entry in reader.entries():
        if entry.index >= state.durable_upto:
            break
        apply_entry(fd, reader, entry)
    for offset, data in [*state.extents(reader), *fixes]:
        os.pwrite(fd, data, offset)
    apply_flips(fd, state.flips())
