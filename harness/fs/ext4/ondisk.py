"""Reading an ext4 image as libext2fs reads it, for the in-process path
(``inproc.py``) and the tree listing (``tree.py``): the super block's
geometry, group descriptors, inodes, extents, each checksum verified where
the file system has them; fields by name (``layout.py``).

Anything this reader does not reproduce exactly raises
:class:`Unsupported`: the caller then takes debugfs.
"""

from __future__ import annotations

import mmap
from typing import Any

from crc32c import crc32c as _crc32c

from harness.errors import CrashlabError
from harness.fs.ext4.layout import (
    CHECKSUM_CRC32C,
    COMPAT_DIR_INDEX,
    COMPAT_EXT_ATTR,
    COMPAT_HAS_JOURNAL,
    COMPAT_RESIZE_INODE,
    DIRENT,
    DIRENT_ALIGN,
    ENCRYPT_FL,
    EXT4_MAGIC,
    EXT4_SB_SIZE,
    EXTENT,
    EXTENT_HEADER,
    EXTENT_MAGIC,
    EXTENT_ROOT_ENTRIES,
    EXTENTS_FL,
    GD_CHECKSUM,
    GD_INODE_TABLE_HI,
    GD_INODE_TABLE_LO,
    GD_SIZE_32,
    GD_SIZE_64,
    GOOD_OLD_INODE_SIZE,
    HUGE_FILE_FL,
    I_BLOCK,
    I_CHECKSUM_HI,
    I_CHECKSUM_LO,
    I_EXTRA_ISIZE,
    I_FLAGS,
    I_GENERATION,
    I_SIZE_HIGH,
    I_SIZE_LO,
    INCOMPAT_64BIT,
    INCOMPAT_EXTENTS,
    INCOMPAT_FILETYPE,
    INCOMPAT_FLEX_BG,
    INCOMPAT_RECOVER,
    INLINE_DATA_FL,
    JOURNAL_INO,
    LE32,
    MAX_INIT_LEN,
    MIN_LOG_BLOCK_SIZE,
    REV_DYNAMIC,
    RO_DIR_NLINK,
    RO_EXTRA_ISIZE,
    RO_HUGE_FILE,
    RO_LARGE_FILE,
    RO_METADATA_CSUM,
    RO_SPARSE_SUPER,
    SB_BLOCKS_COUNT_HI,
    SB_BLOCKS_COUNT_LO,
    SB_BLOCKS_PER_GROUP,
    SB_CHECKSUM,
    SB_CHECKSUM_TYPE,
    SB_DESC_SIZE,
    SB_FEATURE_COMPAT,
    SB_FEATURE_INCOMPAT,
    SB_FEATURE_RO_COMPAT,
    SB_FIRST_DATA_BLOCK,
    SB_INODE_SIZE,
    SB_INODES_COUNT,
    SB_INODES_PER_GROUP,
    SB_JOURNAL_DEV,
    SB_JOURNAL_INUM,
    SB_LOG_BLOCK_SIZE,
    SB_MAGIC,
    SB_REV_LEVEL,
    SB_UUID,
    U16,
    U32,
    VERITY_FL,
)

# the features the in-process path reproduces (anything else: Unsupported)
INCOMPAT_OK = (
    INCOMPAT_FILETYPE | INCOMPAT_RECOVER | INCOMPAT_EXTENTS | INCOMPAT_64BIT | INCOMPAT_FLEX_BG
)
# ext_attr, resize_inode, dir_index only change what replay and rdump leave alone
COMPAT_OK = COMPAT_HAS_JOURNAL | COMPAT_EXT_ATTR | COMPAT_RESIZE_INODE | COMPAT_DIR_INDEX
RO_OK = (
    RO_SPARSE_SUPER
    | RO_LARGE_FILE
    | RO_HUGE_FILE
    | RO_DIR_NLINK
    | RO_EXTRA_ISIZE
    | RO_METADATA_CSUM
)
# up to 16 KiB blocks: a directory entry's rec_len is then the plain field
MAX_LOG_BLOCK_SIZE = 4


class Unsupported(CrashlabError):
    """Something this path does not reproduce exactly: take debugfs."""


def crc32c(seed: int, data: bytes) -> int:
    """The kernel's and libext2fs's ``crc32c_le(seed, data)`` (no inversion
    on input or output), from the ``crc32c`` package's standard CRC-32C
    (hardware instructions where the CPU has them)."""
    return ~_crc32c(data, value=~seed & U32) & U32


