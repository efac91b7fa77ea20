"""ext4 journal replay and file extraction in this process, for the common
case: what debugfs ``jr`` and ``rdump`` do, without the debugfs process.

:func:`replay_and_extract` writes to a crash image exactly what debugfs's
``open -w``, ``jr``, ``close`` write (e2fsprogs 1.47's
``ext2fs_run_ext3_journal``: the jbd2 recovery of ``e2fsck/recovery.c``,
the journal superblock released with ``s_start`` 0 and the next sequence,
the file-system superblock re-read from the replayed image with
needs_recovery cleared), up to the superblock fields ext2fs_flush sets from
the clock and I/O counters (``s_wtime``, ``s_kbytes_written``; the checksum
is recomputed), then extracts every file as ``rdump`` would (contents,
directories, mode, owner, times), and returns the block lists ``blocks``
would print for the journal and each file's data.

It handles one well-understood shape and raises :class:`Unsupported` for
anything else, never guessing: the caller then takes the debugfs path.
Handled: a 64bit/flex_bg/extent/metadata_csum file system with an internal
journal (inode 8) of format v2 with checksum v3 (or no checksums), revoke
records, escaped blocks; directories as linear blocks, files as extents in
the inode (depth 0), written extents only.  Refused, among others: any
checksum that does not verify (superblock, group descriptor, inode,
directory block, journal superblock, descriptor, revoke, commit, tagged data
block: each changes what recovery or extraction does), fast commits, async
commit, checksum v1/v2, a journal s_errno, htree or inline-data
directories, extent trees with index blocks, unwritten extents, symlinks and
special files, a second entry of a name, an empty name, a directory reached
twice, meta_bg, and a replay that writes into the journal or the journal
inode.  The files are written through
:class:`harness.fs.confined.ConfinedTree` (never outside ``out_dir``).
tests/test_ext4_inproc.py holds this path to debugfs's image, files and
verdicts.

This module runs the steps and writes the image; the parts are
``ondisk.py`` (the reader: geometry, descriptors, inodes, extents,
directory entries), ``replay.py`` (the jbd2 recovery), ``extract.py``
(rdump), ``memo.py`` (what is kept across states), every field named in
``layout.py``.
"""

from __future__ import annotations

import mmap
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from harness.fs.ext4.extract import Extractor, WantFiles
from harness.fs.ext4.layout import (
    EXT4_SB_OFFSET,
    EXT4_SB_SIZE,
    INCOMPAT_RECOVER,
    JOURNAL_INO,
    SB_BLOCK_GROUP_NR,
    SB_CHECKSUM,
    SB_FEATURE_INCOMPAT,
    SB_KBYTES_WRITTEN,
    SB_LASTCHECK,
    SB_MTIME,
    SB_WTIME,
    U32,
)
from harness.fs.ext4.memo import BlockMemo
from harness.fs.ext4.ondisk import FsReader, Unsupported, check_sb, crc32c
from harness.fs.ext4.replay import ALL, Journal

# what replay must leave as it found it (else: Unsupported)
GEOMETRY = ("bs", "blocks", "inodes_count", "ipg", "desc_size", "groups", "first_data_block")


@dataclass
class Recovered:
    """What :func:`replay_and_extract` did."""

    replayed: bool  # the superblock asked for recovery (needs_recovery)
    written: list[tuple[int, int]]  # (byte offset, length) written to the image
    journal: list[int]  # the journal's physical blocks, in journal order (shared: never modify)
    data: dict[str, list[int]] = field(default_factory=dict)  # file -> its data blocks
    extracted: bool = True  # the files were written (see ``want_files``)
    skipped: list[str] = field(default_factory=list)  # what the extraction did not write


