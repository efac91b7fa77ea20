"""`crashlab record --sut --workload` end to end on the fuse backend: the log
holds every mark in order, meta.json rebuilds the oracle, and the database
recovered from the replayed log (ext4 journal replay with e2fsprogs, then
SQLite's own recovery) equals the oracle -- at the end and at a txn-ack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.fs.ext4.recover import recover_ext4
from harness.images import ensure_image
from harness.logformat import LogReader
from harness.materialize import replay
from harness.rundir import RunDir, RunMeta
from workloads.oracle import sqlite_digest
from workloads.run import DB_NAME, oracle_from_meta

pytestmark = pytest.mark.needs_fuse
CRASHLAB = Path(sys.executable).with_name("crashlab")


def _ours(parent: Path) -> list[str]:
    """Loop devices and mounts that mention ``parent`` (other agents' tests
    run concurrently: only what lives under our private parent is ours)."""
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    text = loops + Path("/proc/mounts").read_text()
    return [ln for ln in text.splitlines() if str(parent) in ln]


def _db_after(base: Path, log: Path, tmp: Path, end_mark: str | None) -> str:
    img = tmp / f"img-{end_mark}"
    replay(base, log, img, end_mark=end_mark)
    files = tmp / f"files-{end_mark}"
    rec = recover_ext4(img, files)
    assert rec.ok, rec.detail
    return sqlite_digest(files / DB_NAME)


@pytest.mark.parametrize(
    ("sut", "workload"),
    [
        ("sqlite-delete-extra", "update:txns=12,ops=2,order=rand,warmup=30,seed=9"),
        ("sqlite-wal-full", "app:kakaotalk,txns=15,warmup=20"),
    ],
)
def test_record_workload(tmp_path, sut, workload):
    parent = Path("/dev/shm") / f"crashlab-wltest-{os.getpid()}-{tmp_path.name}"
    parent.mkdir()
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            str(CRASHLAB),
            "record",
            "--backend",
            "fuse",
            "--sut",
            sut,
            "--workload",
            workload,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, CRASHLAB_TMPDIR=str(parent)),
    )
    assert proc.returncode == 0, proc.stderr
    assert _ours(parent) == [], "a loop device or mount leaked"
    assert list(parent.iterdir()) == [], "a working directory was left behind"
    parent.rmdir()
    meta = RunDir(out).meta().to_json()
    assert meta["sut"] == sut and meta["db"] == DB_NAME
    oracle = oracle_from_meta(RunMeta.from_json(meta))  # from the run directory alone
    n = oracle.spec.txns
    assert meta["runner"]["transactions"] == n
    with LogReader(RunDir(out).log) as r:
        marks = [e.label for e in r.entries() if e.is_mark]
    expected = ["setup-done"]
    for k in range(1, n + 1):
        expected += [f"txn-begin:{k}", f"txn-ack:{k}"]
    assert marks == [*expected, "workload-end"]
    base, _ = ensure_image("ext4")
    assert _db_after(base, RunDir(out).log, tmp_path, None) == oracle.final
    # Both SUTs promise durability: at txn-ack:K the content is state K.
    k = n // 2
    assert _db_after(base, RunDir(out).log, tmp_path, f"txn-ack:{k}") == oracle.digests[k]
