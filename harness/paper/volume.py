"""I/O volume and syncs per insert from a recording (DHL thesis Fig. 8 and
its sync counts; WALDIO Table 1 and MAW Table I's data/journal split).

One recording per system: ``insert:txns=N,size=100`` (one 100-byte insert
per transaction: the tables' setting) on ext4, or on the system's own file
system (F2FS: through the qemu backend).  Window: from the ``txn-begin:1``
mark to the last ``txn-ack:`` mark, so the open, the set-up and the close
(a WAL checkpoint) are left out, as in the papers' per-insert figures.

Every written 4 KiB block of the window is put in one category, from the
base image's layout (``dumpe2fs``: superblocks, group descriptors, bitmaps,
inode tables; the journal inode's extents) and from who owns the block in
*views* of the run (below):

* ``database file``: a block of the database file, or of another file that
  is a SQLite database in a view (DASH's shadow copy);
* ``log file``: a block of any other regular file (``-journal``, ``-wal``,
  a system's own log or shadow file), per file name in ``files``, and the
  writes to a SUT's emulated NVRAM (``Sut.nvram``: logged past the disk's
  sectors; ``files["NVRAM"]``);
* ``ext4 journal``: the jbd2 region (descriptor, metadata copies, commit);
* ``ext4 metadata``: fixed metadata, directory and extent-tree blocks;
* ``other``: a block free in every view.

Views, asked in order for the blocks still unattributed: images after
journal replay at each flush of the last transaction, at its
acknowledgement and at the end of the run (latest first: a block reused is
named by its latest owner); then, one at a time, at each flush of the
earlier transactions (a DELETE journal owns its blocks only during its own
transaction, and ext4 does not reuse them at once).

Syncs per transaction: the runner's sync calls (``fsync``/``fdatasync``,
its counting VFS), device cache flushes in the log, and jbd2 commit blocks
written to the journal region.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.explain.context import write_data
from harness.fs.ext4 import jbd2
from harness.fs.ext4.explain import Layout, Owner, attribute, read_layout
from harness.fs.ext4.recover import recover_ext4
from harness.logformat import Entry, LogReader
from harness.materialize import DurableImage, sparse_copy
from harness.materialize.nvram import nvram_region
from harness.report.systems import Resolved
from harness.rundir import RunDir
from workloads.run import record_workload

CATEGORIES = ("database file", "log file", "ext4 journal", "ext4 metadata", "other")
VALUE_BYTES = 100  # WALDIO Table 1, MAW Table I: "inserting 100 Byte"
SQLITE_HEADER = b"SQLite format 3\x00"
NVRAM = "NVRAM"  # the file name an emulated NVRAM's writes are counted under


def spec(txns: int) -> str:
    """The workload of one volume recording."""
    return f"insert:txns={txns},size={VALUE_BYTES}"


@dataclass(frozen=True)
class Volume:
    """Per-transaction figures of one recording (KB = 1024 bytes)."""

    txns: int
    fs: str
    backend: str
    total_kb: float
    kb: dict[str, float]  # by CATEGORIES; only "other" when ``split`` is False
    files: dict[str, float]  # KB per regular file name (database and logs)
    split: bool  # every block attributed (ext4); False: the total only
    runner_syncs: float | None  # the runner's fsync/fdatasync calls
    flushes: float  # device cache flushes
    fua: float  # FUA writes
    jbd2_commits: float | None  # commit blocks written to the jbd2 region
    notes: list[str] = field(default_factory=list)

    @property
    def journal_kb(self) -> float | None:
        return self.kb.get("ext4 journal") if self.split else None

    @property
    def data_kb(self) -> float | None:
        """Everything outside the ext4 journal region: the tables' "Data"."""
        j = self.journal_kb
        return None if j is None else self.total_kb - j


def measure(res: Resolved, txns: int, work: Path) -> Volume:
    """Record the system's inserts and measure them; the recording is
    deleted afterwards (only the figures are kept)."""
    assert res.sut_name is not None
    out = work / "rec"
    shutil.rmtree(out, ignore_errors=True)
    try:
        run = record_workload(
            res.sut_name, spec(txns), out, fs=res.fs, backend="qemu" if res.guest_only else "auto"
        )
        meta = run.meta()
        if meta.exit_status != 0:
            raise RuntimeError(f"the recorded runner exited {meta.exit_status}")
        return analyse(run, work / "views")
    finally:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(work / "views", ignore_errors=True)


