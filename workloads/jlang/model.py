"""What a j-lang program does to a file system, run in memory: the one
model of its semantics (:func:`execute`).  It says whether the program can
run at all (a file written before it exists, a name created twice: a
CrashlabError naming the line, as ACE's invalid workloads are refused), the
file tree after every op (:class:`Snapshot`), and what every persistence
op promised to make durable (:class:`Fact`; which of them a file system
keeps is its rule's, workloads/jlang/rules.py).

Ops run in one flat sequence: the setup's, then a ``sync`` crashlab adds
(before ``setup-done``), then the run's.  Snapshot j is the tree after the
first j ops.  A descriptor is a name's (ACE's ``fd_NAME``): ``open``,
``opendir`` and ``creat`` give the name one, and the ops that ACE runs on a
descriptor (write, falloc, mmapwrite, fsetxattr, fsync, fdatasync) need
it; it follows its inode through renames.  What a write writes: byte i of
the op at flat position n is ``"a" + (n + i) % 26`` (:func:`pattern`; the
runner writes the same)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from harness.errors import CrashlabError
from workloads.jlang.lang import Op, Program

XATTR = ("user.xattr1", b"val1")  # ACE's fsetxattr: name and value
BLOCK = 4096  # O_DIRECT's alignment here, and the unit content is judged in
SETUP_SYNC = Op("sync")


def pattern(pos: int, length: int) -> bytes:
    """The bytes the op at flat position ``pos`` writes."""
    return bytes(97 + (pos + i) % 26 for i in range(length))


@dataclass
class Inode:
    kind: str  # "file", "dir", "symlink"
    data: bytearray = field(default_factory=bytearray)
    xattrs: dict[str, bytes] = field(default_factory=dict)
    target: str = ""


@dataclass(frozen=True)
class Snapshot:
    """The tree at one point: every path (relative, "." the root) -> its
    inode number, and the inodes (kind, content, xattrs, link target)."""

    paths: dict[str, int]
    kinds: dict[int, str]
    data: dict[int, bytes]
    xattrs: dict[int, tuple[tuple[str, bytes], ...]]
    targets: dict[int, str]

    def names(self, ino: int) -> frozenset[str]:
        """Every path of the inode (a file's hard links)."""
        return frozenset(p for p, i in self.paths.items() if i == ino)


@dataclass(frozen=True)
class Fact:
    """A persistence op's promise about one thing, made by the op at flat
    position ``pos``: ``kind`` ``entry`` (what ``path`` names: nothing, a
    file, a folder, a link and its target), ``content`` (a file's size and
    bytes; ``span``: only bytes [a, b), size not promised), ``links`` (its
    link count and the other names of its inode) or ``xattrs``.
    ``invariant`` is the FS-* invariant it belongs to, ``op`` the op that
    made it (fsync, fdatasync, sync, dwrite, msync)."""

    pos: int
    invariant: str
    op: str
    kind: str
    path: str
    span: tuple[int, int] | None = None


def _parent(path: str) -> str:
    head = posixpath.dirname(path)
    return head or "."


def ancestors(path: str) -> list[str]:
    """The folders on the way to ``path`` below the root, outermost first."""
    out = []
    while path != ".":
        path = _parent(path)
        if path != ".":
            out.append(path)
    return out[::-1]


class Model:
    """The program's file tree, run op by op (see the module's comment)."""

    def __init__(self) -> None:
        self.paths: dict[str, int] = {".": 0}
        self.inodes: dict[int, Inode] = {0: Inode("dir")}
        self.fds: dict[str, int] = {}
        self.seen: list[str] = ["."]  # every path that ever existed, in order
        # paths a rename put a file on in place of another (ext4's auto_da_alloc)
        self.replaced: set[str] = set()
        self.facts: list[Fact] = []
        self.pos = 0
        self.where = ""

    # --- checks -------------------------------------------------------
    def fail(self, why: str) -> CrashlabError:
        return CrashlabError(f"j-lang {self.where}: {why} (the program cannot run)")

    def node(self, path: str, kind: str | None = None) -> int:
        if path not in self.paths:
            raise self.fail(f"{path!r} does not exist")
        ino = self.paths[path]
        if kind is not None and self.inodes[ino].kind != kind:
            raise self.fail(f"{path!r} is a {self.inodes[ino].kind}, not a {kind}")
        return ino

    def fd(self, path: str, kind: str = "file") -> int:
        if path not in self.fds:
            raise self.fail(f"{path!r} is not open")
        ino = self.fds[path]
        if self.inodes[ino].kind != kind:
            raise self.fail(f"{path!r} is open as a {self.inodes[ino].kind}, not a {kind}")
        return ino

    def free(self, path: str) -> None:
        if path in self.paths:
            raise self.fail(f"{path!r} exists")
        self.node(_parent(path), "dir")

    def add(self, path: str, inode: Inode | int) -> int:
        ino = inode if isinstance(inode, int) else max(self.inodes) + 1
        if not isinstance(inode, int):
            self.inodes[ino] = inode
        self.paths[path] = ino
        if path not in self.seen:
            self.seen.append(path)
        return ino

    # --- facts --------------------------------------------------------
    def promise(
        self, inv: str, op: str, kind: str, path: str, span: tuple[int, int] | None = None
    ) -> None:
        self.facts.append(Fact(self.pos, inv, op, kind, path, span))

    def names_of(self, ino: int) -> list[str]:
        return [p for p in self.seen if self.paths.get(p) == ino]

    def promise_names(self, op: str, ino: int) -> None:
        """The inode's own names and the folders on their way (FS-FSYNC-NAME)."""
        for name in self.names_of(ino):
            for path in [*ancestors(name), name]:
                if path != ".":
                    self.promise("FS-FSYNC-NAME", op, "entry", path)

    def fsync(self, op: str, ino: int) -> None:
        inode = self.inodes[ino]
        names = self.names_of(ino)
        if inode.kind == "dir":
            for d in names:
                for path in self.seen:
                    if path != d and _parent(path) == d:
                        self.promise("FS-DIR-ENTRIES", op, "entry", path)
                        if path in self.replaced:
                            self.promise("FS-REPLACE", op, "content", path)
        elif names:
            self.promise("FS-FSYNC-DATA", op, "content", names[0])
            if op == "fsync":
                self.promise("FS-LINK", op, "links", names[0])
                self.promise("FS-XATTR", op, "xattrs", names[0])
        self.promise_names(op, ino)

    def sync(self) -> None:
        for path in self.seen:
            if path == ".":
                continue
            self.promise("FS-SYNC", "sync", "entry", path)
            ino = self.paths.get(path)
            if ino is not None and self.inodes[ino].kind == "file":
                self.promise("FS-SYNC", "sync", "content", path)
                self.promise("FS-LINK", "sync", "links", path)
                self.promise("FS-XATTR", "sync", "xattrs", path)

    def snapshot(self) -> Snapshot:
        live = set(self.paths.values())
        return Snapshot(
            dict(self.paths),
            {i: self.inodes[i].kind for i in live},
            {i: bytes(self.inodes[i].data) for i in live if self.inodes[i].kind == "file"},
            {i: tuple(sorted(self.inodes[i].xattrs.items())) for i in live},
            {i: self.inodes[i].target for i in live if self.inodes[i].kind == "symlink"},
        )


def _write(inode: Inode, off: int, data: bytes) -> None:
    if len(inode.data) < off:
        inode.data.extend(bytes(off - len(inode.data)))
    inode.data[off : off + len(data)] = data


def _falloc(m: Model, op: Op) -> None:
    inode = m.inodes[m.fd(op.path())]
    flags, off, length = op.path(1).split("|"), op.num(2), op.num(3)
    keep = "FALLOC_FL_KEEP_SIZE" in flags
    if "FALLOC_FL_PUNCH_HOLE" in flags and not keep:
        raise m.fail("FALLOC_FL_PUNCH_HOLE needs FALLOC_FL_KEEP_SIZE")
    if "FALLOC_FL_PUNCH_HOLE" in flags and "FALLOC_FL_ZERO_RANGE" in flags:
        raise m.fail("FALLOC_FL_PUNCH_HOLE and FALLOC_FL_ZERO_RANGE together")
    size = len(inode.data)
    end = off + length if not keep else min(off + length, size)
    if "FALLOC_FL_PUNCH_HOLE" in flags or "FALLOC_FL_ZERO_RANGE" in flags:
        if end > off:
            _write(inode, off, bytes(end - off))
    elif end > size:
        inode.data.extend(bytes(end - size))


def _rename(m: Model, old: str, new: str) -> None:
    ino = m.node(old)
    replacing = new in m.paths and m.inodes[ino].kind == "file"
    if new == old or new.startswith(old + "/"):
        raise m.fail(f"rename {old!r} into itself")
    if new in m.paths:
        dst = m.inodes[m.paths[new]]
        if (dst.kind == "dir") != (m.inodes[ino].kind == "dir"):
            raise m.fail(f"rename {old!r} over {new!r}: a folder and a non-folder")
        if dst.kind == "dir" and any(_parent(p) == new for p in m.paths):
            raise m.fail(f"rename over {new!r}: not empty")
    else:
        m.free(new)
    moved = {p: i for p, i in m.paths.items() if p == old or p.startswith(old + "/")}
    for p in moved:
        del m.paths[p]
    for p, i in moved.items():
        m.add(new + p[len(old) :], i)
    m.replaced -= {old, new}
    if replacing:
        m.replaced.add(new)


def _remove(m: Model, path: str, kind: str | None) -> None:
    ino = m.node(path)
    if kind == "dir":
        m.node(path, "dir")
        if path == "." or any(_parent(p) == path for p in m.paths if p != "."):
            raise m.fail(f"rmdir {path!r}: the root or not empty")
    elif m.inodes[ino].kind == "dir":
        raise m.fail(f"{path!r} is a folder (rmdir)")
    del m.paths[path]


def _open(m: Model, op: Op) -> None:
    path, flags = op.path(), op.path(1).split("|")
    if path not in m.paths:
        if "O_CREAT" not in flags:
            raise m.fail(f"{path!r} does not exist (no O_CREAT)")
        m.free(path)
        m.add(path, Inode("file"))
    ino = m.node(path, "file")
    if "O_TRUNC" in flags:
        m.inodes[ino].data.clear()
    m.fds[path] = ino


def _step(m: Model, op: Op) -> None:  # long: one branch per op of the language
    """Apply one op (see lang.py's table)."""
    n, p = op.name, (op.path() if op.args and isinstance(op.args[0], str) else "")
    if n == "open":
        _open(m, op)
    elif n == "creat":
        _open(m, Op("open", (p, "O_CREAT|O_RDWR|O_TRUNC", "0777")))
    elif n == "opendir":
        m.fds[p] = m.node(p, "dir")
    elif n == "close":
        m.fd(p, m.inodes[m.fds[p]].kind if p in m.fds else "file")
        del m.fds[p]
    elif n == "mkdir":
        m.free(p)
        m.add(p, Inode("dir"))
    elif n == "rmdir":
        _remove(m, p, "dir")
    elif n in ("unlink", "remove"):
        _remove(m, p, None)
        m.replaced.discard(p)
    elif n in ("write", "mmapwrite"):
        _write(m.inodes[m.fd(p)], op.num(1), pattern(m.pos, op.num(2)))
        if n == "mmapwrite":
            m.promise("FS-FSYNC-DATA", "msync", "content", p, (op.num(1), op.num(1) + op.num(2)))
    elif n == "dwrite":
        if op.num(1) % BLOCK or op.num(2) % BLOCK:
            raise m.fail(f"dwrite: offset and length must be multiples of {BLOCK} (O_DIRECT)")
        _write(m.inodes[m.node(p, "file")], op.num(1), pattern(m.pos, op.num(2)))
        m.promise("FS-FSYNC-DATA", "dwrite", "content", p)
    elif n == "falloc":
        _falloc(m, op)
    elif n == "truncate":
        inode = m.inodes[m.node(p, "file")]
        del inode.data[op.num(1) :]
        inode.data.extend(bytes(op.num(1) - len(inode.data)))
    elif n == "link":
        m.free(op.path(1))
        m.add(op.path(1), m.node(p, "file"))
    elif n == "symlink":
        m.free(op.path(1))
        m.add(op.path(1), Inode("symlink", target=p))
    elif n == "rename":
        _rename(m, p, op.path(1))
    elif n == "fsetxattr":
        m.inodes[m.fd(p)].xattrs[XATTR[0]] = XATTR[1]
    elif n == "removexattr":
        inode = m.inodes[m.node(p)]
        if XATTR[0] not in inode.xattrs:
            raise m.fail(f"{p!r} has no {XATTR[0]} to remove")
        del inode.xattrs[XATTR[0]]
    elif n == "fsync":
        m.fd(p, m.inodes[m.fds[p]].kind if p in m.fds else "file")
        m.fsync("fsync", m.fds[p])
    elif n == "fdatasync":
        m.fsync("fdatasync", m.fd(p))
    elif n == "sync":
        m.sync()


@dataclass(frozen=True)
class Run:
    """A program run in the model: its flat ops, the snapshots (j: after
    the first j ops), the facts, where the setup ends (the flat position
    of its sync) and where each checkpoint is (``checkpoints[k-1]``: the
    flat position of checkpoint k)."""

    ops: tuple[Op, ...]
    snapshots: tuple[Snapshot, ...]
    facts: tuple[Fact, ...]
    setup_end: int
    checkpoints: tuple[int, ...]
    seen: tuple[str, ...]


def execute(program: Program) -> Run:
    """Run ``program`` in the model; CrashlabError when it cannot run."""
    m = Model()
    ops = (*program.setup, SETUP_SYNC, *program.run)
    snaps = [m.snapshot()]
    for pos, op in enumerate(ops):
        m.pos, m.where = pos, (f"line {op.line}" if op.line else f"op {pos + 1} ({op.text()})")
        _step(m, op)
        snaps.append(m.snapshot())
    return Run(
        ops,
        tuple(snaps),
        tuple(m.facts),
        len(program.setup),
        tuple(i for i, op in enumerate(ops) if op.name == "checkpoint"),
        tuple(m.seen),
    )
