"""The dm-log-writes log format: the one definition of it in crashlab.

Layout (little-endian; S = the log's sector size, the data device's logical
block size):

* bytes 0..S-1, the super block: ``u64 magic, u64 version, u64 nr_entries,
  u32 sectorsize``.  Bytes 28..31 may hold garbage (the kernel copies an
  uninitialised struct), so they are never validated.
* from byte S on, entries.  Each header fills one S-byte block:
  ``u64 sector`` (in units of S), ``u64 nr_sectors``, ``u64 flags``,
  ``u64 data_len``; a MARK's label follows (no NUL, ``data_len`` bytes), the
  rest is zeros.  Unless the entry is a DISCARD, ``nr_sectors * S`` payload
  bytes follow the header.

Semantics (what a crash-state enumerator needs): everything logged before a
FLUSH entry is durable once that entry is; a FLUSH entry that carries data
(a PREFLUSH+FUA write) applies the flush before its data; a FUA write is
durable where it appears; a MARK is a label in line with the writes.

The C side (``harness/fuse/logwrites.h``) mirrors these constants for the
recording daemon; ``tests/test_logformat.py`` checks that the two agree.
xfstests' ``replay-log`` is the reference reader: logs written here must be
readable by it, which is why non-mark headers keep their padding zeroed.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.confine import open_regular
from harness.errors import CrashlabError

MAGIC = 0x6A736677736872
VERSION = 1

FLUSH = 1
FUA = 2
DISCARD = 4
MARK = 8
METADATA = 16
KNOWN_FLAGS = FLUSH | FUA | DISCARD | MARK | METADATA
FLAG_NAMES = {FLUSH: "FLUSH", FUA: "FUA", DISCARD: "DISCARD", MARK: "MARK", METADATA: "METADATA"}

SUPER = struct.Struct("<QQQI")
ENTRY = struct.Struct("<QQQQ")
VALID_SECTOR_SIZES = (512, 1024, 2048, 4096)


class LogFormatError(CrashlabError):
    """A log that is truncated, foreign or corrupt; names the byte offset."""

    def __init__(self, path: Path | str, offset: int, what: str) -> None:
        super().__init__(f"{path}: byte {offset}: {what}")
        self.path = str(path)
        self.offset = offset
        self.what = what


def flag_names(flags: int) -> str:
    """``FLUSH|FUA`` style text for a flags word, ``NONE`` for 0."""
    names = [name for bit, name in FLAG_NAMES.items() if flags & bit]
    return "|".join(names) if names else "NONE"


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry.  The payload stays in the log: read it with
    :meth:`LogReader.payload`, so that walking a log never loads it."""

    index: int  # 0-based, the numbering of replay-log's --limit and --find
    offset: int  # byte offset of the header in the log
    sector: int  # first sector written, in units of the log's sector size
    nr_sectors: int
    flags: int
    label: str | None  # the mark label, for MARK entries

    @property
    def is_flush(self) -> bool:
        return bool(self.flags & FLUSH)

    @property
    def is_fua(self) -> bool:
        return bool(self.flags & FUA)

    @property
    def is_discard(self) -> bool:
        return bool(self.flags & DISCARD)

    @property
    def is_mark(self) -> bool:
        return bool(self.flags & MARK)

    @property
    def has_payload(self) -> bool:
        """True for entries whose data follows the header (writes, including
        the data of a FLUSH-with-data entry)."""
        return self.nr_sectors > 0 and not self.is_discard and not self.is_mark

    @property
    def is_write(self) -> bool:
        """A write or discard that changes device content."""
        return self.nr_sectors > 0 and not self.is_mark

    def payload_offset(self, sectorsize: int) -> int:
        return self.offset + sectorsize

    def end_offset(self, sectorsize: int) -> int:
        """Byte offset of the next entry's header."""
        data = self.nr_sectors * sectorsize if self.has_payload else 0
        return self.offset + sectorsize + data


@dataclass(frozen=True, slots=True)
class LogSummary:
    """Counts over a whole log (``crashlab log stat``)."""

    sectorsize: int
    nr_entries_super: int
    entries: int
    writes: int
    bytes_written: int
    flushes: int
    fua: int
    discards: int
    metadata: int
    marks: list[str]
    epochs: int  # FLUSH-delimited runs; the last one may be open
    salvaged: int  # entries read past a stale nr_entries


class Payloads(Protocol):
    """What reads the data of a log's writes: a :class:`LogReader`, or a
    cache in front of one."""

    @property
    def sectorsize(self) -> int: ...

    def payload(self, entry: Entry) -> bytes: ...


