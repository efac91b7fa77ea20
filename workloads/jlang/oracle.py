"""The FS-* oracle of a j-lang run: which facts a crash state must show and
what values each may have (:class:`JlangOracle`).

A crash state is judged against (acked K, begun B) from its marks
(workloads/runner/jlang.c: ``txn-ack:K`` after checkpoint K, ``txn-begin:K``
before the first op after checkpoint K-1).  Every fact (model.py) made by
an op before checkpoint K is required, on the file system's rules
(rules.py).  Ops after the fact may have reached the disk too, so a fact
holds when its value in the recovered tree is its value in *some* snapshot
from the fact's op to the end of segment B (the *window*).  A file's bytes
are judged per 4 KiB block (a write in flight may land in part): each
block as in some snapshot of the window, or zeros past the smallest size
the window had; its size as in some snapshot.  With nothing acknowledged
but the run begun, the setup's sync is (``setup-done`` precedes
``txn-begin:1``).
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.jlang.lang import Program
from workloads.jlang.model import BLOCK, Fact, Run, Snapshot, execute
from workloads.jlang.rules import covered

Entry = tuple[str, str] | None  # (kind, link target or "") or nothing


def entry_of(snap: Snapshot, path: str) -> Entry:
    ino = snap.paths.get(path)
    if ino is None:
        return None
    return snap.kinds[ino], snap.targets.get(ino, "")


def data_of(snap: Snapshot, path: str) -> bytes | None:
    ino = snap.paths.get(path)
    return snap.data.get(ino) if ino is not None else None


def block(data: bytes, i: int) -> bytes:
    piece = data[i * BLOCK : (i + 1) * BLOCK]
    return piece + bytes(BLOCK - len(piece))


@dataclass(frozen=True)
class Required:
    """A fact to judge and the snapshots its value may come from."""

    fact: Fact
    window: tuple[Snapshot, ...]
    made_by: str  # the op, as text with its line, for explanations


class JlangOracle:
    """The oracle of one program on one file system (see the module)."""

    def __init__(self, program: Program, fs: str) -> None:
        self.program = program
        self.fs = fs
        self.run: Run = execute(program)
        self.rules = covered(fs)
        self.txns = len(self.run.checkpoints)

    def window_end(self, begun: int) -> int:
        """The snapshot index at the end of segment ``begun``."""
        if begun == 0:
            return self.run.setup_end + 1
        if begun <= self.txns:
            return self.run.checkpoints[begun - 1] + 1
        return len(self.run.ops)

    def required(self, acked: int, begun: int) -> list[Required]:
        """The facts a state at (acked, begun) must show, the latest of each
        kind per path, with their windows."""
        if acked >= 1:
            limit = self.run.checkpoints[min(acked, self.txns) - 1]
        elif begun >= 1:
            limit = self.run.setup_end + 1
        else:
            return []
        end = self.window_end(max(begun, acked))
        latest: dict[tuple[object, ...], Fact] = {}
        for f in self.run.facts:
            if f.pos < limit and f.op in self.rules.get(f.invariant, ()):
                latest[(f.invariant, f.kind, f.path, f.span)] = f
        out = []
        for f in latest.values():
            op = self.run.ops[f.pos]
            where = f"line {op.line}" if op.line else "crashlab's setup sync"
            out.append(
                Required(f, self.run.snapshots[f.pos + 1 : end + 1], f"{op.text()} ({where})")
            )
        return out


def allowed_entries(req: Required) -> set[Entry]:
    return {entry_of(s, req.fact.path) for s in req.window}


def content_problem(req: Required, data: bytes) -> str | None:
    """Why recovered bytes ``data`` of the fact's file are none the window
    allows, or None."""
    versions = [d for d in (data_of(s, req.fact.path) for s in req.window) if d is not None]
    if not versions or any(_unpromised_bytes_of(d, data) for d in _replacements(req)):
        return None
    span = req.fact.span
    if span is None:
        sizes = sorted({len(d) for d in versions})
        if len(data) not in sizes:
            return f"size {len(data)}, not {' or '.join(map(str, sizes))}"
        lo, hi = 0, -(-len(data) // BLOCK)
    else:
        lo, hi = span[0] // BLOCK, -(-span[1] // BLOCK)
    smallest = min(len(d) for d in versions)
    for i in range(lo, hi):
        got = block(data, i)
        if any(block(d, i) == got for d in versions):
            continue
        if i * BLOCK >= smallest and got == bytes(BLOCK):
            continue
        return f"bytes {i * BLOCK}..{(i + 1) * BLOCK - 1} as in no version it had"
    return None


def _replacements(req: Required) -> list[bytes]:
    """The bytes of each other file that took the fact's name in the window
    (renamed over it): the fact was about the file its op saw, not these."""
    first = req.window[0].paths.get(req.fact.path)
    out = []
    for s in req.window:
        ino = s.paths.get(req.fact.path)
        if ino is not None and ino != first and s.data.get(ino) is not None:
            out.append(s.data[ino])
    return out


def _unpromised_bytes_of(version: bytes, data: bytes) -> bool:
    """Whether ``data`` may be what a crash leaves of ``version``, a file no
    fact of this one promised: short of it (even empty: delayed allocation),
    each block as written or zeros (an unwritten extent)."""
    if len(data) > len(version):
        return False
    for i in range(-(-len(data) // BLOCK)):
        got = data[i * BLOCK : (i + 1) * BLOCK]
        if got != version[i * BLOCK : i * BLOCK + len(got)] and any(got):
            return False
    return True


def links_allowed(req: Required, seen: tuple[str, ...]) -> set[tuple[int, frozenset[str]]]:
    """(link count, other names among ``seen``) in each window snapshot."""
    out = set()
    for s in req.window:
        ino = s.paths.get(req.fact.path)
        if ino is not None and s.kinds[ino] == "file":
            names = s.names(ino)
            out.add((len(names), frozenset(n for n in names if n != req.fact.path and n in seen)))
    return out


def xattrs_allowed(req: Required) -> set[tuple[tuple[str, bytes], ...]]:
    out = set()
    for s in req.window:
        ino = s.paths.get(req.fact.path)
        if ino is not None and s.kinds[ino] == "file":
            out.add(s.xattrs[ino])
    return out
