"""The seed papers' published I/O figures, for comparison beside ours.

Every figure here is the papers' number, not a measurement of ours: WALDIO
(USENIX ATC'15), Table 1, and the multi-block atomic write paper (MAW),
Table I, as printed there.  Both tables measure one 100-byte insert
per transaction on ext4, split into the ext4 data region and the ext4
journal region, in KB.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperIo:
    source: str
    mode: str  # SQLite journal_mode
    data_kb: float
    journal_kb: float
    total_kb: float
    note: str = ""


WALDIO = "WALDIO (ATC'15) Table 1"
_JOJ = "(of the journal KB: ext4 journaling of SQLite's own journal file)"
MAW = "MAW Table I"

PAPER_IO: tuple[PaperIo, ...] = (
    PaperIo(WALDIO, "OFF", 8, 12, 20, f"JOJ 0 {_JOJ}"),
    PaperIo(WALDIO, "WAL", 8, 20, 28, f"JOJ 20 {_JOJ}"),
    PaperIo(WALDIO, "DELETE", 24, 56, 80, f"JOJ 44 {_JOJ}"),
    PaperIo(WALDIO, "TRUNCATE", 24, 48, 72, f"JOJ 36 {_JOJ}"),
    PaperIo(WALDIO, "PERSIST", 28, 52, 80, f"JOJ 40 {_JOJ}"),
    PaperIo(MAW, "DELETE", 32, 32, 64),
    PaperIo(MAW, "TRUNCATE", 32, 44, 76),
    PaperIo(MAW, "PERSIST", 36, 12, 48, "fdatasync 4 per transaction"),
    PaperIo(MAW, "WAL", 12, 24, 36, "fdatasync 1 per transaction"),
)

# MAW Table III: the same insert on F2FS (and ext4), split into SQLite's own
# file I/O (database and journal files: PaperIo.data_kb here) and the file
# system's (F2FS node blocks, ext4 journal: PaperIo.journal_kb), in KB.  Not
# part of PAPER_IO (whose columns are ext4 regions); harness/bench/maw.py
# prints it beside crashlab's F2FS measurement.
MAW_F2FS = "MAW Table III"
MAW_F2FS_IO: tuple[PaperIo, ...] = (
    PaperIo(MAW_F2FS, "PERSIST", 36, 16, 52, "F2FS; 4 fdatasync, a node block after each"),
    PaperIo(MAW_F2FS, "WAL", 12, 4, 16, "F2FS; 1 fdatasync"),
    PaperIo(MAW_F2FS, "MAW", 12, 4, 16, "F2FS; the database pages + one node block"),
)

# The published setting: one insert of a 100-byte value per transaction, ext4.
PAPERS_FS = "ext4"  # the file system the seed papers measured on
SETTING = f"{PAPERS_FS}, one 100-byte insert per transaction"


def modes() -> list[str]:
    """The journal modes the papers measured, in first-appearance order."""
    return list(dict.fromkeys(p.mode for p in PAPER_IO))


def figure(source: str, mode: str) -> PaperIo | None:
    for p in PAPER_IO:
        if p.source == source and p.mode == mode:
            return p
    return None
