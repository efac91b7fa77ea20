"""The tree of a recovered ext4 image, read here, and its extraction by
debugfs that never writes outside the extraction folder (the debugfs and
reference paths: ``fast.py``, ``recover.py``).

``debugfs rdump`` writes into a real folder and follows what it wrote: a
symbolic link and then a file of the same name write the file's bytes
(and mode, owner, times) to wherever the link points; a name holding
``/`` (``../../x``) is joined to the folder as a path; a directory linked
into itself recurses until the path is too long.  :func:`list_tree` reads
the replayed image's directories (the same blocks and entries, parsed as
``ext2fs_process_dir_block`` parses them, refusing anything else) and says
what of that the tree holds (:attr:`Tree.hazards`):

* none, and no hard link or extended attribute (:attr:`Tree.lossy`:
  what rdump would lose; no tree crashlab's own workloads record has
  one): ``rdump`` extracts it, byte for byte as before.  With no name
  holding ``/``, NUL or nothing, no name twice in a directory and no
  directory reached twice, every path rdump composes is folders it made
  itself and then a name it writes once: nothing it made can be followed;
* any, or anything rdump would lose: ``rdump`` of each regular file's
  and symbolic link's *inode*
  (``rdump <12> <13> … PRIV``) into a fresh private folder, where each
  becomes ``PRIV/<ino>`` (no name of the file system in the path), and
  :func:`place` puts them under their names itself
  (:class:`harness.fs.confined.ConfinedTree`: nothing followed, nothing
  replaced, the first of two entries of a name wins, a bad name or a
  directory reached twice is not written, device nodes, FIFOs and sockets
  are not made, as rdump does not make them), a file's second name a hard
  link to its first, and the extended attributes read here (``xattr.py``)
  set on each file and folder.

Checksums are not verified here: the listing sees every entry rdump could
(libext2fs refuses an inode or block rdump then does not write); what the
listing cannot parse exactly (inline data, block maps, unwritten extents
in a directory, a corrupt entry) raises :class:`Unsupported`.
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

from harness.fs.confined import MAX_DEPTH, ConfinedTree, Xattrs, bad_name, copy_fd, set_perms
from harness.fs.ext4.debugfs import quote
from harness.fs.ext4.extract import fix_perms
from harness.fs.ext4.layout import (
    EXT4_MAGIC,
    EXT4_SB_OFFSET,
    EXT4_SB_SIZE,
    EXTENT,
    EXTENT_HEADER,
    EXTENT_INDEX,
    EXTENT_MAGIC,
    EXTENT_ROOT_ENTRIES,
    EXTENTS_FL,
    I_BLOCK,
    I_FLAGS,
    I_MODE,
    INCOMPAT_64BIT,
    INCOMPAT_CASEFOLD,
    INCOMPAT_CSUM_SEED,
    INCOMPAT_EA_INODE,
    INCOMPAT_ENCRYPT,
    INCOMPAT_EXTENTS,
    INCOMPAT_FILETYPE,
    INCOMPAT_FLEX_BG,
    INCOMPAT_INLINE_DATA,
    INCOMPAT_LARGEDIR,
    INCOMPAT_MMP,
    INCOMPAT_RECOVER,
    INLINE_DATA_FL,
    MAX_INIT_LEN,
    REV_DYNAMIC,
    ROOT_INO,
    S_IFDIR,
    S_IFLNK,
    S_IFMT,
    S_IFREG,
    SB_FEATURE_INCOMPAT,
    SB_MAGIC,
    SB_REV_LEVEL,
)
from harness.fs.ext4.ondisk import FsReader, Unsupported, dir_entries
from harness.fs.ext4.xattr import inode_xattrs

# incompat features whose directories and inodes this reader reads as
# libext2fs does (inline data is refused per inode); not meta_bg (the
# descriptors lie elsewhere), dirdata, a journal device
INCOMPAT_READ = (
    INCOMPAT_FILETYPE
    | INCOMPAT_RECOVER
    | INCOMPAT_EXTENTS
    | INCOMPAT_64BIT
    | INCOMPAT_MMP
    | INCOMPAT_FLEX_BG
    | INCOMPAT_EA_INODE
    | INCOMPAT_CSUM_SEED
    | INCOMPAT_LARGEDIR
    | INCOMPAT_INLINE_DATA
    | INCOMPAT_ENCRYPT
    | INCOMPAT_CASEFOLD
)
MAX_EXTENT_DEPTH = 5


class _Image:
    """A file read with ``pread``, sliced as ``FsReader`` slices its mapping."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size = os.fstat(fd).st_size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, s: slice) -> bytes:
        return os.pread(self.fd, s.stop - s.start, s.start)


