"""The shape of each transaction of a recorded workload run, for comparing
two recordings of the same SUT and workload (the fuse recorder against the
kernel's dm-log-writes in a qemu guest: harness/bench/crossval.py).

Transaction K is the log from its ``txn-begin:K`` mark to its ``txn-ack:K``
mark.  Its shape: write entries, FLUSH entries, FUA entries, and the bytes
written per region of the device:

* ``database``: blocks of the database file;
* ``journal``: blocks of SQLite's rollback journal or WAL (``-journal``,
  ``-wal``);
* ``fs-journal``: the file system's own journal
  (:meth:`~harness.fs.base.FileSystem.journal_ranges`);
* ``metadata``: everything else (inode tables, bitmaps, directories, super
  blocks written in place).

Which file owns a block changes over a run (a rollback journal is created and
deleted by every transaction), so ownership is read from snapshots: the image
replayed up to each FLUSH entry inside a transaction and up to each
``txn-ack`` mark, recovered (:meth:`~harness.fs.base.FileSystem.recover`,
journal replay), and asked for the files' block maps.  A write is
attributed to the first owner found in the snapshots from the write on, up
to the next ``txn-ack`` (a file's new blocks show once the file system's
journal commit that allocates them is in the image: after the flush, at the
latest at the acknowledgement).  A file system without block maps gets no
regions (``None``)."""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.env import temporary_folder
from harness.errors import CrashlabError
from harness.fs import BlockMap, get_fs
from harness.images import verified_base_for_run
from harness.logformat import Entry, LogReader
from harness.materialize import sparse_copy
from harness.materialize.replay import apply_entry
from harness.rundir import RunDir

REGIONS = ("database", "journal", "fs-journal", "metadata")
JOURNAL_SUFFIXES = ("-journal", "-wal")


@dataclass
class TxnShape:
    txn: int
    writes: int = 0
    flushes: int = 0
    fua: int = 0
    bytes: int = 0
    regions: dict[str, int] | None = field(default_factory=lambda: dict.fromkeys(REGIONS, 0))


def _windows(entries: list[Entry]) -> Iterator[tuple[int, int, int]]:
    """(K, index of txn-begin:K, index of txn-ack:K) for each acknowledged K."""
    begun: dict[str, int] = {}
    for i, e in enumerate(entries):
        if e.is_mark and e.label and ":" in e.label:
            kind, _, k = e.label.partition(":")
            k = k.split(";")[0]
            if kind == "txn-begin":
                begun[k] = i
            elif kind == "txn-ack" and k in begun:
                yield int(k), begun[k], i


class _Owners:
    """Which file owned a device byte, per snapshot (see the module comment)."""

    def __init__(
        self, run: RunDir, db: str, snapshot_at: list[int], acks: set[int], work: Path
    ) -> None:
        meta = run.meta()
        self.fs = get_fs(meta.fs)
        base = verified_base_for_run(run)
        self.at = sorted(set(snapshot_at) | acks)
        self.acks = acks
        self.maps: list[dict[str, BlockMap]] = []
        # one image brought forward entry by entry; each snapshot a sparse copy
        running = work / "running.img"
        sparse_copy(base, running)
        fd = os.open(running, os.O_WRONLY)
        try:
            with LogReader(run.log, salvage=True) as reader:
                entries = reader.entries()
                applied = 0
                for n, at in enumerate(self.at):
                    while applied <= at:
                        apply_entry(fd, reader, next(entries))
                        applied += 1
                    img = work / f"snap{n}.img"
                    sparse_copy(running, img)
                    self.maps.append(self._maps(img, work / str(n), db))
                    img.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def _maps(self, img: Path, work: Path, db: str) -> dict[str, BlockMap]:
        rec = self.fs.recover(img, work / "files", workdir=work / "w", db_name=db, fsck=False)
        maps: dict[str, BlockMap] = {}
        if rec.ok and rec.files is not None:
            for name in (db, *(db + s for s in JOURNAL_SUFFIXES)):
                if (rec.files / name).exists():
                    bm = self.fs.block_map(img, name)
                    if isinstance(bm, BlockMap):
                        maps[name] = bm
        return maps

    def owner(self, index: int, off: int, length: int, db: str) -> tuple[str | None, int]:
        """The region of most of the device range at log entry ``index``."""
        for at, maps in zip(self.at, self.maps, strict=True):
            if at < index:
                continue
            for name, bm in maps.items():
                n = sum(p[2] for p in bm.pieces(off, length))
                if n:
                    return ("database" if name == db else "journal"), n
            if at in self.acks:
                break
        return None, 0


def txn_shapes(run: RunDir) -> list[TxnShape]:
    """The shape of every acknowledged transaction of ``run`` (see the
    module comment)."""
    meta = run.meta()
    if meta.db is None:
        raise CrashlabError(f"{run.path}: not a workload run (meta.json names no database)")
    fs = get_fs(meta.fs)
    with LogReader(run.log, salvage=True) as reader:
        entries = list(reader.entries())
        ss = reader.sectorsize
        base = verified_base_for_run(run)
        journal = fs.journal_ranges(reader, base) or []
    windows = list(_windows(entries))
    flushes = [i for k, b, a in windows for i in range(b, a + 1) if entries[i].is_flush]
    acks = {a for _, _, a in windows}
    shapes = []
    with temporary_folder("crashlab-shape-") as work:
        owners = _Owners(run, meta.db, flushes, acks, work) if fs.block_mapped else None
        for k, b, a in windows:
            s = TxnShape(k, regions=None if owners is None else dict.fromkeys(REGIONS, 0))
            for i in range(b, a + 1):
                e = entries[i]
                s.flushes += e.is_flush
                s.fua += e.is_fua and e.nr_sectors > 0
                if not e.is_write or e.is_discard:
                    continue
                s.writes += 1
                off, length = e.sector * ss, e.nr_sectors * ss
                s.bytes += length
                if s.regions is None or owners is None:
                    continue
                in_fsj = sum(max(0, min(off + length, hi) - max(off, lo)) for lo, hi in journal)
                s.regions["fs-journal"] += in_fsj
                region, n = owners.owner(i, off, length, meta.db)
                if region is not None:
                    s.regions[region] += n
                s.regions["metadata"] += length - in_fsj - (n if region else 0)
            shapes.append(s)
    return shapes


def mean_shape(shapes: list[TxnShape]) -> dict[str, float | None]:
    """Per-transaction means: writes, flushes, fua, bytes and each region."""
    out: dict[str, float | None] = {}
    for key in ("writes", "flushes", "fua", "bytes"):
        out[key] = statistics.fmean(getattr(s, key) for s in shapes) if shapes else 0.0
    for r in REGIONS:
        vals = [s.regions[r] for s in shapes if s.regions is not None]
        out[r] = statistics.fmean(vals) if vals and len(vals) == len(shapes) else None
    return out
