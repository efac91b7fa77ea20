"""ctypes binding over ``dhl/build/libdhl.so`` (built by ``make build``):
a connection to a database (:class:`Database`) and the one-call recoveries.

The C header ``dhl/include/dhl.h`` is the one definition of the API and the
on-disk format.  The loaded library and the structures it shares are in
``dhl/library.py``, slot headers of stored pages in ``dhl/headers.py``, the
engine's I/O served from Python in ``dhl/engine_io.py``; this module
re-exports them (``__all__``), so callers import the binding from here.
Set ``DHL_LIB`` to use another build of the library.
"""

from __future__ import annotations

import ctypes as C
import os
from collections.abc import Iterator
from dataclasses import dataclass

from dhl.engine_io import CaptureIO, IoOp, MemIO
from dhl.headers import Headers, file_headers, image_headers, valid_slot
from dhl.library import (
    _SCAN_CB,
    ERRORS,
    MAX_TREES,
    MODES,
    OPEN_CREATE,
    OPEN_FDATASYNC,
    OPEN_MODES,
    OPEN_NORECOVER,
    OPEN_READONLY,
    OPEN_TRUNCATE,
    PAGE_INTERIOR,
    PAGE_LEAF,
    TID_INV,
    Counters,
    DhlError,
    Info,
    Recovery,
    _Options,
    _PageInfo,
    lib,
    library_path,
)

__all__ = [
    "ERRORS",
    "MAX_TREES",
    "MODES",
    "OPEN_CREATE",
    "OPEN_MODES",
    "OPEN_FDATASYNC",
    "OPEN_NORECOVER",
    "OPEN_READONLY",
    "OPEN_TRUNCATE",
    "PAGE_INTERIOR",
    "PAGE_LEAF",
    "TID_INV",
    "CaptureIO",
    "Counters",
    "Database",
    "DhlError",
    "Headers",
    "Info",
    "IoOp",
    "MemIO",
    "PageInfo",
    "Reached",
    "Recovery",
    "SlotHeader",
    "file_headers",
    "image_headers",
    "lib",
    "library_path",
    "open_db",
    "recovered_in_memory",
    "recovered_on_device",
    "valid_slot",
]


@dataclass(frozen=True)
class SlotHeader:
    tid: int
    nrec: int
    free_off: int
    commit: int  # transaction size when the slot carries the (embedded) commit record
    type: int  # PAGE_LEAF / PAGE_INTERIOR (0 for header meta slots)
    array_ok: bool
    offsets: tuple[int, ...]


@dataclass(frozen=True)
class PageInfo:
    pgno: int
    is_data: bool
    valid_slot: int  # by the read rule at the connection's FCC; -1 none
    slots: tuple[SlotHeader, SlotHeader]  # page 0: meta slots, nrec = page count


@dataclass(frozen=True)
class Reached:
    """A page reached by walking the committed trees (:meth:`Database.reachable`)."""

    pgno: int
    parent: int  # page whose committed slot points here; 0 = the header page's root pointer
    slot: int  # slot picked by the read rule; -1 none committed; -2 committed slot impossible


