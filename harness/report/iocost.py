"""I/O cost per transaction of a recorded run, from its writes.log and
meta.json: what reached the device, and (ext4) how much of it went to the
file system's journal region versus the data region -- the split of WALDIO
Table 1 and MAW Table I ("Data: EXT4 data region, Journal: EXT4 journal
region").

Window: the workload proper, from the ``setup-done`` mark to the
``workload-end`` mark (the whole log when a mark is missing).  Writes logged
after ``workload-end`` (unmount: write-back of what was never synced, journal
checkpoint) are counted apart as the *tail*: for SUTs that do not sync, that
is where their data goes.

The journal region is the file system's to tell
(:meth:`harness.fs.base.FileSystem.journal_ranges`; ext4 reads it from its
super block, ``harness/fs/ext4/superblock.py``); a file system that cannot
tell leaves the split unknown (None) -- never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.fs import get_fs
from harness.logformat import LogReader
from harness.rundir import RunMeta


@dataclass(frozen=True)
class RunCost:
    """Totals over the window; per-transaction figures are properties."""

    txns: int
    window_bytes: int
    journal_bytes: int | None  # of window_bytes, inside the fs journal; None: unknown
    flushes: int  # FLUSH entries in the window (the device cache flushes)
    writes: int  # write entries in the window
    tail_bytes: int  # logged after workload-end
    runner: dict[str, Any] | None  # crashlab-runner's counts of the workload phase

    def per_txn(self, value: float | None) -> float | None:
        return None if value is None or not self.txns else value / self.txns

    @property
    def data_bytes(self) -> int | None:
        return None if self.journal_bytes is None else self.window_bytes - self.journal_bytes

    @property
    def fsyncs(self) -> int | None:
        return None if self.runner is None else self.runner.get("fsyncs")

    @property
    def db_bytes(self) -> int | None:
        """Bytes SQLite/DHL handed to the OS (write calls), per the runner."""
        return None if self.runner is None else self.runner.get("bytes_written")


def _overlap(a: int, b: int, ranges: list[tuple[int, int]]) -> int:
    return sum(max(0, min(b, e) - max(a, s)) for s, e in ranges)


def _txn_count(acks_in_log: int, meta: RunMeta) -> int:
    """Acknowledged transactions: the ``txn-ack:`` marks in the window,
    else the runner's count."""
    if acks_in_log:
        return acks_in_log
    return int((meta.runner or {}).get("transactions") or 0)


def run_cost(run: Path, meta: RunMeta) -> RunCost:
    """Measure a run's writes.log (streamed: only headers and the super block
    are read)."""
    with LogReader(run / "writes.log", salvage=True) as reader:
        image = Path(meta.image.path) if meta.image else None
        journal = get_fs(meta.fs).journal_ranges(reader, image) if meta.fs else None
        ss = reader.sectorsize
        labels = {e.label for e in reader.entries() if e.is_mark}
        inside = "setup-done" not in labels  # no start mark: count from the start
        ended = False
        window = jbytes = flushes = writes = tail = acks = 0
        for e in reader.entries():
            if e.is_mark:
                label = e.label or ""  # a mark always has one (harness/logformat.py)
                if label == "setup-done":
                    inside = True
                elif label == "workload-end" and inside:
                    ended = True
                elif label.startswith("txn-ack:") and inside and not ended:
                    acks += 1
                continue
            if not inside:
                continue
            size = e.nr_sectors * ss if e.has_payload else 0
            if ended:
                tail += size
                continue
            if e.is_flush:
                flushes += 1
            if e.has_payload:
                writes += 1
                window += size
                if journal is not None:
                    start = e.sector * ss
                    jbytes += _overlap(start, start + size, journal)
    runner = meta.runner
    return RunCost(
        txns=_txn_count(acks, meta),
        window_bytes=window,
        journal_bytes=jbytes if journal is not None else None,
        flushes=flushes,
        writes=writes,
        tail_bytes=tail,
        runner=runner.get("workload") if isinstance(runner, dict) else None,
    )
