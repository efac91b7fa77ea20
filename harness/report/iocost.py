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

The journal region comes from the ext4 super block (``s_jnl_blocks``: a copy
of the journal inode's extent root, kept there for e2fsck).  The super block
is normally written at mount, so it is in the log; otherwise the base image
named in meta.json is read when its file is there.  A journal whose extent
tree does not fit in the inode (depth > 0), or another file system, leaves
the split unknown (None) -- never guessed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.logformat import LogReader

EXT4_SB_OFFSET = 1024
EXT4_SB_SIZE = 1024
EXT4_MAGIC = 0xEF53
EXTENT_MAGIC = 0xF30A
JNL_BACKUP_BLOCKS = 1  # s_jnl_backup_type: s_jnl_blocks holds the inode's i_block


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


def ext4_journal_extents(sb: bytes) -> list[tuple[int, int]] | None:
    """Byte ranges ``(start, end)`` of the journal, from an ext4 super block
    (the 1024 bytes at offset 1024); None when not ext4 or not resolvable
    from the super block alone."""
    if len(sb) < EXT4_SB_SIZE or struct.unpack_from("<H", sb, 0x38)[0] != EXT4_MAGIC:
        return None
    block = 1024 << struct.unpack_from("<I", sb, 0x18)[0]
    if struct.unpack_from("<I", sb, 0xE0)[0] == 0 or sb[0xFD] != JNL_BACKUP_BLOCKS:
        return None  # external journal, or no backup of the journal inode
    root = sb[0x10C:0x10C + 60]
    magic, entries, _max, depth = struct.unpack_from("<HHHH", root, 0)
    if magic != EXTENT_MAGIC or depth != 0 or entries > 4:
        return None
    out = []
    for i in range(entries):
        _lblk, length, hi, lo = struct.unpack_from("<IHHI", root, 12 + 12 * i)
        length &= 0x7FFF  # the high bit marks an unwritten extent
        start = ((hi << 32) | lo) * block
        out.append((start, start + length * block))
    return out


def _overlap(a: int, b: int, ranges: list[tuple[int, int]]) -> int:
    return sum(max(0, min(b, e) - max(a, s)) for s, e in ranges)


def _sb_from_log(reader: LogReader) -> bytes | None:
    """The first logged copy of bytes 1024..2047 of the device."""
    ss = reader.sectorsize
    for e in reader.entries():
        if not e.has_payload:
            continue
        start = e.sector * ss
        if start <= EXT4_SB_OFFSET and start + e.nr_sectors * ss >= EXT4_SB_OFFSET + EXT4_SB_SIZE:
            data = reader.payload(e)
            return data[EXT4_SB_OFFSET - start:EXT4_SB_OFFSET - start + EXT4_SB_SIZE]
    return None


def _sb_from_image(meta: dict[str, Any]) -> bytes | None:
    path = (meta.get("image") or {}).get("path")
    if not path or not Path(path).is_file():
        return None
    with open(path, "rb") as f:
        f.seek(EXT4_SB_OFFSET)
        return f.read(EXT4_SB_SIZE)


def _txn_count(acks_in_log: int, meta: dict[str, Any]) -> int:
    """Acknowledged transactions: the ``txn-ack:`` marks in the window,
    else the runner's count."""
    if acks_in_log:
        return acks_in_log
    return int(((meta.get("runner") or {}).get("transactions")) or 0)


def run_cost(run: Path, meta: dict[str, Any]) -> RunCost:
    """Measure a run's writes.log (streamed: only headers and the super block
    are read)."""
    with LogReader(run / "writes.log", salvage=True) as reader:
        journal = None
        if meta.get("fs") == "ext4":
            sb = _sb_from_log(reader) or _sb_from_image(meta)
            journal = ext4_journal_extents(sb) if sb else None
        ss = reader.sectorsize
        labels = {e.label for e in reader.entries() if e.is_mark}
        inside = "setup-done" not in labels  # no start mark: count from the start
        ended = False
        window = jbytes = flushes = writes = tail = acks = 0
        for e in reader.entries():
            if e.is_mark:
                if e.label == "setup-done":
                    inside = True
                elif e.label == "workload-end" and inside:
                    ended = True
                elif e.label.startswith("txn-ack:") and inside and not ended:
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
    runner = meta.get("runner")
    return RunCost(
        txns=_txn_count(acks, meta), window_bytes=window,
        journal_bytes=jbytes if journal is not None else None,
        flushes=flushes, writes=writes, tail_bytes=tail,
        runner=runner.get("workload") if isinstance(runner, dict) else None,
    )
