"""crashlab's bounded suites in the spirit of ACE (Mohan et al., "Finding
Crash-Consistency Bugs with Bounded Black-Box Crash Testing", OSDI '18):
every workload of one core operation followed by one persistence
operation, over a small file set (:func:`seq1`).  Written here from the
paper's description of ACE's bounds, not from ACE's code:

* **file set**: the root ``test`` with two files ``foo``, ``bar`` and the
  folders ``A`` (files ``A/foo``, ``A/bar``) and ``B``; a core op's first
  file is ``foo`` or ``A/foo``, a second file ``bar`` or ``A/bar``, a
  folder ``A`` (and ``B`` as a rename's target), as ACE names them so that
  two workloads that differ only by a file's name are one;
* **operations** (:data:`CORE`) with ACE's parameters: writes that append
  32 KiB, overwrite the first 5000 bytes, or overwrite across the end
  (5000 bytes from 2000 before it); direct writes that append or overwrite
  the first 8 KiB; fallocate in five modes over those three ranges;
  truncate to 0 or 2500; link, symlink and rename between the first and
  second files (and ``A`` to ``B``); unlink, remove; set and remove an
  extended attribute; ``fdatasync`` and ``mmapwrite`` (msync'd), which are
  their own persistence;
* **persistence**: ``fsync`` of a file or folder in the *range* of the
  files used (each used file, its sibling and its parent, as ACE's seq-1
  and seq-2 do), or ``sync``; then ``checkpoint 1``;
* **dependencies**, as ACE inserts them: the folders on the op's paths
  are made first, a file an op needs is created (and written, when the op
  needs bytes — an overwrite, a fallocate, an mmap write: 32 KiB), a
  link's target is free, an attribute exists before it is removed, a name
  to fsync exists (made right before the fsync), and every descriptor is
  closed at the end.

Each workload is checked by the model (workloads/jlang/model.py) as it is
made: one that cannot run is a bug here, not a workload.  The order is
fixed: ``seq1()[n - 1]`` is ``jlang:seq1/n``.
"""

from __future__ import annotations

import itertools
import posixpath
from functools import cache

from harness.errors import CrashlabError
from workloads.jlang.lang import FALLOC_FLAGS, Op, Program
from workloads.jlang.model import execute

FILES, SECOND = ("foo", "A/foo"), ("bar", "A/bar")
FOLDERS = (".", "A", "B")
FALLOC_MODES = (
    "FALLOC_FL_ZERO_RANGE",
    "FALLOC_FL_KEEP_SIZE|FALLOC_FL_ZERO_RANGE",
    "FALLOC_FL_KEEP_SIZE|FALLOC_FL_PUNCH_HOLE",
    "FALLOC_FL_KEEP_SIZE",
    "0",
)
RANGES = ("append", "overlap_unaligned_start", "overlap_extend")
DRANGES = ("append", "overlap_start")
INITIAL = 32768  # what a file an op needs bytes of is given first
assert all(f in FALLOC_FLAGS for m in FALLOC_MODES for f in m.split("|") if f != "0")


def _pairs() -> list[tuple[str, str]]:
    return [(a, b) for a in FILES + SECOND for b in SECOND if a != b]


# the core ops: (op, parameters) in a fixed order
CORE: tuple[tuple[str, tuple[str, ...]], ...] = (
    *(("creat", (f,)) for f in FILES),
    ("mkdir", ("A",)),
    *(("falloc", (f, m, r)) for f, m, r in itertools.product(FILES, FALLOC_MODES, RANGES)),
    *(("write", (f, r)) for f, r in itertools.product(FILES, RANGES)),
    *(("dwrite", (f, r)) for f, r in itertools.product(FILES, DRANGES)),
    *(("mmapwrite", (f, r)) for f, r in itertools.product(FILES, DRANGES)),
    *(("link", p) for p in _pairs()),
    *(("symlink", p) for p in _pairs()),
    *(("rename", p) for p in _pairs()),
    ("rename", ("A", "B")),
    *(("unlink", (f,)) for f in FILES + SECOND),
    *(("remove", (f,)) for f in FILES + SECOND),
    *(("truncate", (f, t)) for f, t in itertools.product(FILES, ("aligned", "unaligned"))),
    *(("fsetxattr", (f,)) for f in FILES),
    *(("removexattr", (f,)) for f in FILES),
    *(("fdatasync", (f,)) for f in FILES),
)
SELF_PERSISTING = ("fdatasync", "mmapwrite")


