"""The DHL thesis's Fig. 9 data (harness/paper/trace.py) on real fuse
recordings of ten two-insert transactions: the writes are named by the
files they went to."""

from __future__ import annotations

from pathlib import Path

from support import Recordings

from harness.paper import trace

FILES = {"crashlab.db", "crashlab.db-wal", "crashlab.db-journal"}


def test_wal_trace_names_its_log_and_the_close_checkpoint(
    recorded: Recordings, tmp_path: Path
) -> None:
    """WAL: at least three 4 KiB blocks per transaction to the -wal file
    (two frames and their headers, the thesis's "at least ... 12KB"), jbd2
    traffic for the growing file, and the close's checkpoint to the
    database file after the last commit."""
    t = trace.extract(recorded("sqlite-wal-full", trace.spec()), tmp_path)
    assert t.txns == trace.TXNS
    regions = t.regions
    assert regions.get("crashlab.db-wal", 0) >= 12 * trace.TXNS, regions
    assert regions.get("ext4 journal", 0) > 0, regions
    assert any(w.region == "crashlab.db" and w.n > t.commit for w in t.writes), t.writes
    assert trace.UNATTRIBUTED not in regions


def test_dhl_cc_trace_writes_no_log_file(recorded: Recordings, tmp_path: Path) -> None:
    """DHL_CC keeps no log file: its writes go to the database file and to
    ext4's own blocks only, the database file once per transaction at least."""
    t = trace.extract(recorded("dhl-cc", trace.spec()), tmp_path)
    regions = t.regions
    assert set(regions) <= {"crashlab.db", "ext4 journal", "ext4 metadata"}, regions
    before = [w for w in t.writes if w.region == "crashlab.db" and w.n <= t.commit]
    assert len(before) >= trace.TXNS, t.writes
