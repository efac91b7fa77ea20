"""ctypes binding over ``dhl/build/libdhl.so`` (built by ``make build``).

The C header ``dhl/include/dhl.h`` is the one definition of the API and the
on-disk format; the ctypes structures below mirror its public structs and are
checked against ``dhl_abi_size`` when the library loads.  Set ``DHL_LIB`` to
use another build of the library.
"""

from __future__ import annotations

import ctypes as C
import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_TREES = 32
TID_INV = 0
MODES = {"tc": 0, "cc": 1, "tc_opt": 2, "cc_opt": 3, "nolog": 4}
OPEN_CREATE, OPEN_TRUNCATE, OPEN_READONLY, OPEN_NORECOVER, OPEN_FDATASYNC = 1, 2, 4, 8, 16
ERRORS = [
    "DHL_OK", "DHL_ENOTFOUND", "DHL_EEXISTS", "DHL_EINVAL", "DHL_EIO", "DHL_ENOTDHL",
    "DHL_EPAGESIZE", "DHL_ETRUNC", "DHL_ECORRUPT", "DHL_EMISUSE", "DHL_ENOMEM", "DHL_EFULL",
    "DHL_EMODE",
]
PAGE_LEAF, PAGE_INTERIOR = 1, 2


class DhlError(Exception):
    """A libdhl call failed: ``code`` is the DHL_E* name, the message says why."""

    def __init__(self, rc: int, message: str) -> None:
        self.rc = rc
        self.code = ERRORS[rc] if 0 <= rc < len(ERRORS) else f"DHL_E{rc}"
        super().__init__(f"{self.code}: {message}")


class _Options(C.Structure):
    _fields_ = [("page_size", C.c_uint32), ("mode", C.c_int), ("ntrees", C.c_uint32),
                ("flags", C.c_uint32), ("cache_pages", C.c_uint32), ("io", C.c_void_p)]


class Counters(C.Structure):
    _fields_ = [(n, C.c_uint64) for n in
                ("syncs", "pages_written", "bytes_written", "pages_read", "txns",
                 "recovered_pages")]


class Recovery(C.Structure):
    _fields_ = [(n, C.c_uint32) for n in
                ("max_commit_tid", "max_commit_size", "max_commit_count", "fcc", "txn_size",
                 "rolled_back", "invalid_headers", "scanned_pages", "max_tid", "next_tid")]


class Info(C.Structure):
    _fields_ = [("page_size", C.c_uint32), ("ntrees", C.c_uint32), ("flags", C.c_uint32),
                ("page_count", C.c_uint32), ("freelist", C.c_uint32), ("fcc", C.c_uint32),
                ("txn_size", C.c_uint32), ("roots", C.c_uint32 * MAX_TREES),
                ("valid_meta", C.c_uint32), ("file_pages", C.c_uint64)]


class _Slot(C.Structure):
    _fields_ = [(n, C.c_uint32) for n in ("tid", "nrec", "free_off", "commit", "type",
                                          "array_ok")]


class _PageInfo(C.Structure):
    _fields_ = [("pgno", C.c_uint32), ("is_data", C.c_uint32), ("valid_slot", C.c_int32),
                ("slot", _Slot * 2)]


class _Mem(C.Structure):
    """Mirror of ``struct dhl_mem``."""

    _fields_ = [("data", C.c_void_p), ("size", C.c_uint64), ("cap", C.c_uint64),
                ("writes", C.c_uint64), ("syncs", C.c_uint64), ("blockdev", C.c_uint64),
                ("hiwater", C.c_uint64)]


_SCAN_CB = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int64, C.POINTER(C.c_uint8), C.c_size_t)


_PREAD = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.c_size_t, C.c_uint64,
                     C.POINTER(C.c_size_t))
_PWRITE = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.c_size_t, C.c_uint64)
_SYNC = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int)
_SIZE = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_uint64))


class _Io(C.Structure):
    """Mirror of ``struct dhl_io``."""

    _fields_ = [("ctx", C.c_void_p), ("pread", _PREAD), ("pwrite", _PWRITE), ("sync", _SYNC),
                ("size", _SIZE), ("close", C.c_void_p), ("blockdev", C.c_int)]


