"""Database checkers for xLog (workloads/runner/xlog.h): the engine's own
recovery, then SQLite's checks (:mod:`checkers.sqlite`).

After a crash xLog opens its database (SQLite's WAL recovery) and replays
the NVRAM's valid records the database lacks.  The check stage puts the
state's NVRAM beside the recovered database (``<db>.nvram``,
harness/materialize/nvram.py); ``crashlab-xlog-recover`` runs the engine's
very open path on the two (``xlog_recover``, the same C code the runner's
open runs: built beside the runner, so a mutant's runner brings its own),
and the database it leaves is examined as any SQLite database."""

from __future__ import annotations

import subprocess
from pathlib import Path

import xxhash

from checkers import sqlite
from checkers.protocol import EngineChecker
from checkers.sqlite import DbFacts
from harness.errors import CrashlabError
from harness.materialize.nvram import NVRAM_SUFFIX
from workloads.run import runner_path

IDS = sqlite.IDS
judge = sqlite.judge
refused = sqlite.refused
RECOVER_TIMEOUT_S = 60


def recover_tool() -> Path:
    """``crashlab-xlog-recover`` beside the runner in use."""
    tool = runner_path().with_name("crashlab-xlog-recover")
    if not tool.exists():
        raise CrashlabError(f"{tool} is not built: run `make build`")
    return tool


def content_key(files: Path, db_name: str) -> bytes:
    """The database's, its sidecars' and the NVRAM's bytes: equal keys
    recover identically."""
    nv = files / (db_name + NVRAM_SUFFIX)
    h = xxhash.xxh3_128(sqlite.content_key(files, db_name))
    h.update(nv.read_bytes() if nv.exists() else b"\1")
    return h.digest()


def examine(db: Path, *, blockdev: bool = False, vfs: str = "") -> DbFacts:
    """Run xLog's recovery on ``db`` and its NVRAM (``db`` + ".nvram"),
    then open, check and digest the database as SQLite does."""
    if not db.exists():
        return DbFacts(exists=False)
    nv = db.with_name(db.name + NVRAM_SUFFIX)
    cmd = [str(recover_tool()), "--db", str(db), "--nvram", str(nv)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RECOVER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return DbFacts(exists=True, open_error=f"xLog recovery hung ({RECOVER_TIMEOUT_S} s)")
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return DbFacts(exists=True, open_error=f"xLog recovery: {why}")
    return sqlite.examine(db, blockdev=blockdev, vfs=vfs)


class XlogChecker(sqlite.SqliteChecker):
    """xLog's checker as the engine protocol has it: SQLite's, but for the
    key and the examination, which take the NVRAM beside the database too
    (so no key of files not written: the NVRAM is written beside them)."""

    content_key = staticmethod(content_key)
    content_key_of = None
    examine = staticmethod(examine)


CHECKER: EngineChecker[DbFacts, None] = XlogChecker()
