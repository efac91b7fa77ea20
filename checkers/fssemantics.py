"""The FS-* checker: a j-lang run's recovered tree against what its
persistence points made durable (workloads/jlang/oracle.py), on the file
system's rules (workloads/jlang/rules.py).  It runs in the worker, as every
built-in engine's checker does (checkers/engines.py, engine ``jlang``).

:meth:`FsChecker.examine` reads the recovered workload folder without
following anything (``os.lstat``, ``os.readlink``, ``os.listxattr`` with
``follow_symlinks=False``): each entry's kind, link target, bytes, inode
number, link count and ``user.*`` extended attributes.  The recovered tree
is hostile: at most MAX_ENTRIES entries and MAX_FILE bytes of a file are
read.

Link counts, inode identity (FS-LINK) and extended attributes (FS-XATTR)
are only as good as the extraction of the recovered file system (a hard
link extracted as a copy has a link count of 1).  The runner leaves a
control beside the workload folder, synced before ``setup-done``
(workloads/runner/jlang.c, PROBE_*): a file with a second hard link and an
extended attribute.  Where the recovered tree shows the two names as two
inodes, or the attribute gone, FS-LINK or FS-XATTR is skipped saying so,
never failed.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.invariants import FS_LEVEL
from checkers.verdict import Verdict, failed, passed, skipped
from workloads.jlang.oracle import (
    Entry,
    JlangOracle,
    Required,
    allowed_entries,
    content_problem,
    links_allowed,
    xattrs_allowed,
)

MAX_ENTRIES = 10_000
MAX_FILE = 4 << 20
PROBE, PROBE_LINK = ".crashlab-probe", ".crashlab-probe-link"  # runner.c's PROBE_*
PROBE_XATTR = ("user.crashlab", b"probe")
EXPLAIN_MAX = 3  # facts named in one verdict


@dataclass(frozen=True)
class Node:
    kind: str  # file, dir, symlink, other
    target: str = ""
    data: bytes | None = None  # None: not read (too large)
    ino: int = 0
    nlink: int = 0
    xattrs: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class TreeFacts:
    """The recovered workload folder: relative path -> Node ("." the folder)."""

    nodes: dict[str, Node] = field(default_factory=dict)
    links_kept: bool | None = None  # the probe's verdict (None: no probe)
    xattrs_kept: bool | None = None
    error: str = ""  # the folder could not be read at all

    def entry(self, path: str) -> Entry:
        node = self.nodes.get(path)
        return None if node is None else (node.kind, node.target)


def _xattrs(path: Path) -> tuple[tuple[str, bytes], ...]:
    try:
        names = os.listxattr(path, follow_symlinks=False)
        return tuple(
            sorted(
                (n, os.getxattr(path, n, follow_symlinks=False))
                for n in names
                if n.startswith("user.")
            )
        )
    except OSError:
        return ()


def _node(path: Path) -> Node:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return Node("symlink", os.readlink(path), ino=st.st_ino, nlink=st.st_nlink)
    if stat.S_ISDIR(st.st_mode):
        return Node("dir", ino=st.st_ino, nlink=st.st_nlink)
    if not stat.S_ISREG(st.st_mode):
        return Node("other", ino=st.st_ino, nlink=st.st_nlink)
    data = None
    if st.st_size <= MAX_FILE:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            data = os.read(fd, MAX_FILE + 1)[:MAX_FILE]
        finally:
            os.close(fd)
    return Node("file", data=data, ino=st.st_ino, nlink=st.st_nlink, xattrs=_xattrs(path))


def read_tree(root: Path) -> TreeFacts:
    """Every entry under ``root`` (see the module's comment)."""
    if not root.is_dir() or root.is_symlink():
        return TreeFacts(error=f"the workload folder {root.name!r} is not a folder")
    nodes: dict[str, Node] = {".": _node(root)}
    todo = ["."]
    while todo:
        rel = todo.pop()
        for name in sorted(os.listdir(root / rel)):
            sub = name if rel == "." else f"{rel}/{name}"
            if len(nodes) >= MAX_ENTRIES:
                return TreeFacts(nodes, error=f"more than {MAX_ENTRIES} entries")
            nodes[sub] = _node(root / sub)
            if nodes[sub].kind == "dir":
                todo.append(sub)
    return TreeFacts(nodes, *_probe(root.parent))


def _probe(top: Path) -> tuple[bool | None, bool | None]:
    """Whether the extraction kept the control's hard link and attribute."""
    try:
        a, b = os.lstat(top / PROBE), os.lstat(top / PROBE_LINK)
    except OSError:
        return None, None
    links = a.st_ino == b.st_ino and a.st_nlink == 2
    return links, dict(_xattrs(top / PROBE)).get(PROBE_XATTR[0]) == PROBE_XATTR[1]


def _judge_fact(req: Required, tree: TreeFacts, seen: tuple[str, ...]) -> str | None:
    """Why the fact does not hold (None: it holds, or the recovered tree
    lacks what it is about and an entry fact judges that)."""
    f, node = req.fact, tree.nodes.get(req.fact.path)
    if f.kind == "entry":
        allowed = allowed_entries(req)
        got = tree.entry(f.path)
        return (
            None
            if got in allowed
            else f"is {_show(got)}, not {' or '.join(sorted(map(_show, allowed)))}"
        )
    if node is None or node.kind != "file":
        return None
    if f.kind == "content":
        if node.data is None:
            return "is too large to read"
        return content_problem(req, node.data)
    if f.kind == "links":
        others = frozenset(
            p for p in seen if p != f.path and p in tree.nodes and tree.nodes[p].ino == node.ino
        )
        got_links = (node.nlink, others)
        allowed_links = links_allowed(req, seen)
        if not allowed_links or got_links in allowed_links:
            return None
        want = sorted((n, sorted(o)) for n, o in allowed_links)
        return f"has {node.nlink} links {sorted(others)}, not {want}"
    allowed_x = xattrs_allowed(req)
    if not allowed_x or node.xattrs in allowed_x:
        return None
    return f"has attributes {dict(node.xattrs)}, not {[dict(x) for x in allowed_x]}"


def _show(entry: Entry) -> str:
    if entry is None:
        return "absent"
    return f"a symlink to {entry[1]!r}" if entry[0] == "symlink" else f"a {entry[0]}"


def _unjudgeable(inv: str, tree: TreeFacts) -> str:
    if inv == "FS-LINK" and not tree.links_kept:
        return "the extraction does not keep hard links (the control's two names are two inodes)"
    if inv == "FS-XATTR" and not tree.xattrs_kept:
        return "the extraction does not keep extended attributes (the control lost its own)"
    return ""


def judge_tree(tree: TreeFacts, oracle: JlangOracle, acked: int, begun: int) -> list[Verdict]:
    """One verdict per FS-* invariant (FsChecker.IDS)."""
    reqs = oracle.required(acked, begun)
    out = []
    for inv in FS_LEVEL:
        mine = [r for r in reqs if r.fact.invariant == inv]
        if tree.error:
            out.append(failed(inv, tree.error) if mine else skipped(inv, tree.error))
            continue
        if not mine:
            out.append(passed(inv, "no persistence point promised any", exercised=False))
            continue
        why = _unjudgeable(inv, tree)
        if why:
            out.append(skipped(inv, why))
            continue
        bad = []
        for r in mine:
            problem = _judge_fact(r, tree, oracle.run.seen)
            if problem:
                bad.append(f"{r.fact.path} {problem} (after {r.made_by}, acked {acked})")
        if bad:
            more = f"; and {len(bad) - EXPLAIN_MAX} more" if len(bad) > EXPLAIN_MAX else ""
            out.append(
                failed(
                    inv,
                    "; ".join(bad[:EXPLAIN_MAX]) + more,
                    implicated=sorted({b.split(" ")[0] for b in bad}),
                )
            )
        else:
            out.append(passed(inv, f"{len(mine)} facts held"))
    return out


class FsChecker:
    """The engine checker of ``jlang`` (checkers/protocol.py): ``db`` is
    the recovered workload folder."""

    IDS = FS_LEVEL
    content_key_of = None
    examine_image = None
    run_checks = None

    def content_key(self, files: Path, db_name: str) -> bytes:
        return _digest(read_tree(files / db_name))

    def examine(self, db: Path, *, blockdev: bool = False, vfs: str = "") -> TreeFacts:
        return read_tree(db)

    def refused(self, why: str) -> TreeFacts:
        return TreeFacts(error=why)

    def judge(
        self,
        facts: TreeFacts,
        oracle: Any,
        acked: int,
        begun: int,
        *,
        run_facts: object = None,  # noqa: ANN401
    ) -> list[Verdict]:
        assert isinstance(oracle, JlangOracle)
        return judge_tree(facts, oracle, acked, begun)

    def native_examiner(self, durable: Path) -> None:
        return None


def _digest(tree: TreeFacts) -> bytes:
    h = hashlib.sha256(repr((tree.links_kept, tree.xattrs_kept, tree.error)).encode())
    for path, node in sorted(tree.nodes.items()):
        h.update(repr((path, node.kind, node.target, node.nlink, node.xattrs)).encode())
        h.update(hashlib.sha256(node.data or b"").digest())
    inos: dict[int, list[str]] = {}
    for path, node in tree.nodes.items():
        inos.setdefault(node.ino, []).append(path)
    h.update(repr(sorted(sorted(v) for v in inos.values())).encode())
    return h.digest()


CHECKER = FsChecker()
