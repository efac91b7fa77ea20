"""The role vocabulary of triage: what a lost or torn write was, as a
short stable name (for signatures) read off the phrases the explainers
already give (``harness/explain/``, ``harness/fs/ext4/explain.py``), and
where in the workload it was issued (the kind of the last mark before
it).  The one place these names are defined; nothing here looks at
bytes: a new explainer phrase needs a new line in :data:`ROLES`.

Names carry no number (no sector, block, page, transaction or log
index), so a re-recording of the same workload names its writes alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Role:
    """One role: its ``name``, the explainer phrase it is read from
    (``pattern``, searched), and how a sentence ``says`` it."""

    name: str
    pattern: str
    says: str
    # named beside the phrase's first role too (a journal write holds its
    # header and records; a database write page 1 and more pages)
    also: bool = False


# Most specific first: the first role whose pattern a phrase holds names it.
ROLES: tuple[Role, ...] = (
    Role("nvram", r"^NVRAM bytes", "the emulated NVRAM"),
    Role("jbd2-superblock", r"jbd2 superblock", "the jbd2 journal superblock"),
    Role("jbd2-descriptor", r"jbd2 descriptor", "a jbd2 descriptor block"),
    Role("jbd2-revoke", r"jbd2 revoke", "a jbd2 revoke block"),
    Role("jbd2-commit", r"jbd2 commit", "a jbd2 commit block"),
    Role("jbd2-copy-inode", r"jbd2 txn \d+ copy of block \d+ \(inode table", "a journalled inode"),
    Role(
        "jbd2-copy-directory",
        r"jbd2 txn \d+ copy of block \d+ \(directory",
        "a journalled directory block",
    ),
    Role("jbd2-copy", r"jbd2 txn \d+ copy of block", "a journalled metadata block"),
    Role("jbd2-data", r"journal data \(no descriptor", "journal data"),
    Role("jbd2-block", r"jbd2 \S+ block of txn", "a jbd2 control block"),
    Role("inode-table", r"inode table", "an inode-table block"),
    Role("bitmap", r"(block|inode) bitmap", "an allocation bitmap"),
    Role("group-descriptors", r"group descriptors|reserved GDT", "the group descriptors"),
    Role("superblock", r"superblock", "the file-system superblock"),
    Role("directory-block", r"directory (block|\S+ block)", "a directory block"),
    Role("extent-tree", r"extent-tree block", "an extent-tree block"),
    Role("file-tail", r"past the end of the file", "bytes past a file's end"),
    Role("sqlite-journal-header-cleared", r"journal header without magic", "a journal header"),
    Role("sqlite-journal-header", r"journal header", "the rollback journal's header"),
    Role("sqlite-journal-record", r"records? \d", "rollback-journal records", also=True),
    Role("sqlite-wal-header", r"WAL header", "the WAL header"),
    Role("sqlite-wal-commit-frame", r"WAL frames? .*commit: db", "a WAL commit frame"),
    Role("sqlite-wal-frame", r"WAL frames? \d", "WAL frames"),
    Role("sqlite-db-header", r"db header:", "the database header page", also=True),
    Role("sqlite-db-page", r"\bpages? \d+(-\d+)? \(", "database pages", also=True),
    Role("dhl-commit", r"DHL page \d+.*with this write .*commit \d", "a DHL commit record"),
    Role("dhl-header-page", r"DHL page 0\b", "the DHL header page"),
    Role("dhl-page", r"DHL page \d+", "a DHL page"),
    Role("free-block", r"unowned block", "a free block"),
    Role("file-data", r"\(inode \d+\) bytes \d+", "file data"),
)
OTHER = Role("other", "", "bytes crashlab cannot name")
_COMPILED = tuple((r, re.compile(r.pattern)) for r in ROLES)
BY_NAME = {r.name: r for r in (*ROLES, OTHER)}
_ALSO = {r.name for r in ROLES if r.also}

# The phase of a write: the last mark before it, its number dropped.
PHASES = {
    "start": "during set-up",
    "setup-done": "after set-up, before the first transaction",
    "txn-begin": "inside a transaction, before its acknowledgement",
    "txn-ack": "after a transaction's acknowledgement",
    "workload-end": "after the workload",
}


def role_of(phrase: str) -> set[str]:
    """The roles an explainer phrase names: the first that fits and every
    ``also`` one that does (``other`` when none fits)."""
    names: set[str] = set()
    for role, rx in _COMPILED:
        if (role.also or not names - _ALSO) and rx.search(phrase):
            names.add(role.name)
    return names or {OTHER.name}


def roles_of(phrases: Iterable[str]) -> tuple[str, ...]:
    """The sorted distinct roles of one write's phrases (one per block or
    file range it hit); ``other`` only when nothing else is named."""
    names = set().union(*(role_of(p) for p in phrases if not p.startswith("...")))
    named = names - {OTHER.name}
    return tuple(sorted(named or names or {OTHER.name}))


def phase_of(label: str | None) -> str:
    """The phase a mark's label begins: its kind, without its number
    (``txn-begin:7`` -> ``txn-begin``); ``start`` before any mark."""
    if label is None:
        return "start"
    return re.sub(r":\d+$", "", label)


def says(roles: Sequence[str]) -> str:
    """The roles of one write in words (``a jbd2 descriptor block``)."""
    return " and ".join(BY_NAME.get(r, OTHER).says for r in roles) or OTHER.says


def phase_says(phase: str) -> str:
    """A phase in words."""
    return PHASES.get(phase, f"after a {phase!r} mark")