@dataclass
class Node:
    """One entry of the tree: its path from the root (as rdump joins it),
    its name, inode number and inode bytes; a directory's entries."""

    rel: bytes
    name: bytes
    ino: int
    raw: bytes
    children: list[Node] | None = None  # a directory's, in directory order
    xattrs: Xattrs = field(default_factory=list)

    @property
    def mode(self) -> int:
        return I_MODE.get(self.raw)

    @property
    def kind(self) -> int:
        return self.mode & S_IFMT


@dataclass
class Tree:
    """A recovered image's tree (root entries in ``skip`` left out)."""

    root: Node
    skip: tuple[str, ...]
    hazards: list[str] = field(default_factory=list)  # why rdump into a folder is unsafe
    lossy: list[str] = field(default_factory=list)  # what rdump into a folder would lose

    @property
    def placed(self) -> bool:
        """Whether :func:`place` puts the files under their names (rdump
        writes each inode into a private folder): a hazard, or a loss."""
        return bool(self.hazards or self.lossy)


def list_tree(image: Path, skip: tuple[str, ...] = ()) -> Tree:
    """Read the tree of the ext4 ``image`` (its journal replayed, closed by
    every writer)."""
    fd = os.open(image, os.O_RDONLY)
    try:
        img = _Image(fd)
        sb = img[EXT4_SB_OFFSET : EXT4_SB_OFFSET + EXT4_SB_SIZE]
        if len(sb) < EXT4_SB_SIZE or SB_MAGIC.get(sb) != EXT4_MAGIC:
            raise Unsupported("no ext4 superblock")
        incompat = SB_FEATURE_INCOMPAT.get(sb)
        if incompat & ~INCOMPAT_READ or SB_REV_LEVEL.get(sb) != REV_DYNAMIC:
            raise Unsupported(f"incompat features {incompat:#x} or revision")
        fs = FsReader(fd, sb, img)  # type: ignore[arg-type]  # FsReader reads bytes or an mmap alike
        fs.csum = False  # see the module comment
        raw = fs.inode(ROOT_INO)
        if I_MODE.get(raw) & S_IFMT != S_IFDIR:
            raise Unsupported("root is not a directory")
        tree = Tree(Node(b"", b"", ROOT_INO, raw, [], inode_xattrs(fs, ROOT_INO, raw)), skip)
        _walk(fs, tree, tree.root, {ROOT_INO}, {os.fsencode(s) for s in skip}, 0)
        tree.lossy = _lossy(tree)
        return tree
    except struct.error as e:  # a field that runs past its block: a hostile image
        raise Unsupported(f"a malformed on-disk structure ({e})") from None
    finally:
        os.close(fd)


def _walk(
    fs: FsReader, tree: Tree, d: Node, walked: set[int], skip: set[bytes], depth: int
) -> None:
    """``d``'s entries, rdump's way: each live entry but a directory called
    ``.`` or ``..``; hazards noted."""
    assert d.children is not None
    if depth > MAX_DEPTH:
        tree.hazards.append(f"{d.rel!r}: more than {MAX_DEPTH} folders deep")
        return
    seen: set[bytes] = set()
    for lblk, phys, n in _extents(fs, d.ino, d.raw):
        del lblk
        data = fs.read(phys, n)
        for k in range(n):
            for ino, name in dir_entries(data[k * fs.bs : (k + 1) * fs.bs], fs.bs):
                if depth == 0 and name in skip:
                    continue
                child = Node(d.rel + b"/" + name if d.rel else name, name, ino, fs.inode(ino))
                if name in (b".", b"..") and child.kind == S_IFDIR:
                    continue  # rdump skips them
                child.xattrs = inode_xattrs(fs, ino, child.raw)
                why = bad_name(name)
                if why is None and name in seen:
                    why = "a second entry of this name"
                if why is None and tree.skip and depth == 0 and (b'"' in name or b"\n" in name):
                    why = "a name debugfs cannot be given"
                if why is not None:
                    tree.hazards.append(f"{child.rel!r}: {why}")
                seen.add(name)
                d.children.append(child)
                if child.kind == S_IFDIR:
                    if ino in walked:
                        tree.hazards.append(f"{child.rel!r}: a directory reached twice")
                        continue
                    walked.add(ino)
                    child.children = []
                    _walk(fs, tree, child, walked, set(), depth + 1)


