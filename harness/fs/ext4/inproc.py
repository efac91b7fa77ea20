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
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from crc32c import crc32c as _crc32c

from harness.errors import CrashlabError
from harness.fs.confined import ConfinedTree, set_perms, write_all
from harness.fs.ext4 import jbd2
from harness.fs.ext4.superblock import EXT4_SB_OFFSET as SB_OFFSET
from harness.fs.ext4.superblock import EXT4_SB_SIZE as SB_SIZE
from harness.fs.ext4.superblock import EXTENT_MAGIC

T = TypeVar("T")
JOURNAL_INO = 8
ROOT_INO = 2
# jbd2 feature bits
# ext4 superblock feature bits this path knows (anything else: Unsupported)
INCOMPAT_FILETYPE, INCOMPAT_RECOVER, INCOMPAT_EXTENTS = 0x2, 0x4, 0x40
INCOMPAT_64BIT, INCOMPAT_FLEX_BG = 0x80, 0x200
INCOMPAT_OK = INCOMPAT_FILETYPE | INCOMPAT_RECOVER | INCOMPAT_EXTENTS | INCOMPAT_64BIT | \
    INCOMPAT_FLEX_BG
COMPAT_HAS_JOURNAL = 0x4
# ext_attr 0x8, resize_inode 0x10, dir_index 0x20 only change what
# replay and rdump leave alone
COMPAT_OK = COMPAT_HAS_JOURNAL | 0x8 | 0x10 | 0x20
RO_METADATA_CSUM = 0x400
# sparse_super, large_file, huge_file, dir_nlink, extra_isize, metadata_csum
RO_OK = 0x1 | 0x2 | 0x8 | 0x20 | 0x40 | RO_METADATA_CSUM
# inode flags
INDEX_FL, HUGE_FILE_FL, EXTENTS_FL, INLINE_DATA_FL = 0x1000, 0x40000, 0x80000, 0x10000000
ENCRYPT_FL, VERITY_FL = 0x800, 0x100000
S_IFMT, S_IFREG, S_IFDIR = 0o170000, 0o100000, 0o040000
MAX_INIT_LEN = 32768
WALKS = 16  # directory walks a BlockMemo keeps (BlockMemo.walked)
# A journal transaction as replay takes it: its sequence and its tags, each
# (fs block, the journal's physical block holding it, escaped, checksum)
Tag = tuple[int, int, int, int]
Txn = tuple[int, list[Tag]]


class Unsupported(CrashlabError):
    """Something this path does not reproduce exactly: take debugfs."""


def crc32c(seed: int, data: bytes) -> int:
    """The kernel's and libext2fs's ``crc32c_le(seed, data)`` (no inversion
    on input or output), from the ``crc32c`` package's standard CRC-32C
    (hardware instructions where the CPU has them)."""
    return ~_crc32c(data, value=~seed & 0xFFFFFFFF) & 0xFFFFFFFF


@dataclass
class Recovered:
    """What :func:`replay_and_extract` did."""

    replayed: bool  # the superblock asked for recovery (needs_recovery)
    written: list[tuple[int, int]]  # (byte offset, length) written to the image
    journal: list[int]  # the journal's physical blocks, in journal order (shared: never modify)
    data: dict[str, list[int]] = field(default_factory=dict)  # file -> its data blocks
    extracted: bool = True  # the files were written (see ``want_files``)


# A file's contents as pieces (buffers valid only until the next piece is
# asked for), or None where no regular file of that relative path (``a/b``)
# was extracted; IsADirectoryError for a directory, as reading one would.
FileReader = Callable[[str], "Iterator[bytes | memoryview] | None"]
# Given the reader of the files a state recovers to: whether to write them.
WantFiles = Callable[[FileReader], bool]


