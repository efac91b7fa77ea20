"""Selective journaling's I/O per transaction beside stock SQLite: device
KiB and flushes per transaction, recorded on ext4.

Each configuration runs the suts benchmark's op streams (TXNS transactions
of one 100-byte operation: one changed page besides the header, which
selective journaling sends through ext4's data journal alone) and a MULTI
stream (three operations on three tables: three pages, SQLite's rollback
journal) in one recording; the window is txn-begin:1 .. txn-ack:TXNS,
ext4's journal included.  Beside ``selective`` (ext4 data=journal): stock
DELETE with FULL and EXTRA and WAL with FULL on ext4's default data=ordered,
and DELETE with EXTRA on data=journal (every page, the journal's too,
written twice: the "journaling of journal" the thesis removes).
"""

from __future__ import annotations

from harness.bench.suts import KINDS, TXNS, record_streams, write_streams
from harness.env import temporary_folder
from workloads.run import runner_path
from workloads.suts import get_sut

NAME = "selective"
STREAMS = {**KINDS, "multi": f"insert:txns={TXNS},ops=3,tables=3,warmup=100"}
# (label, SUT, mount options)
CONFIGS = (
    ("selective", "selective", None),
    ("sqlite-delete-full", "sqlite-delete-full", None),
    ("sqlite-delete-extra", "sqlite-delete-extra", None),
    ("sqlite-wal-full", "sqlite-wal-full", None),
    ("delete-extra data=journal", "sqlite-delete-extra", "data=journal"),
)


def run() -> None:
    runner_path()  # fails early with "run make build"
    with temporary_folder("crashlab-bench-selective-") as work:
        write_streams(work, STREAMS)
        width = max(len(c[0]) for c in CONFIGS)
        print(
            f"{TXNS} transactions per kind (insert/update/delete: one 100-byte operation; "
            f"multi: three on three tables), one recording per configuration on ext4"
        )
        print(
            f"{'configuration':{width}s} {'kind':6s} {'dev KiB/txn':>11s} "
            f"{'dev flush/txn':>13s} {'syncs/txn':>9s} {'fs/sqlite journal txns':>22s}"
        )
        dev: dict[tuple[str, str], float] = {}
        for label, name, options in CONFIGS:
            sut = get_sut(name)
            mount = sut.mount_options if options is None else options
            for kind, kib, flushes, report in record_streams(sut, work, STREAMS, mount):
                sel = report.get("selective")
                paths = f"{sel['fs_journal_txns']}/{sel['sqlite_journal_txns']}" if sel else "-"
                dev[(label, kind)] = kib
                print(
                    f"{label:{width}s} {kind:6s} {kib:11.1f} {flushes:13.2f} "
                    f"{report['workload']['fsyncs'] / TXNS:9.2f} {paths:>22s}"
                )
        for kind in STREAMS:
            sel = dev[("selective", kind)]
            print(
                f"{kind}: selective {sel:.1f} device KiB/txn; sqlite-delete-full "
                f"{dev[('sqlite-delete-full', kind)] / sel:.2f}x that, sqlite-wal-full "
                f"{dev[('sqlite-wal-full', kind)] / sel:.2f}x"
            )
