"""Opening a selective-journaling SUT's database as the SUT does: through
the selective-journaling VFS (workloads/runner/selvfs.h), loaded from the
shared library ``make build`` builds beside the runner.  The VFS keeps a new
transaction's journal in memory until its commit, but a journal that exists
when it is opened (a hot journal a crash left) is the real file: so opening
a crash image through it runs stock SQLite's rollback, and the checkers see
what the SUT's own next open would (tests/test_selective.py compares the
two on crash images)."""

from __future__ import annotations

import ctypes
import sqlite3
from functools import cache
from pathlib import Path

from harness.errors import CrashlabError

NAME = "crashlab-selective"  # SELVFS_NAME
LIBRARY = Path(__file__).resolve().parent / "build" / "libcrashlab-selvfs.so"


@cache
def register() -> str:
    """Register the selective-journaling VFS in this process (once; the
    page threshold plays no part in opening); its name.  CrashlabError when
    the library is not built or refuses."""
    sqlite3.sqlite_version  # noqa: B018  (the system SQLite is loaded first)
    if not LIBRARY.exists():
        raise CrashlabError(f"{LIBRARY} is not built: run `make build`")
    rc = ctypes.CDLL(str(LIBRARY)).selvfs_register(1)
    if rc != 0:
        raise CrashlabError(f"registering the selective-journaling VFS failed (SQLite code {rc})")
    return NAME