def txn_window(entries: list[Entry]) -> tuple[int, int, int, int]:
    """(first, last, last transaction's begin, acknowledged transactions):
    entry indices of ``txn-begin:1`` and the last ``txn-ack:``."""
    first = last = begin_last = -1
    acks = 0
    for e in entries:
        if not e.is_mark or e.label is None:
            continue
        label = e.label.split(";", 1)[0]
        if label == "txn-begin:1" and first < 0:
            first = e.index
        elif label.startswith("txn-begin:"):
            begin_last = e.index
        elif label.startswith("txn-ack:") and first >= 0:
            last, acks = e.index, acks + 1
    if first < 0 or last < 0:
        raise RuntimeError("the recording has no txn-begin:1 .. txn-ack: window")
    return first, last, max(begin_last, first), acks


def analyse(run: RunDir, work: Path) -> Volume:
    """Measure a recorded insert run (see the module comment)."""
    meta = run.meta()
    with LogReader(run.log, salvage=True) as reader:
        entries = list(reader.entries())
        first, last, begin_last, acks = txn_window(entries)
        window = [e for e in entries[first : last + 1] if not e.is_mark]
        runner = (meta.runner or {}).get("workload") if isinstance(meta.runner, dict) else None
        syncs = runner["fsyncs"] / acks if runner and acks else None
        flushes = sum(e.is_flush for e in window) / acks
        fua = sum(e.is_fua for e in window if e.has_payload) / acks
        ss = reader.sectorsize
        total = sum(e.nr_sectors * ss for e in window if e.has_payload)
        base = Path(meta.image.path) if meta.image else None
        if meta.fs != "ext4" or base is None:
            return Volume(
                acks,
                meta.fs,
                meta.backend,
                total / 1024 / acks,
                {"other": total / 1024 / acks},
                {},
                False,
                syncs,
                flushes,
                fua,
                None,
                [
                    f"{meta.fs}: no per-block attribution (crashlab reads ext4 layouts "
                    "only), the total is every byte written"
                ],
            )
        att = attribution(run, entries, first, begin_last, last, work)
        cats, files, commits = _classify(reader, window, att)
    per = {c: cats.get(c, 0) / 1024 / acks for c in CATEGORIES}
    return Volume(
        acks,
        meta.fs,
        meta.backend,
        total / 1024 / acks,
        per,
        {n: b / 1024 / acks for n, b in sorted(files.items())},
        True,
        syncs,
        flushes,
        fua,
        commits / acks,
    )


def _views(
    base: Path, log: Path, positions: list[int], work: Path
) -> tuple[list[tuple[str, Path]], set[str]]:
    """Journal-replayed images of the run after each entry count in
    ``positions``, latest first (a block reused later is named by its
    latest owner), and the names of the files that are SQLite databases in
    any of them (a system's second database file, e.g. DASH's shadow)."""
    views: list[tuple[str, Path]] = []
    databases: set[str] = set()
    (work / "durable").mkdir(parents=True, exist_ok=True)
    img = DurableImage(base, log, work / "durable")
    try:
        for pos in positions:
            img.advance(pos)
            path, files = work / f"view-{pos}.img", work / f"view-{pos}-files"
            sparse_copy(img.path, path)
            recover_ext4(path, files, check=False)
            databases |= {f.name for f in files.glob("*") if _is_sqlite(f)}
            shutil.rmtree(files, ignore_errors=True)
            views.append((f"entry {pos}", path))
    finally:
        img.close()
    return views[::-1], databases


def _is_sqlite(path: Path) -> bool:
    """The file starts with SQLite's database header."""
    if not path.is_file():
        return False
    with open(path, "rb") as f:
        return f.read(16) == SQLITE_HEADER


class _LaterViews:
    """Views at the flushes of the earlier transactions, made one at a time
    (oldest first) only while some block is still unattributed: a file
    deleted before the last transaction (DELETE's journal of transaction 3)
    owns its blocks only in the images of its own transaction."""

    def __init__(self, base: Path, log: Path, positions: list[int], work: Path) -> None:
        self.base, self.log, self.positions, self.work = base, log, positions, work

    def attribute(self, blocks: list[int]) -> dict[int, Owner]:
        found: dict[int, Owner] = {}
        if not blocks or not self.positions:
            return found
        self.work.mkdir(parents=True, exist_ok=True)
        img = DurableImage(self.base, self.log, self.work)
        try:
            for pos in self.positions:
                todo = [b for b in blocks if b not in found]
                if not todo:
                    break
                img.advance(pos)
                path = self.work / "view.img"
                sparse_copy(img.path, path)
                recover_ext4(path, self.work / "files", check=False)
                shutil.rmtree(self.work / "files", ignore_errors=True)
                found.update(attribute([(f"entry {pos}", path)], todo))
        finally:
            img.close()
        return found


