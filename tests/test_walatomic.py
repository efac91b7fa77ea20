"""WAL's single-fsync atomicity (harness/paper/walframes.py, walatomic.py):
the WAL reader and recovery rule against real SQLite's own WAL files, and
the count of reorder states where a commit frame persisted without an
earlier frame of its transaction on a real recorded run."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from support import Recordings

from harness.check.check import CheckOptions, check_run
from harness.filetrace import FileWrite
from harness.paper.walatomic import analyse
from harness.paper.walframes import frame_span, frames_of, recover, transactions
from harness.states import Options
from harness.sweep.builtin_workloads import MULTI

PAGE = 4096


def _wal(tmp_path: Path) -> tuple[Path, bytes]:
    """A database whose WAL holds three transactions of 1, 3 and 3 frames
    (page 4096, never checkpointed), and that WAL's bytes."""
    db = tmp_path / "w.db"
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA page_size=4096")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE a(x)")  # frames: page 1 + root page (1 txn)
    for _ in range(2):
        con.execute("BEGIN")
        con.executemany("INSERT INTO a VALUES (?)", [(b"x" * 1500,)] * 6)
        con.execute("COMMIT")
    wal = (tmp_path / "w.db-wal").read_bytes()
    shutil.copy(db, tmp_path / "copy.db")
    con.close()
    return tmp_path / "copy.db", wal


def _rows(db: Path, wal: bytes) -> int:
    """Rows real SQLite reads from ``db`` with ``wal`` as its WAL (a copy)."""
    work = db.parent / "open"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    shutil.copy(db, work / "d.db")
    (work / "d.db-wal").write_bytes(wal)
    con = sqlite3.connect(work / "d.db")
    try:
        return int(con.execute("SELECT count(*) FROM a").fetchone()[0])
    except sqlite3.DatabaseError:
        return -1
    finally:
        con.close()


def _frames(wal: bytes) -> int:
    return (len(wal) - 32) // (24 + PAGE)


def test_recovery_rule_agrees_with_sqlite_on_damaged_frames(tmp_path: Path) -> None:
    """Whole WAL: every frame kept, the rows all there.  An earlier frame of
    the last transaction zeroed (never persisted): recovery stops there on
    its salts and keeps the transactions before it, as SQLite does; one bit
    of the frame's page flipped: it stops there on the checksum."""
    db, wal = _wal(tmp_path)
    n = _frames(wal)
    whole = recover(wal)
    assert (whole.frames, whole.why) == (n, "end of file")
    assert _rows(db, wal) == 12
    txns = transactions(frames_of([FileWrite(1, ((0, wal),))]))
    assert len(txns[-1]) >= 2
    first = txns[-1][0].index
    lo, hi = frame_span(first, PAGE)
    zeroed = wal[:lo] + bytes(hi - lo) + wal[hi:]
    r = recover(zeroed)
    assert (r.stopped_at, r.why, r.frames) == (first, "salt", first)
    assert _rows(db, zeroed) == 6
    flipped = bytearray(wal)
    flipped[lo + 24 + 100] ^= 1
    r = recover(flipped)
    assert (r.stopped_at, r.why) == (first, "checksum")
    assert _rows(db, bytes(flipped)) == 6


def test_frames_know_every_write_of_each_part(tmp_path: Path) -> None:
    """The WAL written as a page cache writes it back: 4 KiB blocks, the
    block a frame ends in written again with the next transaction.  Each
    frame's parts name every write that put its final bytes there; the
    transactions end at their commit frames."""
    _, wal = _wal(tmp_path)
    whole = frames_of([FileWrite(0, ((0, wal),))])
    writes, done, entry = [], 0, 0
    for txn in transactions(whole):
        end = frame_span(txn[-1].index, PAGE)[1]
        start = done // 4096 * 4096  # the partly written block, again
        entry += 1
        writes.append(FileWrite(entry, ((start, wal[start:end]),)))
        done = end
    frames = frames_of(writes)
    sizes = [len(t) for t in transactions(frames)]
    assert sizes == [len(t) for t in transactions(whole)] and sizes[0] == 2 and sizes[1] > 2
    assert [f.commit for f in frames] == [f.commit for f in whole]
    assert [f.txn for f in frames] == [1, 1] + [2] * sizes[1] + [3] * sizes[2]
    shared = frame_span(1, PAGE)[1] // 512  # frame 1 (transaction 1's commit) ends in it
    assert frames[1].units[shared] == {1, 2}  # written with its transaction, then again
    assert frames[2].units[shared] == {2}
    assert frames[1].persisted(lambda e: e == 2) is False  # its first unit only in write 1
    assert frames[2].persisted(lambda e: e == 2) is True


@pytest.mark.timeout(300)
def test_wal_reorder_states_commit_before_their_frames_are_all_dropped_whole(
    recorded: Recordings, tmp_path: Path
) -> None:
    """sqlite-wal-full, MULTI, reorder: some states keep a commit frame and
    lose an earlier frame of its transaction (one fsync orders nothing);
    in each, WAL recovery stops at or before the missing frame on its
    salts, and the real check passes every invariant."""
    run = recorded.copy(tmp_path / "run", "sqlite-wal-full", MULTI)
    check_run(run, CheckOptions(states=Options(strategy="reorder"), jobs=2), tmp_path / "chk")
    r = analyse(run, tmp_path / "chk", tmp_path / "scratch")
    assert r.states > 1000 and r.multi_frame_txns >= 10
    assert r.split > 100 and r.unjudged == 0
    assert r.passed == r.split and not r.failed
    assert r.stopped == {"salt": r.split} and not r.not_caught