class _Fs:
    """Geometry of one ext4 image, read through ``fd``."""

    def __init__(self, fd: int, sb: bytes, mm: mmap.mmap) -> None:
        self.fd = fd
        self.mm = mm  # the image (shared: its writes are the file's)
        self.view: memoryview = memoryview(b"")  # of mm, for extraction
        self.sb = sb
        u32 = struct.unpack_from
        self.log_bs = u32("<I", sb, 0x18)[0]
        if self.log_bs > 4:  # up to 16 KiB: directory rec_len is then the plain field
            raise Unsupported("block size")
        self.bs = 1024 << self.log_bs
        self.inodes_count, blocks_lo = u32("<II", sb, 0x0)
        self.first_data_block = u32("<I", sb, 0x14)[0]
        self.ipg = u32("<I", sb, 0x28)[0]
        self.compat, self.incompat, self.ro = u32("<III", sb, 0x5C)
        self.blocks = blocks_lo | (u32("<I", sb, 0x150)[0] << 32 if self.incompat &
                                   INCOMPAT_64BIT else 0)
        self.inode_size = u32("<H", sb, 0x58)[0]
        self.desc_size = u32("<H", sb, 0xFE)[0] if self.incompat & INCOMPAT_64BIT else 32
        self.csum = bool(self.ro & RO_METADATA_CSUM)
        self.seed = crc32c(0xFFFFFFFF, sb[0x68:0x78]) if self.csum else 0
        bpg = u32("<I", sb, 0x20)[0]
        if not bpg or not self.ipg or not 128 <= self.inode_size <= self.bs:
            raise Unsupported("superblock geometry")
        self.groups = -(-(self.blocks - self.first_data_block) // bpg)
        self.gdt_block = self.first_data_block + 1
        self._gd: bytes | None = None
        # inodes whose checksum verified: (seed, number, bytes), a pure
        # function of them, so kept in the caller's memo across states
        self.verified: dict[tuple[object, ...], Any] | None = None
        # when a list: every read is noted there, (block, count, bytes)
        self.trace: list[tuple[int, int, bytes]] | None = None

    def read(self, block: int, count: int = 1) -> bytes:
        if block + count > self.blocks or block < 0:
            raise Unsupported(f"block {block} beyond the file system")
        data = self.mm[block * self.bs:(block + count) * self.bs]
        if len(data) != self.bs * count:
            raise Unsupported("image shorter than the file system")
        if self.trace is not None:
            self.trace.append((block, count, data))
        return data

    def gd(self) -> bytes:
        """The group descriptors, checksums verified."""
        if self._gd is None:
            nblocks = -(-self.groups * self.desc_size // self.bs)
            raw = self.read(self.gdt_block, nblocks)
            for g in range(self.groups):
                d = raw[g * self.desc_size:(g + 1) * self.desc_size]
                if self.csum:
                    c = crc32c(self.seed, struct.pack("<I", g))
                    c = crc32c(c, d[:0x1E] + b"\0\0" + d[0x20:]) & 0xFFFF
                    if c != struct.unpack_from("<H", d, 0x1E)[0]:
                        raise Unsupported(f"group descriptor {g} checksum")
            self._gd = raw
        return self._gd

    def inode(self, ino: int) -> bytes:
        """Inode ``ino``'s bytes, checksum verified (libext2fs refuses a
        bad one)."""
        if not 0 < ino <= self.inodes_count:
            raise Unsupported(f"inode {ino} out of range")
        g, i = divmod(ino - 1, self.ipg)
        d = self.gd()[g * self.desc_size:(g + 1) * self.desc_size]
        table = struct.unpack_from("<I", d, 0x8)[0]
        if self.desc_size >= 64:
            table |= struct.unpack_from("<I", d, 0x28)[0] << 32
        off = i * self.inode_size
        blk = table + off // self.bs
        raw = self.read(blk)[off % self.bs:off % self.bs + self.inode_size]
        if self.csum:
            key = ("i", self.seed, ino, raw)
            if self.verified is None or key not in self.verified:
                self._verify_inode(ino, raw)
                if self.verified is not None:
                    self.verified[key] = True
        return raw

    def _verify_inode(self, ino: int, raw: bytes) -> None:
        extra = struct.unpack_from("<H", raw, 0x80)[0] if self.inode_size > 128 else 0
        has_hi = self.inode_size > 128 and extra >= 4
        buf = bytearray(raw)
        buf[0x7C:0x7E] = b"\0\0"
        if has_hi:
            buf[0x82:0x84] = b"\0\0"
        gen = raw[0x64:0x68]
        c = crc32c(crc32c(crc32c(self.seed, struct.pack("<I", ino)), gen), bytes(buf))
        want = struct.unpack_from("<H", raw, 0x7C)[0]
        if has_hi:
            want |= struct.unpack_from("<H", raw, 0x82)[0] << 16
        else:
            c &= 0xFFFF
        if c != want:
            raise Unsupported(f"inode {ino} checksum")

    def extents(self, ino: int, raw: bytes) -> list[tuple[int, int, int]]:
        """``(logical, physical, count)`` of the inode's extents (depth 0,
        written, in range), sorted by logical block."""
        flags = struct.unpack_from("<I", raw, 0x20)[0]
        if flags & INLINE_DATA_FL or not flags & EXTENTS_FL:
            raise Unsupported(f"inode {ino}: not extent-mapped")
        if flags & (HUGE_FILE_FL | ENCRYPT_FL | VERITY_FL):
            raise Unsupported(f"inode {ino}: flags {flags:#x}")
        magic, entries, emax, depth = struct.unpack_from("<HHHH", raw, 0x28)
        if magic != EXTENT_MAGIC or entries > emax or emax > 4:
            raise Unsupported(f"inode {ino}: extent header")
        if depth:
            raise Unsupported(f"inode {ino}: extent tree of depth {depth}")
        out: list[tuple[int, int, int]] = []
        end = 0
        for k in range(entries):
            lblk, n, hi, lo = struct.unpack_from("<IHHI", raw, 0x28 + 12 + 12 * k)
            if n > MAX_INIT_LEN or n == 0:
                raise Unsupported(f"inode {ino}: unwritten or empty extent")
            phys = lo | hi << 32
            if lblk < end or phys + n > self.blocks or phys < self.first_data_block:
                raise Unsupported(f"inode {ino}: extent out of order or range")
            out.append((lblk, phys, n))
            end = lblk + n
        return out


def _size(raw: bytes) -> int:
    return struct.unpack_from("<I", raw, 0x4)[0] | struct.unpack_from("<I", raw, 0x6C)[0] << 32


def _sb_csum_ok(sb: bytes) -> bool:
    return crc32c(0xFFFFFFFF, sb[:0x3FC]) == struct.unpack_from("<I", sb, 0x3FC)[0]


def _check_sb(sb: bytes) -> None:
    """Refuse a superblock whose features or state this path does not
    reproduce."""
    if len(sb) < SB_SIZE or sb[0x38:0x3A] != b"\x53\xef":
        raise Unsupported("no ext4 superblock")
    compat, incompat, ro = struct.unpack_from("<III", sb, 0x5C)
    if not compat & COMPAT_HAS_JOURNAL or compat & ~COMPAT_OK:
        raise Unsupported(f"compat features {compat:#x}")
    if incompat & ~INCOMPAT_OK or not incompat & INCOMPAT_EXTENTS:
        raise Unsupported(f"incompat features {incompat:#x}")
    if ro & ~RO_OK or not ro & RO_METADATA_CSUM:
        raise Unsupported(f"ro_compat features {ro:#x}")
    if sb[0x175] != 1:  # s_checksum_type: crc32c
        raise Unsupported("superblock checksum type")
    if not _sb_csum_ok(sb):
        raise Unsupported("superblock checksum")
    if struct.unpack_from("<I", sb, 0xE0)[0] != JOURNAL_INO or \
            struct.unpack_from("<I", sb, 0xE4)[0] != 0:
        raise Unsupported("journal not inode 8")
    if struct.unpack_from("<I", sb, 0x4C)[0] != 1:  # s_rev_level: dynamic
        raise Unsupported("revision")


class _Journal:
    """The jbd2 journal of inode 8: its block map and superblock.
    ``known`` keeps what was learnt from blocks not in ``unstable`` (see
    :class:`BlockMemo`)."""

    def __init__(self, fs: _Fs, known: dict[tuple[object, ...], Any],
                 unstable: set[int] | frozenset[int]) -> None:
        self.fs = fs
        self.known, self.unstable = known, unstable
        raw = fs.inode(JOURNAL_INO)
        self.inode_raw = raw
        # the block list is a function of the inode's bytes and the geometry:
        # made once (a journal has thousands of blocks), shared, never modified
        key = ("j", raw, fs.blocks, fs.first_data_block, fs.bs)
        self.layout_key = key
        layout = known.get(key)
        if layout is None:
            phys: list[int] = []
            for lblk, p, n in fs.extents(JOURNAL_INO, raw):
                if lblk != len(phys):
                    raise Unsupported("journal has holes")
                phys.extend(range(p, p + n))
            if _size(raw) != len(phys) * fs.bs:
                raise Unsupported("journal size")
            layout = known[key] = (phys, frozenset(phys))
        phys, self.phys_set = layout
        self.phys: list[int] = phys
        jsb = fs.read(phys[0])
        magic, btype = struct.unpack_from(">II", jsb, 0)
        if magic != jbd2.MAGIC or btype != jbd2.SUPERBLOCK_V2:
            raise Unsupported("journal superblock type")
        bs, maxlen, first, seq, start, errno_ = struct.unpack_from(">IIIIIi", jsb, 12)
        compat, incompat, ro = struct.unpack_from(">III", jsb, 0x24)
        nr_users = struct.unpack_from(">I", jsb, 0x40)[0]
        if compat or ro or incompat & ~(jbd2.INCOMPAT_REVOKE | jbd2.INCOMPAT_64BIT |
                                        jbd2.INCOMPAT_CSUM_V3):
            raise Unsupported(f"journal features {compat:#x}/{incompat:#x}/{ro:#x}")
        if nr_users > 1 or errno_ or bs != fs.bs or maxlen != len(phys) or \
                not 0 < first < maxlen or start >= maxlen or 0 < start < first:
            raise Unsupported("journal superblock fields")
        self.csum = bool(incompat & jbd2.INCOMPAT_CSUM_V3)
        if self.csum:
            if jsb[0x50] != 4:  # JBD2_CRC32C_CHKSUM
                raise Unsupported("journal checksum type")
            if crc32c(0xFFFFFFFF, jsb[:0xFC] + b"\0\0\0\0" + jsb[0x100:1024]) != \
                    struct.unpack_from(">I", jsb, 0xFC)[0]:
                raise Unsupported("journal superblock checksum")
            self.seed = crc32c(0xFFFFFFFF, jsb[0x30:0x40])
        self.wide = bool(incompat & jbd2.INCOMPAT_64BIT)
        self.super = jbd2.journal_super(jsb)
        assert self.super is not None  # its magic and type were checked above
        self.tail = self.super.tail_bytes
        self.jsb = jsb
        self.first, self.last, self.sequence, self.start = first, maxlen, seq, start

    def block(self, n: int) -> bytes:
        return self.fs.read(self.phys[n])

    def _wrap(self, n: int) -> int:
        return n - (self.last - self.first) if n >= self.last else n

    def _csum_ok(self, block: bytes, at: int) -> bool:
        """The checksum at byte ``at`` of a descriptor/revoke (tail) or
        commit block (``h_chksum[0]``) verifies."""
        if not self.csum:
            return True
        want = struct.unpack_from(">I", block, at)[0]
        return crc32c(self.seed, block[:at] + b"\0\0\0\0" + block[at + 4:]) == want

    def _tags(self, desc: bytes) -> list[tuple[int, int, int]]:
        """(fs block, flags, checksum) of each tag of a descriptor."""
        return [(t.fs_block, t.flags, t.csum) for t in jbd2.descriptor_tags(desc, self.super)]

    def _cached(self, key: tuple[object, ...], phys: int, compute: Callable[[], T]) -> T:
        """``compute()``, a function of block ``phys``'s content, kept in
        ``self.known`` when that content is the durable image's."""
        if phys in self.unstable:
            return compute()
        hit = self.known.get(key)
        if hit is None:
            hit = self.known[key] = compute()
        return hit  # type: ignore[return-value]

    def _header(self, phys: int) -> tuple[int, int, int]:
        return self._cached(("h", phys), phys,
                            lambda: struct.unpack_from(">III", self.fs.read(phys), 0))

    def _descriptor(self, phys: int) -> tuple[bool, list[tuple[int, int, int]]]:
        def compute() -> tuple[bool, list[tuple[int, int, int]]]:
            blk = self.fs.read(phys)
            return self._csum_ok(blk, self.fs.bs - 4), self._tags(blk)
        return self._cached(("d", phys), phys, compute)

    def recover(self) -> tuple[dict[int, tuple[int, int]], int]:
        """jbd2_journal_recover's three passes: the blocks to write (fs
        block -> the journal's physical block holding its last copy, and
        its tag flags) and the sequence the journal superblock gets."""
        if not self.start:
            return {}, self.sequence + 1
        # PASS_SCAN (with PASS_REVOKE's records gathered on the way: the
        # revoke pass walks the same blocks up to the same end), resumed
        # where an earlier scan of the same durable image got to (_ScanMemo).
        memo = self._scan_memo()
        mark = memo.resume_point(self.unstable) if memo is not None else _ScanMark(
            self.start, self.sequence, 0, 0, ())
        pos, seq = mark.pos, mark.seq
        txns = memo.txns[:mark.txns] if memo is not None else []
        revoked = dict(mark.revoked)
        current: list[Tag] = []
        pending_revokes: list[tuple[int, int]] = []
        # extending the memo: from its last mark, while every block read is
        # the durable image's (the reads since the last commit)
        recording = memo is not None and mark is memo.marks[-1]
        reads: list[int] = []
        new_revokes = False  # revoke records after the mark
        while True:
            phys = self.phys[pos]
            magic, btype, bseq = self._header(phys)
            pos = self._wrap(pos + 1)
            if recording:
                recording = phys not in self.unstable
                reads.append(phys)
            if magic != jbd2.MAGIC or bseq != seq:
                break
            if btype == jbd2.DESCRIPTOR:
                ok, tags = self._descriptor(phys)
                if not ok:
                    raise Unsupported("journal descriptor checksum")
                for fsblk, flags, csum in tags:
                    current.append((fsblk, self.phys[pos], flags & jbd2.FLAG_ESCAPE, csum))
                    pos = self._wrap(pos + 1)
            elif btype == jbd2.COMMIT:
                if not self._cached(("k", phys), phys,
                                    lambda p=phys: self._csum_ok(self.fs.read(p), 16)):
                    raise Unsupported("journal commit checksum")
                txns.append((seq, current))
                for b, s in pending_revokes:
                    if b not in revoked or _tid_gt(s, revoked[b]):
                        revoked[b] = s
                        new_revokes = True
                current, pending_revokes = [], []
                seq = (seq + 1) & 0xFFFFFFFF
                if recording:
                    memo.commit(reads, pos, seq, txns[-1], revoked)
                    reads = []
            elif btype == jbd2.REVOKE:
                blk = self.fs.read(phys)
                if not self._csum_ok(blk, self.fs.bs - 4):
                    raise Unsupported("journal revoke checksum")
                pending_revokes += [(b, seq) for b in self._revokes(blk)]
            else:
                break  # recovery.c: unrecognised block type ends the scan
        end = seq
        # PASS_REPLAY, from the memo's replay of the transactions before the
        # mark when it holds for this image: the revokes are the mark's (none
        # came after it) and no block of those transactions differs
        writes: dict[int, tuple[int, int]] = {}
        done = 0
        if memo is not None and mark.txns and not new_revokes:
            pre = memo.replayed.get(mark.txns)
            if pre is None:
                blocks = frozenset(phys for _, tags in txns[:mark.txns] for _, phys, _, _ in tags)
                if self.unstable.isdisjoint(blocks):
                    self._replay(txns[:mark.txns], revoked, writes)
                    memo.replayed[mark.txns] = (dict(writes), blocks)
                    done = mark.txns
            elif self.unstable.isdisjoint(pre[1]):
                writes.update(pre[0])
                done = mark.txns
        self._replay(txns[done:], revoked, writes)
        return writes, (end + 1) & 0xFFFFFFFF

    def _replay(self, txns: list[Txn], revoked: dict[int, int],
                writes: dict[int, tuple[int, int]]) -> None:
        """PASS_REPLAY of ``txns``, added to ``writes``: the last unrevoked
        copy of each block, its checksum verified (kept in ``known`` as
        :meth:`_cached` keeps facts, inlined: this loop runs for every
        tag)."""
        known, unstable, nblocks = self.known, self.unstable, self.fs.blocks
        for tseq, tags in txns:
            seed = crc32c(self.seed, struct.pack(">I", tseq)) if self.csum else 0
            for fsblk, phys, escape, csum in tags:
                r = revoked.get(fsblk)
                if r is not None and not _tid_gt(tseq, r):
                    continue
                if self.csum:
                    key = ("c", phys, tseq, csum)
                    ok = None if phys in unstable else known.get(key)
                    if ok is None:
                        ok = crc32c(seed, self.fs.read(phys)) == csum
                        if phys not in unstable:
                            known[key] = ok
                    if not ok:
                        raise Unsupported("journal data block checksum")
                if fsblk >= nblocks:
                    raise Unsupported("journal block beyond the file system")
                writes.pop(fsblk, None)
                writes[fsblk] = (phys, escape)

    def _scan_memo(self) -> _ScanMemo | None:
        """The scan memo of this journal (its layout and superblock) over
        the durable image; None when nothing is known of the image."""
        if self.unstable is _ALL:
            return None
        key = ("s", self.layout_key, bytes(self.jsb[:1024]))
        memo = self.known.get(key)
        if memo is None:
            memo = self.known[key] = _ScanMemo(self.start, self.sequence)
        return memo  # type: ignore[no-any-return]

    def _revokes(self, blk: bytes) -> list[int]:
        count = struct.unpack_from(">I", blk, 12)[0]
        if count > self.fs.bs - self.tail:
            raise Unsupported("journal revoke count")
        width = 8 if self.wide else 4
        fmt = ">Q" if self.wide else ">I"
        return [struct.unpack_from(fmt, blk, off)[0] for off in range(16, count - width + 1,
                                                                     width)]


@dataclass(frozen=True)
class _ScanMark:
    """The journal scan's state just after a commit block (or at its
    start): the next position and sequence, how many transactions and block
    reads came before, the revoke records so far."""

    pos: int
    seq: int
    txns: int
    reads: int
    revoked: tuple[tuple[int, int], ...]


class _ScanMemo:
    """PASS_SCAN over a durable image, as far as scans of its crash images
    went reading only the durable image's blocks: the blocks read in order
    (one per step: the header of each descriptor, commit or revoke block)
    and a mark at each commit.  The scan is a function of the blocks it
    reads, so a crash image whose first differing block is the ``k``-th
    read resumes at the last mark with at most ``k`` reads before it: same
    transactions, same revokes, same position."""

    def __init__(self, start: int, seq: int) -> None:
        self.reads = 0
        self.first: dict[int, int] = {}  # block -> how many reads came before its first
        self.txns: list[Txn] = []
        self.marks = [_ScanMark(start, seq, 0, 0, ())]
        self._reads_at = [0]  # each mark's ``reads``, for bisect
        # PASS_REPLAY of the transactions before a mark (by its ``txns``),
        # under its revokes: the writes, and the journal blocks they read
        self.replayed: dict[int, tuple[dict[int, tuple[int, int]], frozenset[int]]] = {}

    def resume_point(self, unstable: set[int] | frozenset[int]) -> _ScanMark:
        """The last mark whose reads are all outside ``unstable``."""
        limit = min((self.first[b] for b in unstable if b in self.first), default=self.reads)
        return self.marks[bisect.bisect_right(self._reads_at, limit) - 1]

    def commit(self, reads: list[int], pos: int, seq: int,
               txn: Txn, revoked: dict[int, int]) -> None:
        """Extend the memo from its last mark by ``reads`` (the blocks
        read since, all the durable image's), ending in the commit of
        ``txn``; the scan's state is then ``pos``, ``seq``, ``revoked``."""
        for phys in reads:
            self.first.setdefault(phys, self.reads)
            self.reads += 1
        self.txns.append(txn)
        self.marks.append(_ScanMark(pos, seq, len(self.txns), self.reads,
                                    tuple(revoked.items())))
        self._reads_at.append(self.reads)


@dataclass
class _Walk:
    """One directory walk (:class:`_Extractor`) and what it read: the
    superblock and group descriptors it went by and each block read."""

    sb: bytes
    gd: bytes
    skip: frozenset[bytes]
    reads: list[tuple[int, int, bytes]]
    root_raw: bytes
    ops: list[tuple[str, bytes, bytes, list[tuple[int, int]]]]
    files: dict[str, list[tuple[int, int]]]
    dirs: set[str]
    data: dict[str, list[int]]


class _Everything(frozenset[int]):
    """Contains every block."""

    def __contains__(self, item: object) -> bool:
        return True


_ALL = _Everything()


def _tid_gt(x: int, y: int) -> bool:
    d = (x - y) & 0xFFFFFFFF
    return d != 0 and d < 0x80000000


class BlockMemo:
    """What the journal scan learnt from blocks whose content is a fixed
    image's (a worker's durable image at one position): headers, parsed
    descriptors, checksum results.  The caller names the image (``base``)
    and the byte ranges where this crash image may differ from it; facts of
    other blocks are reused across crash images of the same base."""

    LIMIT = 1 << 17

    def __init__(self) -> None:
        self.base: object = None
        self.known: dict[tuple[object, ...], Any] = {}
        # the crash image's mapping, kept across states: unmapping a
        # 64 MiB mapping per state cost more than the journal scan
        self._map: tuple[tuple[int, int, int], mmap.mmap] | None = None
        self.walks: list[_Walk] = []  # the last WALKS directory walks, newest last

    def mapping(self, fd: int) -> mmap.mmap:
        """A shared mapping of the file open at ``fd``, the same one while
        that file (device, inode, size) is the same: a file truncated and
        written again in place is seen through it.  (While mapped, its
        inode number cannot go to another file.)"""
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino, st.st_size)
        if self._map is None or self._map[0] != ident:
            self.close()
            self._map = (ident, mmap.mmap(fd, st.st_size))
        return self._map[1]

    def close(self) -> None:
        """Unmap the kept mapping."""
        if self._map is not None:
            self._map[1].close()
            self._map = None

    def walked(self, fs: _Fs, skip: frozenset[bytes]) -> _Walk | None:
        """A kept walk that read, on a file system of the same superblock
        and group descriptors, exactly what ``fs``'s image holds now in every
        block it read: the walk is a function of those, so it is this
        image's walk too."""
        for i in range(len(self.walks) - 1, -1, -1):
            w = self.walks[i]
            if w.sb == fs.sb and w.gd == fs._gd and w.skip == skip and all(
                    fs.mm[b * fs.bs:(b + n) * fs.bs] == data for b, n, data in w.reads):
                self.walks.append(self.walks.pop(i))
                return w
        return None

    def keep_walk(self, walk: _Walk) -> None:
        self.walks.append(walk)
        if len(self.walks) > WALKS:
            del self.walks[0]

    def view(self, base: object, bs: int, differ: list[tuple[int, int]]
             ) -> tuple[dict[tuple[object, ...], Any], set[int]]:
        """The memo for ``base`` and the blocks (of ``bs`` bytes) in
        ``differ``."""
        if base != self.base or len(self.known) > self.LIMIT:
            self.base, self.known = base, {}
        unstable: set[int] = set()
        for off, n in differ:
            unstable.update(range(off // bs, (off + n - 1) // bs + 1))
        return self.known, unstable


def replay_and_extract(image: Path, out_dir: Path, skip: tuple[str, ...] = (),
                       undo: list[tuple[int, bytes]] | None = None, *,
                       memo: BlockMemo | None = None, base: object = None,
                       differ: list[tuple[int, int]] | None = None,
                       want_files: WantFiles | None = None) -> Recovered:
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
        if size < SB_OFFSET + SB_SIZE:
            raise Unsupported("no ext4 superblock")
        # with a memo, its kept mapping (left open); else one for this call
        mapped = nullcontext(memo.mapping(fd)) if memo is not None else mmap.mmap(fd, size)
        with mapped as mm, memoryview(mm) as view:
            return _run(fd, mm, view, out_dir, skip, [] if undo is None else undo, memo,
                        base, differ, want_files)
    finally:
        os.close(fd)


def _write(mm: mmap.mmap, data: bytes, offset: int, undo: list[tuple[int, bytes]]) -> None:
    """Write ``data`` at ``offset`` of the image through its shared mapping
    (no system call), noting in ``undo`` the bytes it replaces."""
    end = offset + len(data)
    undo.append((offset, mm[offset:end]))
    mm[offset:end] = data


def _run(fd: int, mm: mmap.mmap, view: memoryview, out_dir: Path, skip: tuple[str, ...],
         undo: list[tuple[int, bytes]], memo: BlockMemo | None, base: object,
         differ: list[tuple[int, int]] | None, want_files: WantFiles | None) -> Recovered:
    sb = mm[SB_OFFSET:SB_OFFSET + SB_SIZE]
    _check_sb(sb)
    fs = _Fs(fd, sb, mm)
    if len(mm) < fs.blocks * fs.bs:
        raise Unsupported("image shorter than the file system")
    if fs.groups != 1 and fs.first_data_block != 0:
        raise Unsupported("geometry")
    fs.gd()
    if memo is not None and differ is not None:
        known, unstable = memo.view(base, fs.bs, differ)
    else:  # nothing known: every block counts as differing
        known, unstable = {}, _ALL
    if memo is not None:
        fs.verified = known
    journal = _Journal(fs, known, unstable)
    writes, next_seq = journal.recover()
    jset = journal.phys_set
    for b in writes:
        if b in jset:
            raise Unsupported("replay writes into the journal")
    for b, (phys, escape) in writes.items():
        data = fs.read(phys)
        if escape:
            data = struct.pack(">I", jbd2.MAGIC) + data[4:]
        _write(mm, data, b * fs.bs, undo)
    # ext2fs_journal_release(reset): the next sequence, an empty log
    jsb = bytearray(journal.block(0))
    struct.pack_into(">II", jsb, 24, next_seq, 0)
    if journal.csum:
        struct.pack_into(">I", jsb, 0xFC, 0)
        struct.pack_into(">I", jsb, 0xFC, crc32c(0xFFFFFFFF, bytes(jsb[:1024])))
    _write(mm, bytes(jsb), journal.phys[0] * fs.bs, undo)
    # ext2fs_open again on the replayed image, then ext2fs_clear_recover and
    # ext2fs_flush (MASTER_SB_ONLY: the primary superblock and descriptors)
    nsb = bytearray(mm[SB_OFFSET:SB_OFFSET + SB_SIZE])
    _check_sb(bytes(nsb))
    fs2 = _Fs(fd, bytes(nsb), mm)
    fs2.view = view
    fs2.verified = fs.verified
    for a in ("bs", "blocks", "inodes_count", "ipg", "desc_size", "groups", "first_data_block"):
        if getattr(fs2, a) != getattr(fs, a):
            raise Unsupported(f"replay changed the geometry ({a})")
    fs2.gd()  # libext2fs refuses bad descriptor checksums on open
    if fs2.inode(JOURNAL_INO) != journal.inode_raw:
        raise Unsupported("replay changed the journal inode")
    replayed = bool(struct.unpack_from("<I", sb, 0x60)[0] & INCOMPAT_RECOVER)
    struct.pack_into("<I", nsb, 0x60, struct.unpack_from("<I", nsb, 0x60)[0] & ~INCOMPAT_RECOVER)
    mtime = struct.unpack_from("<I", nsb, 0x2C)[0]
    lastcheck = struct.unpack_from("<I", nsb, 0x40)[0]
    if lastcheck >= mtime:
        struct.pack_into("<I", nsb, 0x40, (mtime - 1) & 0xFFFFFFFF)
    struct.pack_into("<H", nsb, 0x5A, 0)  # s_block_group_nr
    kb = struct.unpack_from("<Q", nsb, 0x178)[0]
    if kb:  # volatile (masked by the fsck key): what the I/O counters add
        struct.pack_into("<Q", nsb, 0x178, kb + (len(undo) * fs.bs >> 10))
    struct.pack_into("<I", nsb, 0x30, int(time.time()) & 0xFFFFFFFF)  # s_wtime: volatile
    struct.pack_into("<I", nsb, 0x3FC, crc32c(0xFFFFFFFF, bytes(nsb[:0x3FC])))
    _write(mm, bytes(nsb), SB_OFFSET, undo)
    rec = Recovered(replayed, [(off, len(old)) for off, old in undo], journal.phys)
    ext = _Extractor(fs2, rec, skip)
    ext.walk(memo)
    if want_files is None or want_files(ext.read):
        ext.write(out_dir)
    else:
        rec.extracted = False
    return rec


# what _Extractor.write does, step by step
WRITE_FILE, MAKE_DIR, SET_PERMS = "write-file", "make-dir", "set-perms"


class _Extractor:
    """rdump: files with their contents, directories, mode, owner, times.
    :meth:`walk` finds everything (and declines what it does not handle)
    without writing; :meth:`write` then writes it in rdump's order."""

    def __init__(self, fs: _Fs, rec: Recovered, skip: tuple[str, ...]) -> None:
        self.fs, self.rec = fs, rec
        self.skip = {s.encode() for s in skip}
        self.root = b""
        # in order: (WRITE_FILE, rel, inode, pieces), (MAKE_DIR, rel, inode)
        # before its entries, (SET_PERMS, rel, inode) of a directory after them
        self.ops: list[tuple[str, bytes, bytes, list[tuple[int, int]]]] = []
        self.files: dict[str, list[tuple[int, int]]] = {}  # rel -> pieces
        self.dirs: set[str] = set()
        self.walked_dirs: set[int] = set()  # directory inodes the walk entered

    def walk(self, memo: BlockMemo | None = None) -> None:
        """Find every directory and file from the root; with ``memo``, take
        a kept walk of the same blocks (:meth:`BlockMemo.walked`) or keep
        this one."""
        fs = self.fs
        skip = frozenset(self.skip)
        kept = memo.walked(fs, skip) if memo is not None else None
        if kept is not None:
            self.root_raw, self.ops, self.files, self.dirs = \
                kept.root_raw, kept.ops, kept.files, kept.dirs
            self.rec.data = dict(kept.data)
            return
        fs.trace = [] if memo is not None else None
        try:
            raw = fs.inode(ROOT_INO)
            if struct.unpack_from("<H", raw, 0)[0] & S_IFMT != S_IFDIR:
                raise Unsupported("root is not a directory")
            self.root_raw = raw
            self.walked_dirs = {ROOT_INO}
            self._dir(ROOT_INO, raw, b"", top=True)
        finally:
            reads, fs.trace = fs.trace, None
        if memo is not None:
            assert reads is not None
            memo.keep_walk(_Walk(fs.sb, fs.gd(), skip, reads, self.root_raw, self.ops,
                                 self.files, self.dirs, dict(self.rec.data)))

    def read(self, rel: str) -> Iterator[bytes | memoryview] | None:
        """:data:`FileReader` of the walked files."""
        pieces = self.files.get(rel)
        if pieces is None:
            if rel in self.dirs:
                raise IsADirectoryError(rel)
            return None
        return self._contents(pieces)

    def _contents(self, pieces: list[tuple[int, int]]) -> Iterator[bytes | memoryview]:
        """A file's bytes: ``(start, n)`` of the image, or ``(-1, n)`` zeros."""
        for start, n in pieces:
            if start < 0:
                yield bytes(n)
            else:
                with self.fs.view[start:start + n] as data:
                    yield data

    def write(self, out_dir: Path) -> None:
        """Write what :meth:`walk` found into ``out_dir`` (created), each
        entry at its parent's directory descriptor (:class:`ConfinedTree`:
        nothing followed, nothing replaced)."""
        with ConfinedTree(out_dir) as tree:
            stack = [tree.root]  # the open directories from the root down
            try:
                for kind, rel, raw, pieces in self.ops:
                    name = rel.rpartition(b"/")[2]
                    if kind == WRITE_FILE:
                        fd = tree.create(stack[-1], name, rel)
                        if fd is None:  # the walk lets through no name it refuses
                            raise Unsupported(f"{tree.skipped[-1]}")
                        try:
                            for data in self._contents(pieces):
                                write_all(fd, data)
                            fix_perms(raw, fd)
                        finally:
                            os.close(fd)
                    elif kind == MAKE_DIR:
                        fd = tree.mkdir(stack[-1], name, rel)
                        if fd is None:
                            raise Unsupported(f"{tree.skipped[-1]}")
                        stack.append(fd)
                    else:
                        fd = stack.pop()
                        try:
                            fix_perms(raw, fd)
                        finally:
                            os.close(fd)
                # rdump / sets the root's; rdump of its entries, as with skip, not
                if not self.skip:
                    fix_perms(self.root_raw, tree.root)
            finally:
                for fd in stack[1:]:
                    os.close(fd)

    def _dir(self, ino: int, raw: bytes, rel: bytes, top: bool = False) -> None:
        flags = struct.unpack_from("<I", raw, 0x20)[0]
        if flags & INDEX_FL:
            raise Unsupported(f"inode {ino}: htree directory")
        fs = self.fs
        iseed = crc32c(crc32c(fs.seed, struct.pack("<I", ino)), raw[0x64:0x68])
        seen: set[bytes] = set()
        for lblk, phys, n in fs.extents(ino, raw):
            del lblk
            data = fs.read(phys, n)
            for k in range(n):
                blk = data[k * fs.bs:(k + 1) * fs.bs]
                self._verify_dirblock(ino, iseed, blk)
                for child, name in self._entries(blk):
                    if name in (b".", b"..") or (top and name in self.skip):
                        continue
                    if name in seen:  # rdump would write both, through the first
                        raise Unsupported(f"inode {ino}: a second entry {name!r}")
                    seen.add(name)
                    craw = fs.inode(child)
                    mode = struct.unpack_from("<H", craw, 0)[0]
                    crel = rel + b"/" + name if rel else name
                    if mode & S_IFMT == S_IFREG:
                        self._file(child, craw, crel)
                    elif mode & S_IFMT == S_IFDIR:
                        if child in self.walked_dirs:  # a loop, or a folder twice
                            raise Unsupported(f"inode {child}: a directory reached twice")
                        self.walked_dirs.add(child)
                        self.ops.append((MAKE_DIR, crel, craw, []))
                        self.dirs.add(os.fsdecode(crel))
                        self._dir(child, craw, crel)
                        self.ops.append((SET_PERMS, crel, craw, []))
                    else:
                        raise Unsupported(f"inode {child}: mode {mode:#o}")

    def _verify_dirblock(self, ino: int, iseed: int, blk: bytes) -> None:
        bs = self.fs.bs
        t = blk[bs - 12:]
        inode, rec_len, name_len, ft = struct.unpack_from("<IHBB", t, 0)
        if inode != 0 or rec_len != 12 or name_len != 0 or ft != 0xDE:
            raise Unsupported(f"inode {ino}: directory block without a checksum tail")
        if crc32c(iseed, blk[:bs - 12]) != struct.unpack_from("<I", t, 8)[0]:
            raise Unsupported(f"inode {ino}: directory block checksum")

    def _entries(self, blk: bytes) -> list[tuple[int, bytes]]:
        """ext2fs_process_dir_block's walk: live entries in order."""
        bs = self.fs.bs
        out: list[tuple[int, bytes]] = []
        off = 0
        while off < bs:
            inode, rec_len, name_len = struct.unpack_from("<IHB", blk, off)
            if off + rec_len > bs or rec_len < 8 or rec_len % 4 or name_len + 8 > rec_len:
                raise Unsupported("directory entry corrupted")
            if inode:
                name = blk[off + 8:off + 8 + name_len]
                if not name or b"/" in name or b"\0" in name:
                    raise Unsupported("directory entry name")
                out.append((inode, name))
            off += rec_len
        return out

    def _file(self, ino: int, raw: bytes, rel: bytes) -> None:
        """dump_file: the file's ``i_size`` bytes (holes as zeros), as
        pieces of the image's mapping."""
        fs = self.fs
        size = _size(raw)
        blocks: list[int] = []
        pieces: list[tuple[int, int]] = []
        done = 0
        for lblk, phys, n in fs.extents(ino, raw):
            blocks.extend(range(phys, phys + n))
            start = lblk * fs.bs
            if start >= size:
                continue
            if start > done:
                pieces.append((-1, start - done))
            end = min(size, start + n * fs.bs)
            pieces.append((phys * fs.bs, end - start))
            done = end
        if done < size:
            pieces.append((-1, size - done))
        self.ops.append((WRITE_FILE, rel, raw, pieces))
        name = os.fsdecode(rel)
        self.files[name] = pieces
        self.rec.data[name] = blocks


def fix_perms(raw: bytes, fd: int) -> None:
    """rdump's fix_perms from the inode bytes ``raw``, on the file or
    directory open at ``fd``: mode (its mode_xlate keeps the permission bits
    only), owner, access and modification times (seconds)."""
    mode = struct.unpack_from("<H", raw, 0)[0]
    uid = struct.unpack_from("<H", raw, 0x2)[0] | struct.unpack_from("<H", raw, 0x78)[0] << 16
    gid = struct.unpack_from("<H", raw, 0x18)[0] | struct.unpack_from("<H", raw, 0x7A)[0] << 16
    atime, mtime = struct.unpack_from("<I", raw, 0x8)[0], struct.unpack_from("<I", raw, 0x10)[0]
    set_perms(fd, mode, (atime, mtime), owner=(uid, gid))
