"""REC-CRASHSAFE and REC-MINIMAL: DHL recovery survives a crash of its own,
and writes only what the thesis says it changes.

DHL recovery is run on a copy of a crash image through a capturing I/O
layer (:class:`dhl.binding.CaptureIO`, the engine's pluggable ``struct
dhl_io``), which records every page write and sync it issues, in order.
Its crash states are then enumerated exactly like a recorded run's: the
writes between two syncs form an epoch; a state is every write of the
epochs before epoch E plus a subset of epoch E's writes (every subset when
there are few, else every prefix, every single-write drop and a seeded
sample, up to ``limit`` states).  Each state is recovered again (a plain
open) and must reach the same committed state as the uninterrupted
recovery: the same FCC and the same content digest.

REC-MINIMAL judges the same captured writes against the pages they
overwrote: each must be a page holding a slot header of an aborted
transaction (TID above the FCC recovery chose) and may change only the TID
and commit fields of such headers (and the thesis's in-place commit
record): the thesis's "recovery ... does not copy any record but changes a
single metadata" (§3.2).

The sweep runs both on a sample of crash states (it costs one recovery per
recovery crash state); ``recovery_verdicts`` is the entry point.
"""

from __future__ import annotations

import itertools
import math
import random
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from checkers.dhl_facts import NOLOG_FLAG
from checkers.dhl_format import THESIS_FLAG, recovery_may_change
from checkers.verdict import Verdict, failed, passed, skipped
from dhl.binding import CaptureIO, Database, DhlError, IoOp, MemIO
from harness.materialize import sparse_copy

DEFAULT_LIMIT = 64
EXHAUSTIVE_MAX = 10  # an epoch with at most this many writes: every subset


@dataclass(frozen=True)
class Outcome:
    """What opening (and so recovering) one image gave."""

    fcc: int | None
    digest: str | None
    error: str | None = None

    def describe(self) -> str:
        if self.error is not None:
            return f"open failed ({self.error})"
        return f"FCC {self.fcc}, content {self.digest[:12] if self.digest else '?'}"


@dataclass(frozen=True)
class RecoveryState:
    """One crash state of a recovery: the writes (indices into the write
    list) that reached the disk."""

    epoch: int
    kept: tuple[int, ...]
    dropped: tuple[int, ...]


def _is_nolog(image: Path) -> bool:
    """Whether ``image`` is a NOLOG database (its header flag; False when
    it does not open: recovery says why)."""
    try:
        with Database(image, "auto", readonly=True) as db:
            return bool(db.info().flags & NOLOG_FLAG)
    except DhlError:
        return False


def capture_recovery(
    image: Path, workdir: Path, *, blockdev: bool = False
) -> tuple[list[IoOp], str | None]:
    """Recover a copy of ``image`` through :class:`CaptureIO` (a block
    device's when ``blockdev``): the writes and syncs recovery issued, and
    the open error if it failed."""
    copy = workdir / "capture.db"
    sparse_copy(image, copy)
    try:
        with CaptureIO(copy, blockdev=blockdev) as io:
            try:
                Database(copy, "auto", io=io).close()
            except DhlError as e:
                return io.ops, str(e)
            return io.ops, None
    finally:
        copy.unlink(missing_ok=True)


def outcome(path: Path) -> Outcome:
    """Open ``path`` (recovering it) and read its FCC and content digest."""
    try:
        with Database(path, "auto") as db:
            return Outcome(db.fcc, db.digest())
    except DhlError as e:
        return Outcome(None, None, str(e))


# The copies that crashed recovery's outcomes are read from, reused (a fresh
# megabyte buffer per crash state costs more in page faults than the open).
_STATE = MemIO()


def outcome_of(
    label: Path,
    base: memoryview,
    writes: Sequence[IoOp],
    which: Sequence[int],
    used: int | None = None,
) -> Outcome:
    """:func:`outcome` of a file named ``label`` holding ``base`` with the
    writes ``which`` of ``writes`` on it, opened in memory: the engine sees a
    regular file of that size (not a block device) that may grow, as on a
    scratch file, and names it ``label``.  ``used``: the bytes of ``base``
    past it are zero (not copied: a raw device's image is mostly zero)."""
    _STATE.load(base, cap=2 * len(base), used=used)
    for i in which:
        _STATE.write(writes[i].offset, writes[i].data)
    try:
        with Database(label, "auto", io=_STATE) as db:
            return Outcome(db.fcc, db.digest())
    except DhlError as e:
        return Outcome(None, None, str(e))


def epochs(ops: Sequence[IoOp]) -> list[list[int]]:
    """The indices of the writes of ``ops`` grouped by the syncs between them."""
    out: list[list[int]] = [[]]
    writes = 0
    for op in ops:
        if op.kind == "sync":
            if out[-1]:
                out.append([])
            continue
        out[-1].append(writes)
        writes += 1
    return [e for e in out if e]


