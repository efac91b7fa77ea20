"""DHL checkers on images and traces built with the real engine: every
invariant passes on correct states, and each state built to break one
invariant makes the checker report that ID (plus the IDs that necessarily
fail with it, listed in each test).

States are made from a real DHL workload whose page writes and syncs are
captured through the binding's CaptureIO; synthetic logs are written with
harness.logformat.LogWriter.  Byte poking uses the slot-header layout of
dhl/include/dhl.h (slot s at byte 12·s, TID in its first 4 bytes; a record is
an 8-byte key, 2-byte length, value)."""

from __future__ import annotations

import os
import random
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from checkers import dhl as ck
from checkers import dhl_trace as tr
from checkers.dhl_examine import examine_after, examine_before
from checkers.dhl_facts import After, Before, DhlFacts
from checkers.dhl_judge import AFTER_IDS, judge_count, judge_mono, judge_rollback
from checkers.recovery import crashsafe_verdict
from dhl.binding import CaptureIO, Database, IoOp
from harness.filetrace import BlockMap, FileTrace
from harness.logformat import LogWriter

PS = 512
SLOT = 12  # DHL_SLOT_SIZE


@dataclass
class Run:
    base: Path
    ops: list[IoOp]
    begin: list[int]  # op index where txn k began (k = 1..n at [k-1])
    ack: list[int]  # op index after txn k's commit returned
    digests: list[str]  # 0 = base state
    mode: str


def record(tmp: Path, mode: str, ntx: int = 8, seed: int = 1) -> Run:
    """Warm up (not captured), then ntx transactions of 2-5 random
    inserts/updates/deletes over 2 trees of 512-byte pages (splits happen)."""
    rnd = random.Random(seed)
    base = tmp / f"base-{mode}.db"
    model: dict[tuple[int, int], bytes] = {}
    with Database(base, mode, create=True, truncate=True, page_size=PS, ntrees=2) as db:
        for k in range(50):
            v = bytes([k]) * rnd.randint(20, 60)
            db.insert(k % 2, k * 10, v)
            model[(k % 2, k * 10)] = v
        digests = [db.digest()]
    work = tmp / f"work-{mode}.db"
    shutil.copy(base, work)
    begin, ack = [], []
    with CaptureIO(work) as io, Database(work, mode, io=io) as db:
        for _ in range(ntx):
            begin.append(len(io.ops))
            db.begin()
            for _ in range(rnd.randint(2, 5)):
                t, key = rnd.randrange(2), rnd.randrange(700)
                v = bytes([rnd.randrange(256)]) * rnd.randint(20, 90)
                if (t, key) not in model:
                    db.insert(t, key, v)
                    model[(t, key)] = v
                elif rnd.random() < 0.6:
                    db.update(t, key, v)
                    model[(t, key)] = v
                else:
                    db.delete(t, key)
                    del model[(t, key)]
            db.commit()
            ack.append(len(io.ops))
            digests.append(db.digest())
        ops = list(io.ops)
    return Run(base, ops, begin, ack, digests, mode)


def image(run: Run, out: Path, upto: int, skip: set[int] = frozenset()) -> Path:  # type: ignore[assignment]  # read-only default
    """base + the writes among ops[:upto] except those in ``skip``."""
    shutil.copy(run.base, out)
    fd = os.open(out, os.O_WRONLY)
    for i, op in enumerate(run.ops[:upto]):
        if op.kind == "write" and i not in skip:
            os.pwrite(fd, op.data, op.offset)
    os.close(fd)
    return out


def window(run: Run, upto: int) -> tuple[int, int]:
    acked = sum(1 for a in run.ack if a <= upto)
    begun = sum(1 for b in run.begin if b < upto) if upto else 0
    return acked, max(acked, begun)


def fails(vs: list) -> set[str]:  # noqa: ANN001
    return {v.invariant for v in vs if v.failed}


def judge_image(run: Run, path: Path, acked: int, begun: int) -> list:  # noqa: ANN001
    return ck.judge(ck.examine(path), run.digests, acked, begun)


def poke32(path: Path, off: int, value: int) -> None:
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(struct.pack("<I", value))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    tmp = tmp_path_factory.mktemp("dhlruns")
    return {m: record(tmp, m) for m in ("tc", "cc", "tc_opt", "cc_opt", "nolog")}


# --- correct states pass everything ----------------------------------------------