class LogReader(AbstractContextManager["LogReader"]):
    """Streaming reader of a dm-log-writes log.

    Opening validates the super block.  :meth:`entries` yields entries one at
    a time without reading payloads.  By default it stops at the super block's
    ``nr_entries`` and fails if the file ends first.  With ``salvage=True`` it
    walks past a stale ``nr_entries`` (a writer killed before it rewrote the
    super block) while the headers stay valid and complete, and
    :attr:`salvaged` says how many entries it found that way.  With
    ``device_bytes``, a write or discard that ends past that many bytes of
    the device is a :class:`LogFormatError` (a run's check: the base
    image's size, ``harness/validate.py``).  Only a regular file is opened.
    """

    def __init__(
        self, path: Path | str, *, salvage: bool = False, device_bytes: int | None = None
    ) -> None:
        self.path = Path(path)
        self.salvage = salvage
        self.salvaged = 0
        self.device_bytes = device_bytes
        try:
            self._fd = open_regular(self.path)
        except FileNotFoundError:
            raise CrashlabError(f"{self.path}: no such log") from None
        self.size = os.fstat(self._fd).st_size
        try:
            self._read_super()
        except BaseException:
            os.close(self._fd)
            raise

    def _read_super(self) -> None:
        raw = os.pread(self._fd, SUPER.size, 0)
        if len(raw) < SUPER.size:
            raise LogFormatError(self.path, len(raw), "truncated super block (not a log?)")
        magic, version, nr_entries, sectorsize = SUPER.unpack(raw)
        if magic != MAGIC:
            raise LogFormatError(self.path, 0, f"bad magic {magic:#x}: not a dm-log-writes log")
        if version != VERSION:
            raise LogFormatError(self.path, 8, f"unsupported log version {version}")
        if sectorsize not in VALID_SECTOR_SIZES:
            raise LogFormatError(self.path, 24, f"bad sector size {sectorsize}")
        self.version = version
        self.nr_entries = nr_entries
        self.sectorsize = sectorsize

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _parse(self, index: int, offset: int) -> Entry:
        """Parse and validate the header at ``offset``; raises on anything
        that is not a complete, well-formed entry."""
        s = self.sectorsize
        block = os.pread(self._fd, s, offset)
        if len(block) < s:
            raise LogFormatError(
                self.path, offset, f"entry {index}: truncated header ({len(block)} of {s} bytes)"
            )
        sector, nr_sectors, flags, data_len = ENTRY.unpack_from(block)
        if flags & ~KNOWN_FLAGS:
            raise LogFormatError(self.path, offset, f"entry {index}: unknown flags {flags:#x}")
        if flags == 0 and nr_sectors == 0:
            raise LogFormatError(self.path, offset, f"entry {index}: empty entry (zeros)")
        # what neither the kernel nor crashlab writes: flags that would make
        # an entry count as one kind and act as another
        if flags & MARK and flags != MARK:
            raise LogFormatError(
                self.path, offset, f"entry {index}: a mark with other flags ({flag_names(flags)})"
            )
        if flags & DISCARD and nr_sectors == 0:
            raise LogFormatError(self.path, offset, f"entry {index}: a discard of no sectors")
        label = None
        if flags & MARK:
            if data_len > s - ENTRY.size:
                raise LogFormatError(
                    self.path, offset, f"entry {index}: mark label of {data_len} bytes overflows"
                )
            raw = block[ENTRY.size : ENTRY.size + data_len]
            try:
                label = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise LogFormatError(
                    self.path, offset, f"entry {index}: mark label is not UTF-8"
                ) from None
        elif data_len != 0 or any(block[ENTRY.size :]):
            raise LogFormatError(self.path, offset, f"entry {index}: header padding not zero")
        entry = Entry(index, offset, sector, nr_sectors, flags, label)
        if (
            self.device_bytes is not None
            and entry.is_write
            and (sector + nr_sectors) * s > self.device_bytes
        ):
            raise LogFormatError(
                self.path,
                offset,
                f"entry {index}: sectors {sector}+{nr_sectors} end past the "
                f"device ({self.device_bytes} bytes)",
            )
        end = entry.end_offset(s)
        if end > self.size:
            raise LogFormatError(
                self.path,
                offset + s,
                f"entry {index}: truncated payload ({self.size - offset - s} of "
                f"{nr_sectors * s} bytes)",
            )
        return entry

    def entries(self) -> Iterator[Entry]:
        """Yield every entry in log order (see the class comment for where
        the walk ends)."""
        offset = self.sectorsize
        index = 0
        self.salvaged = 0
        while index < self.nr_entries:
            entry = self._parse(index, offset)
            yield entry
            offset = entry.end_offset(self.sectorsize)
            index += 1
        if not self.salvage:
            return
        while offset + self.sectorsize <= self.size:
            try:
                entry = self._parse(index, offset)
            except LogFormatError:
                return  # the torn or zeroed end of a killed writer's log
            self.salvaged += 1
            yield entry
            offset = entry.end_offset(self.sectorsize)
            index += 1

    def __iter__(self) -> Iterator[Entry]:
        return self.entries()

    def payload(self, entry: Entry) -> bytes:
        """The data an entry writes (empty for marks, flushes, discards)."""
        if not entry.has_payload:
            return b""
        n = entry.nr_sectors * self.sectorsize
        return os.pread(self._fd, n, entry.payload_offset(self.sectorsize))

    def summary(self) -> LogSummary:
        writes = bytes_written = flushes = fua = discards = metadata = entries = 0
        epochs = 1
        marks: list[str] = []
        for e in self.entries():
            entries += 1
            if e.is_flush:
                flushes += 1
                epochs += 1
            if e.is_fua:
                fua += 1
            if e.flags & METADATA:
                metadata += 1
            if e.is_mark:
                marks.append(e.label or "")
            elif e.is_discard:
                discards += 1
            elif e.has_payload:
                writes += 1
                bytes_written += e.nr_sectors * self.sectorsize
        return LogSummary(
            self.sectorsize,
            self.nr_entries,
            entries,
            writes,
            bytes_written,
            flushes,
            fua,
            discards,
            metadata,
            marks,
            epochs,
            self.salvaged,
        )