def recovery_states(ops: Sequence[IoOp], limit: int, seed: int = 0) -> Iterator[RecoveryState]:
    """The crash states of a recovery's writes, at most ``limit`` of them,
    deterministic for the same writes and seed.  The uninterrupted end state
    (every write) is not among them: it is the reference."""
    n = 0
    eps = epochs(ops)
    done: list[int] = []
    for e, idx in enumerate(eps):
        for kept in _subsets(idx, seed + e):
            if len(kept) == len(idx):
                continue  # = the next epoch's empty subset, or the reference itself
            if n >= limit:
                return
            yield RecoveryState(e, tuple(done + list(kept)), tuple(i for i in idx if i not in kept))
            n += 1
        done += idx


def _subsets(idx: list[int], seed: int) -> Iterator[tuple[int, ...]]:
    """Proper subsets of one epoch's writes (order kept), stratified by
    size: sizes 0..k-1 take turns, so that a limit cuts every size alike
    (not the small subsets first).  Within a size: every combination in a
    seeded order when they are few, seeded distinct draws otherwise."""
    k = len(idx)
    rnd = random.Random(seed)
    per_size = [_of_size(idx, r, rnd) for r in range(k)]
    while per_size:
        for it in list(per_size):
            s = next(it, None)
            if s is None:
                per_size.remove(it)
            else:
                yield s


def _of_size(idx: list[int], r: int, rnd: random.Random) -> Iterator[tuple[int, ...]]:
    """The subsets of ``idx`` with ``r`` elements: all in a seeded order
    when there are at most 2**EXHAUSTIVE_MAX, else distinct seeded draws."""
    if math.comb(len(idx), r) <= 1 << EXHAUSTIVE_MAX:
        every = list(itertools.combinations(idx, r))
        rnd.shuffle(every)
        yield from every
        return
    seen: set[tuple[int, ...]] = set()
    while True:  # the caller's limit ends it
        s = tuple(sorted(rnd.sample(idx, r)))
        if s not in seen:
            seen.add(s)
            yield s


def _pages(writes: Sequence[IoOp], which: Sequence[int], page_size: int) -> str:
    return ", ".join(f"page {writes[i].offset // page_size}" for i in which) or "none"


IDS = ("REC-CRASHSAFE", "REC-MINIMAL")  # what recovery_verdicts judges, in this order


def crashsafe_verdict(
    image_path: Path,
    workdir: Path,
    limit: int = DEFAULT_LIMIT,
    *,
    ops: Sequence[IoOp] | None = None,
    blockdev: bool = False,
) -> Verdict:
    """REC-CRASHSAFE alone (see :func:`recovery_verdicts`)."""
    return recovery_verdicts(image_path, workdir, limit, ops=ops, blockdev=blockdev)[0]


def recovery_verdicts(
    image_path: Path,
    workdir: Path,
    limit: int = DEFAULT_LIMIT,
    *,
    ops: Sequence[IoOp] | None = None,
    blockdev: bool = False,
) -> list[Verdict]:
    """REC-CRASHSAFE and REC-MINIMAL for one crash image, from one capture
    of recovery's writes: crash DHL recovery at up to ``limit`` points of
    its own writes and recover again; and judge each write against the page
    it overwrote.  ``image_path`` is not modified; scratch files go to
    ``workdir`` and are removed.  ``blockdev``: the image is a block
    device's (the SUT ran on the raw device), so recovery runs as on a
    block device.

    ``ops`` replaces the captured recovery writes (tests use it to play the
    writes of a deliberately broken recovery)."""
    try:
        return _recovery_verdicts(image_path, workdir, limit, ops, blockdev)
    except DhlError as e:  # a broken image gets a verdict, never an exception
        why = f"the crash image cannot be opened ({e}): DB-OPEN judges it"
        return [skipped(i, why) for i in IDS]