def replay_and_extract(
    image: Path,
    out_dir: Path,
    skip: tuple[str, ...] = (),
    undo: list[tuple[int, bytes]] | None = None,
    *,
    memo: BlockMemo | None = None,
    base: object = None,
    differ: list[tuple[int, int]] | None = None,
    want_files: WantFiles | None = None,
) -> Recovered:
    """Replay ``image``'s journal in place and extract its files into
    ``out_dir`` (created), as debugfs ``open -w``, ``jr``, ``rdump``,
    ``close`` would.  Raises :class:`Unsupported` for anything not handled,
    before writing to the image or after: ``undo`` (appended to before each
    write: byte offset, the bytes there before) then puts it back.  With
    ``memo``, ``image`` is the image ``base`` but for the byte ranges
    ``differ``.  ``want_files``, if given, is called once every file is
    found (and nothing of the extraction is written yet) with a reader of
    the files' contents (:data:`WantFiles`); when it returns False, nothing
    is written to ``out_dir`` (``Recovered.extracted`` False) but the block
    lists are as ever."""
    fd = os.open(image, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if size < EXT4_SB_OFFSET + EXT4_SB_SIZE:
            raise Unsupported("no ext4 superblock")
        # with a memo, its kept mapping (left open); else one for this call
        mapped = nullcontext(memo.mapping(fd)) if memo is not None else mmap.mmap(fd, size)
        with mapped as mm, memoryview(mm) as view:
            return _run(
                fd,
                mm,
                view,
                out_dir,
                skip,
                [] if undo is None else undo,
                memo,
                base,
                differ,
                want_files,
            )
    finally:
        os.close(fd)


def _write(mm: mmap.mmap, data: bytes, offset: int, undo: list[tuple[int, bytes]]) -> None:
    """Write ``data`` at ``offset`` of the image through its shared mapping
    (no system call), noting in ``undo`` the bytes it replaces."""
    end = offset + len(data)
    undo.append((offset, mm[offset:end]))
    mm[offset:end] = data


def _superblock(mm: mmap.mmap) -> bytes:
    return mm[EXT4_SB_OFFSET : EXT4_SB_OFFSET + EXT4_SB_SIZE]


def _run(
    fd: int,
    mm: mmap.mmap,
    view: memoryview,
    out_dir: Path,
    skip: tuple[str, ...],
    undo: list[tuple[int, bytes]],
    memo: BlockMemo | None,
    base: object,
    differ: list[tuple[int, int]] | None,
    want_files: WantFiles | None,
) -> Recovered:
    """debugfs ``open -w``, ``jr``, ``close``, then ``rdump``, each a step."""
    sb = _superblock(mm)
    fs = _open(fd, sb, mm)
    unstable: set[int] | frozenset[int]
    if memo is not None and differ is not None:
        known, unstable = memo.view(base, fs.bs, differ)
    else:  # nothing known: every block counts as differing
        known, unstable = {}, ALL
    if memo is not None:
        fs.verified = known
    journal = Journal(fs, known, unstable)
    _replay(fs, journal, mm, undo)
    fs2 = _reopen(fd, mm, fs, journal)
    fs2.view = view
    _flush(mm, fs2.sb, len(undo) * fs.bs, undo)
    rec = Recovered(
        bool(SB_FEATURE_INCOMPAT.get(sb) & INCOMPAT_RECOVER),
        [(off, len(old)) for off, old in undo],
        journal.phys,
    )
    ext = Extractor(fs2, skip)
    ext.walk(memo)
    rec.data = ext.data
    if want_files is None or want_files(ext.read):
        rec.skipped = ext.write(out_dir)
    else:
        rec.extracted = False
    return rec


def _open(fd: int, sb: bytes, mm: mmap.mmap) -> FsReader:
    """ext2fs_open: the superblock and descriptors checked, the geometry
    this path handles."""
    check_sb(sb)
    fs = FsReader(fd, sb, mm)
    if len(mm) < fs.blocks * fs.bs:
        raise Unsupported("image shorter than the file system")
    if fs.groups != 1 and fs.first_data_block != 0:
        raise Unsupported("geometry")
    fs.gd()
    return fs


def _replay(fs: FsReader, journal: Journal, mm: mmap.mmap, undo: list[tuple[int, bytes]]) -> None:
    """jr: the journal's last copy of each block written in place, then the
    journal superblock released (ext2fs_journal_release(reset))."""
    writes, next_seq = journal.recover()
    jset = journal.phys_set
    for b in writes:
        if b in jset:
            raise Unsupported("replay writes into the journal")
    for b, (phys, escape) in writes.items():
        _write(mm, journal.copy(phys, escape), b * fs.bs, undo)
    _write(mm, journal.released(next_seq), journal.phys[0] * fs.bs, undo)


def _reopen(fd: int, mm: mmap.mmap, fs: FsReader, journal: Journal) -> FsReader:
    """ext2fs_open again on the replayed image: the same geometry and
    journal inode, the descriptors' checksums verified."""
    nsb = _superblock(mm)
    check_sb(nsb)
    fs2 = FsReader(fd, nsb, mm)
    fs2.verified = fs.verified
    for a in GEOMETRY:
        if getattr(fs2, a) != getattr(fs, a):
            raise Unsupported(f"replay changed the geometry ({a})")
    fs2.gd()  # libext2fs refuses bad descriptor checksums on open
    if fs2.inode(JOURNAL_INO) != journal.inode_raw:
        raise Unsupported("replay changed the journal inode")
    return fs2


def _flush(mm: mmap.mmap, sb: bytes, written: int, undo: list[tuple[int, bytes]]) -> None:
    """ext2fs_clear_recover and ext2fs_flush (MASTER_SB_ONLY): the primary
    superblock ``sb`` (as replay left it) written back with needs_recovery
    cleared; ``written``: the bytes written so far (for the I/O counter)."""
    nsb = bytearray(sb)
    SB_FEATURE_INCOMPAT.put(nsb, SB_FEATURE_INCOMPAT.get(nsb) & ~INCOMPAT_RECOVER)
    mtime = SB_MTIME.get(nsb)
    if SB_LASTCHECK.get(nsb) >= mtime:
        SB_LASTCHECK.put(nsb, (mtime - 1) & U32)
    SB_BLOCK_GROUP_NR.put(nsb, 0)
    kb = SB_KBYTES_WRITTEN.get(nsb)
    if kb:  # volatile (masked by the fsck key): what the I/O counters add
        SB_KBYTES_WRITTEN.put(nsb, kb + (written >> 10))
    SB_WTIME.put(nsb, int(time.time()) & U32)  # volatile
    SB_CHECKSUM.put(nsb, crc32c(U32, bytes(nsb[: SB_CHECKSUM.at])))
    _write(mm, bytes(nsb), EXT4_SB_OFFSET, undo)
