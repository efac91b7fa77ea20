"""xLog against WAL: device KiB and flushes per transaction, recorded on
ext4 (``crashlab bench --only xlog``).

Each SUT runs the suts benchmark's op streams (TXNS one-operation
transactions per kind), one recording per SUT and kind (an xLog NVRAM
belongs to one database).  The window is txn-begin:1 .. txn-ack:TXNS, ext4's
journal included.  For xLog the NVRAM's writes (FUA writes past the disk,
harness/states/README.md "NVRAM") are counted apart from the disk's: the
disk KiB and flushes are what the flash device sees; the NVRAM's KiB are
what a battery-backed RAM absorbs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.bench.suts import KINDS, TXNS, WAL_OPT, device_windows, write_streams
from harness.env import temporary_folder
from harness.materialize.nvram import nvram_region
from harness.record.recorder import RecordRequest, record
from workloads.run import runner_command, runner_path
from workloads.suts import get_sut

NAME = "xlog"
SUTS = ("xlog", "sqlite-wal-full", WAL_OPT)


def device_figures(log: Path, nvram_at: int | None) -> tuple[float, float, float, float]:
    """(disk KiB, NVRAM KiB, flushes, FUA writes to the disk) per measured
    transaction of the one runner run in ``log`` (window txn-begin:1 ..
    txn-ack:TXNS); ``nvram_at``: the NVRAM's first byte, None without one."""
    w = device_windows(log, nvram_at)[0]
    return w.disk / 1024 / TXNS, w.nvram / 1024 / TXNS, w.flushes / TXNS, w.fua / TXNS


def run() -> None:
    runner_path()  # fails early with "run make build"
    print(f"{TXNS} one-operation transactions per kind, one recording per SUT and kind on ext4")
    print(
        f"{'SUT':42s} {'kind':6s} {'disk KiB/txn':>12s} {'NVRAM KiB/txn':>13s} "
        f"{'flush/txn':>9s} {'syncs/txn':>9s}"
    )
    disk: dict[tuple[str, str], float] = {}
    with temporary_folder("crashlab-bench-xlog-") as work:
        for kind, ops in write_streams(work).items():
            for name in SUTS:
                sut = get_sut(name)
                stats = work / "stats.json"
                out = work / "run"
                try:
                    rec = record(
                        RecordRequest(
                            runner_command(sut, ops, f"{kind}.db", stats=stats),
                            out,
                            fs="ext4",
                            nvram=sut.nvram,
                        )
                    )
                    if rec.meta().exit_status != 0:
                        raise RuntimeError(f"the recorded runner failed ({name}, {kind})")
                    region = nvram_region(rec.meta().extra)
                    d, nv, fl, _ = device_figures(rec.log, region[0] if region else None)
                finally:
                    shutil.rmtree(out, ignore_errors=True)
                w = json.loads(stats.read_text())["workload"]
                disk[(name, kind)] = d
                print(
                    f"{name:42s} {kind:6s} {d:12.1f} {nv:13.2f} {fl:9.2f} {w['fsyncs'] / TXNS:9.2f}"
                )
        for kind in KINDS:
            x = disk[("xlog", kind)]
            print(
                f"{kind}: xlog {x:.1f} disk KiB/txn; sqlite-wal-full "
                f"{disk[('sqlite-wal-full', kind)] / x:.1f}x that, WAL_OPT "
                f"{disk[(WAL_OPT, kind)] / x:.1f}x"
            )