class FsReader:
    """Geometry of one ext4 image, read through ``mm`` (a mapping of the
    image, or anything sliced the same way) at file descriptor ``fd``."""

    def __init__(self, fd: int, sb: bytes, mm: mmap.mmap) -> None:
        self.fd = fd
        self.mm = mm  # the image (shared: its writes are the file's)
        self.view: memoryview = memoryview(b"")  # of mm, for extraction
        self.sb = sb
        self.log_bs = SB_LOG_BLOCK_SIZE.get(sb)
        if self.log_bs > MAX_LOG_BLOCK_SIZE:
            raise Unsupported("block size")
        self.bs = MIN_LOG_BLOCK_SIZE << self.log_bs
        self.inodes_count = SB_INODES_COUNT.get(sb)
        self.first_data_block = SB_FIRST_DATA_BLOCK.get(sb)
        self.ipg = SB_INODES_PER_GROUP.get(sb)
        self.compat = SB_FEATURE_COMPAT.get(sb)
        self.incompat = SB_FEATURE_INCOMPAT.get(sb)
        self.ro = SB_FEATURE_RO_COMPAT.get(sb)
        wide = self.incompat & INCOMPAT_64BIT
        self.blocks = SB_BLOCKS_COUNT_LO.get(sb) | (SB_BLOCKS_COUNT_HI.get(sb) << 32 if wide else 0)
        self.inode_size = SB_INODE_SIZE.get(sb)
        self.desc_size = SB_DESC_SIZE.get(sb) if wide else GD_SIZE_32
        self.csum = bool(self.ro & RO_METADATA_CSUM)
        self.seed = crc32c(U32, SB_UUID.of(sb)) if self.csum else 0
        bpg = SB_BLOCKS_PER_GROUP.get(sb)
        if not bpg or not self.ipg or not GOOD_OLD_INODE_SIZE <= self.inode_size <= self.bs:
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
        data = self.mm[block * self.bs : (block + count) * self.bs]
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
                d = raw[g * self.desc_size : (g + 1) * self.desc_size]
                if self.csum:
                    c = crc32c(self.seed, LE32(g))
                    c = crc32c(c, d[: GD_CHECKSUM.at] + b"\0\0" + d[GD_CHECKSUM.end :]) & U16
                    if c != GD_CHECKSUM.get(d):
                        raise Unsupported(f"group descriptor {g} checksum")
            self._gd = raw
        return self._gd

    def inode(self, ino: int) -> bytes:
        """Inode ``ino``'s bytes, checksum verified (libext2fs refuses a
        bad one)."""
        if not 0 < ino <= self.inodes_count:
            raise Unsupported(f"inode {ino} out of range")
        g, i = divmod(ino - 1, self.ipg)
        d = self.gd()[g * self.desc_size : (g + 1) * self.desc_size]
        table = GD_INODE_TABLE_LO.get(d)
        if self.desc_size >= GD_SIZE_64:
            table |= GD_INODE_TABLE_HI.get(d) << 32
        off = i * self.inode_size
        blk = table + off // self.bs
        raw = self.read(blk)[off % self.bs : off % self.bs + self.inode_size]
        if self.csum:
            key = ("i", self.seed, ino, raw)
            if self.verified is None or key not in self.verified:
                self._verify_inode(ino, raw)
                if self.verified is not None:
                    self.verified[key] = True
        return raw

    def _verify_inode(self, ino: int, raw: bytes) -> None:
        extra = I_EXTRA_ISIZE.get(raw) if self.inode_size > GOOD_OLD_INODE_SIZE else 0
        has_hi = (
            self.inode_size > GOOD_OLD_INODE_SIZE
            and extra >= I_CHECKSUM_HI.end - GOOD_OLD_INODE_SIZE
        )
        buf = bytearray(raw)
        buf[I_CHECKSUM_LO.at : I_CHECKSUM_LO.end] = b"\0\0"
        if has_hi:
            buf[I_CHECKSUM_HI.at : I_CHECKSUM_HI.end] = b"\0\0"
        c = crc32c(crc32c(crc32c(self.seed, LE32(ino)), I_GENERATION.of(raw)), bytes(buf))
        want = I_CHECKSUM_LO.get(raw)
        if has_hi:
            want |= I_CHECKSUM_HI.get(raw) << 16
        else:
            c &= U16
        if c != want:
            raise Unsupported(f"inode {ino} checksum")

    def extents(self, ino: int, raw: bytes) -> list[tuple[int, int, int]]:
        """``(logical, physical, count)`` of the inode's extents (depth 0,
        written, in range), sorted by logical block."""
        flags = I_FLAGS.get(raw)
        if flags & INLINE_DATA_FL or not flags & EXTENTS_FL:
            raise Unsupported(f"inode {ino}: not extent-mapped")
        if flags & (HUGE_FILE_FL | ENCRYPT_FL | VERITY_FL):
            raise Unsupported(f"inode {ino}: flags {flags:#x}")
        magic, entries, emax, depth = EXTENT_HEADER.unpack_from(raw, I_BLOCK.at)
        if magic != EXTENT_MAGIC or entries > emax or emax > EXTENT_ROOT_ENTRIES:
            raise Unsupported(f"inode {ino}: extent header")
        if depth:
            raise Unsupported(f"inode {ino}: extent tree of depth {depth}")
        out: list[tuple[int, int, int]] = []
        end = 0
        first = I_BLOCK.at + EXTENT_HEADER.size
        for k in range(entries):
            lblk, n, hi, lo = EXTENT.unpack_from(raw, first + EXTENT.size * k)
            if n > MAX_INIT_LEN or n == 0:
                raise Unsupported(f"inode {ino}: unwritten or empty extent")
            phys = lo | hi << 32
            if lblk < end or phys + n > self.blocks or phys < self.first_data_block:
                raise Unsupported(f"inode {ino}: extent out of order or range")
            out.append((lblk, phys, n))
            end = lblk + n
        return out


