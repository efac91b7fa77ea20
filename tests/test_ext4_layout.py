"""The table of ext4 and jbd2 fields (harness/fs/ext4/layout.py) against
e2fsprogs, and the rule that nothing else in harness/fs/ext4 spells an
offset:

* each field read through the table equals what ``dumpe2fs`` and
  ``debugfs`` print of the base image, and of a copy where ``debugfs -w``
  set distinctive values (owner and size beyond 16 and 32 bits, times,
  the superblock's clock and counters): an offset or format off by
  anything reads another number;
* the fields of one structure do not overlap;
* no module of harness/fs/ext4 but layout.py writes a number in hex
  (jbd2.py's and undo.py's named constants aside: magic numbers and
  flags) or passes a literal offset to ``unpack_from``/``pack_into``.
"""

from __future__ import annotations

import ast
import mmap
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.fs.ext4 import layout
from harness.fs.ext4.layout import (
    EXT4_SB_OFFSET,
    EXTENT,
    EXTENT_HEADER,
    GD_CHECKSUM,
    GD_INODE_TABLE_LO,
    I_ATIME,
    I_CHECKSUM_HI,
    I_CHECKSUM_LO,
    I_EXTRA_ISIZE,
    I_FLAGS,
    I_GENERATION,
    I_GID,
    I_GID_HIGH,
    I_MODE,
    I_MTIME,
    I_UID,
    I_UID_HIGH,
    JBD2_HEADER,
    JOURNAL_INO,
    JSB_BLOCKSIZE,
    JSB_FEATURE_INCOMPAT,
    JSB_MAXLEN,
    JSB_SEQUENCE,
    JSB_START,
    ROOT_INO,
    SB_BLOCK_GROUP_NR,
    SB_BLOCKS_COUNT_LO,
    SB_BLOCKS_PER_GROUP,
    SB_CHECKSUM,
    SB_CHECKSUM_TYPE,
    SB_DESC_SIZE,
    SB_FIRST_DATA_BLOCK,
    SB_INODE_SIZE,
    SB_INODES_COUNT,
    SB_INODES_PER_GROUP,
    SB_JNL_BACKUP_TYPE,
    SB_JNL_BLOCKS,
    SB_JOURNAL_INUM,
    SB_KBYTES_WRITTEN,
    SB_LASTCHECK,
    SB_LOG_BLOCK_SIZE,
    SB_MAGIC,
    SB_MTIME,
    SB_REV_LEVEL,
    SB_UUID,
    SB_WTIME,
)
from harness.fs.ext4.ondisk import FsReader, dir_entries, file_size
from harness.fs.ext4.superblock import ext4_journal_extents
from harness.images import ensure_image

EXT4_DIR = Path(__file__).resolve().parent.parent / "harness" / "fs" / "ext4"
# module-level NAME = 0x... constants allowed outside layout.py: values of
# their own formats (jbd2 magic and flags; the e2undo key-block magic)
NAMED_HEX = {"jbd2.py", "undo.py"}


def _dumpe2fs(img: Path, *args: str) -> tuple[dict[str, str], str]:
    """``dumpe2fs``'s ``name: value`` lines, and its whole text."""
    out = subprocess.run(
        ["dumpe2fs", *args, str(img)], capture_output=True, text=True, check=True
    ).stdout
    return {
        k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in out.splitlines() if ":" in ln)
    }, out


