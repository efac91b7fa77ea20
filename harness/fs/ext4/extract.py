"""rdump in process: the files of a replayed ext4 image, found by a walk
from the root (:class:`Extractor`), offered to the caller from the image's
mapping (:data:`WantFiles`) and written, when wanted, in rdump's order
through :class:`harness.fs.confined.ConfinedTree` (never outside the
folder), a file's second name a hard link to its first, extended
attributes as ``xattr.py`` reads them.  Declines (:class:`Unsupported`)
what the debugfs path would not write the same way: htree directories,
symbolic links and special files, a second entry of a name, an empty
name, a directory reached twice."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.fs.confined import ConfinedTree, Xattrs, set_perms, write_all
from harness.fs.ext4.layout import (
    DIR_TAIL,
    DIR_TAIL_FT,
    I_ATIME,
    I_FLAGS,
    I_GENERATION,
    I_GID,
    I_GID_HIGH,
    I_MODE,
    I_MTIME,
    I_UID,
    I_UID_HIGH,
    INDEX_FL,
    LE32,
    ROOT_INO,
    S_IFDIR,
    S_IFMT,
    S_IFREG,
)
from harness.fs.ext4.memo import BlockMemo, Op, Walk
from harness.fs.ext4.ondisk import FsReader, Unsupported, crc32c, dir_entries, file_size
from harness.fs.ext4.xattr import inode_xattrs

# A file's contents as pieces (buffers valid only until the next piece is
# asked for), or None where no regular file of that relative path (``a/b``)
# was extracted; IsADirectoryError for a directory, as reading one would.
FileReader = Callable[[str], "Iterator[bytes | memoryview] | None"]
# Given the reader of the files a state recovers to: whether to write them.
WantFiles = Callable[[FileReader], bool]
# what Extractor.write does, step by step
WRITE_FILE, LINK_FILE, MAKE_DIR, SET_PERMS = "write-file", "link-file", "make-dir", "set-perms"


class Extractor:
    """rdump: files with their contents, directories, mode, owner, times,
    and what rdump loses: hard links, extended attributes.  :meth:`walk`
    finds everything (and declines what it does not handle) without
    writing; :meth:`write` then writes it in rdump's order.  ``data``: each
    file's data blocks (what debugfs ``blocks`` prints), every name of it."""

    def __init__(self, fs: FsReader, skip: tuple[str, ...]) -> None:
        self.fs = fs
        self.skip = {s.encode() for s in skip}
        self.root = b""
        # in order: (WRITE_FILE, rel, inode, pieces, xattrs), (LINK_FILE,
        # rel, first name's rel, ...), (MAKE_DIR, rel, inode, ...) before its
        # entries, (SET_PERMS, rel, inode, [], xattrs) of a directory after
        self.ops: list[Op] = []
        self.root_xattrs: Xattrs = []
        self.first: dict[int, bytes] = {}  # regular file inode -> its first name
        self.files: dict[str, list[tuple[int, int]]] = {}  # rel -> pieces
        self.dirs: set[str] = set()
        self.data: dict[str, list[int]] = {}
        self.walked_dirs: set[int] = set()  # directory inodes the walk entered

    def walk(self, memo: BlockMemo | None = None) -> None:
        """Find every directory and file from the root; with ``memo``, take
        a kept walk of the same blocks (:meth:`BlockMemo.walked`) or keep
        this one."""
        fs = self.fs
        skip = frozenset(self.skip)
        kept = memo.walked(fs, skip) if memo is not None else None
        if kept is not None:
            self.root_raw, self.root_xattrs, self.ops, self.files, self.dirs = (
                kept.root_raw,
                kept.root_xattrs,
                kept.ops,
                kept.files,
                kept.dirs,
            )
            self.data = dict(kept.data)
            return
        fs.trace = [] if memo is not None else None
        try:
            raw = fs.inode(ROOT_INO)
            if I_MODE.get(raw) & S_IFMT != S_IFDIR:
                raise Unsupported("root is not a directory")
            self.root_raw = raw
            self.root_xattrs = inode_xattrs(fs, ROOT_INO, raw)
            self.walked_dirs = {ROOT_INO}
            self._dir(ROOT_INO, raw, b"", top=True)
        finally:
            reads, fs.trace = fs.trace, None
        if memo is not None:
            assert reads is not None
            memo.keep_walk(
                Walk(
                    fs.sb,
                    fs.gd(),
                    skip,
                    reads,
                    self.root_raw,
                    self.root_xattrs,
                    self.ops,
                    self.files,
                    self.dirs,
                    dict(self.data),
                )
            )

    def read(self, rel: str) -> Iterator[bytes | memoryview] | None:
        """:data:`FileReader` of the walked files."""
        pieces = self.files.get(rel)
        if pieces is None:
            if rel in self.dirs:
                raise IsADirectoryError(rel)
            return None
        return self._contents(pieces)

    def _contents(self, pieces: list[tuple[int, int]]) -> Iterator[bytes | memoryview]:
        """A file's bytes: ``(start, n)`` of the image, or ``(-1, n)`` zeros."""
        for start, n in pieces:
            if start < 0:
                yield bytes(n)
            else:
                with self.fs.view[start : start + n] as data:
                    yield data

    def write(self, out_dir: Path) -> list[str]:
        """Write what :meth:`walk` found into ``out_dir`` (created), each
        entry at its parent's directory descriptor (:class:`ConfinedTree`:
        nothing followed, nothing replaced); what was not written (an
        extended attribute: :meth:`ConfinedTree.set_xattrs`)."""
        with ConfinedTree(out_dir) as tree:
            stack = [tree.root]  # the open directories from the root down
            try:
                for kind, rel, raw, pieces, xattrs in self.ops:
                    name = rel.rpartition(b"/")[2]
                    if kind == WRITE_FILE:
                        self._write_file(tree, stack[-1], name, rel, raw, pieces, xattrs)
                    elif kind == LINK_FILE:
                        if not tree.link(stack[-1], name, rel, raw):
                            raise Unsupported(f"{tree.skipped[-1]}")
                    elif kind == MAKE_DIR:
                        fd = tree.mkdir(stack[-1], name, rel)
                        if fd is None:
                            raise Unsupported(f"{tree.skipped[-1]}")
                        stack.append(fd)
                    else:
                        fd = stack.pop()
                        try:
                            fix_perms(raw, fd)
                            tree.set_xattrs(fd, rel, xattrs)
                        finally:
                            os.close(fd)
                # rdump / sets the root's; rdump of its entries, as with skip, not
                if not self.skip:
                    fix_perms(self.root_raw, tree.root)
                    tree.set_xattrs(tree.root, b"", self.root_xattrs)
            finally:
                for fd in stack[1:]:
                    os.close(fd)
            return tree.skipped

    def _write_file(
        self,
        tree: ConfinedTree,
        dfd: int,
        name: bytes,
        rel: bytes,
        raw: bytes,
        pieces: list[tuple[int, int]],
        xattrs: Xattrs,
    ) -> None:
        """One regular file, its contents and then its mode, owner, times,
        extended attributes."""
        fd = tree.create(dfd, name, rel)
        if fd is None:  # the walk lets through no name it refuses
            raise Unsupported(f"{tree.skipped[-1]}")
        try:
            for data in self._contents(pieces):
                write_all(fd, data)
            fix_perms(raw, fd)
            tree.set_xattrs(fd, rel, xattrs)
        finally:
            os.close(fd)

    def _dir(self, ino: int, raw: bytes, rel: bytes, top: bool = False) -> None:
        if I_FLAGS.get(raw) & INDEX_FL:
            raise Unsupported(f"inode {ino}: htree directory")
        fs = self.fs
        iseed = crc32c(crc32c(fs.seed, LE32(ino)), I_GENERATION.of(raw))
        seen: set[bytes] = set()
        for lblk, phys, n in fs.extents(ino, raw):
            del lblk
            data = fs.read(phys, n)
            for k in range(n):
                blk = data[k * fs.bs : (k + 1) * fs.bs]
                self._verify_dirblock(ino, iseed, blk)
                for child, name in dir_entries(blk, fs.bs, names=True):
                    if name in (b".", b"..") or (top and name in self.skip):
                        continue
                    if name in seen:  # rdump would write both, through the first
                        raise Unsupported(f"inode {ino}: a second entry {name!r}")
                    seen.add(name)
                    self._entry(child, rel + b"/" + name if rel else name)

    def _entry(self, child: int, crel: bytes) -> None:
        """The entry ``crel`` of a directory, inode ``child``: a file, or a
        directory walked in turn."""
        craw = self.fs.inode(child)
        mode = I_MODE.get(craw)
        if mode & S_IFMT == S_IFREG:
            first = self.first.get(child)
            if first is None:
                self.first[child] = crel
                self._file(child, craw, crel)
            else:  # a second name: a hard link to the first, the same contents
                self.ops.append((LINK_FILE, crel, first, [], []))
                name = os.fsdecode(crel)
                self.files[name] = self.files[os.fsdecode(first)]
                self.data[name] = self.data[os.fsdecode(first)]
        elif mode & S_IFMT == S_IFDIR:
            if child in self.walked_dirs:  # a loop, or a folder twice
                raise Unsupported(f"inode {child}: a directory reached twice")
            self.walked_dirs.add(child)
            self.ops.append((MAKE_DIR, crel, craw, [], []))
            self.dirs.add(os.fsdecode(crel))
            self._dir(child, craw, crel)
            self.ops.append((SET_PERMS, crel, craw, [], inode_xattrs(self.fs, child, craw)))
        else:
            raise Unsupported(f"inode {child}: mode {mode:#o}")

    def _verify_dirblock(self, ino: int, iseed: int, blk: bytes) -> None:
        at = self.fs.bs - DIR_TAIL.size
        inode, rec_len, name_len, ft, csum = DIR_TAIL.unpack_from(blk, at)
        if inode != 0 or rec_len != DIR_TAIL.size or name_len != 0 or ft != DIR_TAIL_FT:
            raise Unsupported(f"inode {ino}: directory block without a checksum tail")
        if crc32c(iseed, blk[:at]) != csum:
            raise Unsupported(f"inode {ino}: directory block checksum")

    def _file(self, ino: int, raw: bytes, rel: bytes) -> None:
        """dump_file: the file's ``i_size`` bytes (holes as zeros), as
        pieces of the image's mapping."""
        fs = self.fs
        size = file_size(raw)
        blocks: list[int] = []
        pieces: list[tuple[int, int]] = []
        done = 0
        for lblk, phys, n in fs.extents(ino, raw):
            blocks.extend(range(phys, phys + n))
            start = lblk * fs.bs
            if start >= size:
                continue
            if start > done:
                pieces.append((-1, start - done))
            end = min(size, start + n * fs.bs)
            pieces.append((phys * fs.bs, end - start))
            done = end
        if done < size:
            pieces.append((-1, size - done))
        self.ops.append((WRITE_FILE, rel, raw, pieces, inode_xattrs(fs, ino, raw)))
        name = os.fsdecode(rel)
        self.files[name] = pieces
        self.data[name] = blocks


def fix_perms(raw: bytes, fd: int) -> None:
    """rdump's fix_perms from the inode bytes ``raw``, on the file or
    directory open at ``fd``: mode (its mode_xlate keeps the permission bits
    only), owner, access and modification times (seconds)."""
    uid = I_UID.get(raw) | I_UID_HIGH.get(raw) << 16
    gid = I_GID.get(raw) | I_GID_HIGH.get(raw) << 16
    set_perms(fd, I_MODE.get(raw), (I_ATIME.get(raw), I_MTIME.get(raw)), owner=(uid, gid))
