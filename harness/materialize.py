"""Materialise crash-state images fast.

A worker keeps one *durable image*: the base image with every log entry
before some entry number applied.  States are handed out in log order, so
the durable image only ever moves forward and each worker applies the log
about once in all.  A state's image is a *scratch* copy of the durable image
(data extents only: a sparse copy of a 64 MiB image with a few MiB of data
costs about a millisecond on tmpfs) with the state's overlay writes on top.
The scratch copy is needed because recovery (journal replay, SQLite hot
journal rollback, DHL recovery) writes to the image.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from harness.errors import CrashlabError
from harness.logformat import Entry, LogReader
from harness.replay import apply_entry


def sparse_copy(src: Path, dst: Path) -> None:
    """Make ``dst`` a copy of ``src`` that shares its holes: only the data
    extents (SEEK_DATA/SEEK_HOLE) are copied, in the kernel."""
    sfd = os.open(src, os.O_RDONLY)
    try:
        size = os.fstat(sfd).st_size
        dfd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(dfd, size)
            pos = 0
            while pos < size:
                try:
                    start = os.lseek(sfd, pos, os.SEEK_DATA)
                except OSError:  # ENXIO: no data after pos
                    break
                end = os.lseek(sfd, start, os.SEEK_HOLE)
                _copy_range(sfd, dfd, start, end, src)
                pos = end
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _copy_range(sfd: int, dfd: int, start: int, end: int, src: Path) -> None:
    """Copy bytes [start, end) at the same offsets, in the kernel:
    copy_file_range within one file system, sendfile across two."""
    done = start
    while done < end:
        try:
            n = os.copy_file_range(sfd, dfd, end - done, done, done)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            os.lseek(dfd, done, os.SEEK_SET)
            n = os.sendfile(dfd, sfd, done, end - done)
        if n <= 0:
            raise CrashlabError(f"copying {src}: short copy at byte {done}")
        done += n


class DurableImage:
    """A worker-local image that holds log entries ``[0, position)``.

    :meth:`advance` applies entries up to a later position; asking for an
    earlier one rebuilds from the base (callers hand out work in log order,
    so that is rare)."""

    def __init__(self, base: Path, log: Path, workdir: Path, *, salvage: bool = False) -> None:
        self.base = base
        self.workdir = workdir
        self.path = workdir / "durable.img"
        self.scratch_path = workdir / "state.img"
        self._reader = LogReader(log, salvage=salvage)
        self._reset()

    def _reset(self) -> None:
        sparse_copy(self.base, self.path)
        self._entries: Iterator[Entry] = self._reader.entries()
        self._pending: Entry | None = None
        self.position = 0

    def close(self) -> None:
        self._reader.close()

    @property
    def reader(self) -> LogReader:
        return self._reader

    def advance(self, position: int) -> None:
        """Apply entries until ``self.position == position``."""
        if position < self.position:
            self._reset()
        if position == self.position:
            return
        fd = os.open(self.path, os.O_WRONLY)
        try:
            while self.position < position:
                entry = self._pending or next(self._entries, None)
                self._pending = None
                if entry is None:
                    raise CrashlabError(
                        f"{self._reader.path}: log ends at entry {self.position}, "
                        f"state needs {position}"
                    )
                apply_entry(fd, self._reader, entry)
                self.position += 1
        finally:
            os.close(fd)

    def scratch(self, writes: Iterable[tuple[int, bytes]]) -> Path:
        """A fresh copy of the durable image with ``(byte offset, data)``
        writes applied in order; valid until the next call."""
        sparse_copy(self.path, self.scratch_path)
        fd = os.open(self.scratch_path, os.O_WRONLY)
        try:
            for offset, data in writes:
                os.pwrite(fd, data, offset)
        finally:
            os.close(fd)
        return self.scratch_path
