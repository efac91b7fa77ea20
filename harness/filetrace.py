"""The byte history of the database file of a recorded run, prepared by the
harness for the checkers that judge a run as a whole (the trace checks of
``checkers/dhl_trace.py``): what the file held in the base image, then every
write the log made to it, in log order, with the marks in between.

Preparing it is pipeline work — replay the whole log onto the base image,
recover the file system of the final image, map device blocks to file
offsets — so it lives here; a checker only reads a :class:`FileTrace` and
judges (it never replays, recovers or maps anything itself).

Device blocks map to file offsets through the file system's block map of
the run's final image (:meth:`harness.fs.base.FileSystem.block_map`): on a
raw device the file *is* the device; on ext4 the file's extents after
journal replay.  The map is the final one: blocks the file held only earlier
(none for DHL, which never truncates or frees pages) are not seen, and a
block written before the file owned it would be misread as a write to the
file (the recorded file system starts empty, so such writes are zeroing at
most).  A file system with no block map gets no history: :func:`prepare`
says why, and the trace checks are skipped with that reason.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CrashlabError
from harness.faults import FILE_SUFFIX, Fault
from harness.fs import BlockMap, FileSystem, get_fs
from harness.images import verified_base_for_run
from harness.logformat import LogReader
from harness.materialize import replay, sparse_copy
from harness.rundir import RunDir
from harness.states.inject import Spans, StateFaults


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
    holds it, :meth:`events` walks the log.  ``final`` is the file as the
    file system recovered it from the run's final image (what the run left).
    The base image is read through its own map of the file (``base_map``,
    ``base_size``: after its journal replay; zeros past its end and in its
    holes) — a continuation's base is a crash image whose file is older than
    the final map says — and the log's writes through the final map."""

    def __init__(
        self, base: Path, log: Path, bmap: BlockMap, final: Path, base_map: BlockMap, base_size: int
    ) -> None:
        self.base, self.log, self.bmap, self.final = base, log, bmap, final
        self.base_map, self.base_size = base_map, base_size
        self._fd = os.open(base, os.O_RDONLY)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> FileTrace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_base(self, offset: int, n: int) -> bytes:
        out = bytearray(n)
        for dev, at, k in self.base_map.device_ranges(
            offset, max(0, min(n, self.base_size - offset))
        ):
            out[at : at + k] = os.pread(self._fd, k, dev).ljust(k, b"\0")
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
                pieces = tuple(
                    (foff, data[at : at + n])
                    for foff, at, n in self.bmap.pieces(e.sector * ss, len(data))
                )
                if pieces:
                    yield FileWrite(e.index, pieces)


def prepare(
    run: RunDir, work: Path, *, suffix: str = "", end_mark: str | None = None
) -> FileTrace | str:
    """The database file's history for ``run`` (the database named in its
    meta.json), or of the file named like it plus ``suffix`` (``-wal``),
    built in ``work`` (which the caller removes after closing the trace); or
    why it cannot be had.  The map is read from the image at ``end_mark``
    (default: the run's end), for a file the run deletes before its end (a
    WAL removed at close)."""
    meta = run.meta()
    fs, db_name = get_fs(meta.fs), str(meta.db)
    name = db_name + suffix
    if not fs.block_mapped:
        why = fs.block_map(Path(), "/" + name)
        assert isinstance(why, str)  # the base class's block_map: it only says why not
        return why
    base = verified_base_for_run(run)
    final = work / "final.img"
    replay(base, run.log, final, end_mark=end_mark)
    view = _recovered_view(fs, final, work / "final", db_name, name)
    if isinstance(view, str):
        return f"the {'final ' if end_mark is None else ''}image does not recover: {view}"
    base_copy = work / "base.img"
    sparse_copy(base, base_copy)  # recovery writes to it
    base_view = _recovered_view(fs, base_copy, work / "base", db_name, name)
    if isinstance(base_view, str):
        return f"the base image does not recover: {base_view}"
    (bmap, _), (base_map, base_size) = view, base_view
    return FileTrace(base, run.log, bmap, work / "final" / name, base_map, base_size)


