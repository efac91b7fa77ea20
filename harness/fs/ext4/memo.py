"""What the in-process path keeps across the crash states of one worker
(:class:`BlockMemo`): facts of blocks whose content is the durable
image's, the last directory walks, the crash image's mapping.  Each is a
function of bytes checked again before use, so no state takes another's
result (harness/fs/README.md, "In process first")."""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any

from harness.fs.confined import Xattrs
from harness.fs.ext4.ondisk import FsReader

WALKS = 16  # directory walks a BlockMemo keeps (BlockMemo.walked)
# what the extraction does, in rdump's order: (kind, path, inode bytes --
# of a hard link: its first name's path --, pieces of the file's contents,
# extended attributes) -- see harness.fs.ext4.extract
Op = tuple[str, bytes, bytes, list[tuple[int, int]], Xattrs]


@dataclass
class Walk:
    """One directory walk (:class:`harness.fs.ext4.extract.Extractor`) and
    what it read: the superblock and group descriptors it went by and each
    block read."""

    sb: bytes
    gd: bytes
    skip: frozenset[bytes]
    reads: list[tuple[int, int, bytes]]
    root_raw: bytes
    root_xattrs: Xattrs
    ops: list[Op]
    files: dict[str, list[tuple[int, int]]]
    dirs: set[str]
    data: dict[str, list[int]]


class BlockMemo:
    """What the journal scan learnt from blocks whose content is a fixed
    image's (a worker's durable image at one position): headers, parsed
    descriptors, checksum results.  The caller names the image (``base``)
    and the byte ranges where this crash image may differ from it; facts of
    other blocks are reused across crash images of the same base."""

    LIMIT = 1 << 17

    def __init__(self) -> None:
        self.base: object = None
        self.known: dict[tuple[object, ...], Any] = {}
        # the crash image's mapping, kept across states: unmapping a
        # 64 MiB mapping per state cost more than the journal scan
        self._map: tuple[tuple[int, int, int], mmap.mmap] | None = None
        self.walks: list[Walk] = []  # the last WALKS directory walks, newest last

    def mapping(self, fd: int) -> mmap.mmap:
        """A shared mapping of the file open at ``fd``, the same one while
        that file (device, inode, size) is the same: a file truncated and
        written again in place is seen through it.  (While mapped, its
        inode number cannot go to another file.)"""
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino, st.st_size)
        if self._map is None or self._map[0] != ident:
            self.close()
            self._map = (ident, mmap.mmap(fd, st.st_size))
        return self._map[1]

    def close(self) -> None:
        """Unmap the kept mapping."""
        if self._map is not None:
            self._map[1].close()
            self._map = None

    def walked(self, fs: FsReader, skip: frozenset[bytes]) -> Walk | None:
        """A kept walk that read, on a file system of the same superblock
        and group descriptors, exactly what ``fs``'s image holds now in every
        block it read: the walk is a function of those, so it is this
        image's walk too."""
        for i in range(len(self.walks) - 1, -1, -1):
            w = self.walks[i]
            if (
                w.sb == fs.sb
                and w.gd == fs.gd()
                and w.skip == skip
                and all(fs.mm[b * fs.bs : (b + n) * fs.bs] == data for b, n, data in w.reads)
            ):
                self.walks.append(self.walks.pop(i))
                return w
        return None

    def keep_walk(self, walk: Walk) -> None:
        self.walks.append(walk)
        if len(self.walks) > WALKS:
            del self.walks[0]

    def view(
        self, base: object, bs: int, differ: list[tuple[int, int]]
    ) -> tuple[dict[tuple[object, ...], Any], set[int]]:
        """The memo for ``base`` and the blocks (of ``bs`` bytes) in
        ``differ``."""
        if base != self.base or len(self.known) > self.LIMIT:
            self.base, self.known = base, {}
        unstable: set[int] = set()
        for off, n in differ:
            unstable.update(range(off // bs, (off + n - 1) // bs + 1))
        return self.known, unstable