@dataclass
class Attribution:
    """What names the owner of a run's blocks (see the module comment)."""

    layout: Layout
    views: list[tuple[str, Path]]
    db_names: set[str]
    earlier: _LaterViews
    nvram: tuple[int, int] | None  # (offset, bytes) of a SUT's NVRAM past the disk


def attribution(
    run: RunDir, entries: list[Entry], first: int, begin_last: int, last: int, work: Path
) -> Attribution:
    """The views of an ext4 run whose transactions begin at entry ``first``
    and the last of them at ``begin_last``, acknowledged at entry ``last``
    (made under ``work``, which the caller deletes)."""
    meta = run.meta()
    assert meta.image is not None
    base = Path(meta.image.path)
    positions = sorted(
        {e.index + 1 for e in entries[begin_last : last + 1] if e.is_flush}
        | {last + 1, len(entries)}
    )
    work.mkdir(parents=True, exist_ok=True)
    views, databases = _views(base, run.log, positions, work)
    earlier = [e.index + 1 for e in entries[first:begin_last] if e.is_flush]
    return Attribution(
        read_layout(base),
        views,
        {meta.db or "", *databases},
        _LaterViews(base, run.log, earlier, work / "earlier"),
        nvram_region(meta.extra),
    )


def labels(att: Attribution, blocks: set[int]) -> dict[int, tuple[str, str]]:
    """(category, file name or "") of each file-system block: the file
    name for a block of a regular file or of the NVRAM, else ""."""
    layout = att.layout
    nv_lo, nv_hi = (att.nvram[0], att.nvram[0] + att.nvram[1]) if att.nvram else (-1, -1)
    bs = layout.block_size
    unknown = {
        b
        for b in blocks
        if not nv_lo <= b * bs < nv_hi
        and layout.journal_block(b) is None
        and layout.static(b) is None
        and layout.itable_inodes(b) is None
    }
    owners = attribute(att.views, sorted(unknown))
    owners.update(att.earlier.attribute(sorted(unknown - set(owners))))
    out: dict[int, tuple[str, str]] = {}
    for b in blocks:
        if nv_lo <= b * bs < nv_hi:
            out[b] = ("log file", NVRAM)
        elif layout.journal_block(b) is not None:
            out[b] = ("ext4 journal", "")
        elif layout.static(b) is not None or layout.itable_inodes(b) is not None:
            out[b] = ("ext4 metadata", "")
        elif (o := owners.get(b)) is None:
            out[b] = ("other", "")
        elif o.kind != "regular" or o.lblk is None:
            out[b] = ("ext4 metadata", "")
        else:
            name = (o.path or f"<{o.inode}>").rsplit("/", 1)[-1]
            out[b] = ("database file" if name in att.db_names else "log file", name)
    return out


def _classify(
    reader: LogReader, window: list[Entry], att: Attribution
) -> tuple[Counter[str], Counter[str], int]:
    """Bytes per category and per file name, and jbd2 commit blocks, of the
    writes in ``window``."""
    layout = att.layout
    bs, ss = layout.block_size, reader.sectorsize
    pieces: list[tuple[int, int]] = []  # (fs block, bytes of it written)
    commits = 0
    for e in window:
        if not e.has_payload:
            continue
        start, end = e.sector * ss, (e.sector + e.nr_sectors) * ss
        data = write_data(reader, e) if layout.journal_block(start // bs) is not None else b""
        for b in range(start // bs, (end - 1) // bs + 1):
            lo, hi = max(start, b * bs), min(end, (b + 1) * bs)
            pieces.append((b, hi - lo))
            if data and lo == b * bs and hi - lo == bs and layout.journal_block(b) is not None:
                h = jbd2.header(data[lo - start : hi - start])
                commits += h is not None and h.blocktype == jbd2.COMMIT
    named = labels(att, {b for b, _ in pieces})
    cats: Counter[str] = Counter()
    files: Counter[str] = Counter()
    for b, n in pieces:
        cat, name = named[b]
        cats[cat] += n
        if name:
            files[name] += n
    return cats, files, commits