def file_size(raw: bytes) -> int:
    """``i_size`` of the inode bytes ``raw``."""
    return I_SIZE_LO.get(raw) | I_SIZE_HIGH.get(raw) << 32


def sb_csum_ok(sb: bytes) -> bool:
    return crc32c(U32, sb[: SB_CHECKSUM.at]) == SB_CHECKSUM.get(sb)


def check_sb(sb: bytes) -> None:
    """Refuse a superblock whose features or state this path does not
    reproduce."""
    if len(sb) < EXT4_SB_SIZE or SB_MAGIC.get(sb) != EXT4_MAGIC:
        raise Unsupported("no ext4 superblock")
    compat, incompat = SB_FEATURE_COMPAT.get(sb), SB_FEATURE_INCOMPAT.get(sb)
    ro = SB_FEATURE_RO_COMPAT.get(sb)
    if not compat & COMPAT_HAS_JOURNAL or compat & ~COMPAT_OK:
        raise Unsupported(f"compat features {compat:#x}")
    if incompat & ~INCOMPAT_OK or not incompat & INCOMPAT_EXTENTS:
        raise Unsupported(f"incompat features {incompat:#x}")
    if ro & ~RO_OK or not ro & RO_METADATA_CSUM:
        raise Unsupported(f"ro_compat features {ro:#x}")
    if SB_CHECKSUM_TYPE.get(sb) != CHECKSUM_CRC32C:
        raise Unsupported("superblock checksum type")
    if not sb_csum_ok(sb):
        raise Unsupported("superblock checksum")
    if SB_JOURNAL_INUM.get(sb) != JOURNAL_INO or SB_JOURNAL_DEV.get(sb) != 0:
        raise Unsupported("journal not inode 8")
    if SB_REV_LEVEL.get(sb) != REV_DYNAMIC:
        raise Unsupported("revision")


def dir_entries(blk: bytes, bs: int, *, names: bool = False) -> list[tuple[int, bytes]]:
    """The live entries ``(inode, name)`` of a directory block of ``bs``
    bytes in order, as ``ext2fs_process_dir_block`` walks them; a corrupt
    entry is refused, and with ``names`` an empty name or one holding ``/``
    or NUL too."""
    out: list[tuple[int, bytes]] = []
    off = 0
    while off < bs:
        if off + DIRENT.size > bs:  # the records stop short of the block's end
            raise Unsupported("directory entry corrupted")
        inode, rec_len, name_len, _ = DIRENT.unpack_from(blk, off)
        if (
            off + rec_len > bs
            or rec_len < DIRENT.size
            or rec_len % DIRENT_ALIGN
            or name_len + DIRENT.size > rec_len
        ):
            raise Unsupported("directory entry corrupted")
        if inode:
            name = blk[off + DIRENT.size : off + DIRENT.size + name_len]
            if names and (not name or b"/" in name or b"\0" in name):
                raise Unsupported("directory entry name")
            out.append((inode, name))
        off += rec_len
    return out
