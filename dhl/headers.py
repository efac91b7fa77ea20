"""Slot headers of stored page images, decoded by the library in one call
(``dhl_image_headers``), and the read rule (``dhl_valid_slot``)."""

from __future__ import annotations

import ctypes as C
import os
from dataclasses import dataclass

from dhl.library import DhlError, lib


def valid_slot(tid0: int, tid1: int, fcc: int) -> int:
    """The read rule: the slot with the greater TID among those with
    TID != INV and TID <= fcc; -1 if neither."""
    return lib().dhl_valid_slot(tid0, tid1, fcc)


@dataclass(frozen=True)
class Headers:
    """Both slot headers of one stored page image, decoded by
    ``dhl_image_headers``: TIDs, commit fields, and ``aux`` (record count of
    a data page slot; page count of a header meta slot).  ``inplace``: the
    header page of a database in the thesis's format (``dhl_image_commit``)
    carries its one commit record, ``(FCC, size)`` (size 0: not counted);
    None for every other page and format."""

    pgno: int
    tid: tuple[int, int]
    commit: tuple[int, int]
    aux: tuple[int, int]
    inplace: tuple[int, int] | None = None


def image_headers(
    data: bytes, page_size: int, first_pgno: int, ntrees: int, *, nonzero: bool = False
) -> list[Headers]:
    """Decode the slot headers of the consecutive page images in ``data``
    (``len(data) // page_size`` pages, the first being ``first_pgno``) in one
    libdhl call.  With ``nonzero``, pages whose six decoded values are all 0
    (never written, or zeroed) are left out of the list: a crash image is
    mostly such pages, and they carry no TID for any count."""
    return _decode_headers(data, len(data) // page_size, page_size, first_pgno, ntrees, nonzero)


def _decode_headers(
    data: bytes | C.Array[C.c_char] | None,
    n: int,
    page_size: int,
    first_pgno: int,
    ntrees: int,
    nonzero: bool,
) -> list[Headers]:
    out = (C.c_uint32 * (6 * n + 1))()
    rc = lib().dhl_image_headers(data, page_size, first_pgno, n, ntrees, out)
    if rc:
        raise DhlError(rc, f"bad page size {page_size} or tree count {ntrees}")
    if nonzero:
        # the trailing all-zero pages are cut at C speed (rstrip), the rest
        # are tested one by one
        n = -(-len(bytes(out)[: 24 * n].rstrip(b"\0")) // 24)
    v = out[: 6 * n]
    inplace = _inplace(data, page_size) if first_pgno == 0 and n else None
    return [
        Headers(
            first_pgno + i,
            (v[6 * i], v[6 * i + 1]),
            (v[6 * i + 2], v[6 * i + 3]),
            (v[6 * i + 4], v[6 * i + 5]),
            inplace if first_pgno + i == 0 else None,
        )
        for i in range(n)
        if not nonzero or any(v[6 * i : 6 * i + 6])
    ]


def _inplace(data: bytes | C.Array[C.c_char] | None, page_size: int) -> tuple[int, int] | None:
    """The thesis's in-place commit record of the header page at the start
    of ``data`` (None: not that format, or unreadable)."""
    out = (C.c_uint32 * 3)()
    if data is None or lib().dhl_image_commit(data, page_size, out) or not out[0]:
        return None
    return out[1], out[2]


def file_headers(
    path: str | os.PathLike[str], page_size: int, ntrees: int, npages: int | None = None
) -> list[Headers]:
    """The slot headers of the first ``npages`` pages (default: every whole
    page) of a database file as stored, read in chunks."""
    out: list[Headers] = []
    chunk = max(1, (4 << 20) // page_size)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size // page_size
        total = size if npages is None else min(size, npages)
        p = 0
        while p < total:
            k = min(chunk, total - p)
            data = os.pread(f.fileno(), k * page_size, p * page_size)
            out += image_headers(data, page_size, p, ntrees)
            p += k
    return out