def _parent(path: str) -> str:
    return posixpath.dirname(path) or "."


def _sibling(path: str) -> str:
    swap = {"foo": "bar", "bar": "foo", "A": "B", "B": "A"}
    head, name = posixpath.split(path)
    return posixpath.join(head, swap.get(name, name)) if path != "." else "."


def file_range(used: list[str]) -> list[str]:
    """Each used name, its sibling and its parent (ACE's range of used
    files), in a fixed order."""
    out: list[str] = []
    for u in used:
        for x in (u, _sibling(u), _parent(u)):
            if x not in out:
                out.append(x)
    return out


class Builder:
    """A workload's ops with ACE's dependencies put in before each."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.exists: dict[str, str] = {".": "dir"}
        self.open: set[str] = set()
        self.size: dict[str, int] = {}
        self.xattr: set[str] = set()

    def emit(self, name: str, *args: str | int) -> None:
        self.ops.append(Op(name, tuple(args)))

    def folder(self, path: str) -> None:
        if path not in self.exists:
            self.folder(_parent(path))
            self.emit("mkdir", path, "0777")
            self.exists[path] = "dir"

    def opened(self, path: str) -> None:
        """``path`` open (a folder: opendir; a file: created if need be)."""
        if path in FOLDERS:
            self.folder(path)
        self.folder(_parent(path))
        if self.exists.get(path) == "dir":
            if path not in self.open:
                self.emit("opendir", path, "0777")
        elif path not in self.open:
            self.emit("open", path, "O_CREAT|O_RDWR", "0777")
            self.exists[path] = "file"
            self.size.setdefault(path, 0)
        self.open.add(path)

    def with_bytes(self, path: str) -> None:
        self.opened(path)
        if not self.size.get(path):
            self.emit("write", path, 0, INITIAL)
            self.size[path] = INITIAL

    def closed(self, path: str) -> None:
        if path in self.open:
            self.emit("close", path)
            self.open.discard(path)

    def free(self, path: str) -> None:
        self.folder(_parent(path))
        if path in self.exists:
            self.closed(path)
            self.emit("unlink", path)
            del self.exists[path]


def _range(b: Builder, path: str, kind: str) -> tuple[int, int]:
    """ACE's (offset, length) of a write range on ``path``."""
    size = b.size.get(path, 0)
    if kind == "append":
        return size, INITIAL
    if kind == "overlap_start":
        return 0, 8192
    if kind == "overlap_unaligned_start":
        return 0, 5000
    return size - 2000, 5000  # overlap_extend


def _rename(b: Builder, old: str, new: str) -> None:
    """A closed ``old`` renamed to ``new`` (the folders of both first)."""
    b.folder(_parent(old))
    b.folder(_parent(new))
    b.opened(old)
    b.closed(old)
    b.emit("rename", old, new)
    for path in [p for p in b.exists if p == old or p.startswith(old + "/")]:
        b.exists[new + path[len(old) :]] = b.exists.pop(path)
        if path in b.size:
            b.size[new + path[len(old) :]] = b.size.pop(path)


