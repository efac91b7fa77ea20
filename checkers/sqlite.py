"""Database checkers for SQLite SUTs: DB-OPEN, DB-INTEGRITY and the content
verdicts (via :mod:`checkers.content`).

SQLite's own recovery is whatever opening the database does: a hot rollback
journal is rolled back, a WAL is recovered.  It runs here, on the files the
file-system recovery extracted, exactly as an application opening the
database after reboot would trigger it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import xxhash

from checkers.content import judge_content
from checkers.protocol import EngineChecker, ImageExaminer, KeyOfPieces, NativeExaminer, RunChecks
from checkers.verdict import Verdict, failed, passed, skipped
from harness.errors import CrashlabError
from workloads.oracle import Oracle, sqlite_digest
from workloads.vfs import connect

SIDECARS = ("", "-journal", "-wal")


@dataclass(frozen=True)
class DbFacts:
    """What opening one recovered database showed; independent of the
    crash point's marks, so it can be cached by file content."""

    exists: bool
    open_error: str | None = None
    integrity: str | None = None  # "ok" or SQLite's first complaints
    digest: str | None = None


def content_key(files: Path, db_name: str) -> bytes:
    """A digest of the database and its journal/WAL as extracted: two states
    whose files are identical recover identically."""

    def read(name: str) -> list[bytes] | None:
        p = files / name
        return [p.read_bytes()] if p.exists() else None

    return content_key_of(read, db_name)


def content_key_of(
    read: Callable[[str], Iterable[bytes | memoryview] | None], db_name: str
) -> bytes:
    """:func:`content_key` of files not (yet) written: ``read(name)`` gives
    the file's bytes as pieces, or None when there is no such file (the
    ext4 in-process extraction gives them from the image's mapping)."""
    h = xxhash.xxh3_128()
    for suffix in SIDECARS:
        pieces = read(db_name + suffix)
        if pieces is not None:
            # streamed: the digest of suffix NUL bytes NUL, as one update would be
            h.update(suffix.encode() + b"\0")
            for piece in pieces:
                h.update(piece)
            h.update(b"\0")
        else:
            h.update(suffix.encode() + b"\1")
    return h.digest()


def examine(db: Path, *, blockdev: bool = False, vfs: str = "") -> DbFacts:
    """Open ``db`` through ``vfs`` (the SUT's: "" SQLite's default, or the
    checksum VFS, whose verification failures are errors like any other),
    running SQLite's recovery, check its integrity and compute its content
    digest.  ``blockdev`` plays no part: SQLite always runs on a file of a
    file system."""
    if not db.exists():
        return DbFacts(exists=False)
    try:
        con = connect(db, vfs)
        try:
            rows = [r[0] for r in con.execute("PRAGMA integrity_check(8)")]
        finally:
            con.close()
        integrity = "ok" if rows == ["ok"] else "; ".join(rows)
        digest = sqlite_digest(db, vfs)
    except (sqlite3.Error, CrashlabError) as e:
        return DbFacts(exists=True, open_error=f"{type(e).__name__}: {e}")
    except UnicodeDecodeError as e:
        # SQLite's error message names a corrupted schema entry whose bytes
        # are not UTF-8: Python cannot even make the sqlite3 exception
        return DbFacts(exists=True, open_error=f"malformed database (a name is not UTF-8: {e})")
    return DbFacts(exists=True, integrity=integrity, digest=digest)


def refused(why: str) -> DbFacts:
    """The facts of a database not opened, for ``why`` (a file of it is a
    link of the recovered tree): DB-OPEN fails with it."""
    return DbFacts(exists=True, open_error=why)


IDS = ("DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX")  # per state


def judge(
    facts: DbFacts, oracle: Oracle, acked: int, begun: int, *, run_facts: None = None
) -> list[Verdict]:
    """The five database verdicts from what opening the database showed
    (``run_facts``: the engine protocol's; SQLite has no run-level facts)."""
    if not facts.exists:
        why = "the database file does not exist after recovery"
        return [failed("DB-OPEN", why)] + [
            skipped(i, "database missing (see DB-OPEN)")
            for i in ("DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX")
        ]
    if facts.open_error is not None:
        return [failed("DB-OPEN", f"opening and scanning failed: {facts.open_error}")] + [
            skipped(i, "database does not open (see DB-OPEN)")
            for i in ("DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX")
        ]
    out = [passed("DB-OPEN")]
    if facts.integrity == "ok":
        out.append(passed("DB-INTEGRITY"))
    else:
        out.append(
            failed(
                "DB-INTEGRITY",
                f"PRAGMA integrity_check: {facts.integrity}",
                expected="ok",
                actual=facts.integrity,
            )
        )
    assert facts.digest is not None
    return out + judge_content(facts.digest, oracle.digests, acked, begun)


class SqliteChecker:
    """SQLite's checker as the engine protocol (checkers/engines.py) has it:
    the functions above; no in-memory examination, no run-level checks."""

    IDS = IDS
    content_key = staticmethod(content_key)
    content_key_of: KeyOfPieces | None = staticmethod(content_key_of)
    examine = staticmethod(examine)
    refused = staticmethod(refused)
    judge = staticmethod(judge)
    examine_image: ImageExaminer[DbFacts] | None = None
    run_checks: RunChecks[None] | None = None

    def native_examiner(self, durable: Path) -> NativeExaminer[DbFacts] | None:
        return None


CHECKER: EngineChecker[DbFacts, None] = SqliteChecker()
