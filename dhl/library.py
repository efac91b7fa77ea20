"""The loaded ``dhl/build/libdhl.so`` (built by ``make build``; ``DHL_LIB``
names another build) and the C structures the binding shares with it.

The C header ``dhl/include/dhl.h`` is the one definition of the API; the
ctypes structures below mirror its public structs and are checked against
``dhl_abi_size`` when the library loads.
"""

from __future__ import annotations

import ctypes as C
import os
from pathlib import Path

MAX_TREES = 32
TID_INV = 0
# the commit modes (dhl.h enum dhl_mode); OPEN_MODES adds "auto", which
# opens a database in the mode it was created for (DHL_MODE_AUTO)
MODES = {"tc": 0, "cc": 1, "tc_opt": 2, "cc_opt": 3, "nolog": 4, "tc_thesis": 5, "cc_thesis": 6}
OPEN_MODES = {**MODES, "auto": 7}
OPEN_CREATE, OPEN_TRUNCATE, OPEN_READONLY, OPEN_NORECOVER, OPEN_FDATASYNC = 1, 2, 4, 8, 16
ERRORS = [
    "DHL_OK",
    "DHL_ENOTFOUND",
    "DHL_EEXISTS",
    "DHL_EINVAL",
    "DHL_EIO",
    "DHL_ENOTDHL",
    "DHL_EPAGESIZE",
    "DHL_ETRUNC",
    "DHL_ECORRUPT",
    "DHL_EMISUSE",
    "DHL_ENOMEM",
    "DHL_EFULL",
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
    _fields_ = [
        ("page_size", C.c_uint32),
        ("mode", C.c_int),
        ("ntrees", C.c_uint32),
        ("flags", C.c_uint32),
        ("cache_pages", C.c_uint32),
        ("io", C.c_void_p),
    ]


class Counters(C.Structure):
    _fields_ = [
        (n, C.c_uint64)
        for n in (
            "syncs",
            "pages_written",
            "bytes_written",
            "pages_read",
            "txns",
            "recovered_pages",
        )
    ]


class Recovery(C.Structure):
    _fields_ = [
        (n, C.c_uint32)
        for n in (
            "max_commit_tid",
            "max_commit_size",
            "max_commit_count",
            "fcc",
            "txn_size",
            "rolled_back",
            "invalid_headers",
            "scanned_pages",
            "max_tid",
            "next_tid",
        )
    ]


class Info(C.Structure):
    _fields_ = [
        ("page_size", C.c_uint32),
        ("ntrees", C.c_uint32),
        ("flags", C.c_uint32),
        ("page_count", C.c_uint32),
        ("freelist", C.c_uint32),
        ("fcc", C.c_uint32),
        ("txn_size", C.c_uint32),
        ("roots", C.c_uint32 * MAX_TREES),
        ("valid_meta", C.c_uint32),
        ("file_pages", C.c_uint64),
    ]


class _Slot(C.Structure):
    _fields_ = [(n, C.c_uint32) for n in ("tid", "nrec", "free_off", "commit", "type", "array_ok")]


class _PageInfo(C.Structure):
    _fields_ = [
        ("pgno", C.c_uint32),
        ("is_data", C.c_uint32),
        ("valid_slot", C.c_int32),
        ("slot", _Slot * 2),
    ]


class _Mem(C.Structure):
    """Mirror of ``struct dhl_mem``."""

    _fields_ = [
        ("data", C.c_void_p),
        ("size", C.c_uint64),
        ("cap", C.c_uint64),
        ("writes", C.c_uint64),
        ("syncs", C.c_uint64),
        ("blockdev", C.c_uint64),
        ("hiwater", C.c_uint64),
    ]


_SCAN_CB = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int64, C.POINTER(C.c_uint8), C.c_size_t)


_PREAD = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.c_size_t, C.c_uint64, C.POINTER(C.c_size_t))
_PWRITE = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.c_size_t, C.c_uint64)
_SYNC = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int)
_SIZE = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_uint64))


class _Io(C.Structure):
    """Mirror of ``struct dhl_io``."""

    _fields_ = [
        ("ctx", C.c_void_p),
        ("pread", _PREAD),
        ("pwrite", _PWRITE),
        ("sync", _SYNC),
        ("size", _SIZE),
        ("close", C.c_void_p),
        ("blockdev", C.c_int),
    ]


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
        "dhl_begin": (C.c_int, [P]),
        "dhl_commit": (C.c_int, [P]),
        "dhl_rollback": (C.c_int, [P]),
        "dhl_in_txn": (C.c_int, [P]),
        "dhl_insert": (C.c_int, [P, u32, i64, C.c_char_p, sz]),
        "dhl_update": (C.c_int, [P, u32, i64, C.c_char_p, sz]),
        "dhl_delete": (C.c_int, [P, u32, i64]),
        "dhl_get": (C.c_int, [P, u32, i64, C.c_char_p, sz, C.POINTER(sz)]),
        "dhl_scan": (C.c_int, [P, u32, i64, i64, _SCAN_CB, P]),
        "dhl_count": (C.c_int, [P, u32, C.POINTER(C.c_uint64)]),
        "dhl_digest": (C.c_int, [P, C.c_char_p]),
        "dhl_check": (C.c_int, [P]),
        "dhl_recover": (C.c_int, [P]),
        "dhl_recovery_info": (None, [P, C.POINTER(Recovery)]),
        "dhl_counters": (None, [P, C.POINTER(Counters)]),
        "dhl_reset_counters": (None, [P]),
        "dhl_info": (C.c_int, [P, C.POINTER(Info)]),
        "dhl_page_info": (C.c_int, [P, u32, C.POINTER(_PageInfo)]),
        "dhl_slot_offsets": (
            C.c_int,
            [P, u32, C.c_int, C.POINTER(C.c_uint16), u32, C.POINTER(u32)],
        ),
        "dhl_read_page": (C.c_int, [P, u32, C.c_char_p]),
        "dhl_valid_slot": (C.c_int, [u32, u32, u32]),
        "dhl_image_headers": (C.c_int, [C.c_char_p, u32, u32, u32, u32, C.POINTER(u32)]),
        "dhl_image_commit": (C.c_int, [C.c_char_p, sz, C.POINTER(u32)]),
        "dhl_reachable": (
            C.c_int,
            [P, C.POINTER(u32), C.POINTER(u32), C.POINTER(C.c_int32), u32, C.POINTER(u32)],
        ),
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
