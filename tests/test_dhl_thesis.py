"""DHL as the thesis writes it (dhl/FORMAT.md, "The thesis's format"), and
the checks that make its claims testable: real engine runs (captured with
CaptureIO, tests/test_checkers_dhl.py's ``record``) crashed by hand.

* The thesis's TC trusts the FCC alone: a commit record that persisted
  before one of its pages (what a missing ordering sync allows) is
  committed, and the checkers say so; the engine's TC counts and rolls
  the same bytes back.
* The thesis's CC restores FCC - 1 and its size in place on a short count.
* REC-MINIMAL (thesis §3.2): recovery's writes change only the TID and
  commit fields of the aborted transaction's slot headers.
* DHL-INV's exercised count is the thesis's Fig. 5(b): pages of a
  transaction whose commit record did not persist.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from checkers import dhl as ck
from checkers.dhl_facts import inplace, stored_headers
from checkers.recovery import capture_recovery, recovery_verdicts
from dhl.binding import Database, IoOp, MemIO
from tests.test_checkers_dhl import SLOT, Run, image, record

K = 5  # the transaction crashed in every test


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    tmp = tmp_path_factory.mktemp("thesis")
    return {m: record(tmp, m) for m in ("tc", "cc", "tc_thesis", "cc_thesis")}


def writes_of(run: Run, k: int) -> tuple[list[int], int]:
    """Transaction k's data page writes (op indices) and its header page write."""
    idx = [i for i in range(run.begin[k], run.ack[k]) if run.ops[i].kind == "write"]
    hdr = [i for i in idx if run.ops[i].offset == 0]
    assert len(hdr) == 1 and len(idx) >= 3, "a transaction of several pages and one header"
    return [i for i in idx if i != hdr[0]], hdr[0]


def verdicts(run: Run, img: Path, k: int) -> dict[str, object]:
    return {v.invariant: v for v in ck.judge(ck.examine(img), run.digests, k, k + 1)}


def test_thesis_tc_trusts_the_fcc_alone(runs: dict[str, Run], tmp_path: Path) -> None:
    """A commit record on disk without one of its pages: the thesis's TC
    commits the partial transaction (DB-ATOMIC fails), the engine's TC
    counts and rolls it back."""
    for mode, partial in (("tc_thesis", True), ("tc", False)):
        run = runs[mode]
        data, hdr = writes_of(run, K)
        img = image(run, tmp_path / f"{mode}.db", hdr + 1, {data[0]})
        f = ck.examine(img)
        vs = verdicts(run, img, K)
        assert (f.after.engine_fcc == f.before.newest) is partial, mode
        assert vs["DB-ATOMIC"].failed is partial, (mode, vs["DB-ATOMIC"].explanation)  # type: ignore[attr-defined]  # Verdict
        # both readers (libdhl and the independent decoder) agree on the FCC
        assert f.before.indep_fcc == f.before.fcc
    assert f.before.short and f.after.rolled_back  # the engine's TC: counted, rolled back


def test_thesis_tc_records_no_size(runs: dict[str, Run], tmp_path: Path) -> None:
    run = runs["tc_thesis"]
    img = image(run, tmp_path / "done.db", run.ack[K])
    m = MemIO().read_file(img)
    with Database(img, "auto", readonly=True, io=m) as db:
        hs = stored_headers(db, m)
    fcc = hs[0].tid[0] if hs[0].tid[0] > hs[0].tid[1] else hs[0].tid[1]
    assert inplace(hs) == (fcc, 0) and hs[0].commit == (0, 0)
    vs = verdicts(run, img, K + 1)
    count = vs["CC-COUNT"]
    assert count.status == "pass" and "no size to count" in count.explanation  # type: ignore[attr-defined]  # Verdict


