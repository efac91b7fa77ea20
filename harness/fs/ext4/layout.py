"""The one table of ext4 and jbd2 on-disk fields crashlab reads and writes:
where each lies in its structure and how it is encoded; ext4's magic
numbers, feature and inode flags (jbd2's block types and flags are in
``jbd2.py``).  Nothing else in ``harness/fs/ext4`` spells an offset of
these structures (``tests/test_ext4_layout.py``).

Names follow the kernel's (``fs/ext4/ext4.h``, ``ext4_extents.h``,
``include/linux/jbd2.h``) without their prefixes: ``SB_`` the ext4 super
block, ``GD_`` a group descriptor, ``I_`` an inode, ``JSB_`` the journal
super block.  ext4 is little-endian, jbd2 big-endian.  A :class:`Field`
is one number; a :class:`Span`, bytes taken whole; a :class:`Record`, a
run of fields read in one unpack (the hot loops: extents, directory
entries, journal headers).
"""

from __future__ import annotations

import mmap
import struct

Buffer = bytes | bytearray | memoryview | mmap.mmap


class Field:
    """One number at byte ``at`` of its structure, in ``fmt`` (a
    :mod:`struct` format with its byte order)."""

    __slots__ = ("_pack", "_unpack", "at", "end", "size")

    def __init__(self, at: int, fmt: str) -> None:
        s = struct.Struct(fmt)
        # bound methods: a read is one call into struct (a hot path)
        self._unpack, self._pack = s.unpack_from, s.pack_into
        self.at, self.size = at, s.size
        self.end = at + self.size

    def get(self, buf: Buffer, base: int = 0) -> int:
        """The field of the structure at ``base`` of ``buf``."""
        return self._unpack(buf, base + self.at)[0]

    def put(self, buf: bytearray, value: int) -> None:
        self._pack(buf, self.at, value)


class Span:
    """``size`` bytes at byte ``at`` of their structure, taken whole."""

    __slots__ = ("at", "end")

    def __init__(self, at: int, size: int) -> None:
        self.at, self.end = at, at + size

    def of(self, buf: bytes) -> bytes:
        return buf[self.at : self.end]


class Record:
    """A structure, or a run of its fields, read in one unpack: ``fmt``
    names the fields in order (listed beside each)."""

    __slots__ = ("pack_into", "size", "unpack_from")

    def __init__(self, fmt: str) -> None:
        s = struct.Struct(fmt)
        self.size = s.size
        self.unpack_from = s.unpack_from
        self.pack_into = s.pack_into


# --- ext4: where the super block lies, magic numbers ------------------------
EXT4_SB_OFFSET = 1024  # the primary super block's byte offset on the device
EXT4_SB_SIZE = 1024
EXT4_MAGIC = 0xEF53
EXTENT_MAGIC = 0xF30A
ROOT_INO, JOURNAL_INO = 2, 8
MIN_LOG_BLOCK_SIZE = 1024  # block size = MIN_LOG_BLOCK_SIZE << s_log_block_size
REV_DYNAMIC = 1  # s_rev_level
CHECKSUM_CRC32C = 1  # s_checksum_type
JNL_BACKUP_BLOCKS = 1  # s_jnl_backup_type: s_jnl_blocks holds the inode's i_block

# --- ext4 super block (struct ext4_super_block) -----------------------------
SB_INODES_COUNT = Field(0x0, "<I")
SB_BLOCKS_COUNT_LO = Field(0x4, "<I")
SB_FIRST_DATA_BLOCK = Field(0x14, "<I")
SB_LOG_BLOCK_SIZE = Field(0x18, "<I")
SB_BLOCKS_PER_GROUP = Field(0x20, "<I")
SB_INODES_PER_GROUP = Field(0x28, "<I")
SB_MTIME = Field(0x2C, "<I")
SB_WTIME = Field(0x30, "<I")
SB_MAGIC = Field(0x38, "<H")
SB_LASTCHECK = Field(0x40, "<I")
SB_REV_LEVEL = Field(0x4C, "<I")
SB_INODE_SIZE = Field(0x58, "<H")
SB_BLOCK_GROUP_NR = Field(0x5A, "<H")
SB_FEATURE_COMPAT = Field(0x5C, "<I")
SB_FEATURE_INCOMPAT = Field(0x60, "<I")
SB_FEATURE_RO_COMPAT = Field(0x64, "<I")
SB_UUID = Span(0x68, 16)
SB_JOURNAL_INUM = Field(0xE0, "<I")
SB_JOURNAL_DEV = Field(0xE4, "<I")
SB_JNL_BACKUP_TYPE = Field(0xFD, "<B")
SB_DESC_SIZE = Field(0xFE, "<H")
SB_JNL_BLOCKS = Span(0x10C, 60)  # a copy of the journal inode's i_block
SB_BLOCKS_COUNT_HI = Field(0x150, "<I")
SB_CHECKSUM_TYPE = Field(0x175, "<B")
SB_KBYTES_WRITTEN = Field(0x178, "<Q")
SB_WTIME_HI = Field(0x274, "<B")
SB_CHECKSUM = Field(0x3FC, "<I")  # crc32c of every byte before it

