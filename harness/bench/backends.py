"""Record time per backend, and the F2FS recovery guest's speed.

* The default matrix's MULTI workload (sqlite-wal-full) recorded by each
  available backend (fuse; qemu on ext4 and on F2FS), median of REPEAT:
  wall seconds of ``record`` (qemu: boot, record, power-off included) and
  the runner's own time for the workload.
* One F2FS recovery guest (harness/fs/f2fs.py): its boot, then STATES crash
  states of the F2FS recording (prefix states, in order) recovered one
  after the other, with fsck.f2fs: states per second."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from harness.env import temporary_folder
from harness.logformat import LogReader
from harness.materialize import replay
from harness.record.backends import BACKENDS
from harness.sweep.matrix import MULTI

NAME = "backends"
REPEAT = 2
STATES = 20
CASES = (("fuse", "ext4"), ("qemu", "ext4"), ("qemu", "f2fs"))


def _record(work: Path, backend: str, fs: str, i: int) -> tuple[float, float, Path]:
    from workloads.run import record_workload

    out = work / f"{backend}-{fs}-{i}"
    t0 = time.monotonic()
    run = record_workload("sqlite-wal-full", MULTI, out, fs=fs, backend=backend)
    wall = time.monotonic() - t0
    runner = (run.meta().runner or {}).get("elapsed_us", 0) / 1e6
    return wall, runner, out


def _f2fs_guest(work: Path, run: Path) -> None:
    from harness.fs.f2fs import RecoveryGuest
    from harness.images import verified_base_for_run
    from harness.rundir import RunDir

    base = verified_base_for_run(RunDir(run))
    with LogReader(run / "writes.log") as r:
        n = sum(1 for _ in r.entries())
    limits = [max(1, n * (k + 1) // STATES) for k in range(STATES)]
    guest = RecoveryGuest(work / "guest", fsck=True)
    try:
        img = work / "crash.img"
        replay(base, run / "writes.log", img, limit=limits[0])
        t0 = time.monotonic()
        guest.recover_one(img, work / "files-boot")
        boot = time.monotonic() - t0
        spent = 0.0
        for k, limit in enumerate(limits):
            replay(base, run / "writes.log", img, limit=limit)
            t1 = time.monotonic()
            rec = guest.recover_one(img, work / f"files{k}")
            spent += time.monotonic() - t1
            if not rec.ok:
                print(f"  state at entry {limit}: {rec.detail}")
    finally:
        guest.close()
    print(
        f"F2FS recovery guest: boot + first state {boot:.1f} s; {STATES} states in "
        f"{spent:.1f} s = {STATES / spent:.2f} states/s (one guest, fsck.f2fs included)"
    )


def run() -> None:
    with temporary_folder("crashlab-bench-") as work:
        f2fs_run = None
        for backend, fs in CASES:
            cls = BACKENDS[backend]
            ok, why = cls.available()
            if ok:
                ok, why = cls.supports(fs)
            if not ok:
                print(f"{backend:5s} {fs:5s} skipped: {why}")
                continue
            walls, runners = [], []
            for i in range(REPEAT):
                wall, runner, out = _record(work, backend, fs, i)
                walls.append(wall)
                runners.append(runner)
            print(
                f"{backend:5s} {fs:5s} record {statistics.median(walls):6.2f} s "
                f"(runner {statistics.median(runners):.2f} s; median of {REPEAT}; "
                f"sqlite-wal-full MULTI)"
            )
            if fs == "f2fs":
                f2fs_run = out
        if f2fs_run is not None:
            _f2fs_guest(work, f2fs_run)
