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

from harness.env import SELVFS_LIB, selvfs_library
from harness.errors import CrashlabError

NAME = "crashlab-selective"  # SELVFS_NAME
LIBRARY = Path(__file__).resolve().parent / "build" / "libcrashlab-selvfs.so"
# Another build of the library to load instead (``crashlab mutants``: the
# checkers then open through the mutant's VFS, as its runner does after a
# crash: a hot journal goes through the VFS's open).
LIBRARY_ENV = SELVFS_LIB


def library() -> Path:
    """The library this process loads: $CRASHLAB_SELVFS_LIB, else the built one."""
    return selvfs_library() or LIBRARY


@cache
def register() -> str:
    """Register the selective-journaling VFS in this process (once; the
    page threshold plays no part in opening); its name.  CrashlabError when
    the library is not built or refuses."""
    sqlite3.sqlite_version  # noqa: B018  (the system SQLite is loaded first)
    path = library()
    if not path.exists():
        raise CrashlabError(f"{path} is not built: run `make build`")
    rc = ctypes.CDLL(str(path)).selvfs_register(1)
    if rc != 0:
        raise CrashlabError(f"registering the selective-journaling VFS failed (SQLite code {rc})")
    return NAME
