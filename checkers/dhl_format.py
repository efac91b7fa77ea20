"""An independent reader of DHL's page bytes, written from dhl/FORMAT.md
alone (not from the C engine), so that a judge does not see pages through
the code it judges.

It knows only the layout: a data page's two 12-byte slot headers, their
interleaved offset arrays, the records they point at; the header page's
two meta slots.  It answers one question the trace checks need: which bytes
of a page belong to a slot (its *footprint*: header, offset-array entries,
record bytes), so that a write that changes any of them can be caught.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SLOT_SIZE = 12  # u32 tid, u16 nrec, u16 free_off, u16 commit, u8 type, u8 0
ARRAY = 24  # entry i of slot s at ARRAY + 4i + 2s
REC_HDR = 10  # i64 key, u16 vlen
META0 = 32  # header page: meta slot s at META0 + s * (16 + 4 * ntrees)


@dataclass(frozen=True)
class Slot:
    tid: int
    nrec: int
    free_off: int
    commit: int
    type: int


def slot(page: bytes, s: int) -> Slot:
    """Slot header ``s`` (0 or 1) of a data page, as stored."""
    tid, nrec, free_off, commit, typ, _ = struct.unpack_from("<IHHHBB", page, s * SLOT_SIZE)
    return Slot(tid, nrec, free_off, commit, typ)


def meta_range(s: int, ntrees: int) -> tuple[int, int]:
    """Byte range of meta slot ``s`` of the header page (page 0)."""
    size = 16 + 4 * ntrees
    return META0 + s * size, META0 + (s + 1) * size


def footprint(page: bytes, s: int, pgno: int, ntrees: int) -> list[tuple[int, int, str]]:
    """The byte ranges ``(start, end, what)`` that slot ``s`` of page
    ``pgno`` owns: on the header page its meta slot; on a data page its
    header, its offset-array entries and its records (as far as they lie
    inside the page: a damaged slot owns what it claims)."""
    if pgno == 0:
        a, b = meta_range(s, ntrees)
        return [(a, b, f"meta slot {s}")]
    ps = len(page)
    h = slot(page, s)
    out = [(s * SLOT_SIZE, (s + 1) * SLOT_SIZE, f"slot header {s}")]
    for i in range(h.nrec):
        at = ARRAY + 4 * i + 2 * s
        if at + 2 > ps:
            break
        out.append((at, at + 2, f"offset {i} of slot {s}"))
        (off,) = struct.unpack_from("<H", page, at)
        if off + REC_HDR > ps:
            continue
        (vlen,) = struct.unpack_from("<H", page, off + 8)
        out.append((off, min(ps, off + REC_HDR + vlen), f"record {i} of slot {s} (offset {off})"))
    return out


def changed_bytes(old: bytes, new: bytes, s: int, pgno: int, ntrees: int) -> list[str]:
    """What of slot ``s``'s footprint (as ``old`` stored it) differs in
    ``new``: empty when a write left every byte of the slot in place."""
    return [what for a, b, what in footprint(old, s, pgno, ntrees) if old[a:b] != new[a:b]]
