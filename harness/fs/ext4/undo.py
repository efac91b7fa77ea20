"""Which bytes of an image a libext2fs program wrote: the keys of its
undo file (``-z FILE``, e2fsprogs' undo I/O manager, read by ``e2undo``).

Layout (lib/ext2fs/undo_io.c, format "E2UNDO02", little-endian): block 0
holds the header; from block ``key_offset`` on, a *key block* (magic
0xCADECADE, crc, 8 reserved bytes, then ``block_size/16 - 1`` keys of
``u64 fsblk, u32 crc, u32 size``) is followed by the saved data of its keys
(``ceil(size / block_size)`` undo blocks per key), then the next key block.
``fsblk`` counts file-system blocks of ``fs_block_size`` bytes.

Only the positions are used here (the original bytes are in the durable
image already); the saved copies are what ``e2undo`` would write back.
"""

from __future__ import annotations

import struct
from pathlib import Path

from harness.errors import CrashlabError

MAGIC = b"E2UNDO02"
KEYBLOCK_MAGIC = 0xCADECADE
_HEADER = struct.Struct("<8sQQQII")  # magic, num_keys, super_offset, key_offset, bs, fs_bs
_KEY = struct.Struct("<QII")


def written_ranges(undo: Path) -> list[tuple[int, int]]:
    """``(byte offset, length)`` of every region the program overwrote, in
    the order first written.  A missing or empty file means nothing was
    written; anything unreadable raises :class:`CrashlabError`."""
    try:
        data = undo.read_bytes()
    except FileNotFoundError:
        return []
    if not data:
        return []
    if len(data) < _HEADER.size:
        raise CrashlabError(f"{undo}: undo file truncated")
    magic, num_keys, _sb, key_off, bs, fs_bs = _HEADER.unpack_from(data)
    if magic != MAGIC or bs < 1024 or fs_bs < 512 or bs % 512:
        raise CrashlabError(f"{undo}: not an e2undo file")
    per_block = bs // _KEY.size - 1
    out: list[tuple[int, int]] = []
    blk = key_off
    while len(out) < num_keys:
        base = blk * bs
        if base + bs > len(data) or struct.unpack_from("<I", data, base)[0] != KEYBLOCK_MAGIC:
            raise CrashlabError(f"{undo}: key block {blk} missing or bad")
        n = min(per_block, num_keys - len(out))
        data_blocks = 0
        for i in range(n):
            fsblk, _crc, size = _KEY.unpack_from(data, base + 16 + i * _KEY.size)
            out.append((fsblk * fs_bs, size))
            data_blocks += -(-size // bs)
        blk += 1 + data_blocks
    return out