def database_map(run: RunDir, work: Path) -> BlockMap | str:
    """Where the run's database file lies on the device (the final map, as
    :func:`prepare` reads it; on the raw tier the whole device), built in
    ``work`` (which the caller removes); or why it cannot be told.  Where
    state faults aim (``harness/states/inject.py``)."""
    meta = run.meta()
    fs, db_name = get_fs(meta.fs), str(meta.db)
    if not fs.has_files:
        return fs.block_map(verified_base_for_run(run), "/" + db_name)
    if not fs.block_mapped:
        return fs.block_map(Path(), "/" + db_name)  # why not
    final = work / "final.img"
    replay(verified_base_for_run(run), run.log, final)
    view = _recovered_view(fs, final, work / "final", db_name)
    if isinstance(view, str):
        return f"the final image does not recover: {view}"
    return view[0]


def fault_targets(run: RunDir, faults: tuple[Fault, ...], work: Path) -> Spans | None:
    """The device spans of the file that state faults aim at (misdirect,
    corrupt: the database file, or with ``file=wal`` its WAL), built in
    ``work`` (removed again); None when no such fault is among ``faults`` or
    the run has no block map (the faults then aim at any block the run
    writes).  A WAL aimed at that the run has no map of: CrashlabError."""
    sf = StateFaults.of(faults)
    if not sf.targeted:
        return None
    work.mkdir(parents=True, exist_ok=True)
    try:
        if sf.aim == "db":
            bmap = database_map(run, work)
        else:
            bmap = _wal_map(run, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return bmap.spans if isinstance(bmap, BlockMap) else None


def workload_end(run: RunDir) -> str:
    """The last mark before the runner closes the database (where a WAL,
    deleted at close, still exists with its blocks allocated):
    ``workload-end``, else the last ``txn-ack:``; CrashlabError: neither."""
    label = None
    with LogReader(run.log) as reader:
        for e in reader.entries():
            if e.is_mark and e.label == "workload-end":
                return e.label
            if e.is_mark and e.label and e.label.startswith("txn-ack:"):
                label = e.label
    if label is None:
        raise CrashlabError(f"{run.path}: no transaction was acknowledged")
    return label


def _wal_map(run: RunDir, work: Path) -> BlockMap:
    """The block map of the run's WAL at :func:`workload_end`."""
    meta = run.meta()
    fs, name = get_fs(meta.fs), f"{meta.db}{FILE_SUFFIX['wal']}"
    if not fs.block_mapped:
        raise CrashlabError(f"{run.path}: file=wal needs a file system with a block map")
    final = work / "wal.img"
    replay(verified_base_for_run(run), run.log, final, end_mark=workload_end(run))
    view = _recovered_view(fs, final, work / "wal", str(meta.db), name)
    if isinstance(view, str) or not view[1]:
        why = view if isinstance(view, str) else f"no {name} at {workload_end(run)}"
        raise CrashlabError(f"{run.path}: file=wal, but no WAL to aim at: {why}")
    return view[0]


def _recovered_view(
    fs: FileSystem, image: Path, files: Path, db_name: str, name: str | None = None
) -> tuple[BlockMap, int] | str:
    """Recover ``image`` into ``files``: the block map and size (0: no such
    file) of the file ``name`` (default: the database), or why it does not
    recover.  The map is read after recovery (the journal may hold the
    file's extents), unless recovery takes the image away."""
    name = name or db_name
    shutil.rmtree(files, ignore_errors=True)
    early = fs.block_map(image, "/" + name) if fs.recovery_moves_image else None
    rec = fs.recover(image, files, workdir=files.parent, db_name=db_name, fsck=False)
    if not rec.ok:
        return rec.detail
    bmap = early if early is not None else fs.block_map(image, "/" + name)
    assert isinstance(bmap, BlockMap)
    path = files / name
    return bmap, path.stat().st_size if path.exists() else 0
