"""Hand-made ext4 crash images for tests/test_ext4_inproc.py: the
superblock, inode and journal fields the in-process path checks, changed
one at a time (``DECLINE``: each reason it declines a state), and a journal
log written here (``_write_log``)."""

from __future__ import annotations

import struct

from harness.fs.ext4 import jbd2, replay
from harness.fs.ext4.ondisk import FsReader, crc32c


def _fix_sb(img: bytearray) -> None:
    sb = 1024
    struct.pack_into("<I", img, sb + 0x3FC, crc32c(0xFFFFFFFF, bytes(img[sb : sb + 0x3FC])))


def _journal(img: bytes) -> tuple[int, list[int]]:
    """(block size, the journal's physical blocks) of an image."""
    fs = FsReader(-1, img[1024:2048], img)  # type: ignore[arg-type]  # no file: bytes only
    j = replay.Journal(fs, {}, replay.ALL)
    return fs.bs, j.phys


def _log_blocks(img: bytes) -> dict[int, list[int]]:
    """Journal blocks of the live log by type: {1: descriptors, 2: commits,
    0: tagged data blocks} (physical block numbers)."""
    bs, phys = _journal(img)
    jsb = img[phys[0] * bs : phys[0] * bs + 1024]
    seq, start = struct.unpack_from(">II", jsb, 24)
    out: dict[int, list[int]] = {0: [], 1: [], 2: []}
    pos = start
    while True:
        blk = img[phys[pos] * bs : (phys[pos] + 1) * bs]
        magic, btype, bseq = struct.unpack_from(">III", blk, 0)
        if magic != jbd2.MAGIC or bseq != seq or btype not in (1, 2):
            return out
        out[btype].append(phys[pos])
        pos += 1
        if btype == 1:
            fs = FsReader(-1, img[1024:2048], img)  # type: ignore[arg-type]  # no file: bytes only
            j = replay.Journal(fs, {}, replay.ALL)
            for _ in j._tags(blk):
                out[0].append(phys[pos])
                pos += 1
        else:
            seq += 1


def _inode_at(img: bytes, ino: int) -> int:
    """Byte offset of inode ``ino`` (group 0)."""
    table = struct.unpack_from("<I", img, 4096 + 0x8)[0]
    return table * 4096 + (ino - 1) * struct.unpack_from("<H", img, 1024 + 0x58)[0]


def _fix_inode(img: bytearray, ino: int) -> None:
    at = _inode_at(bytes(img), ino)
    raw = bytearray(img[at : at + 256])
    raw[0x7C:0x7E] = b"\0\0"
    raw[0x82:0x84] = b"\0\0"
    seed = crc32c(0xFFFFFFFF, bytes(img[1024 + 0x68 : 1024 + 0x78]))
    c = crc32c(crc32c(crc32c(seed, struct.pack("<I", ino)), bytes(raw[0x64:0x68])), bytes(raw))
    struct.pack_into("<H", img, at + 0x7C, c & 0xFFFF)
    struct.pack_into("<H", img, at + 0x82, c >> 16)


def _db_ino(img: bytes) -> int:
    """The inode of the first regular file in the root directory."""
    root = _inode_at(img, 2)
    blk = struct.unpack_from("<I", img, root + 0x28 + 12 + 8)[0]
    d = img[blk * 4096 : (blk + 1) * 4096]
    off = 0
    while off < 4096 - 12:
        ino, rec_len, name_len, ftype = struct.unpack_from("<IHBB", d, off)
        if ino and ftype == 1:
            return ino
        off += rec_len
    raise AssertionError("no file")


def _flip(img: bytearray, at: int) -> None:
    img[at] ^= 0x5A


def _set_inode_u32(field: int, value: int, ino: int | None = None):  # noqa: ANN202
    def mutate(img: bytearray) -> None:
        i = _db_ino(bytes(img)) if ino is None else ino
        at = _inode_at(bytes(img), i) + field
        struct.pack_into("<I", img, at, value(struct.unpack_from("<I", img, at)[0]))
        _fix_inode(img, i)

    return mutate


