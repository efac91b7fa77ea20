"""Materialise crash-state images fast.

A worker keeps one *durable image*: the base image with every log entry
before some entry number applied.  States are handed out in log order, so
the durable image only ever moves forward and each worker applies the log
about once in all.  A state's image is a *scratch* copy of the durable image
(data extents only: a sparse copy of a 64 MiB image with a few MiB of data
costs about a millisecond on tmpfs) with the state's overlay writes on top.
The scratch copy is needed because recovery (journal replay, SQLite hot
journal rollback, DHL recovery) writes to the image.

For a database that is the whole device (the raw tier) a state's image
need not be a file at all: :meth:`DurableImage.load_state` puts it into a
buffer in memory (the checks read it there).

The scratch image is kept between states: :class:`DurableImage` remembers
the byte ranges where it may differ from the durable image (the last
overlay, what recovery reported writing via :meth:`DurableImage.mark_dirty`,
entries the durable image advanced over) and restores only those from the
durable image.  A recovery that writes where it cannot say calls
:meth:`DurableImage.invalidate`, and the next scratch is a full copy again.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from harness.errors import CrashlabError
from harness.logformat import Entry, LogReader
from harness.materialize.replay import apply_entry, apply_flips


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


# Past this many dirty bytes a full sparse copy is cheaper than restoring.
RESTORE_LIMIT = 4 << 20


class Loadable(Protocol):
    """An image in memory (dhl.binding.MemIO): :meth:`DurableImage.load_state`'s target."""

    def load(self, image: bytes | memoryview, *, used: int | None = None) -> object: ...

    def write(self, offset: int, data: bytes) -> None: ...


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
        # Byte ranges where the scratch image may differ from the durable
        # one; None: unknown (the next scratch is a full copy).
        self._dirty: list[tuple[int, int]] | None = None
        self._dirty_bytes = 0
        self.overlay: list[tuple[int, int]] = []  # ranges the last scratch() wrote
        self.full_copies = 0
        self._reset()

    def _reset(self) -> None:
        self._unmap()
        sparse_copy(self.base, self.path)
        self.size = os.path.getsize(self.path)  # bytes of the durable image's file
        # past this byte the durable image is zero: the base's data, then
        # every entry applied (load_state copies no further)
        self.data_end = _data_end(self.path)
        self._entries: Iterator[Entry] = self._reader.entries()
        self._pending: Entry | None = None
        self.position = 0
        self.invalidate()

    def close(self) -> None:
        self._unmap()
        self._reader.close()

    def _unmap(self) -> None:
        mm: mmap.mmap | None = getattr(self, "_map", None)
        if mm is not None:
            mm.close()
        self._map: mmap.mmap | None = None

    def load_state(self, target: Loadable, writes: Iterable[tuple[int, bytes]]) -> None:
        """What :meth:`scratch` makes, in ``target`` instead of a file: the
        durable image, read through a shared read-only mapping of its file
        (no read call), then the ``(byte offset, data)`` writes in order."""
        size = os.path.getsize(self.path)
        if self._map is None or len(self._map) != size:
            self._unmap()
            if size:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    self._map = mmap.mmap(fd, size, prot=mmap.PROT_READ)
                finally:
                    os.close(fd)
        if self._map is None:
            target.load(b"")
        else:
            with memoryview(self._map) as view:
                target.load(view, used=self.data_end)
        for offset, data in writes:
            target.write(offset, data)

    @property
    def reader(self) -> LogReader:
        return self._reader

    def invalidate(self) -> None:
        """Forget what the scratch image holds: the next :meth:`scratch` is
        a full copy."""
        self._dirty = None
        self._dirty_bytes = 0

    def mark_dirty(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Note ``(offset, length)`` ranges written to the scratch image
        (by recovery); the next :meth:`scratch` restores them."""
        if self._dirty is None:
            return
        for off, n in ranges:
            self._dirty.append((off, n))
            self._dirty_bytes += n
        if self._dirty_bytes > RESTORE_LIMIT:
            self.invalidate()

    def advance(self, position: int) -> None:
        """Apply entries until ``self.position == position``."""
        if position < self.position:
            self._reset()
        if position == self.position:
            return
        ss = self._reader.sectorsize
        changed: list[tuple[int, int]] = []
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
                if entry.is_write:
                    changed.append((entry.sector * ss, entry.nr_sectors * ss))
                    self.data_end = max(self.data_end, (entry.sector + entry.nr_sectors) * ss)
                self.position += 1
            self.size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        # The scratch image lacks these entries: restore them too.
        self.mark_dirty(changed)

    def scratch(
        self, writes: Iterable[tuple[int, bytes]], flips: Iterable[tuple[int, int]] = ()
    ) -> Path:
        """A fresh copy of the durable image with ``(byte offset, data)``
        writes applied in order, then the ``(byte offset, XOR mask)`` flips
        (a corrupt fault: :meth:`harness.states.State.flips`); valid until
        the next call.  Only the
        ranges where the previous scratch image may differ are copied back
        from the durable image, unless :meth:`invalidate` was called or the
        file is gone (a recovery moved it away)."""
        dirty = self._dirty
        if dirty is None or not self.scratch_path.exists():
            sparse_copy(self.path, self.scratch_path)
            self.full_copies += 1
            dirty = []
        fd = os.open(self.scratch_path, os.O_RDWR)
        try:
            if dirty:
                src = os.open(self.path, os.O_RDONLY)
                try:
                    for off, n in _merge(dirty):
                        data = os.pread(src, n, off)
                        os.pwrite(fd, data, off)
                    size = os.fstat(src).st_size
                    if os.fstat(fd).st_size != size:  # a write past the end
                        os.ftruncate(fd, size)
                finally:
                    os.close(src)
            overlay: list[tuple[int, int]] = []
            for offset, data in writes:
                os.pwrite(fd, data, offset)
                overlay.append((offset, len(data)))
            overlay += apply_flips(fd, flips)
        finally:
            os.close(fd)
        self.overlay = overlay
        self._dirty = list(overlay)
        self._dirty_bytes = sum(n for _, n in overlay)
        return self.scratch_path


def _data_end(path: Path) -> int:
    """The end of the last data extent of the file ``path`` (SEEK_DATA,
    SEEK_HOLE): past it the file is a hole, and reads as zero."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end, pos, size = 0, 0, os.fstat(fd).st_size
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: no data after pos
                break
            pos = end = os.lseek(fd, start, os.SEEK_HOLE)
        return end
    finally:
        os.close(fd)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, non-overlapping ``(offset, length)`` ranges covering ``ranges``."""
    out: list[tuple[int, int]] = []
    for off, n in sorted(ranges):
        if out and off <= out[-1][0] + out[-1][1]:
            last_off, last_n = out[-1]
            out[-1] = (last_off, max(last_n, off + n - last_off))
        else:
            out.append((off, n))
    return out
