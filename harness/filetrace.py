"""The byte history of the database file of a recorded run, prepared by the
harness for the checkers that judge a run as a whole (the trace checks of
``checkers/dhl_trace.py``): what the file held in the base image, then every
write the log made to it, in log order, with the marks in between.

Preparing it is pipeline work — replay the whole log onto the base image,
recover the file system of the final image, map device blocks to file
offsets — so it lives here; a checker only reads a :class:`FileTrace` and
judges (it never replays, recovers or maps anything itself).

Mapping device blocks to file offsets:

* raw-device runs (no file system): the file *is* the device, byte n at n;
* ext4: the file's extents, read with ``debugfs stat`` from the run's final
  image after journal replay.  The map is the final one: blocks the file
  held only earlier (none for DHL, which never truncates or frees pages)
  are not seen, and a block written before the file owned it would be
  misread as a write to the file (the recorded file system starts empty, so
  such writes are zeroing at most);
* other file systems (xfs, btrfs) are not mapped: :func:`prepare` says so,
  and the trace checks are skipped with that reason (btrfs writes every
  data block copy-on-write, so one final map could not describe the run).
"""

from __future__ import annotations

import bisect
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.explain.ext4 import _extents, debugfs
from harness.images import verified_base_for_run
from harness.logformat import LogReader
from harness.recover.fs import recover_fs
from harness.replay import replay
from harness.rundir import RunDir

MAPPED_FS = ("raw", "ext4")


@dataclass(frozen=True)
class BlockMap:
    """Device byte ranges that hold bytes of the file:
    ``(dev_start, dev_end, file_start)`` sorted by ``dev_start``."""

    spans: tuple[tuple[int, int, int], ...]

    @classmethod
    def identity(cls, size: int) -> BlockMap:
        return cls(((0, size, 0),))

    def pieces(self, dev_off: int, length: int) -> Iterator[tuple[int, int, int]]:
        """``(file_off, start_in_data, n)`` for the parts of the device range
        ``[dev_off, dev_off + length)`` that hold file bytes."""
        starts = [s[0] for s in self.spans]
        i = max(0, bisect.bisect_right(starts, dev_off) - 1)
        end = dev_off + length
        while i < len(self.spans) and self.spans[i][0] < end:
            a, b, f = self.spans[i]
            lo, hi = max(a, dev_off), min(b, end)
            if lo < hi:
                yield f + (lo - a), lo - dev_off, hi - lo
            i += 1

    def device_ranges(self, file_off: int, length: int) -> Iterator[tuple[int, int, int]]:
        """``(dev_off, start_in_range, n)`` for a file byte range."""
        end = file_off + length
        for a, b, f in self.spans:
            fa, fb = f, f + (b - a)
            lo, hi = max(fa, file_off), min(fb, end)
            if lo < hi:
                yield a + (lo - fa), lo - file_off, hi - lo


@dataclass(frozen=True)
class FileWrite:
    """One log entry's write, as the file saw it: ``pieces`` are
    ``(file_offset, bytes)`` (one device write can touch several
    non-adjacent parts of a file)."""

    entry: int
    pieces: tuple[tuple[int, bytes], ...]


@dataclass(frozen=True)
class Mark:
    entry: int
    label: str


class FileTrace:
    """The history of one file: :meth:`read_base` reads it as the base image
    holds it (zeros past the device), :meth:`events` walks the log.
    ``final`` is the file as the file system recovered it from the run's
    final image (what the run left)."""

    def __init__(self, base: Path, log: Path, bmap: BlockMap, final: Path) -> None:
        self.base, self.log, self.bmap, self.final = base, log, bmap, final
        self._fd = os.open(base, os.O_RDONLY)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> FileTrace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_base(self, offset: int, n: int) -> bytes:
        out = bytearray(n)
        for dev, at, k in self.bmap.device_ranges(offset, n):
            out[at:at + k] = os.pread(self._fd, k, dev).ljust(k, b"\0")
        return bytes(out)

    def events(self) -> Iterator[FileWrite | Mark]:
        """Marks, and every write entry that touched the file, in log order
        (discards are left out: no SUT traced here discards)."""
        with LogReader(self.log) as reader:
            ss = reader.sectorsize
            for e in reader.entries():
                if e.is_mark and e.label:
                    yield Mark(e.index, e.label)
                    continue
                if not e.has_payload:
                    continue
                data = reader.payload(e)
                pieces = tuple((foff, data[at:at + n])
                               for foff, at, n in self.bmap.pieces(e.sector * ss, len(data)))
                if pieces:
                    yield FileWrite(e.index, pieces)


def ext4_map(image: Path, file_path: str) -> BlockMap:
    """Device ranges of ``file_path`` in the (journal-replayed) ext4 image."""
    out = debugfs(image, ["stats", f"stat {file_path}"])
    bs = next((int(ln.split(":")[1]) for ln in out.splitlines()
               if ln.startswith("Block size:")), 4096)
    ext, _ = _extents(out.split(f"stat {file_path}", 1)[-1])
    return BlockMap(tuple(sorted((p * bs, (p + n) * bs, lb * bs) for lb, p, n in ext)))


def prepare(run: RunDir, work: Path) -> FileTrace | str:
    """The database file's history for ``run`` (the database named in its
    meta.json), built in ``work`` (which the caller removes after closing
    the trace); or why it cannot be had."""
    meta = run.meta()
    fs, db_name = meta["fs"], meta["db"]
    if fs not in MAPPED_FS:
        return f"no block-to-page map for {fs} ({' and '.join(MAPPED_FS)} only)"
    base = verified_base_for_run(run)
    final = work / "final.img"
    replay(base, run.log, final)
    size = os.path.getsize(final)
    files = work / "files"
    shutil.rmtree(files, ignore_errors=True)
    rec = recover_fs(fs, final, files, workdir=work, db_name=db_name, fsck=False)
    if not rec.ok:
        return f"the final image does not recover: {rec.detail}"
    bmap = BlockMap.identity(size) if fs == "raw" else ext4_map(final, "/" + db_name)
    return FileTrace(base, run.log, bmap, files / db_name)