def _sb_feature(off: int, bit: int):  # noqa: ANN202
    def mutate(img: bytearray) -> None:
        struct.pack_into("<I", img, 1024 + off, struct.unpack_from("<I", img, 1024 + off)[0] | bit)
        _fix_sb(img)

    return mutate


def _jsb_field(off: int, value: int):  # noqa: ANN202
    def mutate(img: bytearray) -> None:
        bs, phys = _journal(bytes(img))
        at = phys[0] * bs
        struct.pack_into(">I", img, at + off, struct.unpack_from(">I", img, at + off)[0] | value)
        struct.pack_into(">I", img, at + 0xFC, 0)
        struct.pack_into(">I", img, at + 0xFC, crc32c(0xFFFFFFFF, bytes(img[at : at + 1024])))

    return mutate


def _journal_target(img: bytearray) -> None:
    """The first tag of the first descriptor names a journal block (the
    descriptor's checksum made valid again)."""
    bs, phys = _journal(bytes(img))
    desc = _log_blocks(bytes(img))[1][0] * bs
    struct.pack_into(">I", img, desc + 12, phys[5])
    struct.pack_into(">I", img, desc + bs - 4, 0)
    seed = crc32c(0xFFFFFFFF, bytes(img[phys[0] * bs + 0x30 : phys[0] * bs + 0x40]))
    struct.pack_into(">I", img, desc + bs - 4, crc32c(seed, bytes(img[desc : desc + bs])))


# (reason the path gives, whether the mutation is of a replayed image, mutation)
DECLINE = {
    "superblock checksum": (False, lambda img: _flip(img, 1024 + 0x100)),
    "incompat features": (False, _sb_feature(0x60, 0x8000)),  # inline_data
    "group descriptor 0 checksum": (True, lambda img: _flip(img, 4096 + 0x0C)),
    "journal features": (False, _jsb_field(0x28, 0x20)),  # fast commit
    "journal superblock fields": (False, _jsb_field(0x20, 5)),  # s_errno
    "journal superblock checksum": (
        False,
        lambda img: _flip(img, _journal(bytes(img))[1][0] * 4096 + 0x90),
    ),
    "journal descriptor checksum": (
        False,
        lambda img: _flip(img, _log_blocks(bytes(img))[1][0] * 4096 + 2000),
    ),
    "journal commit checksum": (
        False,
        lambda img: _flip(img, _log_blocks(bytes(img))[2][0] * 4096 + 200),
    ),
    "journal data block checksum": (
        False,
        lambda img: _flip(img, _log_blocks(bytes(img))[0][0] * 4096 + 100),
    ),
    "replay writes into the journal": (False, _journal_target),
    "checksum": (True, lambda img: _flip(img, _inode_at(bytes(img), _db_ino(bytes(img))) + 0x10)),
    "htree directory": (True, _set_inode_u32(0x20, lambda f: f | 0x1000, ino=2)),
    "extent tree of depth": (True, _set_inode_u32(0x28 + 4, lambda v: v | 1 << 16)),
    "unwritten or empty extent": (True, _set_inode_u32(0x28 + 16, lambda v: v | 0x8000)),
    "mode": (True, _set_inode_u32(0x0, lambda v: (v & ~0xF000) | 0xA000)),  # a symlink
    "directory block checksum": (
        True,
        lambda img: _flip(
            img,
            struct.unpack_from("<I", img, _inode_at(bytes(img), 2) + 0x28 + 20)[0] * 4096 + 4000,
        ),
    ),
    "no ext4 superblock": (
        False,
        lambda img: img.__setitem__(slice(1024 + 0x38, 1024 + 0x3A), b"\0\0"),
    ),
    "journal superblock type": (False, _jsb_field(4, 3)),  # v2 -> 7
    "not extent-mapped": (True, _set_inode_u32(0x20, lambda f: f & ~0x80000)),
    "journal block beyond the file system": (
        True,
        lambda img: _write_log(img, [([(20000, b"x" * 4096)], [])]),
    ),
    "journal revoke checksum": (True, lambda img: _bad_revoke(img)),
}


