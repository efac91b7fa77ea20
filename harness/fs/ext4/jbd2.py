"""The ext4 journal (jbd2) as it appears in written blocks: block headers,
the journal superblock, and descriptor tags (which file-system block each
journal data block is a copy of).

Layouts from the kernel's ``include/linux/jbd2.h``; every field big-endian.
Only what explaining a write needs is decoded; fast-commit blocks are not.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.fs.ext4.layout import (
    BLOCK_TAIL_SIZE,
    JBD2_HEADER,
    JSB_BLOCKSIZE,
    JSB_FEATURE_INCOMPAT,
    JSB_FIRST,
    JSB_MAXLEN,
    JSB_SEQUENCE,
    JSB_START,
    REVOKE_COUNT,
    REVOKE_RECORD_32,
    REVOKE_RECORD_64,
    REVOKE_RECORDS,
    TAG3,
    TAG_BLOCKNR,
    TAG_BLOCKNR_HIGH,
    TAG_CSUM_V2,
    TAG_FLAGS,
    TAG_SIZE,
    TAG_UUID,
)

MAGIC = 0xC03B3998
DESCRIPTOR, COMMIT, SUPERBLOCK_V1, SUPERBLOCK_V2, REVOKE = 1, 2, 3, 4, 5
BLOCK_TYPES = {
    DESCRIPTOR: "descriptor",
    COMMIT: "commit",
    SUPERBLOCK_V1: "superblock v1",
    SUPERBLOCK_V2: "superblock",
    REVOKE: "revoke",
}

# s_feature_incompat bits
INCOMPAT_REVOKE, INCOMPAT_64BIT, INCOMPAT_ASYNC_COMMIT = 0x1, 0x2, 0x4
INCOMPAT_CSUM_V2, INCOMPAT_CSUM_V3 = 0x8, 0x10
# descriptor tag flags
FLAG_ESCAPE, FLAG_SAME_UUID, FLAG_DELETED, FLAG_LAST_TAG = 1, 2, 4, 8


@dataclass(frozen=True)
class Header:
    """The 12-byte header that starts every jbd2 metadata block."""

    blocktype: int
    sequence: int

    @property
    def kind(self) -> str:
        return BLOCK_TYPES.get(self.blocktype, f"type {self.blocktype}")


def header(block: bytes) -> Header | None:
    """The jbd2 header of ``block``, or None when it does not start with the
    jbd2 magic (a journal data block, or an unused one)."""
    if len(block) < JBD2_HEADER.size:
        return None
    magic, btype, seq = JBD2_HEADER.unpack_from(block, 0)
    if magic != MAGIC:
        return None
    return Header(btype, seq)


@dataclass(frozen=True)
class JournalSuper:
    """The fields of journal block 0 an explanation needs."""

    blocksize: int
    maxlen: int  # journal length in blocks
    first: int  # first block of the log proper
    sequence: int  # first transaction expected in the log
    start: int  # block of the first transaction; 0 = journal clean
    incompat: int

    @property
    def tag_bytes(self) -> int:
        """Size of one descriptor tag, without the optional UUID (the
        kernel's ``journal_tag_bytes``)."""
        if self.incompat & INCOMPAT_CSUM_V3:
            return TAG3.size
        size = TAG_SIZE + (TAG_CSUM_V2 if self.incompat & INCOMPAT_CSUM_V2 else 0)
        # without 64bit, no t_blocknr_high
        return size if self.incompat & INCOMPAT_64BIT else size - TAG_BLOCKNR_HIGH.size

    @property
    def tail_bytes(self) -> int:
        """The checksum tail at the end of descriptor and revoke blocks."""
        return BLOCK_TAIL_SIZE if self.incompat & (INCOMPAT_CSUM_V2 | INCOMPAT_CSUM_V3) else 0


def journal_super(block: bytes) -> JournalSuper | None:
    """Decode journal block 0; None if it is not a jbd2 superblock."""
    h = header(block)
    if h is None or h.blocktype not in (SUPERBLOCK_V1, SUPERBLOCK_V2):
        return None
    incompat = JSB_FEATURE_INCOMPAT.get(block) if h.blocktype == SUPERBLOCK_V2 else 0
    return JournalSuper(
        JSB_BLOCKSIZE.get(block),
        JSB_MAXLEN.get(block),
        JSB_FIRST.get(block),
        JSB_SEQUENCE.get(block),
        JSB_START.get(block),
        incompat,
    )


@dataclass(frozen=True)
class Tag:
    fs_block: int  # the file-system block the journal block is a copy of
    flags: int
    csum: int = 0  # checksum v3: the crc32c of the journal block (0 otherwise)


def descriptor_tags(block: bytes, sb: JournalSuper) -> list[Tag]:
    """The tags of a descriptor block, in order: tag i describes the i-th
    journal block after the descriptor (wrapping at the journal's end)."""
    tags: list[Tag] = []
    pos = JBD2_HEADER.size
    limit = len(block) - sb.tail_bytes
    v3 = bool(sb.incompat & INCOMPAT_CSUM_V3)
    wide = bool(sb.incompat & INCOMPAT_64BIT)
    while pos + sb.tag_bytes <= limit:
        csum = 0
        if v3:
            lo, flags, hi, csum = TAG3.unpack_from(block, pos)
        else:
            lo, flags = TAG_BLOCKNR.get(block, pos), TAG_FLAGS.get(block, pos)
            hi = TAG_BLOCKNR_HIGH.get(block, pos) if wide else 0
        tags.append(Tag(lo | (hi << 32 if wide else 0), flags, csum))
        pos += sb.tag_bytes
        if not flags & FLAG_SAME_UUID:
            pos += TAG_UUID
        if flags & FLAG_LAST_TAG:
            break
    return tags


def revoke_count(block: bytes, sb: JournalSuper) -> int:
    """How many file-system blocks a revoke block revokes."""
    used = REVOKE_COUNT.get(block)
    record = REVOKE_RECORD_64 if sb.incompat & INCOMPAT_64BIT else REVOKE_RECORD_32
    return max(0, (used - REVOKE_RECORDS) // record.size)


def describe(block: bytes, sb: JournalSuper | None) -> str | None:
    """One phrase for a journal metadata block (None for a data block)."""
    h = header(block)
    if h is None:
        return None
    if h.blocktype in (SUPERBLOCK_V1, SUPERBLOCK_V2):
        js = journal_super(block)
        assert js is not None
        state = "clean" if js.start == 0 else f"log starts at block {js.start}"
        return f"jbd2 superblock (next txn {js.sequence}, {state})"
    if h.blocktype == DESCRIPTOR and sb is not None:
        n = len(descriptor_tags(block, sb))
        return f"jbd2 descriptor of txn {h.sequence} ({n} block{'s' if n != 1 else ''} follow)"
    if h.blocktype == REVOKE and sb is not None:
        return f"jbd2 revoke of txn {h.sequence} ({revoke_count(block, sb)} blocks)"
    return f"jbd2 {h.kind} block of txn {h.sequence}"
