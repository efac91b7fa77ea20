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


def test_trace_figures_and_chart(tmp_path: Path) -> None:
    """The table's figures from the writes, and the chart drawn with a
    traced system, with a system that has only its reason, and with none."""
    from harness.paper import render

    w = trace.Write
    writes = [
        w(1, 100, 8, "a.db"),
        w(2, 102, 4, "a.db"),
        w(4, 500, 4, "jbd2"),
        w(6, 103, 4, "a.db"),
    ]
    t = trace.Trace("ext4", 2, 5, [3], writes)
    assert (t.kb, t.kb_after_commit) == (20, 4)
    assert t.regions == {"a.db": 16, "jbd2": 4}
    assert t.jumps == 2  # 102 follows 100+8 KB; 500 and 103 do not follow
    for rows in ([{"key": "A", "trace": t.as_json()}, {"key": "B", "trace": None}], []):
        out = tmp_path / f"fig9-{len(rows)}.png"
        render.fig9({"fig9": {"systems": rows}}, out)
        assert out.read_bytes().startswith(b"\x89PNG")