def _bad_revoke(img: bytearray) -> None:
    """A log of one transaction whose revoke block's checksum fails."""
    _write_log(img, [([(9000, b"x" * 4096)], [9001])])
    bs, phys = _journal(bytes(img))
    first = struct.unpack_from(">I", img, phys[0] * bs + 20)[0]
    _flip(img, phys[first + 2] * bs + 100)  # descriptor, data, then the revoke block


def _write_log(img: bytearray, txns: list[tuple[list[tuple[int, bytes]], list[int]]]) -> None:
    """Replace the journal's log of the clean image ``img`` by ``txns``
    (each: (fs block, content) writes, then fs blocks revoked), every
    checksum valid, and mark the file system as needing recovery."""
    bs, phys = _journal(bytes(img))
    j0 = phys[0] * bs
    seed = crc32c(0xFFFFFFFF, bytes(img[j0 + 0x30 : j0 + 0x40]))
    first, seq = struct.unpack_from(">II", img, j0 + 20)
    pos = first

    def put(block: bytes | bytearray) -> None:
        nonlocal pos
        img[phys[pos] * bs : (phys[pos] + 1) * bs] = block
        pos += 1

    def tail_csum(block: bytearray) -> bytearray:
        struct.pack_into(">I", block, bs - 4, crc32c(seed, bytes(block[: bs - 4]) + bytes(4)))
        return block

    for n, (writes, revokes) in enumerate(txns):
        s = seq + n
        if writes:
            desc = bytearray(bs)
            struct.pack_into(">III", desc, 0, jbd2.MAGIC, 1, s)
            at = 12
            for k, (blk, data) in enumerate(writes):
                escape = data[:4] == struct.pack(">I", jbd2.MAGIC)
                flags = (2 if k else 0) | (8 if k == len(writes) - 1 else 0) | int(escape)
                stored = bytes(4) + data[4:] if escape else data
                csum = crc32c(crc32c(seed, struct.pack(">I", s)), stored)
                struct.pack_into(">IIII", desc, at, blk & 0xFFFFFFFF, flags, blk >> 32, csum)
                at += 16 if k else 32  # the first tag carries the UUID
            put(tail_csum(desc))
            for _, data in writes:
                put(bytes(4) + data[4:] if data[:4] == struct.pack(">I", jbd2.MAGIC) else data)
        if revokes:
            rv = bytearray(bs)
            struct.pack_into(">III", rv, 0, jbd2.MAGIC, 5, s)
            struct.pack_into(">I", rv, 12, 16 + 8 * len(revokes))
            for k, blk in enumerate(revokes):
                struct.pack_into(">Q", rv, 16 + 8 * k, blk)
            put(tail_csum(rv))
        commit = bytearray(bs)
        struct.pack_into(">III", commit, 0, jbd2.MAGIC, 2, s)
        struct.pack_into(">QI", commit, 48, 1_700_000_000 + n, 0)
        struct.pack_into(">I", commit, 16, crc32c(seed, bytes(commit)))
        put(commit)
    img[phys[pos] * bs : (phys[pos] + 1) * bs] = bytes(bs)  # the log ends here
    struct.pack_into(">I", img, j0 + 28, first)  # s_start
    struct.pack_into(">I", img, j0 + 0xFC, 0)
    struct.pack_into(">I", img, j0 + 0xFC, crc32c(0xFFFFFFFF, bytes(img[j0 : j0 + 1024])))
    struct.pack_into("<I", img, 1024 + 0x60, struct.unpack_from("<I", img, 1024 + 0x60)[0] | 4)
    _fix_sb(img)
