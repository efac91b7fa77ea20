"""A misdirected write in a crash state's image (``harness/states/``: the
``.mN@S`` part of a state ID): the write of log entry N landed at sector S,
and its own place kept what it held before it.

The write may be of the state's epoch or durable before it, and later
writes may cover either place, so the final content of both places is
worked out from the log itself: the base image's bytes there, then every
write of the state in log order (the durable entries, then the overlay),
the misdirected one applied at its landing place.  Those bytes are written
after the overlay; the rest of the image is as without the fault.  Cost: a
walk over the log's entry headers up to the state's epoch, payloads read
only where a write touches the two places.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from harness.logformat import Entry, LogReader
from harness.states.model import State, item_extents
from harness.states.stateid import UNIT


def misdirect_extents(reader: LogReader, base: Path, state: State) -> list[tuple[int, bytes]]:
    """``(device offset, data)`` to write after the state's overlay: the
    final content of the misdirected write's own place and landing place
    (none without a misdirect fault)."""
    victim = state.victim(reader)
    if victim is None:
        return []
    assert state.key.misdirect is not None
    ss = reader.sectorsize
    length = victim.nr_sectors * ss
    own, land = victim.sector * ss, state.key.misdirect[1] * UNIT
    units: dict[int, bytearray] = {}
    fd = os.open(base, os.O_RDONLY)
    try:
        for start in (own, land):
            for off in range(start, start + length, UNIT):
                if off not in units:
                    units[off] = bytearray(os.pread(fd, UNIT, off).ljust(UNIT, b"\0"))
    finally:
        os.close(fd)

    def put(offset: int, data: bytes) -> None:
        """Copy the parts of ``data`` (at ``offset``) that fall on the units."""
        for u in range(offset - offset % UNIT, offset + len(data), UNIT):
            buf = units.get(u)
            if buf is None:
                continue
            lo, hi = max(u, offset), min(u + UNIT, offset + len(data))
            buf[lo - u : hi - u] = data[lo - offset : hi - offset]

    def apply(entry: Entry, extents: Iterator[tuple[int, bytes]]) -> None:
        for off, data in extents:
            put(land + off - own if entry.index == victim.index else off, data)

    lo, hi = min(units), max(units) + UNIT
    for e in reader.entries():
        if e.index >= state.durable_upto:
            break
        if e.is_write and e.sector * ss < hi and (e.sector + e.nr_sectors) * ss > lo:
            apply(e, item_extents(reader, e, -1))
    for w, persisted in state.program():
        e = state.epoch.writes[w]
        apply(e, item_extents(reader, e, persisted))
    return _merged(units)


def _merged(units: dict[int, bytearray]) -> list[tuple[int, bytes]]:
    """Adjacent units as one extent each, ascending."""
    out: list[tuple[int, bytes]] = []
    for off in sorted(units):
        if out and out[-1][0] + len(out[-1][1]) == off:
            out[-1] = (out[-1][0], out[-1][1] + bytes(units[off]))
        else:
            out.append((off, bytes(units[off])))
    return out
