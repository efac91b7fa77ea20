"""Crafting ext4 images and runs for tests/test_extract_confined.py: the
project's base image written with ``debugfs -w``; directory entries
changed in place where no tool writes them (a second entry of one name or
a name with ``/``, their block's checksum made again; a record short of
its block); a recorded run's log extended to end in a crafted image."""

from __future__ import annotations

import mmap
import os
import shutil
import struct
import subprocess
from pathlib import Path

from support import resummarize

from harness.fs.ext4.ondisk import FsReader, crc32c
from harness.images import ensure_image
from harness.logformat import ENTRY, FLUSH, SUPER
from harness.rundir import RunDir

PAYLOAD = b"PAYLOAD written by the crafted file system\n"


def debugfs_w(img: Path, commands: list[str]) -> None:
    """Run ``commands`` in ``debugfs -w`` on ``img``; each must succeed
    (debugfs says nothing but its prompts and allocations)."""
    p = subprocess.run(
        ["debugfs", "-w", "-f", "-", str(img)],
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    bad = [
        ln
        for ln in p.stdout.splitlines() + p.stderr.splitlines()
        if ln and not ln.startswith(("debugfs", "Allocated inode"))
    ]
    assert not bad, bad


def rename_entry(img: Path, dir_ino: int, old: bytes, new: bytes) -> None:
    """Rename the entry ``old`` of directory ``dir_ino`` to ``new`` in
    place (``new`` must fit its record), its block's checksum made again:
    what neither the kernel nor debugfs writes (a second entry of a name, a
    name with ``/``)."""
    fd = os.open(img, os.O_RDWR)
    try:
        with mmap.mmap(fd, 0) as mm:
            fs = FsReader(fd, mm[1024:2048], mm)
            raw = fs.inode(dir_ino)
            iseed = crc32c(crc32c(fs.seed, struct.pack("<I", dir_ino)), raw[0x64:0x68])
            bs = fs.bs
            for _, phys, n in fs.extents(dir_ino, raw):
                for b in range(phys, phys + n):
                    blk = bytearray(mm[b * bs : (b + 1) * bs])
                    off = 0
                    while off < bs - 12:
                        ino, rec_len, name_len = struct.unpack_from("<IHB", blk, off)
                        if ino and blk[off + 8 : off + 8 + name_len] == old:
                            assert 8 + len(new) <= rec_len
                            blk[off + 6] = len(new)
                            blk[off + 8 : off + 8 + len(new)] = new
                            struct.pack_into(
                                "<I", blk, bs - 4, crc32c(iseed, bytes(blk[: bs - 12]))
                            )
                            mm[b * bs : (b + 1) * bs] = bytes(blk)
                            return
                        off += rec_len
    finally:
        os.close(fd)
    raise AssertionError(f"no entry {old!r} in directory {dir_ino}")


def ino_of(img: Path, rel: bytes) -> int:
    """The inode of ``rel`` (b"" the root), as debugfs finds it."""
    out = subprocess.run(
        ["debugfs", "-R", f"stat /{os.fsdecode(rel)}", str(img)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split("Inode:")[1].split()[0])


def root_names(img: Path) -> list[str]:
    """The names in the root directory, in directory order."""
    out = subprocess.run(
        ["debugfs", "-R", "ls -p /", str(img)], capture_output=True, text=True, check=True
    ).stdout
    return [ln.split("/")[5] for ln in out.splitlines() if ln.count("/") >= 6]


def crafted(
    tmp_path: Path, commands: list[str], renames: tuple[tuple[bytes, bytes, bytes], ...] = ()
) -> Path:
    """The base ext4 image written with ``commands`` and then ``renames``
    (directory, old name, new name)."""
    payload = tmp_path / "payload"
    payload.write_bytes(PAYLOAD)
    img = tmp_path / "crafted.img"
    shutil.copyfile(ensure_image("ext4")[0], img)
    debugfs_w(img, [c.replace("PAYLOAD", str(payload)) for c in commands])
    for d, old, new in renames:
        rename_entry(img, ino_of(img, d), old, new)
    return img


def host_disk() -> tuple[int, int]:
    """Major and minor of this machine's first disk (not a loop or RAM disk)."""
    for d in sorted(Path("/sys/block").iterdir()):
        if not d.name.startswith(("loop", "ram", "zram")):
            major, minor = (d / "dev").read_text().split(":")
            return int(major), int(minor)
    return 8, 0


def shorten_last_record(img: Path, dir_ino: int, by: int) -> None:
    """Make the last record of directory ``dir_ino``'s first block (the
    checksum tail's) end ``by`` bytes before the block does: what no
    writer leaves, a next record header that would run past the block."""
    fd = os.open(img, os.O_RDWR)
    try:
        with mmap.mmap(fd, 0) as mm:
            fs = FsReader(fd, mm[1024:2048], mm)
            raw = fs.inode(dir_ino)
            bs = fs.bs
            phys = next(iter(fs.extents(dir_ino, raw)))[1]
            blk = bytearray(mm[phys * bs : (phys + 1) * bs])
            off = last = 0
            while off < bs:  # to the last record (the checksum tail's)
                last = off
                off += struct.unpack_from("<H", blk, off + 4)[0]
            struct.pack_into("<H", blk, last + 4, struct.unpack_from("<H", blk, last + 4)[0] - by)
            mm[phys * bs : (phys + 1) * bs] = bytes(blk)
    finally:
        os.close(fd)


def append_image(run: RunDir, image: Path, base: Path) -> int:
    """Append to ``run``'s log a write of every 4 KiB block where ``image``
    differs from ``base`` and a FLUSH, and record the log's new summary in
    meta.json; the number of blocks."""
    log = run.log
    blocks = []
    with open(image, "rb") as a, open(base, "rb") as b:
        n = 0
        while chunk := a.read(4096):
            if chunk != b.read(4096):
                blocks.append((n, chunk))
            n += 1
    with open(log, "r+b") as f:
        magic, version, nr, ss = SUPER.unpack(f.read(SUPER.size))
        f.seek(0, os.SEEK_END)
        for blk, data in blocks:
            f.write(ENTRY.pack(blk * 4096 // ss, 4096 // ss, 0, 0).ljust(ss, b"\0") + data)
        f.write(ENTRY.pack(0, 0, FLUSH, 0).ljust(ss, b"\0"))
        f.seek(0)
        f.write(SUPER.pack(magic, version, nr + len(blocks) + 1, ss))
    resummarize(run.path)
    return len(blocks)
