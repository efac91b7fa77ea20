"""Opening a checksummed SQLite database as its SUT does: through
crashlab's checksum VFS (workloads/runner/cksumvfs.h: the page format and
what it detects), loaded from the shared library ``make build`` builds
beside the runner.  Python's sqlite3 module and the library use the same
system SQLite, so the VFS the library registers is one Python's
connections can name."""

from __future__ import annotations

import ctypes
import sqlite3
import urllib.parse
from functools import cache
from pathlib import Path

from harness.errors import CrashlabError
from workloads import waldiovfs

NAME = "crashlab-cksum"  # CKSUMVFS_NAME
LIBRARY = Path(__file__).resolve().parent / "build" / "libcrashlab-cksumvfs.so"


@cache
def register() -> str:
    """Register the checksum VFS in this process (once); its name.
    CrashlabError when the library is not built or refuses."""
    sqlite3.sqlite_version  # noqa: B018  (the system SQLite is loaded first)
    if not LIBRARY.exists():
        raise CrashlabError(f"{LIBRARY} is not built: run `make build`")
    lib = ctypes.CDLL(str(LIBRARY))
    rc = lib.cksumvfs_register()
    if rc != 0:
        raise CrashlabError(f"registering the checksum VFS failed (SQLite code {rc})")
    return NAME


def connect(path: Path | str, vfs: str = "") -> sqlite3.Connection:
    """A connection to the database ``path``, through the VFS ``vfs``
    ("": SQLite's default; :data:`NAME`: the checksum VFS; the WALDIO VFS,
    workloads/waldiovfs.py; the selective-journaling VFS, workloads/selvfs.py),
    in autocommit mode."""
    from workloads import selvfs

    if not vfs:
        return sqlite3.connect(str(path), isolation_level=None)
    registrars = {NAME: register, waldiovfs.NAME: waldiovfs.register,
                  selvfs.NAME: selvfs.register}
    if vfs not in registrars:
        raise CrashlabError(f"unknown VFS {vfs!r} (crashlab knows {', '.join(registrars)})")
    registrars[vfs]()
    uri = f"file:{urllib.parse.quote(str(path))}?vfs={vfs}"
    return sqlite3.connect(uri, uri=True, isolation_level=None)