# s_feature_compat / s_feature_incompat / s_feature_ro_compat bits
COMPAT_HAS_JOURNAL, COMPAT_EXT_ATTR, COMPAT_RESIZE_INODE, COMPAT_DIR_INDEX = 0x4, 0x8, 0x10, 0x20
INCOMPAT_FILETYPE, INCOMPAT_RECOVER, INCOMPAT_EXTENTS, INCOMPAT_64BIT = 0x2, 0x4, 0x40, 0x80
INCOMPAT_MMP, INCOMPAT_FLEX_BG, INCOMPAT_EA_INODE = 0x100, 0x200, 0x400
INCOMPAT_CSUM_SEED, INCOMPAT_LARGEDIR, INCOMPAT_INLINE_DATA = 0x2000, 0x4000, 0x8000
INCOMPAT_ENCRYPT, INCOMPAT_CASEFOLD = 0x10000, 0x20000
RO_SPARSE_SUPER, RO_LARGE_FILE, RO_HUGE_FILE, RO_DIR_NLINK = 0x1, 0x2, 0x8, 0x20
RO_EXTRA_ISIZE, RO_METADATA_CSUM = 0x40, 0x400

# --- group descriptor (struct ext4_group_desc) ------------------------------
GD_INODE_TABLE_LO = Field(0x8, "<I")
GD_CHECKSUM = Field(0x1E, "<H")  # crc16 slot: the low 16 bits of a crc32c
GD_INODE_TABLE_HI = Field(0x28, "<I")  # in descriptors of GD_SIZE_64 bytes
GD_SIZE_32, GD_SIZE_64 = 32, 64  # s_desc_size without and with the 64bit feature

# --- inode (struct ext4_inode) ----------------------------------------------
I_MODE = Field(0x0, "<H")
I_UID = Field(0x2, "<H")
I_SIZE_LO = Field(0x4, "<I")
I_ATIME = Field(0x8, "<I")
I_MTIME = Field(0x10, "<I")
I_GID = Field(0x18, "<H")
I_FLAGS = Field(0x20, "<I")
I_BLOCK = Span(0x28, 60)  # the extent tree's root (extent-mapped inodes)
I_GENERATION = Span(0x64, 4)
I_FILE_ACL_LO = Field(0x68, "<I")  # the extended-attribute block (0: none)
I_SIZE_HIGH = Field(0x6C, "<I")
I_FILE_ACL_HIGH = Field(0x76, "<H")
I_UID_HIGH = Field(0x78, "<H")
I_GID_HIGH = Field(0x7A, "<H")
I_CHECKSUM_LO = Field(0x7C, "<H")
GOOD_OLD_INODE_SIZE = 128  # the fields above; larger inodes have more:
I_EXTRA_ISIZE = Field(0x80, "<H")  # bytes used beyond GOOD_OLD_INODE_SIZE
I_CHECKSUM_HI = Field(0x82, "<H")  # there when i_extra_isize reaches past it

# i_flags bits
ENCRYPT_FL, INDEX_FL, INLINE_DATA_FL = 0x800, 0x1000, 0x10000000
HUGE_FILE_FL, EXTENTS_FL, VERITY_FL = 0x40000, 0x80000, 0x100000
# i_mode file types
S_IFMT, S_IFREG, S_IFDIR, S_IFLNK = 0o170000, 0o100000, 0o040000, 0o120000

# --- extent tree (ext4_extents.h) -------------------------------------------
EXTENT_HEADER = Record("<HHHH4x")  # eh_magic, eh_entries, eh_max, eh_depth
EXTENT = Record("<IHHI")  # ee_block, ee_len, ee_start_hi, ee_start_lo
EXTENT_INDEX = Record("<IIH2x")  # ei_block, ei_leaf_lo, ei_leaf_hi
EXTENT_ROOT_ENTRIES = (I_BLOCK.end - I_BLOCK.at - EXTENT_HEADER.size) // EXTENT.size
MAX_INIT_LEN = 32768  # a longer ee_len marks an unwritten extent

