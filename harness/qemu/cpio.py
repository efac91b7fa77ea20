"""A byte-reproducible cpio archive in the "newc" format the kernel unpacks
as an initramfs: members in sorted path order, every time stamp 0, owner
root, inode numbers counted from 1, parent directories made explicit.  The
same members give the same bytes on every machine.  Several archives
concatenated are unpacked one after the other by the kernel (a later member
replaces an earlier one), which is how a run's job is added to the cached
base archive without rebuilding it."""

from __future__ import annotations

import gzip
from dataclasses import dataclass

TRAILER = "TRAILER!!!"


@dataclass(frozen=True)
class Member:
    path: str  # absolute, e.g. /bin/busybox
    mode: int  # full st_mode: 0o100755 file, 0o040755 directory, 0o120777 symlink
    data: bytes = b""  # a file's content, a symlink's target


def file(path: str, data: bytes, executable: bool = False) -> Member:
    return Member(path, 0o100755 if executable else 0o100644, data)


def symlink(path: str, target: str) -> Member:
    return Member(path, 0o120777, target.encode())


def _header(ino: int, m: Member, name: bytes) -> bytes:
    fields = (ino, m.mode, 0, 0, 1, 0, len(m.data), 0, 0, 0, 0, len(name) + 1, 0)
    return b"070701" + b"".join(b"%08X" % f for f in fields)


def _pad(n: int) -> bytes:
    return b"\0" * (-n % 4)


def archive(members: list[Member]) -> bytes:
    """The newc archive of ``members`` and every parent directory they need
    (a later member of the same path wins)."""
    by_path: dict[str, Member] = {}
    for m in members:
        parts = m.path.strip("/").split("/")
        for i in range(1, len(parts)):
            d = "/" + "/".join(parts[:i])
            by_path.setdefault(d, Member(d, 0o040755))
        by_path[m.path] = m
    out = bytearray()
    for ino, path in enumerate(sorted(by_path), start=1):
        m = by_path[path]
        name = path.lstrip("/").encode()
        head = _header(ino, m, name) + name + b"\0"
        out += head + _pad(len(head)) + m.data + _pad(len(m.data))
    trailer = _header(0, Member(TRAILER, 0), TRAILER.encode()) + TRAILER.encode() + b"\0"
    out += trailer + _pad(len(trailer))
    return bytes(out)


def gzipped(data: bytes) -> bytes:
    """``data`` gzip-compressed with no time stamp or name (reproducible)."""
    return gzip.compress(data, compresslevel=6, mtime=0)