class LogWriter(AbstractContextManager["LogWriter"]):
    """Writes a dm-log-writes log.  The super block's ``nr_entries`` is
    rewritten after every FLUSH, FUA and MARK entry (as the kernel does) and
    on close, so a log cut short by a crash of its writer stays readable up
    to its last such entry, and beyond it with ``salvage``."""

    def __init__(self, path: Path | str, sectorsize: int = 512) -> None:
        if sectorsize not in VALID_SECTOR_SIZES:
            raise CrashlabError(f"bad sector size {sectorsize}")
        self.path = Path(path)
        self.sectorsize = sectorsize
        self.nr_entries = 0
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._offset = sectorsize
        self._write_super()

    def _write_super(self) -> None:
        block = SUPER.pack(MAGIC, VERSION, self.nr_entries, self.sectorsize)
        os.pwrite(self._fd, block.ljust(self.sectorsize, b"\0"), 0)

    def _append(self, sector: int, nr_sectors: int, flags: int, extra: bytes, data: bytes) -> None:
        header = ENTRY.pack(sector, nr_sectors, flags, len(extra)) + extra
        os.pwrite(self._fd, header.ljust(self.sectorsize, b"\0") + data, self._offset)
        self._offset += self.sectorsize + len(data)
        self.nr_entries += 1
        if flags & (FLUSH | FUA | MARK):
            self._write_super()

    def _check_data(self, data: bytes) -> int:
        if not data or len(data) % self.sectorsize:
            raise ValueError(f"write of {len(data)} bytes is not whole {self.sectorsize}-B sectors")
        return len(data) // self.sectorsize

    def write(self, sector: int, data: bytes, flags: int = 0) -> None:
        """Log a write of ``data`` at ``sector`` (``flags`` may add FUA or
        METADATA, or FLUSH for a PREFLUSH write that carries data)."""
        if flags & (DISCARD | MARK):
            raise ValueError("use discard() or mark()")
        self._append(sector, self._check_data(data), flags, b"", data)

    def flush(self) -> None:
        self._append(0, 0, FLUSH, b"", b"")

    def discard(self, sector: int, nr_sectors: int) -> None:
        if nr_sectors <= 0:
            raise ValueError("discard of no sectors")
        self._append(sector, nr_sectors, DISCARD, b"", b"")

    def mark(self, label: str) -> None:
        raw = label.encode("utf-8")
        if not raw or len(raw) > self.sectorsize - ENTRY.size:
            raise ValueError(f"mark label must be 1..{self.sectorsize - ENTRY.size} bytes")
        self._append(0, 0, MARK, raw, b"")

    def close(self) -> None:
        if self._fd >= 0:
            self._write_super()
            os.close(self._fd)
            self._fd = -1

    def __exit__(self, *exc: object) -> None:
        self.close()
