"""WAL_OPT (DHL thesis §IV) against plain WAL: device KiB and flushes per
transaction, recorded on ext4.

WAL_OPT pre-allocates the WAL (100 frames of zeros, written and synced at
open: the runner's --wal-prealloc) and checkpoints every 100 pages, so that
a commit overwrites WAL blocks that already exist and never grows the file:
ext4's fdatasync then has no metadata to commit.  Beside it: plain WAL
(SQLite's default checkpoint interval, 1000 pages) and plain WAL with the
same interval as WAL_OPT, both with synchronous=FULL, and the NORMAL pair.
Each SUT runs the suts benchmark's op streams (TXNS one-operation
transactions per kind) in one recording; the window is txn-begin:1 ..
txn-ack:TXNS, ext4's journal included.

Beside them WALDIO (``waldio``: the same pre-allocated 100 frames and
checkpoint interval, the WAL in 4 KiB direct-I/O blocks with the frame
header embedded in the page, one aligned write and one fdatasync per
transaction; workloads/runner/waldiovfs.h), its synchronous=NORMAL twin, and
WALDIO with 1000 frames, which no checkpoint interrupts in the window: the
log's own cost per transaction.
"""

from __future__ import annotations

from harness.bench.suts import KINDS, WAL_100, WAL_OPT, device_table, write_streams
from harness.env import temporary_folder
from workloads.run import runner_path

NAME = "walopt"
WALDIO = "waldio"
SUTS = (
    "sqlite-wal-full",
    WAL_100,
    WAL_OPT,
    "sqlite-wal-normal",
    "sqlite:journal=wal,sync=normal,walopt=100",
    WALDIO,
    "sqlite:journal=wal,sync=normal,waldio=100",
    "sqlite:journal=wal,sync=full,waldio=1000",
)


def run() -> None:
    runner_path()  # fails early with "run make build"
    with temporary_folder("crashlab-bench-walopt-") as work:
        write_streams(work)
        dev = device_table(
            SUTS,
            work,
            " (synchronous=NORMAL syncs nothing in the window: its data reaches the device later)",
        )
        for kind in KINDS:
            opt = dev[(WAL_OPT, kind)]
            print(
                f"{kind}: WAL_OPT {opt:.1f} device KiB/txn, sqlite-wal-full "
                f"{dev[('sqlite-wal-full', kind)] / opt:.1f}x that, WAL every 100 pages "
                f"{dev[(WAL_100, kind)] / opt:.1f}x; WALDIO {dev[(WALDIO, kind)]:.1f} KiB/txn"
            )