def _lossy(tree: Tree) -> list[str]:
    """What ``rdump`` into a folder would not write: a regular file's
    second name (a copy, not a link), extended attributes."""
    out: list[str] = []
    first: dict[int, bytes] = {}
    if tree.root.xattrs and not tree.skip:
        out.append("'': extended attributes")
    for n in _all(tree.root):
        if n.xattrs:
            out.append(f"{n.rel!r}: extended attributes")
        if n.kind == S_IFREG:
            if n.ino in first:
                out.append(f"{n.rel!r}: a hard link to {first[n.ino]!r}")
            first.setdefault(n.ino, n.rel)
    return out


def _extents(fs: FsReader, ino: int, raw: bytes) -> list[tuple[int, int, int]]:
    """``(logical, physical, count)`` of a directory's written extents, any
    depth, in logical order."""
    flags = I_FLAGS.get(raw)
    if flags & INLINE_DATA_FL or not flags & EXTENTS_FL:
        raise Unsupported(f"inode {ino}: a directory not mapped by extents")
    out: list[tuple[int, int, int]] = []
    _node(fs, ino, I_BLOCK.of(raw), EXTENT_ROOT_ENTRIES, None, out, 0)
    end = 0
    for lblk, _, n in out:
        if lblk < end:
            raise Unsupported(f"inode {ino}: extents out of order")
        end = lblk + n
    return out


def _node(
    fs: FsReader,
    ino: int,
    buf: bytes,
    room: int,
    depth: int | None,
    out: list[tuple[int, int, int]],
    level: int,
) -> None:
    magic, entries, emax, d = EXTENT_HEADER.unpack_from(buf, 0)
    if (
        magic != EXTENT_MAGIC
        or entries > emax
        or emax > room
        or level > MAX_EXTENT_DEPTH
        or (depth is not None and d != depth)
    ):
        raise Unsupported(f"inode {ino}: extent tree")
    for k in range(entries):
        at = EXTENT_HEADER.size + EXTENT.size * k
        if d == 0:
            lblk, n, hi, lo = EXTENT.unpack_from(buf, at)
            phys = lo | hi << 32
            if n == 0 or n > MAX_INIT_LEN or phys < fs.first_data_block or phys + n > fs.blocks:
                raise Unsupported(f"inode {ino}: an unwritten, empty or out-of-range extent")
            out.append((lblk, phys, n))
        else:
            _, lo, hi = EXTENT_INDEX.unpack_from(buf, at)
            child = fs.read(lo | hi << 32)
            _node(
                fs,
                ino,
                child,
                (fs.bs - EXTENT_HEADER.size) // EXTENT_INDEX.size,
                d - 1,
                out,
                level + 1,
            )


def _regular(node: Node) -> list[Node]:
    """Every regular file under ``node``, in rdump's order."""
    out: list[Node] = []
    for c in node.children or ():
        if c.kind == S_IFREG:
            out.append(c)
        elif c.children is not None:
            out += _regular(c)
    return out


def files(tree: Tree) -> list[tuple[str, int]]:
    """``(path, inode)`` of every regular file the extraction writes,
    sorted by path (what ``blocks`` is asked of)."""
    if tree.placed:
        placed = _placed(tree)
        nodes = [n for n in _regular(tree.root) if id(n) in placed]
    else:
        nodes = _regular(tree.root)
    return sorted((os.fsdecode(n.rel), n.ino) for n in nodes)


def _placed(tree: Tree) -> set[int]:
    """The nodes (by ``id``) :func:`place` writes: the first entry of each
    valid name, directories reached once."""
    out: set[int] = set()

    def visit(d: Node) -> None:
        seen: set[bytes] = set()
        for c in d.children or ():
            if bad_name(c.name) or c.name in seen:
                seen.add(c.name)
                continue
            seen.add(c.name)
            out.add(id(c))
            if c.children is not None:
                visit(c)

    visit(tree.root)
    return out


