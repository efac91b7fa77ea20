"""blktrace of a recorded device (``crashlab record --backend qemu
--blktrace``): the guest traces ``/dev/mapper/lw`` while the command runs
(harness/qemu/guest/record.sh), the host turns the binary trace into text
with ``blkparse`` (RUN/blktrace.txt, beside the log), and :func:`events`
reads that text back for the report's I/O timeline.

blkparse's default line: ``MAJ,MIN CPU SEQ TIME PID ACTION RWBS [SECTOR +
N] [PROCESS]``.  RWBS: a leading ``F`` is a pre-flush, then ``W``/``R``/
``D`` (discard)/``N`` (no data), then ``F`` again for FUA, ``S`` sync, ``M``
metadata.  Only queue events (``Q``: the file system's bios as the device
got them) are read."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CrashlabError

TRACE_NAME = "blktrace.txt"  # in the run folder
_LINE = re.compile(
    r"^\s*\d+,\d+\s+\d+\s+\d+\s+(?P<t>\d+\.\d+)\s+\d+\s+(?P<a>[A-Z]+)\s+"
    r"(?P<rwbs>[A-Z]+)(?:\s+(?P<sector>\d+)\s+\+\s+(?P<n>\d+))?"
)


@dataclass(frozen=True)
class Event:
    time_s: float
    rwbs: str
    sector: int | None  # 512-byte sectors; None for a flush without data
    sectors: int

    @property
    def preflush(self) -> bool:
        return self.rwbs.startswith("F")

    @property
    def op(self) -> str:
        """W, R, D (discard) or N (no data)."""
        body = self.rwbs[1:] if self.preflush else self.rwbs
        return body[:1]

    @property
    def fua(self) -> bool:
        body = self.rwbs[1:] if self.preflush else self.rwbs
        return "F" in body[1:]


def blkparse(trace_dir: Path, name: str, out: Path) -> None:
    """``blkparse`` of the binary trace ``trace_dir/name.blktrace.*`` into ``out``."""
    proc = subprocess.run(
        ["blkparse", "-i", name, "-D", str(trace_dir), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise CrashlabError(f"blkparse: {proc.stderr.strip() or proc.returncode}")


def events(path: Path) -> list[Event]:
    """The queue events of a blkparse text file, in time order."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = _LINE.match(line)
        if m is None or m["a"] != "Q":
            continue
        sector = int(m["sector"]) if m["sector"] is not None else None
        out.append(Event(float(m["t"]), m["rwbs"], sector, int(m["n"] or 0)))
    return sorted(out, key=lambda e: e.time_s)