def _core(b: Builder, op: str, args: tuple[str, ...]) -> list[str]:  # long: one branch per op
    """Emit the core op and its dependencies; the names it used."""
    first = args[0]
    if op == "creat":
        b.folder(_parent(first))
        b.emit("open", first, "O_CREAT|O_RDWR", "0777")
        b.exists[first], b.size[first] = "file", 0
        b.open.add(first)
    elif op == "mkdir":
        b.folder(first)
    elif op in ("write", "dwrite", "mmapwrite", "falloc"):
        kind = args[-1]
        if kind != "append" or op in ("falloc", "mmapwrite"):
            b.with_bytes(first)  # ACE gives a file bytes before these
        b.opened(first)
        off, length = _range(b, first, kind)
        if op == "falloc":
            b.emit("falloc", first, args[1], off, length)
            grows = "FALLOC_FL_KEEP_SIZE" not in args[1]
        else:
            b.emit(op, first, off, length)
            grows = True
        if grows:
            b.size[first] = max(b.size.get(first, 0), off + length)
    elif op == "link":
        b.folder(_parent(args[1]))  # ACE: the folders of both names first
        b.opened(first)
        b.free(args[1])
        b.emit("link", first, args[1])
        b.exists[args[1]] = "file"
    elif op == "symlink":
        b.free(args[1])
        b.emit("symlink", first, args[1])
        b.exists[args[1]] = "symlink"
    elif op == "rename":
        _rename(b, first, args[1])
    elif op in ("unlink", "remove"):
        b.opened(first)
        b.closed(first)
        b.emit(op, first)
        del b.exists[first]
    elif op == "truncate":
        b.with_bytes(first)
        b.emit("truncate", first, 0 if args[1] == "aligned" else 2500)
    elif op == "fsetxattr":
        b.opened(first)
        b.emit("fsetxattr", first)
    elif op == "removexattr":
        b.opened(first)
        b.emit("fsetxattr", first)
        b.emit("removexattr", first)
    elif op == "fdatasync":
        b.opened(first)
        b.emit("fdatasync", first)
    return [a for a in args if a in FILES + SECOND + ("A", "B")]


def _persist(b: Builder, how: str) -> None:
    if how == "sync":
        b.emit("sync")
    else:
        if b.exists.get(how) == "symlink":
            return
        b.opened(how)
        b.emit("fsync", how)


def workload(op: str, args: tuple[str, ...], how: str) -> Program:
    """One seq-1 workload: the core op, then ``how`` (a name to fsync,
    "sync", or "" for an op that is its own persistence), a checkpoint, and
    every descriptor closed."""
    b = Builder()
    _core(b, op, args)
    if how:
        _persist(b, how)
    b.emit("checkpoint", 1)
    for path in sorted(b.open):
        b.emit("close", path)
    return Program((), tuple(b.ops))


def persistence_choices(op: str, args: tuple[str, ...]) -> list[str]:
    """What may follow the core op: fsync of each name in the range of the
    names it used, or sync; nothing for an op that persists itself."""
    if op in SELF_PERSISTING:
        return [""]
    used = [a for a in args if a in FILES + SECOND + ("A", "B")]
    return [*file_range(used), "sync"]


@cache
def seq1() -> tuple[Program, ...]:
    """The seq-1 suite, in its fixed order (each checked by the model)."""
    out = []
    for op, args in CORE:
        for how in persistence_choices(op, args):
            program = workload(op, args, how)
            if how and _fsync_of_symlink(op, args, how):
                continue  # a symlink cannot be opened to fsync (ACE would follow it)
            execute(program)  # a CrashlabError here is a bug of this generator
            out.append(program)
    return tuple(out)


def _fsync_of_symlink(op: str, args: tuple[str, ...], how: str) -> bool:
    return op == "symlink" and how == args[1]


SUITES = {"seq1": seq1}


def suite_program(suite: str, n: int) -> Program:
    """Workload ``n`` (from 1) of ``suite``."""
    if suite not in SUITES:
        raise CrashlabError(f"unknown j-lang suite {suite!r} (choose from {', '.join(SUITES)})")
    programs = SUITES[suite]()
    if not 1 <= n <= len(programs):
        raise CrashlabError(f"jlang:{suite}/{n}: the suite has workloads 1..{len(programs)}")
    return programs[n - 1]
