"""The jbd2 recovery of e2fsprogs' ``e2fsck/recovery.c`` in process (the
scan, revoke and replay passes over the journal of inode 8), with what it
keeps across crash images of one durable image (:class:`ScanMemo`, and the
facts of unchanged journal blocks): see harness/fs/README.md, "In process
first".  :class:`Journal` reads; the caller writes what it returns."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from harness.fs.ext4 import jbd2
from harness.fs.ext4.layout import (
    BE32,
    BLOCK_TAIL_SIZE,
    CHECKSUM,
    COMMIT_CHKSUM,
    JBD2_CRC32C_CHKSUM,
    JBD2_HEADER,
    JOURNAL_INO,
    JSB_CHECKSUM,
    JSB_CHECKSUM_TYPE,
    JSB_ERRNO,
    JSB_FEATURE_COMPAT,
    JSB_FEATURE_RO_COMPAT,
    JSB_NR_USERS,
    JSB_SEQUENCE,
    JSB_SIZE,
    JSB_START,
    JSB_UUID,
    REVOKE_COUNT,
    REVOKE_RECORD_32,
    REVOKE_RECORD_64,
    REVOKE_RECORDS,
    TID_HALF,
    U32,
)
from harness.fs.ext4.ondisk import FsReader, Unsupported, crc32c, file_size

T = TypeVar("T")
# A journal transaction as replay takes it: its sequence and its tags, each
# (fs block, the journal's physical block holding it, escaped, checksum)
Tag = tuple[int, int, int, int]
Txn = tuple[int, list[Tag]]


class Journal:
    """The jbd2 journal of inode 8: its block map and superblock.
    ``known`` keeps what was learnt from blocks not in ``unstable`` (see
    :class:`harness.fs.ext4.memo.BlockMemo`)."""

    def __init__(
        self,
        fs: FsReader,
        known: dict[tuple[object, ...], Any],
        unstable: set[int] | frozenset[int],
    ) -> None:
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
            if file_size(raw) != len(phys) * fs.bs:
                raise Unsupported("journal size")
            layout = known[key] = (phys, frozenset(phys))
        phys, phys_set = layout
        self.phys_set: frozenset[int] = phys_set
        self.phys: list[int] = phys
        self.jsb = jsb = fs.read(phys[0])
        magic, btype, _ = JBD2_HEADER.unpack_from(jsb, 0)
        if magic != jbd2.MAGIC or btype != jbd2.SUPERBLOCK_V2:
            raise Unsupported("journal superblock type")
        js = jbd2.journal_super(jsb)
        assert js is not None  # its magic and type were checked above
        self.super = js
        self._check_super(jsb, js, len(phys))
        incompat = js.incompat
        self.csum = bool(incompat & jbd2.INCOMPAT_CSUM_V3)
        if self.csum:
            if JSB_CHECKSUM_TYPE.get(jsb) != JBD2_CRC32C_CHKSUM:
                raise Unsupported("journal checksum type")
            if crc32c(
                U32, jsb[: JSB_CHECKSUM.at] + b"\0\0\0\0" + jsb[JSB_CHECKSUM.end : JSB_SIZE]
            ) != JSB_CHECKSUM.get(jsb):
                raise Unsupported("journal superblock checksum")
            self.seed = crc32c(U32, JSB_UUID.of(jsb))
        self.wide = bool(incompat & jbd2.INCOMPAT_64BIT)
        self.tail = js.tail_bytes
        self.first, self.last, self.sequence, self.start = (
            js.first,
            js.maxlen,
            js.sequence,
            js.start,
        )

    def _check_super(self, jsb: bytes, js: jbd2.JournalSuper, length: int) -> None:
        """Refuse a journal superblock (``jsb``, decoded ``js``) this path
        does not replay exactly (``length``: the journal inode's blocks)."""
        compat, ro = JSB_FEATURE_COMPAT.get(jsb), JSB_FEATURE_RO_COMPAT.get(jsb)
        incompat = js.incompat
        if (
            compat
            or ro
            or incompat & ~(jbd2.INCOMPAT_REVOKE | jbd2.INCOMPAT_64BIT | jbd2.INCOMPAT_CSUM_V3)
        ):
            raise Unsupported(f"journal features {compat:#x}/{incompat:#x}/{ro:#x}")
        maxlen, first, start = js.maxlen, js.first, js.start
        if (
            JSB_NR_USERS.get(jsb) > 1
            or JSB_ERRNO.get(jsb)
            or js.blocksize != self.fs.bs
            or maxlen != length
            or not 0 < first < maxlen
            or start >= maxlen
            or 0 < start < first
        ):
            raise Unsupported("journal superblock fields")

    def block(self, n: int) -> bytes:
        return self.fs.read(self.phys[n])

    def _wrap(self, n: int) -> int:
        return n - (self.last - self.first) if n >= self.last else n

    def _csum_ok(self, block: bytes, at: int) -> bool:
        """The checksum at byte ``at`` of a descriptor/revoke (tail) or
        commit block (``h_chksum[0]``) verifies."""
        if not self.csum:
            return True
        want = CHECKSUM.get(block, at)
        return crc32c(self.seed, block[:at] + b"\0\0\0\0" + block[at + 4 :]) == want

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
        return hit

    def _header(self, phys: int) -> tuple[int, int, int]:
        return self._cached(
            ("h", phys), phys, lambda: JBD2_HEADER.unpack_from(self.fs.read(phys), 0)
        )

    def _commit_ok(self, phys: int) -> bool:
        """Whether the commit block at ``phys`` has a valid checksum."""
        return self._cached(
            ("k", phys), phys, lambda: self._csum_ok(self.fs.read(phys), COMMIT_CHKSUM.at)
        )

    def _descriptor(self, phys: int) -> tuple[bool, list[tuple[int, int, int]]]:
        def compute() -> tuple[bool, list[tuple[int, int, int]]]:
            blk = self.fs.read(phys)
            return self._csum_ok(blk, self.fs.bs - BLOCK_TAIL_SIZE), self._tags(blk)

        return self._cached(("d", phys), phys, compute)

    def recover(self) -> tuple[dict[int, tuple[int, int]], int]:
        """jbd2_journal_recover's three passes: the blocks to write (fs
        block -> the journal's physical block holding its last copy, and
        its tag flags) and the sequence the journal superblock gets."""
        if not self.start:
            return {}, self.sequence + 1
        # PASS_SCAN (with PASS_REVOKE's records gathered on the way: the
        # revoke pass walks the same blocks up to the same end), resumed
        # where an earlier scan of the same durable image got to (ScanMemo).
        memo = self._scan_memo()
        mark = (
            memo.resume_point(self.unstable)
            if memo is not None
            else ScanMark(self.start, self.sequence, 0, 0, ())
        )
        pos, seq = mark.pos, mark.seq
        txns = memo.txns[: mark.txns] if memo is not None else []
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
                if not self._commit_ok(phys):
                    raise Unsupported("journal commit checksum")
                txns.append((seq, current))
                for b, s in pending_revokes:
                    if b not in revoked or _tid_gt(s, revoked[b]):
                        revoked[b] = s
                        new_revokes = True
                current, pending_revokes = [], []
                seq = (seq + 1) & U32
                if recording and memo is not None:
                    memo.commit(reads, pos, seq, txns[-1], revoked)
                    reads = []
            elif btype == jbd2.REVOKE:
                blk = self.fs.read(phys)
                if not self._csum_ok(blk, self.fs.bs - BLOCK_TAIL_SIZE):
                    raise Unsupported("journal revoke checksum")
                pending_revokes += [(b, seq) for b in self._revokes(blk)]
            else:
                break  # recovery.c: unrecognised block type ends the scan
        # PASS_REPLAY, from the memo's replay of the transactions before the
        # mark when it holds for this image: the revokes are the mark's (none
        # came after it)
        writes: dict[int, tuple[int, int]] = {}
        done = 0
        if memo is not None and mark.txns and not new_revokes:
            done = self._replay_memo(memo, txns, mark.txns, revoked, writes)
        self._replay(txns[done:], revoked, writes)
        return writes, (seq + 1) & U32

    def _replay_memo(
        self,
        memo: ScanMemo,
        txns: list[Txn],
        n: int,
        revoked: dict[int, int],
        writes: dict[int, tuple[int, int]],
    ) -> int:
        """PASS_REPLAY of the first ``n`` of ``txns`` (those before the
        memo's mark), added to ``writes``: taken from the memo (or replayed
        and kept there) when no block of theirs differs in this image.  How
        many were replayed: ``n``, or 0 (the caller replays them)."""
        pre = memo.replayed.get(n)
        if pre is None:
            blocks = frozenset(phys for _, tags in txns[:n] for _, phys, _, _ in tags)
            if not self.unstable.isdisjoint(blocks):
                return 0
            self._replay(txns[:n], revoked, writes)
            memo.replayed[n] = (dict(writes), blocks)
            return n
        if not self.unstable.isdisjoint(pre[1]):
            return 0
        writes.update(pre[0])
        return n

    def _replay(
        self, txns: list[Txn], revoked: dict[int, int], writes: dict[int, tuple[int, int]]
    ) -> None:
        """PASS_REPLAY of ``txns``, added to ``writes``: the last unrevoked
        copy of each block, its checksum verified (kept in ``known`` as
        :meth:`_cached` keeps facts, inlined: this loop runs for every
        tag)."""
        known, unstable, nblocks = self.known, self.unstable, self.fs.blocks
        for tseq, tags in txns:
            seed = crc32c(self.seed, BE32(tseq)) if self.csum else 0
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

    def _scan_memo(self) -> ScanMemo | None:
        """The scan memo of this journal (its layout and superblock) over
        the durable image; None when nothing is known of the image."""
        if self.unstable is ALL:
            return None
        key = ("s", self.layout_key, bytes(self.jsb[:JSB_SIZE]))
        memo = self.known.get(key)
        if memo is None:
            memo = self.known[key] = ScanMemo(self.start, self.sequence)
        return memo

    def _revokes(self, blk: bytes) -> list[int]:
        count = REVOKE_COUNT.get(blk)
        if count > self.fs.bs - self.tail:
            raise Unsupported("journal revoke count")
        record = REVOKE_RECORD_64 if self.wide else REVOKE_RECORD_32
        return [
            record.get(blk, off)
            for off in range(REVOKE_RECORDS, count - record.size + 1, record.size)
        ]

    def copy(self, phys: int, escape: int) -> bytes:
        """The file-system block journal block ``phys`` holds (an escaped
        block had its leading jbd2 magic zeroed)."""
        data = self.fs.read(phys)
        if escape:
            magic = BE32(jbd2.MAGIC)
            data = magic + data[len(magic) :]
        return data

    def released(self, next_seq: int) -> bytes:
        """The journal superblock as ext2fs_journal_release(reset) writes
        it: the next sequence, an empty log, the checksum made again."""
        jsb = bytearray(self.block(0))
        JSB_SEQUENCE.put(jsb, next_seq)
        JSB_START.put(jsb, 0)
        if self.csum:
            JSB_CHECKSUM.put(jsb, 0)
            JSB_CHECKSUM.put(jsb, crc32c(U32, bytes(jsb[:JSB_SIZE])))
        return bytes(jsb)


@dataclass(frozen=True)
class ScanMark:
    """The journal scan's state just after a commit block (or at its
    start): the next position and sequence, how many transactions and block
    reads came before, the revoke records so far."""

    pos: int
    seq: int
    txns: int
    reads: int
    revoked: tuple[tuple[int, int], ...]


class ScanMemo:
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
        self.marks = [ScanMark(start, seq, 0, 0, ())]
        self._reads_at = [0]  # each mark's ``reads``, for bisect
        # PASS_REPLAY of the transactions before a mark (by its ``txns``),
        # under its revokes: the writes, and the journal blocks they read
        self.replayed: dict[int, tuple[dict[int, tuple[int, int]], frozenset[int]]] = {}

    def resume_point(self, unstable: set[int] | frozenset[int]) -> ScanMark:
        """The last mark whose reads are all outside ``unstable``."""
        limit = min((self.first[b] for b in unstable if b in self.first), default=self.reads)
        return self.marks[bisect.bisect_right(self._reads_at, limit) - 1]

    def commit(
        self, reads: list[int], pos: int, seq: int, txn: Txn, revoked: dict[int, int]
    ) -> None:
        """Extend the memo from its last mark by ``reads`` (the blocks
        read since, all the durable image's), ending in the commit of
        ``txn``; the scan's state is then ``pos``, ``seq``, ``revoked``."""
        for phys in reads:
            self.first.setdefault(phys, self.reads)
            self.reads += 1
        self.txns.append(txn)
        self.marks.append(ScanMark(pos, seq, len(self.txns), self.reads, tuple(revoked.items())))
        self._reads_at.append(self.reads)


class _Everything(frozenset[int]):
    """Contains every block."""

    def __contains__(self, item: object) -> bool:
        return True


ALL = _Everything()


def _tid_gt(x: int, y: int) -> bool:
    d = (x - y) & U32
    return d != 0 and d < TID_HALF
