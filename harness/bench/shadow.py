"""OFF_OPT and DASH (DHL thesis §IV) beside journal OFF, DHL NOLOG and WAL:
which database pages each transaction writes, and device KiB and flushes
per transaction, recorded on ext4.

* Pages: each SUT of PAGE_SUTS records PAGE_TXNS one-row inserts into one
  table; the database file's history (harness/filetrace.py: the log's
  writes through the file's block map) gives, per transaction (txn-begin:K
  .. txn-ack:K), the set of database pages written.  Page 0 is the header
  page (SQLite's page 1, DHL's header page).  DASH has no such figure: its
  database name moves to another file every transaction, and the block map
  is of the final file only.
* Device: every SUT of SUTS runs the suts benchmark's op streams (TXNS
  one-operation transactions per kind) in one recording (as
  ``--only walopt`` does); the window is txn-begin:1 .. txn-ack:TXNS, ext4's
  journal included.  syncs/txn and KiB/txn are what the runner handed to the
  OS (its --stats: file and directory syncs; DASH's copies included).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from harness.bench.suts import WAL_OPT, device_table, write_streams
from harness.env import temporary_folder
from harness.filetrace import FileWrite, Mark, prepare
from harness.rundir import RunDir
from workloads.run import record_workload, runner_path
from workloads.suts import PAGE_SIZE

NAME = "shadow"
SUTS = ("sqlite-off", "off-opt", "dhl-nolog", "dash", "sqlite-wal-full", WAL_OPT)
PAGE_SUTS = ("sqlite-off", "off-opt", "dhl-nolog")
PAGE_TXNS = 20
PAGE_WORKLOAD = f"insert:txns={PAGE_TXNS},tables=1,warmup=100,seed=1"


def pages_per_txn(run: RunDir, work: Path) -> dict[int, set[int]]:
    """The database pages (file offset // PAGE_SIZE) each acknowledged
    transaction K of ``run`` wrote between txn-begin:K and txn-ack:K
    (``work``: an empty folder it may fill)."""
    work.mkdir(parents=True, exist_ok=True)
    trace = prepare(run, work)
    if isinstance(trace, str):
        raise RuntimeError(f"{run.path}: no file history: {trace}")
    out: dict[int, set[int]] = {}
    current: int | None = None
    with trace:
        for ev in trace.events():
            if isinstance(ev, Mark):
                kind, _, k = ev.label.partition(":")
                if kind == "txn-begin":
                    current = int(k.split(";")[0])
                    out[current] = set()
                elif kind == "txn-ack":
                    current = None
            elif isinstance(ev, FileWrite) and current is not None:
                for off, data in ev.pieces:
                    out[current].update(
                        range(off // PAGE_SIZE, (off + len(data) - 1) // PAGE_SIZE + 1)
                    )
    return out


def _pages(work: Path) -> None:
    print(
        f"pages of the database file written per transaction ({PAGE_WORKLOAD}, ext4; "
        f"page 0 = the header page)"
    )
    print(f"{'SUT':12s} {'pages/txn':>9s} {'txns writing page 0':>20s}  first transactions")
    for name in PAGE_SUTS:
        run = record_workload(name, PAGE_WORKLOAD, work / f"pages-{name}")
        pages = pages_per_txn(run, work / f"trace-{name}")
        mean = statistics.fmean(len(p) for p in pages.values())
        header = sum(0 in p for p in pages.values())
        first = " ".join(f"{k}:{sorted(p)}" for k, p in sorted(pages.items())[:4])
        print(f"{name:12s} {mean:9.2f} {header:>14d} of {len(pages):<3d}  {first}")


def run() -> None:
    runner_path()  # fails early with "run make build"
    with temporary_folder("crashlab-bench-shadow-") as work:
        write_streams(work)
        _pages(work)
        device_table(SUTS, work)