# --- extended attributes (fs/ext4/xattr.h) ----------------------------------
# in the inode after its i_extra_isize bytes: the magic, then entries whose
# values are at e_value_offs from the first entry; in a block: a header of
# XATTR_BLOCK_HEADER_SIZE bytes, then entries whose values are at
# e_value_offs from the block's start; entries end at four zero bytes
XATTR_MAGIC = 0xEA020000
XATTR_IBODY_MAGIC = Field(0x0, "<I")  # of the in-inode area
XATTR_H_MAGIC = Field(0x0, "<I")  # of a block
XATTR_H_BLOCKS = Field(0x8, "<I")  # blocks the attributes take: 1
XATTR_H_CHECKSUM = Field(0x10, "<I")  # crc32c(seed, le64 block number, block with it zeroed)
XATTR_BLOCK_HEADER_SIZE = 32
# e_name_len, e_name_index, e_value_offs, e_value_inum, e_value_size, e_hash
XATTR_ENTRY = Record("<BBHIII")
XATTR_PAD = 4  # an entry (its name after it) and a value are padded to it
XATTR_END = 4  # the zero bytes that end the entries
# e_name_index: the name's prefix (fs/ext4/xattr.h, EXT4_XATTR_INDEX_*)
XATTR_PREFIX = {
    1: b"user.",
    2: b"system.posix_acl_access",
    3: b"system.posix_acl_default",
    4: b"trusted.",
    6: b"security.",
    7: b"system.",
    8: b"system.richacl",
}

# --- directory entries (struct ext4_dir_entry_2, ext4_dir_entry_tail) -------
DIRENT = Record("<IHBB")  # inode, rec_len, name_len, file_type; the name follows
DIRENT_ALIGN = 4  # every rec_len is a multiple of it
DIR_TAIL = Record("<IHBBI")  # zero, rec_len (its size), zero, file_type, checksum
DIR_TAIL_FT = 0xDE  # the tail's file_type

# --- jbd2 (include/linux/jbd2.h), big-endian --------------------------------
JBD2_HEADER = Record(">III")  # h_magic, h_blocktype, h_sequence
JSB_BLOCKSIZE = Field(0xC, ">I")
JSB_MAXLEN = Field(0x10, ">I")
JSB_FIRST = Field(0x14, ">I")
JSB_SEQUENCE = Field(0x18, ">I")
JSB_START = Field(0x1C, ">I")
JSB_ERRNO = Field(0x20, ">i")
JSB_FEATURE_COMPAT = Field(0x24, ">I")
JSB_FEATURE_INCOMPAT = Field(0x28, ">I")
JSB_FEATURE_RO_COMPAT = Field(0x2C, ">I")
JSB_UUID = Span(0x30, 16)
JSB_NR_USERS = Field(0x40, ">I")
JSB_CHECKSUM_TYPE = Field(0x50, ">B")
JSB_CHECKSUM = Field(0xFC, ">I")  # crc32c of the JSB_SIZE bytes, itself zeroed
JSB_SIZE = 1024
JBD2_CRC32C_CHKSUM = 4  # s_checksum_type
COMMIT_CHKSUM = Field(0x10, ">I")  # h_chksum[0] of a commit block
REVOKE_COUNT = Field(0xC, ">I")  # r_count: bytes used, header included
REVOKE_RECORDS = REVOKE_COUNT.end  # where the revoked block numbers start
REVOKE_RECORD_32 = Field(0x0, ">I")  # a revoked block number, from REVOKE_RECORDS on
REVOKE_RECORD_64 = Field(0x0, ">Q")  # the same with the 64bit feature
BLOCK_TAIL_SIZE = 4  # descriptor and revoke blocks end in their checksum (t_checksum)
CHECKSUM = Field(0x0, ">I")  # a jbd2 checksum, where its block type puts it
# descriptor tags: journal_block_tag3_t (checksum v3) and journal_block_tag_t
TAG3 = Record(">IIII")  # t_blocknr, t_flags, t_blocknr_high, t_checksum
TAG_BLOCKNR = Field(0x0, ">I")
TAG_FLAGS = Field(0x6, ">H")
TAG_BLOCKNR_HIGH = Field(0x8, ">I")
TAG_SIZE = TAG_BLOCKNR_HIGH.end  # sizeof(journal_block_tag_t)
TAG_CSUM_V2 = 2  # the tag's 16-bit checksum under checksum v2
TAG_UUID = 16  # follows a tag without the same-UUID flag

# --- arithmetic of on-disk numbers ------------------------------------------
U16, U32 = 0xFFFF, 0xFFFFFFFF  # masks: a 16-bit checksum slot, 32-bit wrap
TID_HALF = 1 << 31  # a jbd2 sequence is after another when less than this ahead
LE32 = struct.Struct("<I").pack  # a number as ext4 feeds it to a checksum (inode, group)
LE64 = struct.Struct("<Q").pack  # a block number as ext4 feeds it (an attribute block)
BE32 = struct.Struct(">I").pack  # as jbd2 does (sequence), and the jbd2 magic as bytes
