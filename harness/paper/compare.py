"""The papers' numbers beside ours, and a sentence per row saying where and
why they differ, computed from the measured breakdown (never typed per
row): which region the difference is in, how many 4 KiB blocks it is, what
that region held here (files, jbd2 commits) and how many syncs each side
issued."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.report import papers
from harness.report.papers import PaperIo, ThesisVolume

BLOCK_KB = 4.0
# Differences up to this many KB are "the same" (one 4 KiB block, minus a
# rounding margin: our figures are averages over the transactions).
SAME_KB = 2.0

# What stays different whatever the breakdown says (the setting, not a
# measurement): said once per table, under it.
SETTING_NOTE = (
    "Setting differences that stay: the papers measured phones (eMMC/UFS, "
    "Android kernels of 2014-2016, their SQLite); here a recent Linux ext4 "
    "(4 KiB blocks, data=ordered) on a recorded loop device and this build's "
    "SQLite, averaged over the transactions of one run."
)

TABLE_SYSTEMS = {
    "OFF": "OFF",
    "WAL": "WAL",
    "DELETE": "DELETE",
    "TRUNCATE": "TRUNCATE",
    "PERSIST": "PERSIST",
}


def _kb(x: float) -> str:
    """KB with one decimal, a whole number without it."""
    return f"{x:.1f}".rstrip("0").rstrip(".") if x == round(x, 1) else f"{x:.1f}"


def _blocks(kb: float) -> str:
    """A KB difference as signed 4 KiB blocks."""
    n = kb / BLOCK_KB
    return (
        f"{n:+.0f} block{'s' if abs(round(n)) != 1 else ''}"
        if abs(n - round(n)) < 0.05
        else f"{n:+.1f} blocks"
    )


def table_sentence(p: PaperIo, v: dict[str, Any]) -> str:
    """Why our row differs from the paper's ``p``; ``v`` is a measured
    volume as in paper.json (``total_kb``, ``kb`` by category,
    ``jbd2_commits``, ``runner_syncs``, ``flushes``, ``files``)."""
    kb = v["kb"]
    journal = kb["ext4 journal"]
    data = v["total_kb"] - journal
    dd, dj, dt = data - p.data_kb, journal - p.journal_kb, v["total_kb"] - p.total_kb
    if abs(dt) <= SAME_KB and abs(dd) <= SAME_KB:
        head = f"Matches: {_kb(v['total_kb'])} KB against {_kb(p.total_kb)} KB."
    else:
        where = "the ext4 journal" if abs(dj) >= abs(dd) else "the data region"
        head = (
            f"{_kb(v['total_kb'])} KB against {_kb(p.total_kb)} KB ({_blocks(dt)} per "
            f"insert), mostly in {where}."
        )
    parts = [head]
    commits = v.get("jbd2_commits") or 0.0
    if abs(dj) > SAME_KB and not commits:
        parts.append(
            f"Journal {_kb(journal)} KB against {_kb(p.journal_kb)} ({_blocks(dj)}): "
            f"ext4 committed no jbd2 transaction here, because SQLite's sync "
            f"(fdatasync in this build's unix VFS) of a file whose size and blocks "
            f"did not change has no metadata to journal; the paper's kernel journaled "
            f"{p.journal_kb / BLOCK_KB:.0f} blocks per insert for the same sync."
        )
    elif abs(dj) > SAME_KB:
        each = f", {_kb(journal / commits)} KB each" if commits else ""
        parts.append(
            f"Journal {_kb(journal)} KB against {_kb(p.journal_kb)} ({_blocks(dj)}): "
            f"ext4 committed {commits:.2f} jbd2 transactions per insert here{each} "
            f"(descriptor, metadata copies, commit block), so the paper's kernel "
            f"journaled {'more' if dj < 0 else 'fewer'} metadata blocks or "
            f"{'more' if dj < 0 else 'fewer'} commits per insert."
        )
    if abs(dd) > SAME_KB:
        pages = kb["database file"] / BLOCK_KB
        rollback = p.mode in ("DELETE", "TRUNCATE", "PERSIST")
        parts.append(
            f"Data {_kb(data)} KB against {_kb(p.data_kb)} ({_blocks(dd)}): here "
            f"database file {_kb(kb['database file'])}, log file "
            f"{_kb(kb['log file'])}, ext4 metadata {_kb(kb['ext4 metadata'])}, other "
            f"{_kb(kb['other'])} KB"
            + (
                f"; SQLite wrote {pages:.1f} database pages per insert"
                + (f" (MAW: {papers.MAW_DB_PAGES})" if p.source == papers.MAW else "")
                if rollback
                else ""
            )
            + (
                ", and ext4 wrote no metadata in place inside the window (jbd2 "
                "checkpoints it later)"
                if kb["ext4 metadata"] == 0 and dd < 0
                else ""
            )
            + "."
        )
    stated = papers.PAPER_SYNCS.get((p.source, p.mode))
    syncs = v.get("runner_syncs")
    if stated is not None and syncs is not None and abs(syncs - stated) >= 0.5:
        parts.append(f"SQLite issued {syncs:.2f} syncs per insert here, the paper {stated}.")
    return " ".join(parts)


@dataclass(frozen=True)
class TableRow:
    source: str
    mode: str
    system: str
    paper: PaperIo
    ours: dict[str, Any] | None  # data_kb, journal_kb, total_kb, syncs
    sentence: str  # why it differs; or why there is no row of ours


def table_rows(volumes: dict[str, dict[str, Any]], why_not: dict[str, str]) -> list[TableRow]:
    """WALDIO Table 1 and MAW Table I, row by row, beside ours.
    ``volumes``: system key → measured volume (paper.json); ``why_not``:
    system key → why it has none."""
    rows = []
    for p in papers.PAPER_IO:
        key = TABLE_SYSTEMS[p.mode]
        v = volumes.get(key)
        if v is None or not v.get("split"):
            why = why_not.get(key) or (
                "no data/journal split on this file system" if v else "not selected (--systems)"
            )
            rows.append(TableRow(p.source, p.mode, key, p, None, why))
            continue
        journal = v["kb"]["ext4 journal"]
        ours = {
            "data_kb": v["total_kb"] - journal,
            "journal_kb": journal,
            "total_kb": v["total_kb"],
            "syncs": v.get("runner_syncs"),
        }
        rows.append(TableRow(p.source, p.mode, key, p, ours, table_sentence(p, v)))
    return rows


def fig8_sentence(t: ThesisVolume, v: dict[str, Any], offopt_total: float | None) -> str:
    """Our Fig. 8 bar against what the thesis's text says of it."""
    kb = v["kb"]
    said = []
    if t.total_kb is not None:
        said.append(f"total {_kb(v['total_kb'])} KB against about {_kb(t.total_kb)}")
    if t.db_kb is not None:
        said.append(f"database file {_kb(kb['database file'])} KB against {_kb(t.db_kb)}")
    if t.log_kb is not None:
        said.append(f"log file {_kb(kb['log file'])} KB against {_kb(t.log_kb)}")
    if t.journal_share is not None and v["total_kb"]:
        said.append(
            f"jbd2 {kb['ext4 journal'] / v['total_kb']:.0%} of the total against "
            f"{t.journal_share:.0%}"
        )
    if t.system == "WAL_OPT":
        said.append(
            f"{v['total_kb'] / offopt_total:.1f}x OFF_OPT's total against 1.9x"
            if offopt_total
            else "OFF_OPT is not measured here, so no ratio"
        )
    if t.note:
        said.append(t.note)
    return "; ".join(said) if said else "the thesis gives no number for it"