def library_path() -> Path:
    """Where libdhl.so is: $DHL_LIB, else dhl/build/libdhl.so next to this file."""
    env = os.environ.get("DHL_LIB")
    return Path(env) if env else Path(__file__).resolve().parent / "build" / "libdhl.so"


_lib: C.CDLL | None = None


def lib() -> C.CDLL:
    """The loaded library (loaded once; its struct sizes checked)."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `make build` first")
    L = C.CDLL(str(path))
    P, u32, i64, sz = C.c_void_p, C.c_uint32, C.c_int64, C.c_size_t
    sig = {
        "dhl_open": (C.c_int, [C.c_char_p, C.POINTER(_Options), C.POINTER(P)]),
        "dhl_close": (C.c_int, [P]),
        "dhl_errmsg": (C.c_char_p, [P]),
        "dhl_begin": (C.c_int, [P]), "dhl_commit": (C.c_int, [P]),
        "dhl_rollback": (C.c_int, [P]), "dhl_in_txn": (C.c_int, [P]),
        "dhl_insert": (C.c_int, [P, u32, i64, C.c_char_p, sz]),
        "dhl_update": (C.c_int, [P, u32, i64, C.c_char_p, sz]),
        "dhl_delete": (C.c_int, [P, u32, i64]),
        "dhl_get": (C.c_int, [P, u32, i64, C.c_char_p, sz, C.POINTER(sz)]),
        "dhl_scan": (C.c_int, [P, u32, i64, i64, _SCAN_CB, P]),
        "dhl_count": (C.c_int, [P, u32, C.POINTER(C.c_uint64)]),
        "dhl_digest": (C.c_int, [P, C.c_char_p]),
        "dhl_check": (C.c_int, [P]), "dhl_recover": (C.c_int, [P]),
        "dhl_recovery_info": (None, [P, C.POINTER(Recovery)]),
        "dhl_counters": (None, [P, C.POINTER(Counters)]),
        "dhl_reset_counters": (None, [P]),
        "dhl_info": (C.c_int, [P, C.POINTER(Info)]),
        "dhl_page_info": (C.c_int, [P, u32, C.POINTER(_PageInfo)]),
        "dhl_slot_offsets": (C.c_int, [P, u32, C.c_int, C.POINTER(C.c_uint16), u32,
                                       C.POINTER(u32)]),
        "dhl_read_page": (C.c_int, [P, u32, C.c_char_p]),
        "dhl_valid_slot": (C.c_int, [u32, u32, u32]),
        "dhl_image_headers": (C.c_int, [C.c_char_p, u32, u32, u32, u32, C.POINTER(u32)]),
        "dhl_reachable": (C.c_int, [P, C.POINTER(u32), C.POINTER(u32), C.POINTER(C.c_int32), u32,
                                    C.POINTER(u32)]),
        "dhl_mem_io": (None, [C.POINTER(_Io), C.POINTER(_Mem)]),
        "dhl_abi_size": (sz, [C.c_int]),
    }
    for name, (res, args) in sig.items():
        f = getattr(L, name)
        f.restype, f.argtypes = res, args
    for i, st in enumerate((_Options, Counters, Recovery, Info, _PageInfo, _Mem, _Io)):
        if L.dhl_abi_size(i) != C.sizeof(st):
            raise RuntimeError(f"{path}: struct {st.__name__} size mismatch (rebuild?)")
    _lib = L
    return L


def valid_slot(tid0: int, tid1: int, fcc: int) -> int:
    """The read rule: the slot with the greater TID among those with
    TID != INV and TID <= fcc; -1 if neither."""
    return lib().dhl_valid_slot(tid0, tid1, fcc)


@dataclass(frozen=True)
class Headers:
    """Both slot headers of one stored page image, decoded by
    ``dhl_image_headers``: TIDs, commit fields, and ``aux`` (record count of
    a data page slot; page count of a header meta slot)."""

    pgno: int
    tid: tuple[int, int]
    commit: tuple[int, int]
    aux: tuple[int, int]


def image_headers(data: bytes, page_size: int, first_pgno: int, ntrees: int, *,
                  nonzero: bool = False) -> list[Headers]:
    """Decode the slot headers of the consecutive page images in ``data``
    (``len(data) // page_size`` pages, the first being ``first_pgno``) in one
    libdhl call.  With ``nonzero``, pages whose six decoded values are all 0
    (never written, or zeroed) are left out of the list: a crash image is
    mostly such pages, and they carry no TID for any count."""
    return _decode_headers(data, len(data) // page_size, page_size, first_pgno, ntrees, nonzero)


def _decode_headers(data: bytes | C.Array[C.c_char] | None, n: int, page_size: int,
                    first_pgno: int, ntrees: int, nonzero: bool) -> list[Headers]:
    out = (C.c_uint32 * (6 * n + 1))()
    rc = lib().dhl_image_headers(data, page_size, first_pgno, n, ntrees, out)
    if rc:
        raise DhlError(rc, f"bad page size {page_size} or tree count {ntrees}")
    if nonzero:
        # the trailing all-zero pages are cut at C speed (rstrip), the rest
        # are tested one by one
        n = -(-len(bytes(out)[: 24 * n].rstrip(b"\0")) // 24)
    v = out[: 6 * n]
    return [Headers(first_pgno + i, (v[6 * i], v[6 * i + 1]), (v[6 * i + 2], v[6 * i + 3]),
                    (v[6 * i + 4], v[6 * i + 5]))
            for i in range(n) if not nonzero or any(v[6 * i: 6 * i + 6])]


def file_headers(path: str | os.PathLike[str], page_size: int, ntrees: int,
                 npages: int | None = None) -> list[Headers]:
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


@dataclass(frozen=True)
class SlotHeader:
    tid: int
    nrec: int
    free_off: int
    commit: int   # transaction size when the slot carries the (embedded) commit record
    type: int     # PAGE_LEAF / PAGE_INTERIOR (0 for header meta slots)
    array_ok: bool
    offsets: tuple[int, ...]


@dataclass(frozen=True)
class PageInfo:
    pgno: int
    is_data: bool
    valid_slot: int          # by the read rule at the connection's FCC; -1 none
    slots: tuple[SlotHeader, SlotHeader]  # page 0: meta slots, nrec = page count


@dataclass(frozen=True)
class IoOp:
    """One I/O the engine issued through a :class:`CaptureIO`: a write of
    ``data`` at byte ``offset``, or a sync (``kind == "sync"``, no data)."""

    kind: str  # "write" | "sync"
    offset: int = 0
    data: bytes = b""


class CaptureIO:
    """A ``struct dhl_io`` over a regular file, in Python, that records every
    write and sync the engine issues (in issue order) in ``ops`` — the I/O
    shim that lets a checker crash DHL's own recovery.  Writes also reach the
    file; a sync is only recorded (the file is a scratch copy)."""

    def __init__(self, path: str | os.PathLike[str], *, blockdev: bool = False) -> None:
        self.fd = os.open(path, os.O_RDWR)
        self.ops: list[IoOp] = []
        self.blockdev = blockdev

        def pread(_ctx: object, buf: int, n: int, off: int, got: C._Pointer) -> int:
            try:
                data = os.pread(self.fd, n, off)
            except OSError as e:
                return -(e.errno or 5)
            C.memmove(buf, data, len(data))
            got[0] = len(data)
            return 0

        def pwrite(_ctx: object, buf: int, n: int, off: int) -> int:
            data = C.string_at(buf, n)
            if blockdev and off + n > os.fstat(self.fd).st_size:
                return -errno.ENOSPC  # a device does not grow
            try:
                os.pwrite(self.fd, data, off)
            except OSError as e:
                return -(e.errno or 5)
            self.ops.append(IoOp("write", off, data))
            return 0

        def sync(_ctx: object, _datasync: int) -> int:
            self.ops.append(IoOp("sync"))
            return 0

        def size(_ctx: object, out: C._Pointer) -> int:
            out[0] = os.fstat(self.fd).st_size
            return 0

        # the CFUNCTYPE objects must outlive every call: keep them on self
        self._fns = (_PREAD(pread), _PWRITE(pwrite), _SYNC(sync), _SIZE(size))
        self.struct = _Io(None, *self._fns, None, int(blockdev))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> CaptureIO:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemIO:
    """A database image held in memory, opened through libdhl's
    ``dhl_mem_io`` (pass it as ``Database(..., io=)``): recovery and checks
    run on the buffer, no file is read or written.  The buffer is reused by
    :meth:`load` and :meth:`read_file` (no handle may be open on it then):
    checkers examining thousands of images pay no fresh allocation each.

    Bytes past ``used`` (what was loaded, raised by every write) are kept
    zero, so a write past the end leaves a zero-filled gap as on a file,
    and a block device's image with a zero tail is loaded, copied and
    compared only up to ``used``; writes may grow the image up to the
    buffer's capacity (at least the ``cap`` asked, default the image size).
    With ``blockdev`` the image is a block device's: its size is fixed and
    the engine sees a block device (``struct dhl_io.blockdev``), as the
    SUT did when it ran on the raw recorded device."""

    def __init__(self, image: bytes | bytearray | memoryview = b"", cap: int | None = None,
                 *, blockdev: bool = False) -> None:
        self.mem = _Mem(None, 0, 0, 0, 0, int(blockdev), 0)
        self.struct = _Io()
        self._buf = bytearray()
        self._arr: C.Array[C.c_char] | None = None
        lib().dhl_mem_io(C.byref(self.struct), C.byref(self.mem))
        self.load(image, cap)

    def _reserve(self, n: int, cap: int | None, keep: int) -> None:
        """Make room for an image of ``n`` bytes whose first ``keep`` bytes
        the caller is about to overwrite; every other byte is zero after."""
        want = max(1, n, cap or 0)
        if want > len(self._buf):
            self._arr = None  # drop the export so the old buffer can go
            self._buf = bytearray(want)
            self._arr = (C.c_char * want).from_buffer(self._buf)
            self.mem.data, self.mem.cap = C.addressof(self._arr), want
        elif self.used > keep:  # past ``used`` the buffer is zero already
            self._buf[keep:self.used] = bytes(self.used - keep)
        self.mem.size = self.mem.writes = self.mem.syncs = self.mem.hiwater = 0

    def load(self, image: bytes | bytearray | memoryview, cap: int | None = None, *,
             used: int | None = None) -> MemIO:
        """Replace the image by a copy of ``image``; ``used``: the bytes of
        ``image`` past it are known to be zero, and are not copied (a block
        device's image is mostly such a tail)."""
        n = len(image)
        k = n if used is None else min(used, n)
        self._reserve(n, cap, k)
        self._buf[:k] = image[:k]
        self.mem.size, self.mem.hiwater = n, k
        return self

    def load_copy(self, other: MemIO) -> MemIO:
        """Replace the image by a copy of ``other``'s image."""
        with other.view() as v:
            return self.load(v, used=other.used)

    @property
    def used(self) -> int:
        """Past this many bytes the buffer is zero: what was loaded, raised
        by every write since (``struct dhl_mem.hiwater``)."""
        return int(self.mem.hiwater)

    def write(self, offset: int, data: bytes | memoryview) -> None:
        """Write ``data`` at ``offset``, as a pwrite on the image's file
        would: past the end it grows the image (a zero-filled gap), up to
        the buffer's capacity (beyond it the buffer is reallocated)."""
        end = offset + len(data)
        if end > len(self._buf):
            size, used = self.size, self.used
            keep = bytes(self._buf[:used])
            self._reserve(end, None, 0)
            self._buf[:used] = keep
            self.mem.size, self.mem.hiwater = size, used
        self._buf[offset:end] = data
        self.mem.size = max(self.mem.size, end)
        self.mem.hiwater = max(self.mem.hiwater, end)

    def read_file(self, path: str | os.PathLike[str]) -> MemIO:
        """Replace the image by the content of the file ``path``."""
        with open(path, "rb", buffering=0) as f:
            n = os.fstat(f.fileno()).st_size
            self._reserve(n, None, n)
            view = memoryview(self._buf)
            got = 0
            while got < n and (k := f.readinto(view[got:n])):
                got += k
            view.release()
        self.mem.size = self.mem.hiwater = got
        return self

    @property
    def size(self) -> int:
        return int(self.mem.size)

    @property
    def blockdev(self) -> bool:
        """Whether the image is a block device's (see the class comment)."""
        return bool(self.mem.blockdev)

    @blockdev.setter
    def blockdev(self, value: bool) -> None:
        self.mem.blockdev = self.struct.blockdev = int(value)

    @property
    def writes(self) -> int:
        """pwrite calls since the image was loaded."""
        return int(self.mem.writes)

    def view(self) -> memoryview:
        """The image as it is now, without a copy (release before :meth:`load`)."""
        return memoryview(self._buf)[: self.size]

    @property
    def data(self) -> bytes:
        """A copy of the image as it is now."""
        return bytes(self._buf[: self.size])

    def same_as(self, other: MemIO) -> bool:
        """Whether both images hold the same bytes."""
        if self.size != other.size:
            return False
        n = min(self.size, max(self.used, other.used))  # past it both are zero
        with memoryview(self._buf) as a, memoryview(other._buf) as b:
            return a[:n] == b[:n]

    def headers(self, page_size: int, ntrees: int, *, nonzero: bool = False) -> list[Headers]:
        """:func:`image_headers` of the image, without a copy."""
        return _decode_headers(self._arr, self.size // page_size, page_size, 0, ntrees, nonzero)


@dataclass(frozen=True)
class Reached:
    """A page reached by walking the committed trees (:meth:`Database.reachable`)."""

    pgno: int
    parent: int  # page whose committed slot points here; 0 = the header page's root pointer
    slot: int    # slot picked by the read rule; -1 none committed; -2 committed slot impossible


class Database:
    """One connection to a DHL database (file, block device).  Use as a
    context manager or call close()."""

    def __init__(self, path: str | os.PathLike[str], mode: str = "tc", *, create: bool = False,
                 truncate: bool = False, page_size: int = 0, ntrees: int = 0,
                 readonly: bool = False, recover: bool = True, fdatasync: bool = False,
                 cache_pages: int = 0, io: CaptureIO | MemIO | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown DHL mode {mode!r} (one of {', '.join(MODES)})")
        L = lib()
        flags = ((OPEN_CREATE if create else 0) | (OPEN_TRUNCATE if truncate else 0)
                 | (OPEN_READONLY if readonly else 0) | (0 if recover else OPEN_NORECOVER)
                 | (OPEN_FDATASYNC if fdatasync else 0))
        o = _Options(page_size, MODES[mode], ntrees, flags, cache_pages,
                     C.cast(C.pointer(io.struct), C.c_void_p) if io is not None else None)
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

    def scan(self, tree: int, lo: int = -(2**63), hi: int = 2**63 - 1
             ) -> list[tuple[int, bytes]]:
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
                self._ok(lib().dhl_slot_offsets(self._handle(), pgno, s, arr, len(arr),
                                                C.byref(n)))
                offs = tuple(arr[: min(n.value, len(arr))])
            slots.append(SlotHeader(x.tid, x.nrec, x.free_off, x.commit, x.type,
                                    bool(x.array_ok), offs))
        return PageInfo(pi.pgno, bool(pi.is_data), pi.valid_slot, (slots[0], slots[1]))

    def headers(self, pgno: int) -> tuple[int, int, int, int, int]:
        """Cheaper :meth:`page` for scans: ``(tid0, tid1, commit0, commit1,
        valid_slot)`` as stored (page 0: the meta slots)."""
        pi = _PageInfo()
        self._ok(lib().dhl_page_info(self._handle(), pgno, C.byref(pi)))
        return (pi.slot[0].tid, pi.slot[1].tid, pi.slot[0].commit, pi.slot[1].commit,
                pi.valid_slot)

    def reachable(self) -> list[Reached]:
        """Every page reached from the committed roots through the read rule,
        in walk order, damage included (see ``dhl_reachable`` in dhl.h)."""
        cap = max(16, int(self.info().page_count))
        while True:
            pages, parents = (C.c_uint32 * cap)(), (C.c_uint32 * cap)()
            slots, n = (C.c_int32 * cap)(), C.c_uint32()
            self._ok(lib().dhl_reachable(self._handle(), pages, parents, slots, cap,
                                         C.byref(n)))
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


def recovered_in_memory(image: bytes, mode: str = "tc", *, blockdev: bool = False
                        ) -> bytes | str:
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