def rdump_request(tree: Tree, out_dir: Path) -> tuple[str | None, Path]:
    """The one debugfs request that extracts ``tree`` (None: nothing to
    extract), and the folder it writes: ``out_dir`` when the tree has no
    hazard and rdump loses nothing of it, else a fresh private folder
    beside it that gets the inodes of its files and links (then
    :func:`place`).  ``out_dir`` is made empty
    first: rdump follows what is already there (a link an earlier try
    left)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    if not tree.placed:
        if not tree.skip:
            return f"rdump / {quote(out_dir)}", out_dir
        names = [c.name for c in tree.root.children or ()]
        if not names:
            return None, out_dir
        sources = " ".join(quote("/" + os.fsdecode(n)) for n in names)
        return f"rdump {sources} {quote(out_dir)}", out_dir
    private = out_dir.with_name(out_dir.name + ".rdump")
    shutil.rmtree(private, ignore_errors=True)
    private.mkdir(mode=0o700)
    placed = _placed(tree)
    inos = sorted(
        {n.ino for n in _all(tree.root) if id(n) in placed and n.kind in (S_IFREG, S_IFLNK)}
    )
    return (f"rdump {' '.join(f'<{i}>' for i in inos)} {quote(private)}" if inos else None, private)


def _all(node: Node) -> list[Node]:
    out: list[Node] = []
    for c in node.children or ():
        out.append(c)
        if c.children is not None:
            out += _all(c)
    return out


def place(tree: Tree, out_dir: Path, private: Path) -> list[str]:
    """Put what ``rdump`` wrote into ``private`` (a :attr:`Tree.placed`
    tree) under ``out_dir``, as :class:`ConfinedTree` writes; directories
    made here, with rdump's mode bits, owner and times; a file's second
    name a hard link to its first; extended attributes.  Returns what was
    not written.  Removes ``private``."""
    try:
        with ConfinedTree(out_dir) as out:
            pfd = os.open(private, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                _Place(out, pfd, _placed(tree)).dir(tree.root, out.root)
            finally:
                os.close(pfd)
            if not tree.skip:
                fix_perms(tree.root.raw, out.root)
                out.set_xattrs(out.root, b"", tree.root.xattrs)
            return out.skipped
    finally:
        shutil.rmtree(private, ignore_errors=True)


class _Place:
    """One :func:`place`: the inodes it wrote, by their first name."""

    def __init__(self, out: ConfinedTree, pfd: int, placed: set[int]) -> None:
        self.out, self.pfd, self.placed = out, pfd, placed
        self.first: dict[int, bytes] = {}  # inode -> the name it was written as

    def dir(self, d: Node, dfd: int) -> None:
        out = self.out
        for c in d.children or ():
            if id(c) not in self.placed:
                why = bad_name(c.name) or "a second entry of this name"
                out.skip(c.rel, f"not written: {why}")
            elif c.kind == S_IFDIR:
                if c.children is None:
                    out.skip(c.rel, "not written: a directory reached twice")
                    continue
                fd = out.mkdir(dfd, c.name, c.rel)
                if fd is None:
                    continue
                try:
                    self.dir(c, fd)
                    fix_perms(c.raw, fd)
                    out.set_xattrs(fd, c.rel, c.xattrs)
                finally:
                    os.close(fd)
            elif c.kind == S_IFLNK:
                self._link(c, dfd)
            elif c.kind == S_IFREG:
                if c.ino in self.first:
                    out.link(dfd, c.name, c.rel, self.first[c.ino])
                elif self._file(c, dfd):
                    self.first[c.ino] = c.rel
            else:
                out.skip(c.rel, f"not written: a special file (mode {c.mode:#o})")

    def _link(self, c: Node, dfd: int) -> None:
        """A symbolic link, as rdump read its target; never its extended
        attributes (no descriptor of a link to set them on)."""
        try:
            target = os.readlink(f"<{c.ino}>", dir_fd=self.pfd)
        except OSError:
            self.out.skip(c.rel, "not written: debugfs did not extract the link")
            return
        if self.out.symlink(dfd, c.name, os.fsencode(target), c.rel) and c.xattrs:
            self.out.skip(c.rel, "its extended attributes not written: a symbolic link's")

    def _file(self, c: Node, dfd: int) -> bool:
        """A regular file, from rdump's copy of its inode; whether written."""
        out = self.out
        try:
            src = os.open(f"<{c.ino}>", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self.pfd)
        except OSError:
            out.skip(c.rel, "not written: debugfs did not extract the file")
            return False
        try:
            fd = out.create(dfd, c.name, c.rel)
            if fd is None:
                return False
            try:
                copy_fd(src, fd)
                st = os.fstat(src)
                set_perms(
                    fd,
                    st.st_mode,
                    (st.st_atime_ns, st.st_mtime_ns),
                    owner=(st.st_uid, st.st_gid),
                    ns=True,
                )
                out.set_xattrs(fd, c.rel, c.xattrs)
            finally:
                os.close(fd)
            return True
        finally:
            os.close(src)