@pytest.mark.parametrize("mode", ["tc", "cc", "tc_opt", "cc_opt"])
def test_every_prefix_and_last_epoch_subset_passes(
    runs: dict[str, Run], mode: str, tmp_path: Path
) -> None:
    run = runs[mode]
    n = 0
    for upto in range(len(run.ops) + 1):
        if upto and run.ops[upto - 1].kind == "sync":
            continue
        vs = judge_image(run, image(run, tmp_path / "s.db", upto), *window(run, upto))
        assert not fails(vs), (upto, [v.explanation for v in vs if v.failed])
        assert {v.invariant for v in vs} >= {
            "DHL-T1",
            "DHL-READ",
            "DHL-INV",
            "CC-COUNT",
            "CC-ROLLBACK",
            "REC-IDEMPOTENT",
            "DB-ATOMIC",
        }
        n += 1
    # every subset of the last transaction's writes that a crash can leave:
    # any subset of one epoch (CC modes: the whole transaction); in TC modes
    # a write after the ordering sync only with every write before it
    lo, hi = run.begin[-1], run.ack[-1]
    writes = [i for i in range(lo, hi) if run.ops[i].kind == "write"]
    epoch_of = {w: sum(run.ops[j].kind == "sync" for j in range(lo, w)) for w in writes}
    judged = 0
    for mask in range(1 << len(writes)):
        skip = {w for j, w in enumerate(writes) if mask >> j & 1}
        kept_epochs = {epoch_of[w] for w in writes if w not in skip}
        if any(epoch_of[w] < e for w in skip for e in kept_epochs):
            continue  # a write after a sync persisted, one before it did not: no crash state
        vs = judge_image(
            run, image(run, tmp_path / "s.db", hi, skip), len(run.ack) - 1, len(run.ack)
        )
        assert not fails(vs), (mask, [v.explanation for v in vs if v.failed])
        judged += 1
    assert judged >= (2 ** len(writes) if mode in ("cc", "cc_opt") else len(writes))
    assert n > 20


