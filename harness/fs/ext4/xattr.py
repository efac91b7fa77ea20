"""The extended attributes of an ext4 inode, read from the image as the
kernel lays them out (``fs/ext4/xattr.h``): those in the inode after its
``i_extra_isize`` bytes, then those of its attribute block, each in its
on-disk order, names with their prefix (``user.``, ``trusted.``, ...).

One reader for every ext4 path: the in-process extraction (``extract.py``)
and the tree the debugfs and reference paths place (``tree.py``); which of
them are written is :meth:`harness.fs.confined.ConfinedTree.set_xattrs`'s
rule.  A value kept in an inode of its own (``ea_inode``) is not read (its
value ``None``: noted, not written).  A malformed area (an entry or value
past its end, a block without the magic) raises :class:`Unsupported`, as
every other structure the readers do not parse exactly; so does a block
whose checksum does not verify where the reader verifies checksums.
"""

from __future__ import annotations

from harness.fs.confined import Xattrs
from harness.fs.ext4.layout import (
    GOOD_OLD_INODE_SIZE,
    I_EXTRA_ISIZE,
    I_FILE_ACL_HIGH,
    I_FILE_ACL_LO,
    INCOMPAT_64BIT,
    LE64,
    XATTR_BLOCK_HEADER_SIZE,
    XATTR_END,
    XATTR_ENTRY,
    XATTR_H_BLOCKS,
    XATTR_H_CHECKSUM,
    XATTR_H_MAGIC,
    XATTR_IBODY_MAGIC,
    XATTR_MAGIC,
    XATTR_PAD,
    XATTR_PREFIX,
)
from harness.fs.ext4.ondisk import FsReader, Unsupported, crc32c


def inode_xattrs(fs: FsReader, ino: int, raw: bytes) -> Xattrs:
    """Every extended attribute of inode ``ino`` (its bytes ``raw``): the
    in-inode ones, then its block's."""
    out: Xattrs = []
    if fs.inode_size > GOOD_OLD_INODE_SIZE:
        start = GOOD_OLD_INODE_SIZE + I_EXTRA_ISIZE.get(raw)
        if (
            start + XATTR_IBODY_MAGIC.size <= len(raw)
            and start % XATTR_PAD == 0
            and XATTR_IBODY_MAGIC.get(raw, start) == XATTR_MAGIC
        ):
            first = start + XATTR_IBODY_MAGIC.size
            out += _entries(raw, first, first, ino)
    block = I_FILE_ACL_LO.get(raw)
    if fs.incompat & INCOMPAT_64BIT:
        block |= I_FILE_ACL_HIGH.get(raw) << 32
    if block:
        data = fs.read(block)
        if XATTR_H_MAGIC.get(data) != XATTR_MAGIC or XATTR_H_BLOCKS.get(data) != 1:
            raise Unsupported(f"inode {ino}: extended attribute block {block}")
        if fs.csum:
            at = XATTR_H_CHECKSUM.at
            zeroed = data[:at] + bytes(XATTR_H_CHECKSUM.size) + data[XATTR_H_CHECKSUM.end :]
            if crc32c(crc32c(fs.seed, LE64(block)), zeroed) != XATTR_H_CHECKSUM.get(data):
                raise Unsupported(f"inode {ino}: extended attribute block checksum")
        out += _entries(data, XATTR_BLOCK_HEADER_SIZE, 0, ino)
    return out


def _entries(buf: bytes, off: int, base: int, ino: int) -> Xattrs:
    """The entries from ``off`` of ``buf`` up to the four zero bytes that
    end them; values at ``base`` + their offset."""
    out: Xattrs = []
    end = len(buf)
    while True:
        if off + XATTR_END > end:
            raise Unsupported(f"inode {ino}: extended attribute entries run past their area")
        if buf[off : off + XATTR_END] == bytes(XATTR_END):
            return out
        if off + XATTR_ENTRY.size > end:
            raise Unsupported(f"inode {ino}: an extended attribute entry past its area")
        name_len, index, voff, vinum, vsize, _ = XATTR_ENTRY.unpack_from(buf, off)
        name_at = off + XATTR_ENTRY.size
        if name_at + name_len > end:
            raise Unsupported(f"inode {ino}: an extended attribute name past its area")
        prefix = XATTR_PREFIX.get(index, f"(name index {index}) ".encode())
        name = prefix + buf[name_at : name_at + name_len]
        value: bytes | None = None
        if not vinum:
            at = base + voff
            if at < base or at + vsize > end:
                raise Unsupported(f"inode {ino}: an extended attribute value past its area")
            value = buf[at : at + vsize]
        out.append((name, value))
        off = name_at + -(-name_len // XATTR_PAD) * XATTR_PAD
