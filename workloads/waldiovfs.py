"""Opening a WALDIO database as its SUT does: through crashlab's WALDIO VFS
(workloads/runner/waldiovfs.h: the WAL's on-disk layout and what the VFS
promises), loaded from the shared library ``make build`` builds beside the
runner.  The library translates the WAL between its on-disk layout (4 KiB
blocks, each frame's header embedded in its page) and the layout SQLite's
own WAL recovery reads, so a recovered database opened through it is
recovered by the real SQLite; opened without it, SQLite finds no frame."""

from __future__ import annotations

import ctypes
import sqlite3
from functools import cache
from pathlib import Path

from harness.env import waldio_library
from harness.errors import CrashlabError

NAME = "crashlab-waldio"  # WALDIOVFS_NAME
LIBRARY = Path(__file__).resolve().parent / "build" / "libcrashlab-waldiovfs.so"


def library() -> Path:
    """The library this process loads: $CRASHLAB_WALDIO_LIB (another build:
    ``crashlab mutants`` makes the checkers recover through the mutant's VFS,
    as its runner did), else the built one."""
    return waldio_library() or LIBRARY


@cache
def register() -> str:
    """Register the WALDIO VFS in this process (once) with no
    pre-allocation, as a reader of recovered databases; its name.
    CrashlabError when the library is not built or refuses."""
    sqlite3.sqlite_version  # noqa: B018  (the system SQLite is loaded first)
    path = library()
    if not path.exists():
        raise CrashlabError(f"{path} is not built: run `make build`")
    lib = ctypes.CDLL(str(path))
    rc = lib.waldiovfs_register(0)
    if rc != 0:
        raise CrashlabError(f"registering the WALDIO VFS failed (SQLite code {rc})")
    return NAME