def test_cc_short_count_is_rolled_back(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["cc"]
    k = len(run.ack) - 1
    data = [
        i
        for i in range(run.begin[k], run.ack[k])
        if run.ops[i].kind == "write" and run.ops[i].offset
    ]
    img = image(run, tmp_path / "short.db", run.ack[k], {data[0]})
    f = ck.examine(img)
    assert f.before.short and f.after.rolled_back
    vs = {v.invariant: v for v in ck.judge(f, run.digests, k, k + 1)}
    rb = vs["CC-ROLLBACK"]
    assert rb.status == "pass" and rb.exercised and "did not match" in rb.explanation
    assert crashsafe_verdict(img, tmp_path).status == "pass"


# --- each invariant broken ---------------------------------------------------------


def committed_image(run: Run, tmp_path: Path, k: int) -> Path:
    """The image right after transaction k (1-based) was acknowledged."""
    return image(run, tmp_path / f"ack{k}.db", run.ack[k - 1])


def test_t1_page_without_committed_header(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["cc"]
    img = committed_image(run, tmp_path, 5)
    with Database(img, "cc", readonly=True) as db:
        fcc = db.fcc
        victim = [r.pgno for r in db.reachable()][-1]
    poke32(img, victim * PS, fcc + 7)
    poke32(img, victim * PS + SLOT, fcc + 8)
    vs = judge_image(run, img, 5, 5)
    t1 = next(v for v in vs if v.invariant == "DHL-T1")
    assert t1.failed and f"page {victim}" in t1.explanation and f"FCC {fcc}" in t1.explanation
    assert t1.implicated == [f"page {victim}"]
    # the page's content is gone for readers and after recovery too; the
    # database does not open, and its pages read one by one miss that
    # page's records: DB-ATOMIC is judged on them, not skipped
    assert fails(vs) == {"DHL-T1", "DHL-READ", "DB-OPEN", "DB-ATOMIC"}
    atomic = next(v for v in vs if v.invariant == "DB-ATOMIC")
    assert "does not open; its pages read through the read rule" in atomic.explanation
    skipped = {v.invariant: v.explanation for v in vs if v.status == "skip"}
    assert skipped["DB-INTEGRITY"] == "the database does not open (see DB-OPEN)"
    assert "no recovered image" in skipped["DHL-INV"]


def test_read_rule_content_differs_from_recovered(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["tc"]
    good = committed_image(run, tmp_path, 4)
    bad = tmp_path / "flipped.db"
    shutil.copy(good, bad)
    with Database(bad, "tc", readonly=True) as db:
        leaf = db.reachable()[-1]
        off = db.page(leaf.pgno).slots[leaf.slot].offsets[0]
    with open(bad, "r+b") as f:  # flip the first value byte of a committed record
        f.seek(leaf.pgno * PS + off + 10)
        b = f.read(1)
        f.seek(leaf.pgno * PS + off + 10)
        f.write(bytes([b[0] ^ 0xFF]))
    before, nolog = examine_before(bad)
    after = examine_after(good, tmp_path / "rec.db", before, nolog)
    vs = ck.judge(DhlFacts(True, nolog, before, after), run.digests, 4, 4)
    assert fails(vs) == {"DHL-READ"}
    read = next(v for v in vs if v.invariant == "DHL-READ")
    assert "matches no oracle state" in read.explanation


def test_inv_header_above_fcc_survives(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["cc"]
    img = committed_image(run, tmp_path, 6)
    rec = tmp_path / "rec.db"
    shutil.copy(img, rec)
    Database(rec, "cc").close()
    with Database(rec, "cc", readonly=True) as db:  # a page whose older slot is not FCC's
        fcc = db.fcc
        pg, s = next(
            (r.pgno, 1 - r.slot)
            for r in db.reachable()
            if db.page(r.pgno).slots[1 - r.slot].tid not in (0, fcc)
        )
    poke32(rec, pg * PS + s * SLOT, fcc + 1)  # recovery "forgot" to invalidate it
    before, nolog = examine_before(img)
    after = examine_after(img, rec, before, nolog, recover=False)
    vs = ck.judge(DhlFacts(True, nolog, before, after), run.digests, 6, 6)
    inv = next(v for v in vs if v.invariant == "DHL-INV")
    assert (
        f"page {pg}: slot header {s} TID {fcc + 1} > FCC {fcc} survives recovery" in inv.explanation
    )
    # a second recovery repairs it: the first was not a fixpoint
    assert fails(vs) == {"DHL-INV", "REC-IDEMPOTENT"}


def test_count_short_after_recovery(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["cc"]
    img = committed_image(run, tmp_path, 6)
    rec = tmp_path / "rec.db"
    shutil.copy(img, rec)
    Database(rec, "cc").close()
    with Database(rec, "cc", readonly=True) as db:
        fcc = db.fcc
        pg, s = next(
            (r.pgno, r.slot) for r in db.reachable() if db.page(r.pgno).slots[r.slot].tid == fcc
        )
    poke32(rec, pg * PS + s * SLOT, 0)  # recovery destroyed a committed header
    before, nolog = examine_before(img)
    after = examine_after(img, rec, before, nolog, recover=False)
    vs = ck.judge(DhlFacts(True, nolog, before, after), run.digests, 5, 6)
    count = next(v for v in vs if v.invariant == "CC-COUNT")
    assert count.failed and count.actual == count.expected - 1
    idem = next(v for v in vs if v.invariant == "REC-IDEMPOTENT")
    assert idem.failed and "rewrote pages" in idem.explanation
    assert fails(vs) == {"CC-COUNT", "REC-IDEMPOTENT"}


def test_rollback_forgotten(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["cc"]
    k = 6
    data = [
        i
        for i in range(run.begin[k], run.ack[k])
        if run.ops[i].kind == "write" and run.ops[i].offset
    ]
    img = image(run, tmp_path / "short.db", run.ack[k], {data[-1]})
    rec = tmp_path / "rec.db"
    shutil.copy(img, rec)  # a "recovery" that wrote nothing: transaction k+1 kept
    before, nolog = examine_before(img)
    assert before.short
    after = examine_after(img, rec, before, nolog, recover=False)
    vs = ck.judge(DhlFacts(True, nolog, before, after), run.digests, k, k + 1)
    rb = next(v for v in vs if v.invariant == "CC-ROLLBACK")
    assert rb.failed and f"expected {before.newest - 1}" in rb.explanation
    # keeping a short transaction is also a short count, and not a fixpoint
    assert fails(vs) == {"CC-ROLLBACK", "CC-COUNT", "REC-IDEMPOTENT"}


def test_crashsafe_broken_recovery(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["cc"]
    k = 6
    data = [
        i
        for i in range(run.begin[k], run.ack[k])
        if run.ops[i].kind == "write" and run.ops[i].offset
    ]
    img = image(run, tmp_path / "short.db", run.ack[k], {data[0]})
    ok = crashsafe_verdict(img, tmp_path)
    assert ok.status == "pass" and ok.actual > 0
    # a recovery that clears each page before writing its repaired image
    from checkers.recovery import capture_recovery

    ops, err = capture_recovery(img, tmp_path)
    assert err is None and ops
    bad = []
    for op in ops:
        if op.kind == "write":
            bad.append(IoOp("write", op.offset, bytes(len(op.data))))
        bad.append(op)
    v = crashsafe_verdict(img, tmp_path, ops=bad)
    assert v.invariant == "REC-CRASHSAFE" and v.failed
    assert "instead of" in v.explanation and v.implicated
    assert not list(tmp_path.glob("rec-crashsafe"))


def test_db_level_on_dhl(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["tc"]
    img = committed_image(run, tmp_path, 4)
    # an acknowledged transaction lost: the image after 4 judged as if 5 were acked
    assert fails(judge_image(run, img, 5, 5)) == {"DB-DURABLE", "DHL-READ"}
    # a transaction that was never issued is visible
    assert fails(judge_image(run, img, 3, 3)) == {"DB-PREFIX", "DHL-READ"}
    # not a database at all
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"x" * 4096)
    vs = judge_image(run, junk, 0, 0)
    assert fails(vs) == {"DB-OPEN"} and {v.invariant for v in vs if v.status == "skip"} >= {
        "DHL-T1",
        "DB-ATOMIC",
    }
    assert fails(ck.judge(ck.examine(tmp_path / "missing.db"), run.digests, 0, 0)) == {"DB-OPEN"}
    # a committed key moved outside its parent's range: structure check and content
    bad = tmp_path / "key.db"
    shutil.copy(img, bad)
    with Database(bad, "tc", readonly=True) as db:
        leaves = [r for r in db.reachable() if db.page(r.pgno).slots[r.slot].type == 1]
        leaf = leaves[0]
        offs = db.page(leaf.pgno).slots[leaf.slot].offsets
    with open(bad, "r+b") as f:  # last key of the leftmost leaf: larger, still in page order
        f.seek(leaf.pgno * PS + offs[-1])
        key = struct.unpack("<q", f.read(8))[0]
        f.seek(leaf.pgno * PS + offs[-1])
        f.write(struct.pack("<q", key + 100000))
    vs = judge_image(run, bad, 4, 4)
    assert {"DB-INTEGRITY", "DB-ATOMIC"} <= fails(vs)
    assert (
        "outside its parent's range"
        in next(v for v in vs if v.invariant == "DB-INTEGRITY").explanation
    )


def test_nolog_mid_transaction_fails_t1_and_atomicity(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["nolog"]
    bad = set()
    for k in range(len(run.ack)):
        for upto in range(run.begin[k] + 1, run.ack[k]):
            vs = judge_image(run, image(run, tmp_path / "n.db", upto), k, k + 1)
            bad |= fails(vs)
            assert all(v.status == "skip" for v in vs if v.invariant in AFTER_IDS)
    assert {"DB-ATOMIC", "DHL-T1"} <= bad


# --- trace checkers on synthetic logs ------------------------------------------


def write_log(
    run: Run,
    path: Path,
    edit: dict[int, bytes] | None = None,
    extra: dict[int, list[IoOp]] | None = None,
) -> Path:
    """The captured ops as a raw-device log with txn marks; ``edit`` replaces
    the data of op i, ``extra`` inserts writes before op i."""
    edit, extra = edit or {}, extra or {}
    with LogWriter(path) as w:
        w.mark("setup-done")
        for i, op in enumerate(run.ops + [IoOp("sync")]):
            for x in extra.get(i, []):
                w.write(x.offset // 512, x.data)
            for k, b in enumerate(run.begin):
                if b == i:
                    w.mark(f"txn-begin:{k + 1}")
            if i < len(run.ops):
                if op.kind == "write":
                    w.write(op.offset // 512, edit.get(i, op.data))
                else:
                    w.flush()
            for k, a in enumerate(run.ack):
                if a == i + 1:
                    w.mark(f"txn-ack:{k + 1}")
    return path


def trace(run: Run, log: Path) -> list:  # noqa: ANN001
    with Database(run.base, run.mode, readonly=True) as db:
        ntrees = db.info().ntrees
    size = run.base.stat().st_size
    with FileTrace(
        run.base, log, BlockMap.identity(1 << 30), run.base, BlockMap.identity(size), size
    ) as history:
        res = tr.trace_pages(history, PS, ntrees, run.mode == "nolog")
    return tr.verdicts(res, run.mode == "nolog")


@pytest.mark.parametrize("mode", ["tc", "cc", "tc_opt", "cc_opt"])
def test_trace_passes(runs: dict[str, Run], mode: str, tmp_path: Path) -> None:
    vs = trace(runs[mode], write_log(runs[mode], tmp_path / "w.log"))
    assert not fails(vs) and len(vs) == 3 and vs[0].actual > 10


def test_trace_nolog_overwrites_only_committed_header(runs: dict[str, Run], tmp_path: Path) -> None:
    vs = trace(runs["nolog"], write_log(runs["nolog"], tmp_path / "w.log"))
    t2 = next(v for v in vs if v.invariant == "DHL-T2")
    assert t2.failed and "the only committed one" in t2.explanation
    assert t2.implicated and t2.implicated[0].startswith("entry ")
    assert fails(vs) == {"DHL-T2", "CC-NEXT"}


def _tids(data: bytes) -> tuple[int, int]:
    return struct.unpack_from("<I", data, 0)[0], struct.unpack_from("<I", data, SLOT)[0]


def _page_write(run: Run, pred) -> int:  # noqa: ANN001
    """The first data-page write whose old/new slot TIDs satisfy pred."""
    last: dict[int, bytes] = {}
    with open(run.base, "rb") as f:
        raw = f.read()
    for i, op in enumerate(run.ops):
        if op.kind != "write" or op.offset == 0:
            continue
        old = last.get(op.offset, raw[op.offset : op.offset + PS].ljust(PS, b"\0"))
        if pred(_tids(old), _tids(op.data)):
            return i
        last[op.offset] = op.data
    raise AssertionError("no such write")


def test_trace_t2_write_changes_both_headers(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["tc"]

    def older_other(old: tuple[int, int], new: tuple[int, int]) -> bool:
        s = 0 if old[0] != new[0] else 1
        w = new[s]
        return 0 < old[1 - s] < w - 1 and old[s] not in (0, w - 1)

    i = _page_write(run, older_other)
    data = bytearray(run.ops[i].data)
    old0, old1 = _tids(data)
    w = max(old0, old1)
    struct.pack_into("<I", data, 0, w)
    struct.pack_into("<I", data, SLOT, w)  # the write also stamps the committed header
    vs = trace(run, write_log(run, tmp_path / "w.log", edit={i: bytes(data)}))
    t2 = next(v for v in vs if v.invariant == "DHL-T2")
    assert t2.failed and "rewrote both slot headers" in t2.explanation
    assert t2.implicated[0].endswith(f"(page {run.ops[i].offset // PS})")
    # the page's next write (by W+1) then necessarily overwrites a header of W
    assert fails(vs) == {"DHL-T2", "CC-NEXT"}
    nxt = next(v for v in vs if v.invariant == "CC-NEXT")
    assert int(nxt.implicated[0].split()[1]) > int(t2.implicated[0].split()[1])


def test_trace_cc_next_t_plus_one_overwrites_t(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["cc"]

    def after_predecessor(old: tuple[int, int], new: tuple[int, int]) -> bool:
        s = 0 if old[0] != new[0] else 1
        return old[1 - s] == new[s] - 1 and old[s] != 0

    i = _page_write(run, after_predecessor)
    data = bytearray(run.ops[i].data)
    h0, h1 = bytes(data[:SLOT]), bytes(data[SLOT : 2 * SLOT])
    data[:SLOT], data[SLOT : 2 * SLOT] = h1, h0  # the new header lands in T's slot
    vs = trace(run, write_log(run, tmp_path / "w.log", edit={i: bytes(data)}))
    nxt = next(v for v in vs if v.invariant == "CC-NEXT")
    assert nxt.failed and "(its predecessor)" in nxt.explanation
    assert fails(vs) == {"CC-NEXT", "DHL-T2"}  # T's header was the valid one


def test_trace_cc_mono_fcc_goes_back(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["cc"]
    hdr = [op for op in run.ops if op.kind == "write" and op.offset == 0]
    stale = hdr[1]  # the header page as transaction 2 wrote it
    at = run.ack[5] - 1  # just before txn 6's final sync
    vs = trace(run, write_log(run, tmp_path / "w.log", extra={at: [stale]}))
    mono = next(v for v in vs if v.invariant == "CC-MONO")
    assert mono.failed and "txn-ack:6" in mono.explanation
    assert fails(vs) == {"CC-MONO", "DHL-T2"}  # the stale header write itself


def test_page_map_pieces() -> None:
    m = BlockMap(((8192, 16384, 0), (32768, 36864, 8192)))
    assert list(m.pieces(4096, 16384)) == [(0, 4096, 8192)]
    assert list(m.pieces(12288, 24576)) == [(4096, 0, 4096), (8192, 20480, 4096)]
    assert list(m.device_ranges(6144, 4096)) == [(14336, 0, 2048), (32768, 2048, 2048)]


def test_an_over_counted_commit_record_is_short_too() -> None:
    """Recovery rolls back on any mismatch of count and size, so the checker
    judges the rollback for more headers than the size as well."""
    b = Before(fcc=9, newest=10, newest_size=3, newest_count=4, previous=9)
    assert b.short
    kept = After(fcc=10, txn_size=3, count_fcc=(1, 2, 3, 4), count_newest=(1, 2, 3, 4))
    v = judge_rollback(b, kept)
    assert v.failed and "expected 9" in v.explanation
    idle = judge_rollback(Before(newest=10, newest_size=3, newest_count=3), kept)
    assert idle.status == "pass" and not idle.exercised
    assert "exercised" in idle.to_json() and "exercised" not in v.to_json()


def test_tc_modes_do_not_promise_a_rollback_they_cannot_do() -> None:
    from harness.sweep.matrix import DHL_INSERT, Cell

    for sut, promised in (
        ("dhl-tc-raw", False),
        ("dhl-tc-opt-raw", False),
        ("dhl-cc-raw", True),
        ("dhl-cc-opt-raw", True),
    ):
        exp = Cell(sut, DHL_INSERT, "raw").expectation("reorder")
        assert ("CC-ROLLBACK" in exp.guaranteed) is promised, sut


# --- judged by the write trace, not by the engine's counting --------------------

FACTS = tr.RunFacts(
    txn_pages={9: frozenset({0, 4}), 10: frozenset({0, 1, 2})}, ack_writer={3: 9, 4: 10}
)


def test_rollback_is_judged_by_the_pages_the_trace_saw_written() -> None:
    """An engine whose commit record and count agree on a wrong size (page 0
    left out) keeps an incomplete transaction: the count rule sees nothing
    to roll back, the write trace sees page 0 missing."""
    b = Before(newest=10, newest_size=2, newest_count=2, newest_pages=(1, 2), previous=9)
    kept = After(fcc=10, engine_fcc=10, txn_size=2, count_fcc=(1, 2), fcc_pages=(1, 2))
    assert judge_rollback(b, kept).status == "pass"  # the engine's own rule: fooled
    v = judge_rollback(b, kept, FACTS)
    assert v.failed and "incomplete by the write trace" in v.explanation and "0" in v.explanation
    count = judge_count(kept, FACTS)
    assert count.failed and "incomplete by the write trace" in count.explanation


def test_rolling_back_a_complete_transaction_fails() -> None:
    b = Before(newest=10, newest_size=4, newest_count=3, newest_pages=(0, 1, 2), previous=9)
    assert b.short  # the engine's count says short: a wrong size was recorded
    back = After(fcc=9, engine_fcc=9, txn_size=2, count_fcc=(0, 4), fcc_pages=(0, 4))
    assert judge_rollback(b, back).status == "pass"  # by the count: a proper rollback
    v = judge_rollback(b, back, FACTS)
    assert v.failed and "complete by the write trace" in v.explanation


def test_a_commit_record_size_the_trace_contradicts_fails_cc_count() -> None:
    a = After(fcc=10, engine_fcc=10, txn_size=3, count_fcc=(0, 1, 2), fcc_pages=(0, 1, 2))
    assert judge_count(a, FACTS).status == "pass"
    wrong = After(fcc=9, engine_fcc=9, txn_size=1, count_fcc=(4,), fcc_pages=(0, 4))
    assert judge_count(wrong).status == "pass"  # count == recorded size
    v = judge_count(wrong, FACTS)
    assert v.failed and "the engine counts wrongly" in v.explanation


def test_cc_mono_per_image_against_the_acknowledged_tid() -> None:
    a = After(fcc=9, engine_fcc=9)
    assert judge_mono(a, FACTS, 3).status == "pass"
    v = judge_mono(a, FACTS, 4)  # transaction 4 was written as TID 10 and acknowledged
    assert v.failed and "below TID 10" in v.explanation
    idle = judge_mono(a, FACTS, 2)
    assert idle.status == "pass" and not idle.exercised
    assert judge_mono(a, None, 4).status == "skip"
