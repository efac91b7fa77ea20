"""SQLite's WAL as a recorded run wrote it: which log entries wrote each
frame, which frames make one transaction, and what WAL recovery (wal.c,
``walIndexRecover``) keeps of a WAL's bytes.  The on-disk format is
https://www.sqlite.org/fileformat2.html#walformat:

* a 32-byte header: magic (0x377f0682: checksums over little-endian words,
  0x377f0683: big-endian), version, page size, checkpoint sequence, salt-1,
  salt-2, and a checksum of its first 24 bytes;
* frames of a 24-byte header (page number; for a commit frame the database
  size in pages after the commit, else 0; salt-1, salt-2; a checksum) and
  one page.  A frame's checksum covers its header's first 8 bytes and its
  page, chained from the checksum of the frame before (the first frame's:
  the header's).

Recovery reads frames from the first and stops at the first whose salts
differ from the header's or whose checksum does not hold; the WAL then ends
at the last valid commit frame before it.  So a commit frame that persisted
without an earlier frame of its transaction is never reached.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from harness.filetrace import FileWrite

WAL_HEADER = 32
FRAME_HEADER = 24
MAGIC = (0x377F0682, 0x377F0683)


@dataclass
class Frame:
    """One frame of one WAL generation (the WAL from one header write to
    the next).  ``units``: per 512-byte unit of the WAL file that holds
    part of the frame, the log entries that wrote that part as it finally
    reads (several: a block rewritten when the next frame is appended)."""

    generation: int
    index: int  # from 0 in its generation
    commit: bool = False
    txn: int = 0  # the transaction, counted over the run from 1 (the commit frame's)
    units: dict[int, set[int]] = field(default_factory=dict)

    def persisted(self, has: Callable[[int], bool]) -> bool:
        """Whether every part of the frame is on disk as written, given
        which log entries the crash state persisted (``has``)."""
        return all(any(has(e) for e in writers) for writers in self.units.values())


def frame_span(index: int, page_size: int) -> tuple[int, int]:
    """The file bytes ``[start, end)`` of frame ``index``."""
    start = WAL_HEADER + index * (FRAME_HEADER + page_size)
    return start, start + FRAME_HEADER + page_size


def _header(buf: bytes | bytearray) -> tuple[int, int, bytes] | None:
    """(checksum byte order: 1 big-endian, page size, salts) of a valid WAL
    header, else None."""
    if len(buf) < WAL_HEADER:
        return None
    magic, _version, page_size = struct.unpack(">III", buf[:12])
    if magic not in MAGIC or page_size < 512 or page_size & (page_size - 1):
        return None
    big = magic & 1
    if checksum(buf[:24], big) != struct.unpack(">II", buf[24:32]):
        return None
    return big, page_size, bytes(buf[16:24])


def checksum(data: bytes | bytearray, big: int, s: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """wal.c's ``walChecksumBytes`` over ``data`` (a multiple of 8 bytes)."""
    words = struct.unpack(f"{'>' if big else '<'}{len(data) // 4}I", data)
    s1, s2 = s
    for i in range(0, len(words), 2):
        s1 = (s1 + words[i] + s2) & 0xFFFFFFFF
        s2 = (s2 + words[i + 1] + s1) & 0xFFFFFFFF
    return s1, s2


@dataclass(frozen=True)
class Recovered:
    """What WAL recovery keeps of a WAL: ``frames`` valid frames up to the
    last commit frame, and why it stopped reading (the first frame it
    refused: "salt", "checksum", "page number", or "end of file")."""

    frames: int
    stopped_at: int
    why: str


def recover(buf: bytes | bytearray) -> Recovered:
    """WAL recovery over the bytes of a WAL file (an invalid header: nothing)."""
    head = _header(buf)
    if head is None:
        return Recovered(0, 0, "header")
    big, page_size, salts = head
    s = struct.unpack(">II", buf[24:32])
    last_commit = 0
    k = 0
    while True:
        start, end = frame_span(k, page_size)
        if end > len(buf):
            return Recovered(last_commit, k, "end of file")
        pgno, size = struct.unpack(">II", buf[start : start + 8])
        if bytes(buf[start + 8 : start + 16]) != salts:
            return Recovered(last_commit, k, "salt")
        if pgno == 0:
            return Recovered(last_commit, k, "page number")
        s = checksum(buf[start + FRAME_HEADER : end], big, checksum(buf[start : start + 8], big, s))
        if s != struct.unpack(">II", buf[start + 16 : start + 24]):
            return Recovered(last_commit, k, "checksum")
        k += 1
        if size:
            last_commit = k


def frames_of(writes: Iterable[FileWrite], unit: int = 512) -> list[Frame]:
    """Every frame the writes put in the WAL, in order, with its
    transaction (counted over generations) and the entries that wrote it
    as it finally reads.  A header write with new salts starts a
    generation: the frames of the one before are settled from the bytes as
    they were then."""
    buf = bytearray()
    frames: list[Frame] = []
    gen_frames: dict[int, Frame] = {}
    pieces: list[tuple[int, int, bytes]] = []  # (entry, offset, bytes) of this generation
    generation, salts = 0, b""

    def settle() -> None:
        head = _header(buf)
        if head is None:
            return
        _, page_size, gen_salts = head
        for entry, off, data in pieces:
            end = off + len(data)
            k = max(0, (off - WAL_HEADER) // (FRAME_HEADER + page_size))
            while (span := frame_span(k, page_size))[0] < end:
                lo, hi = max(off, span[0]), min(end, span[1])
                if lo < hi and buf[lo:hi] == data[lo - off : hi - off]:
                    fr = gen_frames.setdefault(k, Frame(generation, k))
                    for u in range(lo // unit, (hi - 1) // unit + 1):
                        fr.units.setdefault(u, set()).add(entry)
                k += 1
        for k in sorted(gen_frames):
            start, end = frame_span(k, page_size)
            fr = gen_frames[k]
            if end > len(buf) or bytes(buf[start + 8 : start + 16]) != gen_salts:
                continue  # never written whole in this generation
            fr.commit = struct.unpack(">I", buf[start + 4 : start + 8])[0] != 0
            frames.append(fr)

    for w in writes:
        for off, data in w.pieces:
            if off == 0 and len(data) >= WAL_HEADER and bytes(data[16:24]) != salts:
                settle()
                generation, salts = generation + 1, bytes(data[16 - off : 24 - off])
                gen_frames, pieces = {}, []
            if len(buf) < off + len(data):
                buf.extend(bytes(off + len(data) - len(buf)))
            buf[off : off + len(data)] = data
            pieces.append((w.entry, off, bytes(data)))
    settle()
    txn = 1
    for fr in frames:
        fr.txn = txn
        txn += fr.commit
    return frames


def transactions(frames: list[Frame]) -> list[list[Frame]]:
    """The frames grouped by transaction, each ending at its commit frame
    (frames after the last commit frame: not a transaction, left out)."""
    out: list[list[Frame]] = []
    cur: list[Frame] = []
    for fr in frames:
        cur.append(fr)
        if fr.commit:
            out.append(cur)
            cur = []
    return out
