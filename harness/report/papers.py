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


# --- Stated in the papers' text (crashlab paper: harness/paper/) ----------

# Syncs per inserting transaction as the papers describe them: WALDIO §3
# (Fig. 2: "the first and the second fsync() are for synchronizing the
# rollback journal file ... The third fsync() is for synchronizing the
# updated database file ... PERSIST mode carries an additional fsync()";
# WAL and OFF synchronize one file once), MAW Table I's notes.
PAPER_SYNCS: dict[tuple[str, str], int] = {
    (WALDIO, "OFF"): 1,
    (WALDIO, "WAL"): 1,
    (WALDIO, "DELETE"): 3,
    (WALDIO, "TRUNCATE"): 3,
    (WALDIO, "PERSIST"): 4,
    (MAW, "PERSIST"): 4,
    (MAW, "WAL"): 1,
}

# MAW §II: "One record insert entails 3 database page update (12 KB)".
MAW_DB_PAGES = 3


@dataclass(frozen=True)
class ThesisVolume:
    """What the DHL thesis's text says of Fig. 8 (KB per insert; the plot's
    bars are not given as numbers): ``total_kb`` / ``db_kb`` / ``log_kb``
    where the text gives one, ``journal_share`` of the total, ``quote``."""

    system: str
    quote: str
    total_kb: float | None = None
    db_kb: float | None = None
    log_kb: float | None = None
    journal_share: float | None = None
    note: str = ""  # ours, not the thesis's: how the row maps to the figure


_EMBEDDED = (
    "the thesis's DHL embeds its commit metadata in the data page ('As we "
    "implement DHL in SQLite, we make use of metadata embedding'), as DHL_TC_OPT and "
    "DHL_CC_OPT do here"
)
DHL_FIG8 = "DHL thesis Fig. 8 (§IV text)"
THESIS_FIG8: tuple[ThesisVolume, ...] = (
    ThesisVolume(
        "OFF",
        "the total number of bytes written ... in the journal OFF mode ... about 10KB",
        total_kb=10,
    ),
    ThesisVolume(
        "OFF_OPT",
        "OFF_OPT mode writes only a single data page to the database file ... about 6KB",
        total_kb=6,
        db_kb=4,
    ),
    ThesisVolume(
        "WAL",
        "WAL mode appends approximately 2 pages (8KB) on average to the WAL "
        "file per insertion ... jbd2 accounts for as much as 68% of the total",
        log_kb=8,
        journal_share=0.68,
    ),
    ThesisVolume("WAL_OPT", "the total I/O volume of WAL_OPT is 1.9x higher than that of OFF_OPT"),
    *(
        ThesisVolume(
            key,
            "only one page (4KB) is written to the database file per "
            "transaction ... there is no external log file",
            db_kb=4,
            log_kb=0,
            note="" if key.endswith("_OPT") else _EMBEDDED,
        )
        for key in ("DHL_TC", "DHL_CC", "DHL_TC_OPT", "DHL_CC_OPT")
    ),
)


def thesis_fig8(system: str) -> ThesisVolume | None:
    """What the thesis's text says of ``system``'s Fig. 8 bar, if anything."""
    return next((t for t in THESIS_FIG8 if t.system == system), None)


# WALDIO (ATC'15) Table 2: operations per second on the paper's phone (1,000
# of each, one per transaction), the rows crashlab runs: its WAL modes and
# WALDIO with Full Sync and no group sync (crashlab's WALDIO syncs every
# commit and groups one transaction); LS-MVBT, persistent direct I/O,
# Normal Sync and Group Sync are not built here.
WALDIO_TABLE2: dict[str, tuple[int, int, int]] = {  # system key -> (insert, update, delete)
    "DELETE": (98, 97, 96),
    "TRUNCATE": (99, 98, 97),
    "PERSIST": (213, 212, 203),
    "WAL": (587, 556, 596),
    "WALDIO": (1219, 1254, 1197),  # WALDIO-FS + NoGS
}
WALDIO_TABLE2_NOT_BUILT = (
    "LS-MVBT (not built, as MVBT), WALDIO-PD (persistent direct I/O: a device "
    "without a volatile cache), WALDIO-NS (synchronous=NORMAL) and every "
    "Group Sync row (the multi-transaction group commit is not emulated)"
)
# xLog's talk slides, Conclusion
XLOG_SPEEDUP = 77  # "xLog logs up to 77x times faster than the traditional logging scheme"
XLOG_WA = (122.0, 1.6)  # "reduces the write amplification from 122x to 1.6x"
XLOG_RECORD_BYTES = 104  # the slides' benchmark: "4 byte key, 100 byte value"
