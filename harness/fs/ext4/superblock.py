"""The ext4 super block, read without any tool: where the journal lies
(the I/O-cost split of ``harness/report/iocost.py``).

The journal region comes from ``s_jnl_blocks``: a copy of the journal
inode's extent root, kept in the super block for e2fsck.  The super block is
normally written at mount, so it is in the log; otherwise the base image is
read.  A journal whose extent tree does not fit in the inode (depth > 0)
leaves the region unknown (None) -- never guessed.
"""

from __future__ import annotations

from pathlib import Path

from harness.fs.ext4.layout import (
    EXT4_MAGIC,
    EXT4_SB_OFFSET,
    EXT4_SB_SIZE,
    EXTENT,
    EXTENT_HEADER,
    EXTENT_MAGIC,
    EXTENT_ROOT_ENTRIES,
    JNL_BACKUP_BLOCKS,
    MAX_INIT_LEN,
    MIN_LOG_BLOCK_SIZE,
    SB_JNL_BACKUP_TYPE,
    SB_JNL_BLOCKS,
    SB_JOURNAL_INUM,
    SB_LOG_BLOCK_SIZE,
    SB_MAGIC,
)
from harness.logformat import LogReader


def ext4_journal_extents(sb: bytes) -> list[tuple[int, int]] | None:
    """Byte ranges ``(start, end)`` of the journal, from an ext4 super block
    (the 1024 bytes at offset 1024); None when not ext4 or not resolvable
    from the super block alone."""
    if len(sb) < EXT4_SB_SIZE or SB_MAGIC.get(sb) != EXT4_MAGIC:
        return None
    block = MIN_LOG_BLOCK_SIZE << SB_LOG_BLOCK_SIZE.get(sb)
    if SB_JOURNAL_INUM.get(sb) == 0 or SB_JNL_BACKUP_TYPE.get(sb) != JNL_BACKUP_BLOCKS:
        return None  # external journal, or no backup of the journal inode
    root = SB_JNL_BLOCKS.of(sb)
    magic, entries, _max, depth = EXTENT_HEADER.unpack_from(root, 0)
    if magic != EXTENT_MAGIC or depth != 0 or entries > EXTENT_ROOT_ENTRIES:
        return None
    out = []
    for i in range(entries):
        _lblk, length, hi, lo = EXTENT.unpack_from(root, EXTENT_HEADER.size + EXTENT.size * i)
        if length > MAX_INIT_LEN:  # an unwritten extent (ext4_ext_get_actual_len)
            length -= MAX_INIT_LEN
        start = ((hi << 32) | lo) * block
        out.append((start, start + length * block))
    return out


def _sb_from_log(reader: LogReader) -> bytes | None:
    """The first logged copy of bytes 1024..2047 of the device."""
    ss = reader.sectorsize
    for e in reader.entries():
        if not e.has_payload:
            continue
        start = e.sector * ss
        if start <= EXT4_SB_OFFSET and start + e.nr_sectors * ss >= EXT4_SB_OFFSET + EXT4_SB_SIZE:
            data = reader.payload(e)
            return data[EXT4_SB_OFFSET - start : EXT4_SB_OFFSET - start + EXT4_SB_SIZE]
    return None


def _sb_from_image(path: Path | None) -> bytes | None:
    if path is None or not path.is_file():
        return None
    with open(path, "rb") as f:
        f.seek(EXT4_SB_OFFSET)
        return f.read(EXT4_SB_SIZE)


def journal_ranges(reader: LogReader, base: Path | None) -> list[tuple[int, int]] | None:
    """The journal's device byte ranges: from the first super block the log
    holds, else from the base image ``base``."""
    sb = _sb_from_log(reader) or _sb_from_image(base)
    return ext4_journal_extents(sb) if sb else None