def test_thesis_cc_restores_fcc_and_size(runs: dict[str, Run], tmp_path: Path) -> None:
    """Fig. 5(c): the commit record on disk, a page of its transaction not:
    recovery writes FCC - 1 and the count of its slot headers back into the
    one commit record, and survives a crash of its own."""
    run = runs["cc_thesis"]
    data, hdr = writes_of(run, K)
    img = image(run, tmp_path / "short.db", hdr + 1, {data[0]})
    f = ck.examine(img)
    assert f.before.short and f.after.rolled_back
    assert f.before.previous == f.before.newest - 1 == f.after.fcc
    assert f.after.txn_size == len(f.after.count_fcc) > 0
    vs = verdicts(run, img, K)
    assert not [i for i, v in vs.items() if v.failed], vs  # type: ignore[attr-defined]  # Verdict
    assert vs["CC-ROLLBACK"].exercised  # type: ignore[attr-defined]  # Verdict
    crash, minimal = recovery_verdicts(img, tmp_path)
    assert crash.status == "pass" and crash.actual > 0
    assert minimal.status == "pass" and "commit record" in minimal.explanation


def test_fig5b_is_what_dhl_inv_exercises(runs: dict[str, Run], tmp_path: Path) -> None:
    """Pages of transaction K on disk, its commit record not (Fig. 5(b)):
    DHL-INV exercised; the state after K: not exercised."""
    for mode in ("cc", "tc_thesis", "cc_thesis"):
        run = runs[mode]
        data, hdr = writes_of(run, K)
        img = image(run, tmp_path / f"{mode}-5b.db", hdr + 1, {hdr})
        inv = verdicts(run, img, K)["DHL-INV"]
        assert inv.status == "pass" and inv.exercised and inv.actual >= len(data), mode  # type: ignore[attr-defined]  # Verdict
        done = image(run, tmp_path / f"{mode}-done.db", run.ack[K])
        inv = verdicts(run, done, K + 1)["DHL-INV"]
        assert inv.status == "pass" and not inv.exercised, mode  # type: ignore[attr-defined]  # Verdict


def _short_image(run: Run, tmp: Path) -> Path:
    data, hdr = writes_of(run, K)
    return image(run, tmp / "short.db", hdr + 1, {data[0]})


def test_rec_minimal_holds_for_real_recovery(runs: dict[str, Run], tmp_path: Path) -> None:
    for mode in ("cc", "cc_thesis"):
        minimal = recovery_verdicts(_short_image(runs[mode], tmp_path), tmp_path)[1]
        assert minimal.status == "pass" and minimal.exercised and minimal.actual >= 2, mode


def test_rec_minimal_catches_a_cleared_slot_header(runs: dict[str, Run], tmp_path: Path) -> None:
    """A recovery that zeroes all of an invalidated slot header (record
    count, free-space offset, type too) changes the page beyond the TID and
    commit fields: REC-MINIMAL fails, REC-CRASHSAFE does not notice."""
    img = _short_image(runs["cc"], tmp_path)
    ops, err = capture_recovery(img, tmp_path)
    assert err is None
    bad = []
    for op in ops:
        if op.kind == "write" and op.offset:
            page = bytearray(op.data)
            for s in range(2):
                (tid,) = struct.unpack_from("<I", page, s * SLOT)
                if tid == 0:
                    page[s * SLOT : (s + 1) * SLOT] = bytes(SLOT)
            op = IoOp("write", op.offset, bytes(page))
        bad.append(op)
    crash, minimal = recovery_verdicts(img, tmp_path, ops=bad)
    assert crash.status == "pass"
    assert minimal.failed and "outside slot" in minimal.explanation


def test_rec_minimal_catches_a_page_it_had_no_reason_to_write(
    runs: dict[str, Run], tmp_path: Path
) -> None:
    run = runs["cc"]
    img = _short_image(run, tmp_path)
    ops, err = capture_recovery(img, tmp_path)
    assert err is None
    untouched = {op.offset for op in ops if op.kind == "write"}
    ps = len(ops[0].data)
    extra = next(p for p in range(1, 8) if p * ps not in untouched)
    same = img.read_bytes()[extra * ps : (extra + 1) * ps]  # rewritten unchanged
    minimal = recovery_verdicts(img, tmp_path, ops=[*ops, IoOp("write", extra * ps, same)])[1]
    assert minimal.failed and f"page {extra} holds no slot header above" in minimal.explanation
