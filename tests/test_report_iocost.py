"""I/O cost per transaction from a log: window, journal split, flushes, tail."""

from __future__ import annotations

import json

from test_report_synth import BLOCK, ext4_super, write_log

from harness.fs.ext4.superblock import ext4_journal_extents
from harness.logformat import LogWriter
from harness.report.iocost import run_cost
from harness.rundir import ImageRef, RunMeta


def test_journal_extents_from_super_block():
    assert ext4_journal_extents(ext4_super()) == [
        (100 * BLOCK, 110 * BLOCK),
        (200 * BLOCK, 220 * BLOCK),
    ]


def test_journal_extents_unknown_when_not_resolvable():
    assert ext4_journal_extents(ext4_super(magic=0x1234)) is None  # not ext4
    assert ext4_journal_extents(ext4_super(depth=1)) is None  # extent tree below the inode
    assert ext4_journal_extents(bytes(100)) is None


def test_run_cost_counts_window_journal_flushes_tail(tmp_path):
    want = write_log(tmp_path / "writes.log", txns=3)
    meta = RunMeta(
        fs="ext4",
        log={"marks": ["setup-done", *[f"txn-ack:{i}" for i in (1, 2, 3)]]},
        runner={"transactions": 3, "workload": {"fsyncs": 6, "bytes_written": 3000}},
    )
    cost = run_cost(tmp_path, meta)
    assert cost.txns == 3
    assert cost.window_bytes == want["window"]
    assert cost.journal_bytes == want["journal"]
    assert cost.data_bytes == want["window"] - want["journal"]
    assert cost.flushes == want["flushes"]
    assert cost.tail_bytes == want["tail"]
    assert cost.per_txn(cost.window_bytes) == 6 * BLOCK
    assert cost.per_txn(cost.fsyncs) == 2
    assert cost.db_bytes == 3000


def test_split_unknown_without_super_block_or_on_other_fs(tmp_path):
    write_log(tmp_path / "writes.log", with_super=False)
    meta = RunMeta(fs="ext4", image=ImageRef("ext4", str(tmp_path / "missing.img"), ""))
    cost = run_cost(tmp_path, meta)
    assert cost.journal_bytes is None and cost.data_bytes is None
    assert cost.window_bytes == 2 * 6 * BLOCK
    assert cost.runner is None and cost.fsyncs is None
    # xfs: never attributed by the ext4 rule, even with an ext4-looking block
    write_log(tmp_path / "writes.log")
    assert run_cost(tmp_path, RunMeta(fs="xfs")).journal_bytes is None


def test_super_block_read_from_base_image_when_not_logged(tmp_path):
    write_log(tmp_path / "writes.log", with_super=False)
    image = tmp_path / "base.img"
    image.write_bytes(bytes(1024) + ext4_super() + bytes(BLOCK))
    cost = run_cost(tmp_path, RunMeta(fs="ext4", image=ImageRef("ext4", str(image), "")))
    assert cost.journal_bytes == 2 * 3 * BLOCK


def test_no_setup_mark_counts_from_the_start(tmp_path):
    with LogWriter(tmp_path / "writes.log") as w:
        w.write(8, b"a" * BLOCK)
        w.flush()
        w.mark("txn-ack:1")
    (tmp_path / "meta.json").write_text(json.dumps({}))
    cost = run_cost(tmp_path, RunMeta(fs="raw"))
    assert (cost.window_bytes, cost.flushes, cost.tail_bytes, cost.txns) == (BLOCK, 1, 0, 1)
