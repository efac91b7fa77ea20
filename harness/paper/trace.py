"""The DHL thesis's Fig. 9: the block trace of ten transactions, each
inserting two records, one panel per system.

One recording per system (``insert:txns=10,ops=2``); the trace is every
block write from the ``txn-begin:1`` mark to the end of the log (so the
close, e.g. WAL's checkpoint, is in it, as in the thesis), in the log's
order.  The x-axis is the log entry number, not time: a dm-log-writes log
(fuse or guest) keeps the order of the writes, not their times.  Each
write is named by the file or region of most of its bytes, with volume.py's
attribution (ext4 only; another file system's writes are "unattributed").
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.logformat import Entry, LogReader
from harness.paper.volume import VALUE_BYTES, attribution, labels, txn_window
from harness.report.systems import Resolved
from harness.rundir import RunDir
from workloads.run import record_workload

TXNS, OPS = 10, 2  # the thesis: "ten transactions, each of which inserts two records"
UNATTRIBUTED = "unattributed"
# The thesis's panels; DHL_TC/DHL_CC with and without metadata embedding
# (the thesis's own embed it, build.THESIS_DHL).  MVBT keeps its reason.
SYSTEMS = (
    "WAL",
    "WAL_OPT",
    "DASH",
    "MVBT",
    "DHL_TC",
    "DHL_CC",
    "DHL_TC_OPT",
    "DHL_CC_OPT",
    "OFF",
    "OFF_OPT",
)


def spec() -> str:
    """The workload of one trace recording."""
    return f"insert:txns={TXNS},ops={OPS},size={VALUE_BYTES}"


@dataclass(frozen=True)
class Write:
    n: int  # log entry number, counted from the txn-begin:1 mark
    block: int  # first file-system block written (4 KiB: the LBA / 8)
    kb: float
    region: str  # file name, else a volume.CATEGORIES name, else UNATTRIBUTED


@dataclass(frozen=True)
class Trace:
    fs: str
    txns: int  # acknowledged transactions
    commit: int  # entry number of the last transaction's acknowledgement
    flushes: list[int]  # entry numbers of the device cache flushes
    writes: list[Write]

    @property
    def kb(self) -> float:
        return sum(w.kb for w in self.writes)

    @property
    def kb_after_commit(self) -> float:
        """Written after the last acknowledgement: the close."""
        return sum(w.kb for w in self.writes if w.n > self.commit)

    @property
    def regions(self) -> dict[str, float]:
        """KB per region, largest first."""
        kb: dict[str, float] = {}
        for w in self.writes:
            kb[w.region] = kb.get(w.region, 0.0) + w.kb
        return dict(sorted(kb.items(), key=lambda r: -r[1]))

    @property
    def jumps(self) -> int:
        """Writes that do not start where the previous write ended."""
        ends = [w.block + max(1, round(w.kb / 4)) for w in self.writes]
        return sum(w.block != end for w, end in zip(self.writes[1:], ends, strict=False))

    def as_json(self) -> dict[str, Any]:
        """paper.json's form: the fields and the table's figures."""
        return {
            **asdict(self),
            "kb": self.kb,
            "kb_after_commit": self.kb_after_commit,
            "jumps": self.jumps,
            "regions": self.regions,
        }


def measure(res: Resolved, work: Path) -> Trace:
    """Record the system's ten two-insert transactions and extract the
    trace; the recording is deleted afterwards."""
    assert res.sut_name is not None
    out = work / "trace-rec"
    shutil.rmtree(out, ignore_errors=True)
    try:
        run = record_workload(
            res.sut_name, spec(), out, fs=res.fs, backend="qemu" if res.guest_only else "auto"
        )
        if run.meta().exit_status != 0:
            raise RuntimeError(f"the recorded runner exited {run.meta().exit_status}")
        return extract(run, work / "trace-views")
    finally:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(work / "trace-views", ignore_errors=True)


def extract(run: RunDir, work: Path) -> Trace:
    """The trace of a recorded insert run (see the module comment); views
    are made under ``work``."""
    meta = run.meta()
    with LogReader(run.log, salvage=True) as reader:
        entries = list(reader.entries())
        first, last, begin_last, acks = txn_window(entries)
        window = [e for e in entries[first:] if e.has_payload and not e.is_mark]
        bs = 4096
        named: dict[int, tuple[str, str]] = {}
        if meta.fs == "ext4" and meta.image is not None:
            att = attribution(run, entries, first, begin_last, last, work)
            bs = att.layout.block_size
            named = labels(att, {b for e in window for b in _blocks(e, reader.sectorsize, bs)})
        writes = [_write(e, reader.sectorsize, bs, named, first) for e in window]
        flushes = [e.index - first for e in entries[first:] if e.is_flush]
    return Trace(meta.fs, acks, last - first, flushes, writes)


def _blocks(e: Entry, ss: int, bs: int) -> range:
    """The file-system blocks an entry writes to."""
    start, end = e.sector * ss, (e.sector + e.nr_sectors) * ss
    return range(start // bs, (end - 1) // bs + 1)


def _write(e: Entry, ss: int, bs: int, named: dict[int, tuple[str, str]], first: int) -> Write:
    """One point of the trace: named by the region of most of its blocks."""
    votes: Counter[str] = Counter()
    for b in _blocks(e, ss, bs):
        cat, name = named.get(b, (UNATTRIBUTED, ""))
        votes[name or cat] += 1
    region = votes.most_common(1)[0][0]
    return Write(e.index - first, e.sector * ss // bs, e.nr_sectors * ss / 1024, region)