def _recovery_verdicts(
    image_path: Path, workdir: Path, limit: int, ops: Sequence[IoOp] | None, blockdev: bool
) -> list[Verdict]:
    if _is_nolog(image_path):
        return [skipped(i, "NOLOG database: no recovery") for i in IDS]
    work = workdir / "rec-crashsafe"
    work.mkdir(parents=True, exist_ok=True)
    try:
        if ops is None:
            ops, err = capture_recovery(image_path, work, blockdev=blockdev)
            if err is not None:
                return [skipped(i, f"recovery itself fails: {err}") for i in IDS]
        writes = [op for op in ops if op.kind == "write"]
        if not writes:
            return [
                passed(
                    "REC-CRASHSAFE", "recovery wrote nothing: it cannot be interrupted", actual=0
                ),
                passed("REC-MINIMAL", "not exercised: recovery wrote nothing", exercised=False),
            ]
        with Database(image_path, "auto", readonly=True) as db:
            info = db.info()
        data = image_path.read_bytes()
        used = len(data.rstrip(b"\0"))
        base = memoryview(data)
        ref = outcome_of(work / "full.db", base, writes, range(len(writes)), used)
        crash = _crash_states(work, base, ops, writes, used, ref, limit, info.page_size)
        if ref.fcc is None:
            return [crash, skipped("REC-MINIMAL", f"recovery's own result: {ref.describe()}")]
        thesis = bool(info.flags & THESIS_FLAG)
        return [crash, minimal_verdict(base, writes, info.page_size, info.ntrees, ref.fcc, thesis)]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _crash_states(
    work: Path,
    base: memoryview,
    ops: Sequence[IoOp],
    writes: Sequence[IoOp],
    used: int,
    ref: Outcome,
    limit: int,
    ps: int,
) -> Verdict:
    """REC-CRASHSAFE: every crash state of recovery's writes (up to
    ``limit``) recovers to ``ref``, the uninterrupted recovery's outcome."""
    n = 0
    state = work / "state.db"
    for st in recovery_states(ops, limit):
        n += 1
        got = outcome_of(state, base, writes, st.kept, used)
        if got != ref:
            return failed(
                "REC-CRASHSAFE",
                f"recovery crashed in its epoch {st.epoch} with writes "
                f"[{_pages(writes, st.kept, ps)}] on disk and "
                f"[{_pages(writes, st.dropped, ps)}] lost; recovering that again gives "
                f"{got.describe()} instead of {ref.describe()}",
                expected=ref.describe(),
                actual=got.describe(),
                implicated=[
                    f"recovery write {i} (page {writes[i].offset // ps})" for i in st.dropped
                ],
            )
    return passed(
        "REC-CRASHSAFE",
        f"{n} crash states of recovery's {len(writes)} writes all recover to {ref.describe()}",
        actual=n,
    )


def minimal_verdict(
    base: bytes | memoryview,
    writes: Sequence[IoOp],
    ps: int,
    ntrees: int,
    fcc: int,
    thesis: bool = False,
) -> Verdict:
    """REC-MINIMAL, the thesis's claim that recovery "does not copy any
    record but changes a single metadata" (§3.2), judged from recovery's
    own writes on the crash image ``base``: each write is one page that
    held a slot header above ``fcc`` (the FCC recovery chose: an aborted
    transaction's), and it changed only what ``recovery_may_change``
    allows there (those headers' TID and commit fields; the thesis's
    in-place commit record)."""
    now: dict[int, bytes] = {}  # the pages as recovery's earlier writes left them
    problems: list[str] = []
    for i, w in enumerate(writes):
        p, off = divmod(w.offset, ps)
        if off or len(w.data) != ps:
            problems.append(f"write {i} is not one whole page ({len(w.data)} bytes at {w.offset})")
            continue
        old = now.get(p)
        if old is None:
            old = bytes(base[p * ps : (p + 1) * ps]).ljust(ps, b"\0")
        allowed = recovery_may_change(old, p, ntrees, fcc, thesis=thesis)
        if not allowed:
            problems.append(f"page {p} holds no slot header above FCC {fcc}, yet recovery wrote it")
        elif outside := _changed_outside(old, w.data, allowed):
            problems.append(
                f"page {p}: bytes {outside} changed, outside "
                + ", ".join(what for _, _, what in allowed)
            )
        now[p] = bytes(w.data)
    if problems:
        return failed(
            "REC-MINIMAL",
            f"recovery to FCC {fcc} changed more than the aborted transactions' slot-header "
            f"metadata: {'; '.join(problems[:4])}" + (" ..." if len(problems) > 4 else ""),
            expected="only TID and commit fields of slot headers above the FCC",
            actual=len(problems),
        )
    return passed(
        "REC-MINIMAL",
        f"recovery's {len(writes)} writes ({len(now)} pages) changed only the TID and "
        f"commit fields of slot headers above FCC {fcc}"
        + (" and the header page's commit record" if thesis else ""),
        actual=len(now),
    )


def _changed_outside(old: bytes, new: bytes, allowed: Sequence[tuple[int, int, str]]) -> str:
    """The byte ranges (``a-b, ...``) where ``new`` differs from ``old``
    outside the ``allowed`` ranges; empty when there is none."""
    ok = bytearray(len(old))
    for a, b, _ in allowed:
        ok[a:b] = b"\1" * (b - a)
    bad = [j for j in range(len(old)) if old[j] != new[j] and not ok[j]]
    runs: list[list[int]] = []
    for j in bad:
        if runs and runs[-1][1] == j - 1:
            runs[-1][1] = j
        else:
            runs.append([j, j])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in runs[:6])
