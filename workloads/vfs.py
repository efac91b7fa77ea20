"""Opening a database as its SUT does: through the SQLite VFS shim the SUT
runs on (``Sut.vfs``), loaded with ctypes from the shared library ``make
build`` builds beside the runner.  Python's sqlite3 module and the libraries
use the same system SQLite, so a VFS a library registers is one Python's
connections can name.  Every shim is a pass-through over SQLite's default
VFS (workloads/runner/vfsshim.h); what each changes:

* :data:`CKSUM_VFS` (cksumvfs.h) — 8 reserved bytes per page hold a checksum,
  verified on every read: the page format and what it detects are in the
  header.
* :data:`WALDIO_VFS` (waldiovfs.h) — the WAL in 4 KiB blocks, each frame's
  header embedded in its page.  The library translates between that layout
  and the one SQLite's own WAL recovery reads, so a database opened through
  it is recovered by the real SQLite; opened without it, SQLite finds no
  frame.  Registered with no pre-allocation, as a reader.
* :data:`SELECTIVE_VFS` (selvfs.h) — a new transaction's journal is kept in
  memory until its commit, but a journal that exists when it is opened (a
  hot journal a crash left) is the real file: opening a crash image through
  it runs stock SQLite's rollback, so the checkers see what the SUT's own
  next open would (tests/test_selective.py compares the two).

A shim with an ``env`` variable loads the library that variable names
instead of the built one: ``crashlab mutants`` sets it so the checkers
recover through the mutant's VFS, as the mutant's runner did.
"""

from __future__ import annotations

import ctypes
import sqlite3
import urllib.parse
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from harness.env import SELVFS_LIB, WALDIO_LIB, library_override
from harness.errors import CrashlabError

BUILD = Path(__file__).resolve().parent / "build"


@dataclass(frozen=True)
class Shim:
    name: str  # the name SQLite knows it by (the header's *_NAME)
    library: Path  # the built library
    register: str  # its C registration function, int f(int arg) or int f(void)
    arg: int | None = None
    env: str = ""  # names another build to load instead ("" = never)


CKSUM_VFS = "crashlab-cksum"
WALDIO_VFS = "crashlab-waldio"
SELECTIVE_VFS = "crashlab-selective"
SHIMS: dict[str, Shim] = {
    s.name: s
    for s in (
        Shim(CKSUM_VFS, BUILD / "libcrashlab-cksumvfs.so", "cksumvfs_register"),
        Shim(WALDIO_VFS, BUILD / "libcrashlab-waldiovfs.so", "waldiovfs_register", 0, WALDIO_LIB),
        # the page threshold (the argument) plays no part in opening
        Shim(SELECTIVE_VFS, BUILD / "libcrashlab-selvfs.so", "selvfs_register", 1, SELVFS_LIB),
    )
}


def library(name: str) -> Path:
    """The library this process loads for the VFS ``name``: the one its
    environment variable names, else the built one."""
    shim = SHIMS[name]
    return (library_override(shim.env) if shim.env else None) or shim.library


@cache
def register(name: str) -> str:
    """Register the VFS ``name`` in this process (once); its name.
    CrashlabError when it is unknown, or its library is not built or refuses."""
    if name not in SHIMS:
        raise CrashlabError(f"unknown VFS {name!r} (crashlab knows {', '.join(SHIMS)})")
    shim = SHIMS[name]
    sqlite3.sqlite_version  # noqa: B018  (the system SQLite is loaded first)
    path = library(name)
    if not path.exists():
        raise CrashlabError(f"{path} is not built: run `make build`")
    fn = getattr(ctypes.CDLL(str(path)), shim.register)
    rc = fn() if shim.arg is None else fn(shim.arg)
    if rc != 0:
        raise CrashlabError(f"registering the VFS {name} failed (SQLite code {rc})")
    return name


def connect(path: Path | str, vfs: str = "") -> sqlite3.Connection:
    """A connection to the database ``path`` through the VFS ``vfs`` ("":
    SQLite's default), in autocommit mode."""
    if not vfs:
        return sqlite3.connect(str(path), isolation_level=None)
    uri = f"file:{urllib.parse.quote(str(path))}?vfs={register(vfs)}"
    return sqlite3.connect(uri, uri=True, isolation_level=None)
