"""MAW's I/O per insert on F2FS, recorded in the guest, against the MAW
paper's tables (harness/report/papers.py: Table I on ext4, Table III on F2FS).

The paper's setting: one 100-byte insert per transaction.  Each SUT runs
``WORKLOAD`` recorded on F2FS by the kernel's dm-log-writes (qemu backend);
transaction K is the log from ``txn-begin:K`` to ``txn-ack:K``, and each of
its writes is put in an F2FS area by its device block
(harness/fs/f2fs_layout.py): data log, node log, metadata (checkpoint, SIT,
NAT, SSA) or another main-area segment.  Flushes are FLUSH entries; FUA
writes are counted apart.  Means over the acknowledged transactions.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from harness.env import temporary_folder
from harness.fs.f2fs_layout import AREAS, read_layout
from harness.images import verified_base_for_run
from harness.logformat import LogReader
from harness.report.papers import MAW, MAW_F2FS_IO, figure
from harness.rundir import RunDir

NAME = "maw"
WORKLOAD = "insert:txns=10,ops=1,tables=1,seed=1"  # the paper's one 100-byte insert
# MAW against the modes of the paper's Table III (PERSIST, WAL) and the
# rollback journal MAW replaces (DELETE, EXTRA so it is durable)
SUTS = {
    "maw": "MAW",
    "sqlite-persist-full": "PERSIST",
    "sqlite-wal-full": "WAL",
    "sqlite-delete-extra": "DELETE",
}
KIB = 1024


@dataclass
class TxnIo:
    """One transaction's device I/O, bytes per F2FS area."""

    txn: int
    flushes: int = 0
    fua: int = 0
    writes: int = 0
    areas: dict[str, int] | None = None


def io_per_txn(run: RunDir) -> list[TxnIo]:
    """Every acknowledged transaction of an F2FS ``run``: its writes by
    area (see the module comment)."""
    layout = read_layout(verified_base_for_run(run))
    out: list[TxnIo] = []
    cur: TxnIo | None = None
    with LogReader(run.log, salvage=True) as reader:
        ss = reader.sectorsize
        for e in reader.entries():
            if e.is_mark and e.label:
                kind, _, k = e.label.partition(":")
                if kind == "txn-begin":
                    cur = TxnIo(int(k.split(";")[0]), areas=dict.fromkeys(AREAS, 0))
                elif kind == "txn-ack" and cur is not None:
                    out.append(cur)
                    cur = None
                continue
            if cur is None or cur.areas is None:
                continue
            cur.flushes += e.is_flush
            if not e.is_write or e.is_discard:
                continue
            cur.writes += 1
            cur.fua += e.is_fua
            first, n = e.sector * ss // 4096, max(1, e.nr_sectors * ss // 4096)
            for block in range(first, first + n):
                cur.areas[layout.area(block)] += 4096
    return out


def mean_io(txns: list[TxnIo]) -> dict[str, float]:
    """KiB per area, flushes, FUA writes and writes per transaction (means)."""
    if not txns:
        return {}
    out = {a: statistics.fmean(t.areas[a] for t in txns if t.areas) / KIB for a in AREAS}
    for key in ("flushes", "fua", "writes"):
        out[key] = statistics.fmean(getattr(t, key) for t in txns)
    return out


def run() -> None:
    from workloads.run import record_workload

    with temporary_folder("crashlab-bench-maw-") as work:
        print(
            f"{WORKLOAD} on F2FS, recorded in the qemu guest; KiB per transaction by F2FS "
            f"area; paper: MAW Table III (F2FS: SQLite KB + file-system KB = total), "
            f"Table I (ext4: data + journal = total)"
        )
        print(
            f"{'SUT':20s} {'data':>6s} {'node':>6s} {'meta':>6s} {'other':>6s} {'total':>6s} "
            f"{'flush':>5s} {'fua':>4s}   paper F2FS        paper ext4"
        )
        for sut, mode in SUTS.items():
            rec = record_workload(sut, WORKLOAD, Path(work) / sut, fs="f2fs", backend="qemu")
            m = mean_io(io_per_txn(rec))
            total = sum(m[a] for a in AREAS)
            f2 = next((p for p in MAW_F2FS_IO if p.mode == mode), None)
            e4 = figure(MAW, mode)
            f2t = f"{f2.data_kb:g}+{f2.journal_kb:g}={f2.total_kb:g}" if f2 else "-"
            e4t = f"{e4.data_kb:g}+{e4.journal_kb:g}={e4.total_kb:g}" if e4 else "-"
            print(
                f"{sut:20s} {m['data']:6.1f} {m['node']:6.1f} {m['metadata']:6.1f} "
                f"{m['other']:6.1f} {total:6.1f} {m['flushes']:5.2f} {m['fua']:4.2f}   "
                f"{f2t:17s} {e4t}"
            )