class Database:
    """One connection to a DHL database (file, block device).  Use as a
    context manager or call close()."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: str = "tc",
        *,
        create: bool = False,
        truncate: bool = False,
        page_size: int = 0,
        ntrees: int = 0,
        readonly: bool = False,
        recover: bool = True,
        fdatasync: bool = False,
        cache_pages: int = 0,
        io: CaptureIO | MemIO | None = None,
    ) -> None:
        if mode not in OPEN_MODES:
            raise ValueError(f"unknown DHL mode {mode!r} (one of {', '.join(OPEN_MODES)})")
        L = lib()
        flags = (
            (OPEN_CREATE if create else 0)
            | (OPEN_TRUNCATE if truncate else 0)
            | (OPEN_READONLY if readonly else 0)
            | (0 if recover else OPEN_NORECOVER)
            | (OPEN_FDATASYNC if fdatasync else 0)
        )
        o = _Options(
            page_size,
            OPEN_MODES[mode],
            ntrees,
            flags,
            cache_pages,
            C.cast(C.pointer(io.struct), C.c_void_p) if io is not None else None,
        )
        self._io = io  # keeps the callbacks alive as long as the handle
        h = C.c_void_p()
        self.mode = mode
        self.path = str(path)
        rc = L.dhl_open(os.fsencode(path), C.byref(o), C.byref(h))
        self._h: int | None = h.value
        if rc:
            msg = L.dhl_errmsg(h).decode(errors="replace") if h.value else "out of memory"
            L.dhl_close(h)
            self._h = None
            raise DhlError(rc, msg)

    # -- plumbing -------------------------------------------------------
    def _handle(self) -> int:
        if self._h is None:
            raise DhlError(9, "database is closed")
        return self._h

    def _ok(self, rc: int) -> None:
        if rc:
            raise DhlError(rc, lib().dhl_errmsg(self._h).decode(errors="replace"))

    def close(self) -> None:
        if self._h is not None:
            lib().dhl_close(self._h)
            self._h = None

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    # -- transactions and records --------------------------------------
    def begin(self) -> None:
        self._ok(lib().dhl_begin(self._handle()))

    def commit(self) -> None:
        self._ok(lib().dhl_commit(self._handle()))

    def rollback(self) -> None:
        self._ok(lib().dhl_rollback(self._handle()))

    def insert(self, tree: int, key: int, value: bytes) -> None:
        self._ok(lib().dhl_insert(self._handle(), tree, key, value, len(value)))

    def update(self, tree: int, key: int, value: bytes) -> None:
        self._ok(lib().dhl_update(self._handle(), tree, key, value, len(value)))

    def delete(self, tree: int, key: int) -> None:
        self._ok(lib().dhl_delete(self._handle(), tree, key))

    def get(self, tree: int, key: int) -> bytes | None:
        """The value of key, or None when absent."""
        n = C.c_size_t()
        buf = C.create_string_buffer(2048)
        rc = lib().dhl_get(self._handle(), tree, key, buf, len(buf), C.byref(n))
        if rc == 1:
            return None
        self._ok(rc)
        if n.value > len(buf):
            buf = C.create_string_buffer(n.value)
            self._ok(lib().dhl_get(self._handle(), tree, key, buf, len(buf), C.byref(n)))
        return buf.raw[: n.value]

    def scan(self, tree: int, lo: int = -(2**63), hi: int = 2**63 - 1) -> list[tuple[int, bytes]]:
        """Records with lo <= key <= hi, in key order."""
        out: list[tuple[int, bytes]] = []

        def cb(_arg: object, key: int, val: C._Pointer, n: int) -> int:
            out.append((key, C.string_at(val, n)))
            return 0

        self._ok(lib().dhl_scan(self._handle(), tree, lo, hi, _SCAN_CB(cb), None))
        return out

    def items(self) -> Iterator[tuple[int, int, bytes]]:
        """Every record of every tree as (tree, key, value)."""
        for t in range(self.info().ntrees):
            for k, v in self.scan(t):
                yield t, k, v

    def count(self, tree: int) -> int:
        n = C.c_uint64()
        self._ok(lib().dhl_count(self._handle(), tree, C.byref(n)))
        return n.value

    # -- whole-database operations ---------------------------------------
    def digest(self) -> str:
        """The oracle content digest: 32 lowercase hex digits."""
        buf = C.create_string_buffer(33)
        self._ok(lib().dhl_digest(self._handle(), buf))
        return buf.value.decode()

    def check(self) -> None:
        """Structure check of the committed state; raises DhlError."""
        self._ok(lib().dhl_check(self._handle()))

    def recover(self) -> Recovery:
        self._ok(lib().dhl_recover(self._handle()))
        return self.recovery()

    def recovery(self) -> Recovery:
        """What recovery at open found (computed also when opened without it)."""
        r = Recovery()
        lib().dhl_recovery_info(self._handle(), C.byref(r))
        return r

    def counters(self) -> Counters:
        c = Counters()
        lib().dhl_counters(self._handle(), C.byref(c))
        return c

    def reset_counters(self) -> None:
        lib().dhl_reset_counters(self._handle())

    # -- introspection ---------------------------------------------------
    def info(self) -> Info:
        i = Info()
        self._ok(lib().dhl_info(self._handle(), C.byref(i)))
        return i

    @property
    def fcc(self) -> int:
        return self.info().fcc

    @property
    def txn_size(self) -> int:
        return self.info().txn_size

    def page(self, pgno: int) -> PageInfo:
        """Both slot headers of page pgno as stored on disk."""
        pi = _PageInfo()
        self._ok(lib().dhl_page_info(self._handle(), pgno, C.byref(pi)))
        slots = []
        for s in range(2):
            x = pi.slot[s]
            offs: tuple[int, ...] = ()
            if pgno != 0:
                arr = (C.c_uint16 * 20000)()
                n = C.c_uint32()
                self._ok(lib().dhl_slot_offsets(self._handle(), pgno, s, arr, len(arr), C.byref(n)))
                offs = tuple(arr[: min(n.value, len(arr))])
            slots.append(
                SlotHeader(x.tid, x.nrec, x.free_off, x.commit, x.type, bool(x.array_ok), offs)
            )
        return PageInfo(pi.pgno, bool(pi.is_data), pi.valid_slot, (slots[0], slots[1]))

    def headers(self, pgno: int) -> tuple[int, int, int, int, int]:
        """Cheaper :meth:`page` for scans: ``(tid0, tid1, commit0, commit1,
        valid_slot)`` as stored (page 0: the meta slots)."""
        pi = _PageInfo()
        self._ok(lib().dhl_page_info(self._handle(), pgno, C.byref(pi)))
        return (pi.slot[0].tid, pi.slot[1].tid, pi.slot[0].commit, pi.slot[1].commit, pi.valid_slot)

    def reachable(self) -> list[Reached]:
        """Every page reached from the committed roots through the read rule,
        in walk order, damage included (see ``dhl_reachable`` in dhl.h)."""
        cap = max(16, int(self.info().page_count))
        while True:
            pages, parents = (C.c_uint32 * cap)(), (C.c_uint32 * cap)()
            slots, n = (C.c_int32 * cap)(), C.c_uint32()
            self._ok(lib().dhl_reachable(self._handle(), pages, parents, slots, cap, C.byref(n)))
            if n.value <= cap:
                return [Reached(pages[i], parents[i], slots[i]) for i in range(n.value)]
            cap = n.value

    def read_page(self, pgno: int) -> bytes:
        buf = C.create_string_buffer(self.info().page_size)
        self._ok(lib().dhl_read_page(self._handle(), pgno, buf))
        return buf.raw


def open_db(path: str | os.PathLike[str], mode: str = "tc", **kw: object) -> Database:
    """Shorthand for Database(path, mode, **kw)."""
    return Database(path, mode, **kw)  # type: ignore[arg-type]  # **kw passes Database's options through


def recovered_in_memory(image: bytes, mode: str = "tc", *, blockdev: bool = False) -> bytes | str:
    """``image`` after DHL recovery run on it in memory (as a block device's
    with ``blockdev``), or the error code when it cannot be opened."""
    mem = MemIO(image, blockdev=blockdev)
    try:
        Database("(memory)", mode, io=mem).close()
    except DhlError as e:
        return e.code
    return mem.data


def recovered_on_device(dev: str, image: bytes, mode: str = "tc") -> bytes | str:
    """Write ``image`` to the block device ``dev``, recover it there and read
    it back; or the error code when it cannot be opened."""
    fd = os.open(dev, os.O_WRONLY)
    try:
        os.pwrite(fd, image, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        Database(dev, mode).close()
    except DhlError as e:
        return e.code
    with open(dev, "rb", buffering=0) as f:
        return f.read()
