"""What a byte range of a SQLite database, rollback journal or WAL file
holds, from the file offset and the bytes written there.

Layouts: https://www.sqlite.org/fileformat2.html (database header, b-tree
page header, rollback journal, WAL).  Pages are numbered from 1 as SQLite
numbers them: page p is at file offset (p - 1) * page size.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
WAL_MAGICS = (0x377F0682, 0x377F0683)
WAL_HEADER = 32
WAL_FRAME_HEADER = 24
DEFAULT_JOURNAL_HEADER = 512  # one sector, as SQLite sizes it on Linux files
PAGE_KINDS = {2: "index interior", 5: "table interior", 10: "index leaf", 13: "table leaf"}


def file_kind(name: str, db_name: str) -> str | None:
    """ "db", "journal", "wal" for the database and its sidecars, else None."""
    if name == db_name:
        return "db"
    if name == db_name + "-journal":
        return "journal"
    if name == db_name + "-wal":
        return "wal"
    return None


def explain_db(offset: int, data: bytes, page_size: int) -> str:
    """Database file bytes [offset, offset + len(data))."""
    first = offset // page_size + 1
    last = (offset + len(data) - 1) // page_size + 1
    parts: list[str] = []
    kinds: list[str] = []
    for p in range(first, last + 1):
        start = (p - 1) * page_size - offset  # the page's first byte within data
        if start < 0:
            continue
        hdr = start + (100 if p == 1 else 0)
        if p == 1 and len(data) >= start + 32:
            counter, npages = struct.unpack_from(">II", data, start + 24)
            parts.append(f"db header: change counter {counter}, {npages} pages")
        if len(data) > hdr:
            kinds.append(PAGE_KINDS.get(data[hdr], "overflow/free"))
    pages = f"page {first}" if first == last else f"pages {first}-{last}"
    if kinds and len(set(kinds)) == 1:
        pages += f" ({kinds[0]})"
    elif kinds:
        pages += f" ({', '.join(kinds)})"
    if offset % page_size or len(data) % page_size:
        pages += f" bytes {offset % page_size}..{(offset + len(data) - 1) % page_size + 1}"
    return "; ".join([pages, *parts])


def _records(offset: int, data: bytes, header: int, size: int) -> list[tuple[int, int]]:
    """The fixed-size records (journal records, WAL frames) after a
    ``header``-byte file header that bytes ``[offset, offset+len(data))``
    touch: ``(record number from 0, where it starts within data)``; the
    start is negative for a record that began before ``data``."""
    end = offset + len(data)
    if end <= header:
        return []
    first = (max(offset, header) - header) // size
    last = (end - header - 1) // size
    return [(k, header + k * size - offset) for k in range(first, last + 1)]


def explain_journal(
    offset: int, data: bytes, page_size: int, header_size: int = DEFAULT_JOURNAL_HEADER
) -> str:
    """Rollback journal bytes: the header (nRec, the database size before the
    transaction) and records ``[page number][page][checksum]``."""
    parts: list[str] = []
    if offset < header_size:
        if offset == 0 and len(data) >= 28 and data[:8] == JOURNAL_MAGIC:
            nrec, _, dbsize, sector, psize = struct.unpack_from(">IIIII", data, 8)
            parts.append(f"journal header (nRec {nrec}, db was {dbsize} pages)")
            header_size, page_size = sector or header_size, psize or page_size
        elif offset == 0 and len(data) >= 28 and data[:8] == bytes(8):
            # SQLite writes the magic only after syncing the records, and
            # zeroes it to commit (PERSIST): without it the journal is not hot
            dbsize = struct.unpack_from(">I", data, 16)[0]
            parts.append(f"journal header without magic (not hot; db was {dbsize} pages)")
        else:
            parts.append("journal header")
    named: list[str] = []
    for k, at in _records(offset, data, header_size, page_size + 8):
        if 0 <= at and at + 4 <= len(data):
            named.append(f"{k + 1} (page {struct.unpack_from('>I', data, at)[0]})")
        else:
            named.append(f"{k + 1}")
    if named:
        parts.append(f"{'record' if len(named) == 1 else 'records'} {', '.join(named)}")
    return "journal " + "; ".join(parts) if not parts[0].startswith("journal") else "; ".join(parts)


def explain_wal(offset: int, data: bytes, page_size: int) -> str:
    """WAL bytes: the 32-byte header and frames ``[24-byte header][page]``;
    a frame header names its page and, on a commit frame, the database size."""
    parts: list[str] = []
    if offset < WAL_HEADER:
        if offset == 0 and len(data) >= 16 and struct.unpack_from(">I", data)[0] in WAL_MAGICS:
            _, _, psize, ckpt = struct.unpack_from(">IIII", data)
            parts.append(f"WAL header (checkpoint {ckpt})")
            page_size = psize or page_size
        else:
            parts.append("WAL header")
    named: list[str] = []
    for k, at in _records(offset, data, WAL_HEADER, WAL_FRAME_HEADER + page_size):
        if 0 <= at and at + 8 <= len(data):
            pgno, commit = struct.unpack_from(">II", data, at)
            c = f", commit: db {commit} pages" if commit else ""
            named.append(f"{k + 1} (page {pgno}{c})")
        else:
            named.append(f"{k + 1}")
    if named:
        parts.append(f"{'frame' if len(named) == 1 else 'frames'} {', '.join(named)}")
    return "WAL " + "; ".join(parts) if not parts[0].startswith("WAL") else "; ".join(parts)


def explain_file_bytes(kind: str, offset: int, data: bytes, page_size: int) -> str:
    """Dispatch on :func:`file_kind`."""
    if kind == "db":
        return explain_db(offset, data, page_size)
    if kind == "journal":
        return explain_journal(offset, data, page_size)
    return explain_wal(offset, data, page_size)


def describe_files(files: Path, db_name: str, page_size: int = 4096) -> list[str]:
    """One line per file the file-system recovery left, with what SQLite
    will make of the database's sidecars when it opens it (a rollback
    journal with its magic is hot and is rolled back; WAL frames up to the
    last commit frame are replayed)."""
    if not files.is_dir():
        return []
    out: list[str] = []
    for p in sorted(files.rglob("*")):
        rel = str(p.relative_to(files))
        if p.is_symlink():  # the recovered tree's: never followed
            out.append(f"{rel}: a symbolic link to {os.readlink(p)!r} (not followed)")
            continue
        if not p.is_file():
            continue
        size = p.stat().st_size
        kind = file_kind(rel, db_name)
        line = f"{rel} ({size} bytes)"
        with open(p, "rb") as f:
            head = f.read(32)
        if kind == "db" and size >= 100:
            counter, npages = struct.unpack_from(">II", head, 24)
            line += f": {size // page_size} pages, change counter {counter}"
        elif kind == "journal":
            if size == 0:
                line += ": empty (not hot)"
            elif head[:8] == JOURNAL_MAGIC:
                nrec, _, dbsize = struct.unpack_from(">III", head, 8)
                line += (
                    f": HOT (magic present, nRec {nrec}, db was {dbsize} pages): "
                    "opening the database rolls it back"
                )
            else:
                line += ": not hot (no magic in the header): ignored on open"
        elif kind == "wal" and size >= WAL_HEADER:
            frames = (size - WAL_HEADER) // (WAL_FRAME_HEADER + page_size)
            line += f": {frames} frames (replayed up to the last valid commit frame on open)"
        out.append(line)
    return out