def _debugfs(img: Path, *commands: str, write: bool = False) -> str:
    p = subprocess.run(
        ["debugfs", *(["-w"] if write else []), "-f", "-", str(img)],
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    return p.stdout


def _image(tmp_path: Path) -> Path:
    base, _ = ensure_image("ext4")
    img = tmp_path / "ext4.img"
    shutil.copyfile(base, img)
    return img


def _sb(img: Path) -> bytes:
    with open(img, "rb") as f:
        f.seek(EXT4_SB_OFFSET)
        return f.read(1024)


def test_superblock_fields_equal_dumpe2fs(tmp_path: Path) -> None:
    img = _image(tmp_path)
    _debugfs(
        img,
        "ssv mtime 20240102030405",
        "ssv lastcheck 20230102030405",
        "ssv kbytes_written 5000000000123",
        write=True,
    )
    sb, (d, _) = _sb(img), _dumpe2fs(img, "-h")
    assert SB_MAGIC.get(sb) == int(d["Filesystem magic number"], 16)
    assert SB_REV_LEVEL.get(sb) == int(d["Filesystem revision #"].split()[0])
    assert SB_UUID.of(sb).hex() == d["Filesystem UUID"].replace("-", "")
    assert SB_INODES_COUNT.get(sb) == int(d["Inode count"])
    assert SB_BLOCKS_COUNT_LO.get(sb) == int(d["Block count"])
    assert SB_FIRST_DATA_BLOCK.get(sb) == int(d["First block"])
    assert 1024 << SB_LOG_BLOCK_SIZE.get(sb) == int(d["Block size"])
    assert SB_DESC_SIZE.get(sb) == int(d["Group descriptor size"])
    assert SB_BLOCKS_PER_GROUP.get(sb) == int(d["Blocks per group"])
    assert SB_INODES_PER_GROUP.get(sb) == int(d["Inodes per group"])
    assert SB_INODE_SIZE.get(sb) == int(d["Inode size"])
    assert SB_JOURNAL_INUM.get(sb) == int(d["Journal inode"]) == JOURNAL_INO
    assert SB_JNL_BACKUP_TYPE.get(sb) == layout.JNL_BACKUP_BLOCKS  # "inode blocks"
    assert d["Journal backup"] == "inode blocks" and d["Checksum type"] == "crc32c"
    assert SB_CHECKSUM_TYPE.get(sb) == layout.CHECKSUM_CRC32C
    assert SB_CHECKSUM.get(sb) == int(d["Checksum"], 16)
    assert SB_KBYTES_WRITTEN.get(sb) == 5000000000123  # beyond 32 bits (dumpe2fs rounds it)
    assert SB_BLOCK_GROUP_NR.get(sb) == 0  # the primary's (ext2fs_flush writes 0 there)
    # debugfs takes the times as local time; the seconds are those of the string
    for field, stamp in ((SB_MTIME, "20240102030405"), (SB_LASTCHECK, "20230102030405")):
        got = subprocess.run(
            ["date", "-d", f"@{field.get(sb)}", "+%Y%m%d%H%M%S"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert got == stamp, field
    assert SB_WTIME.get(sb) != 0
    # the flags: every feature dumpe2fs names is a bit of the table's
    names = {
        "has_journal": ("compat", layout.COMPAT_HAS_JOURNAL),
        "ext_attr": ("compat", layout.COMPAT_EXT_ATTR),
        "resize_inode": ("compat", layout.COMPAT_RESIZE_INODE),
        "dir_index": ("compat", layout.COMPAT_DIR_INDEX),
        "filetype": ("incompat", layout.INCOMPAT_FILETYPE),
        "extent": ("incompat", layout.INCOMPAT_EXTENTS),
        "64bit": ("incompat", layout.INCOMPAT_64BIT),
        "flex_bg": ("incompat", layout.INCOMPAT_FLEX_BG),
        "sparse_super": ("ro", layout.RO_SPARSE_SUPER),
        "large_file": ("ro", layout.RO_LARGE_FILE),
        "huge_file": ("ro", layout.RO_HUGE_FILE),
        "dir_nlink": ("ro", layout.RO_DIR_NLINK),
        "extra_isize": ("ro", layout.RO_EXTRA_ISIZE),
        "metadata_csum": ("ro", layout.RO_METADATA_CSUM),
    }
    want = {"compat": 0, "incompat": 0, "ro": 0}
    for name in d["Filesystem features"].split():
        kind, bit = names[name]
        want[kind] |= bit
    assert (
        layout.SB_FEATURE_COMPAT.get(sb),
        layout.SB_FEATURE_INCOMPAT.get(sb),
        layout.SB_FEATURE_RO_COMPAT.get(sb),
    ) == (want["compat"], want["incompat"], want["ro"])


def test_descriptor_inode_extent_dirent_and_journal_fields_equal_e2fsprogs(tmp_path: Path) -> None:
    img = _image(tmp_path)
    _debugfs(
        img,
        "write /dev/null f",
        "sif f uid 70001",
        "sif f gid 80002",
        "sif f size 0x100000123",
        "sif f atime 0x11223344",
        "sif f mtime 0x55667788",
        "sif f generation 0xbadcafe",
        write=True,
    )
    d, text = _dumpe2fs(img)
    fd = os.open(img, os.O_RDONLY)
    try:
        with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as mm:
            fs = FsReader(fd, mm[1024:2048], mm)  # type: ignore[arg-type]  # FsReader reads an mmap too
            gd = fs.gd()  # its checksums verified: GD_CHECKSUM
            group0 = re.search(r"^Group 0: .* csum (0x[0-9a-f]+)", text, re.M)
            table = re.search(r"^  Inode table at (\d+)-", text, re.M)
            assert group0 and table
            assert GD_CHECKSUM.get(gd) == int(group0[1], 16)
            assert GD_INODE_TABLE_LO.get(gd) == int(table[1])
            listing = _debugfs(img, "ls -p /")
            root = fs.inode(ROOT_INO)  # its checksum verified: I_CHECKSUM_*, I_GENERATION
            ents = [
                e
                for _, p, n in fs.extents(ROOT_INO, root)
                for k in range(n)
                for e in dir_entries(fs.read(p + k), fs.bs)
            ]
            want = [
                (int(m[1]), m[2].encode())
                for m in re.finditer(r"^/(\d+)/\d+/\d+/\d+/([^/]*)/", listing, re.M)
            ]
            assert ents == want
            ino = next(i for i, name in ents if name == b"f")
            raw = fs.inode(ino)
            stat = _debugfs(img, "stat /f")
            assert f"Mode:  {I_MODE.get(raw) & 0o7777:04o}" in stat
            assert (I_UID.get(raw) | I_UID_HIGH.get(raw) << 16) == 70001
            assert (I_GID.get(raw) | I_GID_HIGH.get(raw) << 16) == 80002
            assert re.search(r"User:\s+70001\s+Group:\s+80002\s", stat)
            assert file_size(raw) == 0x100000123
            assert I_ATIME.get(raw) == 0x11223344 and I_MTIME.get(raw) == 0x55667788
            assert I_GENERATION.of(raw) == (0xBADCAFE).to_bytes(4, "little")
            assert f"Flags: {I_FLAGS.get(raw):#x}" in stat
            assert f"Size of extra inode fields: {I_EXTRA_ISIZE.get(raw)}" in stat
            csum = I_CHECKSUM_LO.get(raw) | I_CHECKSUM_HI.get(raw) << 16
            assert f"Inode checksum: {csum:#010x}" in stat
            # the journal superblock, through the journal inode's first extent
            _, jphys, _ = fs.extents(JOURNAL_INO, fs.inode(JOURNAL_INO))[0]
            jsb = fs.read(jphys)
            assert JBD2_HEADER.unpack_from(jsb, 0)[:2] == (0xC03B3998, 4)
            assert JSB_BLOCKSIZE.get(jsb) == fs.bs
            assert JSB_MAXLEN.get(jsb) == int(d["Total journal blocks"])
            assert JSB_SEQUENCE.get(jsb) == int(d["Journal sequence"], 16)
            assert JSB_START.get(jsb) == int(d["Journal start"])
            assert JSB_FEATURE_INCOMPAT.get(jsb) == 0  # "Journal features: (none)"
    finally:
        os.close(fd)


def _extents_of(name: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of every Field and Span of structure ``name``'s
    prefix in the table."""
    out = []
    for k, v in vars(layout).items():
        if k.startswith(name) and isinstance(v, layout.Field | layout.Span):
            out.append((k, v.at, v.end))
    return sorted(out, key=lambda e: e[1])


@pytest.mark.parametrize("prefix", ["SB_", "GD_", "I_", "JSB_", "TAG_"])
def test_fields_of_one_structure_do_not_overlap(prefix: str) -> None:
    fields = _extents_of(prefix)
    assert len(fields) > 2
    for (a, _, end), (b, start, _) in zip(fields, fields[1:], strict=False):
        assert end <= start, f"{a} overlaps {b}"


def _hex_literals(tree: ast.Module, source: str, allow_named: bool) -> list[int]:
    """Lines of int literals written in hex, but (``allow_named``) those
    that are the value of a module-level UPPER_CASE constant."""
    allowed: set[int] = set()
    if allow_named:
        for node in tree.body:
            if isinstance(node, ast.Assign) and all(
                isinstance(t, ast.Name | ast.Tuple) for t in node.targets
            ):
                allowed.update(id(c) for c in ast.walk(node.value))
    lines = source.splitlines()
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, int)
            and id(node) not in allowed
            and node.end_col_offset is not None
        ):
            text = lines[node.lineno - 1][node.col_offset : node.end_col_offset]
            if text.lower().startswith("0x"):
                out.append(node.lineno)
    return out


def _literal_offsets(tree: ast.Module) -> list[int]:
    """Lines of ``unpack_from``/``pack_into`` calls given a literal offset
    other than 0."""
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("unpack_from", "pack_into")
        ):
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, int) and a.value:
                    out.append(node.lineno)
    return out


def test_no_offset_outside_the_table() -> None:
    bad = []
    for path in sorted(EXT4_DIR.glob("*.py")):
        if path.name == "layout.py":
            continue
        source = path.read_text()
        tree = ast.parse(source)
        bad += [
            f"{path.name}:{n}: hex literal"
            for n in _hex_literals(tree, source, path.name in NAMED_HEX)
        ]
        bad += [f"{path.name}:{n}: literal offset" for n in _literal_offsets(tree)]
    assert not bad, bad


@pytest.mark.parametrize("ee_len, blocks", [(1024, 1024), (32768, 32768), (32768 + 5, 5)])
def test_journal_extent_lengths_as_the_kernel_reads_them(
    tmp_path: Path, ee_len: int, blocks: int
) -> None:
    """``ext4_journal_extents`` reads an extent's length as
    ext4_ext_get_actual_len does: up to 32768 an initialised extent of that
    many blocks (32768 included), above it an unwritten one of the excess."""
    sb = bytearray(_sb(_image(tmp_path)))
    at = SB_JNL_BLOCKS.at + EXTENT_HEADER.size
    lblk, _, hi, lo = EXTENT.unpack_from(sb, at)
    EXTENT.pack_into(sb, at, lblk, ee_len, hi, lo)
    got = ext4_journal_extents(bytes(sb))
    assert got is not None
    bs = 1024 << SB_LOG_BLOCK_SIZE.get(bytes(sb))
    start, end = got[0]
    assert (end - start) // bs == blocks
