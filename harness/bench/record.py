"""Recording overhead: 1000 autocommit inserts (synchronous=FULL, one
process, Python's sqlite3 module) on ext4 recorded by the fuse backend vs
the same ext4 image on a plain loop device over a tmpfs file, in DELETE and
WAL mode, measured in the same run; prints the ratio (goal: <= 1.5x) and
what the daemon saw (requests, log bytes, time spent logging)."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from harness.env import temporary_folder
from harness.images import ensure_image
from harness.logformat import LogReader, LogSummary
from harness.record.fuse import FuseBackend
from harness.sysops import loop_mounted

NAME = "record"
INSERTS = 1000
REPEAT = 3

# The workload: times only the inserts, writes the seconds to argv[3].
WORKLOAD = r"""
import sqlite3, sys, time
mode, n, result = sys.argv[1], int(sys.argv[2]), sys.argv[3]
db = sqlite3.connect("bench.db", isolation_level=None)
db.execute(f"pragma journal_mode={mode}")
db.execute("pragma synchronous=full")
db.execute("create table t(id integer primary key, v text)")
v = "x" * 100
t0 = time.perf_counter()
for i in range(n):
    db.execute("insert into t values(?, ?)", (i, v))
elapsed = time.perf_counter() - t0
db.close()
open(result, "w").write(f"{elapsed}\n")
"""


def _command(mode: str, result: Path) -> list[str]:
    return [sys.executable, "-c", WORKLOAD, mode, str(INSERTS), str(result)]


def _plain(base: Path, work: Path, mode: str) -> float:
    """The workload on a plain loop device over a tmpfs copy of ``base``."""
    image = work / "plain.img"
    shutil.copyfile(base, image)
    mnt = work / "plain-mnt"
    mnt.mkdir()
    result = work / "plain.result"
    try:
        with loop_mounted(image, mnt, "ext4"):
            subprocess.run(_command(mode, result), cwd=mnt, check=True)
    finally:
        mnt.rmdir()
        image.unlink()
    return float(result.read_text())


def _fuse(base: Path, work: Path, mode: str) -> tuple[float, LogSummary, str]:
    """The workload recorded by the fuse backend; returns its time, the
    log's summary and the daemon's last report line."""
    wd = work / "fuse-run"
    wd.mkdir()
    image = wd / "disk.img"
    shutil.copyfile(base, image)
    log = work / "fuse.log"
    result = work / "fuse.result"
    status = FuseBackend().run(
        _command(mode, result), image=image, log=log, workdir=wd, fs="ext4", env=dict(os.environ)
    )
    if status != 0:
        raise RuntimeError(f"the workload failed with status {status}")
    with LogReader(log) as r:
        s = r.summary()
    daemon = (wd / "logfuse.err").read_text().strip().splitlines()[-1]
    shutil.rmtree(wd)
    log.unlink()
    return float(result.read_text()), s, daemon


def run() -> None:
    ok, why = FuseBackend.available()
    if not ok:
        print(f"skipped: the fuse backend is unavailable ({why})")
        return
    base, _ = ensure_image("ext4")
    with temporary_folder("crashlab-bench-") as work:
        for mode in ("delete", "wal"):
            plain, fuse = [], []
            for _ in range(REPEAT):  # interleaved, so drift hits both alike
                plain.append(_plain(base, work, mode))
                t, s, daemon = _fuse(base, work, mode)
                fuse.append(t)
            p, f = statistics.median(plain), statistics.median(fuse)
            print(
                f"{mode:6s} {INSERTS} inserts: plain loop {p:.3f} s, fuse {f:.3f} s, "
                f"ratio {f / p:.2f}x (median of {REPEAT})"
            )
            print(
                f"       log: {s.entries} entries, {s.writes} writes, {s.flushes} flushes, "
                f"{s.bytes_written / INSERTS / 1024:.1f} KiB/txn"
            )
            print(f"       {daemon}")
