"""The emulated NVRAM of a crash state (a SUT with ``Sut.nvram``).

The recorder puts the NVRAM after the disk in the same log (meta.json
``nvram`` = {offset, bytes}: FUA writes at the sectors after the disk's), so
a state's image is the disk followed by the NVRAM as the state left it.
The check stage hands the NVRAM to the SUT's recovery as a file beside the
recovered database: ``<db>.nvram`` (``NVRAM_SUFFIX``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.logformat import FUA, LogReader, LogWriter

NVRAM_SUFFIX = ".nvram"


def nvram_region(extra: Mapping[str, Any]) -> tuple[int, int] | None:
    """(offset, bytes) of a run's NVRAM from meta.json's extra keys; None
    for a run without one."""
    nv = extra.get("nvram")
    if not nv:
        return None
    return int(nv["offset"]), int(nv["bytes"])


def read_nvram(image: Path, region: tuple[int, int]) -> bytes:
    """The NVRAM's bytes in a state's ``image``: zeros where the image ends
    before them (no write of the log reached that far)."""
    offset, size = region
    fd = os.open(image, os.O_RDONLY)
    try:
        data = os.pread(fd, size, offset)
    finally:
        os.close(fd)
    return data + bytes(size - len(data))


def strip_nvram_fua(log: Path, out: Path, region: tuple[int, int]) -> int:
    """Copy the log ``log`` to ``out`` with the FUA flag taken off every
    write to the NVRAM ``region``: the recording as it would be if the NVRAM
    were a volatile cache (its writes durable only at the next FLUSH), the
    broken variant the NVRAM's contract must be shown to matter against.
    Returns how many writes lost the flag."""
    first = region[0]
    stripped = 0
    with LogReader(log) as reader, LogWriter(out, reader.sectorsize) as writer:
        for e in reader.entries():
            if e.is_mark:
                writer.mark(e.label or "")
            elif e.is_discard:
                writer.discard(e.sector, e.nr_sectors)
            elif e.has_payload:
                flags = e.flags
                if e.sector * reader.sectorsize >= first and flags & FUA:
                    flags &= ~FUA
                    stripped += 1
                writer.write(e.sector, reader.payload(e), flags)
            else:
                writer.flush()
    return stripped
