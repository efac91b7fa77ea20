"""The raw tier's DHL facts in one C call per state (``checkers/native/``).

:class:`NativeExaminer` gives, for a crash state of a raw-tier DHL run, the
:class:`checkers.dhl_facts.DhlFacts` that :func:`checkers.dhl_examine.examine_image` gives
— equal, field by field (``tests/test_raw_fast.py`` compares them on every
state of real runs) — but takes them in C: the image built in a reused
buffer from the durable image and the state's overlay, the engine's open,
recovery and second recovery through the *loaded* libdhl's entry points
(a mutant's, under ``crashlab mutants``), and the checker's own reading of
the format (``rawcheck.c``, restated from ``dhl/FORMAT.md`` like
``dhl_format.py``; it includes no engine header and shares no code with
``dhl/``).

The facts come back serialised; equal bytes are equal facts, so they are
also the key under which a worker reuses facts and verdicts.  Where the
Python path would raise (or the state is not a block device's image), the
call says so and the caller takes the Python path.
"""

from __future__ import annotations

import ctypes as C
import mmap
import os
import struct
from collections.abc import Sequence
from pathlib import Path

from checkers.dhl_facts import After, Before, DhlFacts
from dhl.binding import lib as dhl_lib

OK, FALLBACK = 0, 1
NONE = 0xFFFFFFFF
ZEROS = (1 << 64) - 1  # RC_ZEROS: an item of zeros, not of the log
LOG_RESIDENT = 32 << 20  # bytes of the mapped log a worker keeps resident behind its chunk
ABI = (0, 2, 3, 5, 6)  # the engine structs the checker declares (dhl_abi_size numbers)
ENTRY_POINTS = (
    "dhl_open",
    "dhl_close",
    "dhl_errmsg",
    "dhl_info",
    "dhl_recovery_info",
    "dhl_check",
    "dhl_digest",
    "dhl_reachable",
    "dhl_image_headers",
    "dhl_valid_slot",
)
_U32 = struct.Struct("<I")


class _Engine(C.Structure):
    """``struct rc_engine``: the loaded engine's entry points, in order."""

    _fields_ = [(n, C.c_void_p) for n in ENTRY_POINTS]


def library_path() -> Path:
    return Path(__file__).resolve().parent / "build" / "librawcheck.so"


_lib: C.CDLL | None = None


def available() -> bool:
    """Whether the native checker is built (``make build``)."""
    return library_path().exists()


def _load() -> C.CDLL:
    global _lib
    if _lib is None:
        L = C.CDLL(str(library_path()))
        P, u64 = C.c_void_p, C.c_uint64
        L.rc_new.restype, L.rc_new.argtypes = P, [C.POINTER(_Engine)]
        L.rc_free.restype, L.rc_free.argtypes = None, [P]
        L.rc_abi_size.restype, L.rc_abi_size.argtypes = C.c_size_t, [C.c_int]
        L.rc_examine.restype = C.c_int
        L.rc_examine.argtypes = [
            P,
            P,
            u64,
            u64,
            P,
            P,
            C.c_char_p,
            C.c_uint32,
            C.c_char_p,
            C.c_char_p,
            C.c_char_p,
            C.POINTER(P),
            C.POINTER(C.c_size_t),
        ]
        L.rc_examine_chunk.restype = C.c_int
        L.rc_examine_chunk.argtypes = [
            P,
            P,
            u64,
            u64,
            P,
            u64,
            P,
            P,
            C.c_uint32,
            C.c_char_p,
            C.c_char_p,
            C.c_char_p,
            P,
            P,
            C.POINTER(P),
            C.POINTER(C.c_size_t),
        ]
        engine = dhl_lib()
        for i in ABI:
            if L.rc_abi_size(i) != engine.dhl_abi_size(i):
                raise RuntimeError(
                    f"{library_path()}: engine struct {i} size differs from libdhl's (rebuild both)"
                )
        _lib = L
    return _lib


NSCALAR, NSTR, NARR = 13, 10, 8  # the layout of rawcheck.c's emit()
_SCALARS = struct.Struct(f"<{NSCALAR}I")


def _groups(v: Sequence[int], k: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(v[i : i + k]) for i in range(0, len(v), k))


def parse_facts(blob: bytes) -> DhlFacts:
    """The :class:`DhlFacts` serialised in ``blob`` (rawcheck.c's emit():
    the scalars, then the strings, then the lists, each in its order)."""
    sc = _SCALARS.unpack_from(blob, 0)
    at = _SCALARS.size
    unpack = _U32.unpack_from
    strs: list[str | None] = []
    for _ in range(NSTR):
        (n,) = unpack(blob, at)
        at += 4
        if n == NONE:
            strs.append(None)
        else:
            strs.append(blob[at : at + n].decode(errors="replace"))
            at += n
    arrs: list[tuple[int, ...] | None] = []
    for _ in range(NARR):
        (n,) = unpack(blob, at)
        at += 4
        if n == NONE:
            arrs.append(None)
        else:
            arrs.append(struct.unpack_from(f"<{n}I", blob, at))
            at += 4 * n
    assert at == len(blob), "facts layout out of step with rawcheck.c"
    b = Before(
        error=strs[0],
        fcc=sc[0],
        newest=sc[1],
        newest_size=sc[2],
        newest_count=sc[3],
        newest_pages=arrs[0],  # type: ignore[arg-type]  # ctypes/native-blob values are untyped
        previous=sc[4],
        above_newest=sc[12],
        t1_missing=_groups(arrs[1], 4),  # type: ignore[arg-type]  # ctypes/native-blob values are untyped
        reached=sc[5],
        digest=strs[1],
        read_error=strs[2],
        indep_fcc=sc[6],
        indep_digest=strs[3],
        indep_error=strs[4],
        indep_no_committed=arrs[2],  # type: ignore[arg-type]  # ctypes/native-blob values are untyped
    )
    a = After(
        error=strs[5],
        fcc=sc[7],
        txn_size=sc[8],
        engine_fcc=sc[9],
        rolled_back=bool(sc[10]),
        integrity=strs[6],
        digest=strs[7],
        scan_error=strs[8],
        above_fcc=_groups(arrs[3], 3),  # type: ignore[arg-type]  # ctypes/native-blob values are untyped
        count_fcc=arrs[4],  # type: ignore[arg-type]  # ctypes/native-blob values are untyped
        fcc_pages=arrs[5],  # type: ignore[arg-type]  # ctypes/native-blob values are untyped
        count_newest=arrs[6],  # type: ignore[arg-type]  # ctypes/native-blob values are untyped
        idempotent_changed=arrs[7],
        idempotent_error=strs[9],
    )
    return DhlFacts(exists=True, nolog=bool(sc[11]), before=b, after=a)


class NativeExaminer:
    """One C context (reused buffers) over the durable image file ``durable``
    of one worker (harness/materialize/durable.py), mapped shared: the
    durable image's later writes are seen without remapping."""

    def __init__(self, durable: Path) -> None:
        self.L = _load()
        engine = dhl_lib()
        table = _Engine(*(C.cast(getattr(engine, n), C.c_void_p).value for n in ENTRY_POINTS))
        self.ctx = self.L.rc_new(C.byref(table))
        if not self.ctx:
            raise MemoryError("rc_new")
        self.durable = durable
        self._map: mmap.mmap | None = None
        self._export: C.Array[C.c_char] | None = None
        self._out, self._outlen = C.c_void_p(), C.c_size_t()
        self.calls = self.fallbacks = 0
        self._label: Path | None = None
        self._labels = (b"", b"", b"")
        self._log: mmap.mmap | None = None
        self._log_export: C.Array[C.c_char] | None = None
        self._log_kept = 0  # the log's pages below this offset are let go (_release_log)

    def close(self) -> None:
        self._unmap()
        self._log_export = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.ctx:
            self.L.rc_free(self.ctx)
            self.ctx = None

    def _unmap(self) -> None:
        self._export = None
        if self._map is not None:
            self._map.close()
            self._map = None

    def _address(self, size: int) -> int:
        """The address of the durable image's mapping, whose file is
        ``size`` bytes now (remapped when that changed)."""
        if self._map is None or len(self._map) != size:
            self._unmap()
            if size == 0:
                return 0
            fd = os.open(self.durable, os.O_RDWR)
            try:
                self._map = mmap.mmap(fd, size)  # shared; only read
            finally:
                os.close(fd)
            self._export = (C.c_char * size).from_buffer(self._map)
        return C.addressof(self._export)  # type: ignore[arg-type]  # ctypes/native-blob values are untyped

    def facts(self, blob: bytes) -> DhlFacts:
        """The facts serialised in ``blob`` (an :meth:`examine` result)."""
        return parse_facts(blob)

    def _set_label(self, label: Path) -> None:
        if label is not self._label:  # one label per worker: made once
            rec = label.parent / "dhl-check" / "recovered.db"
            self._label = label
            self._labels = (
                os.fsencode(label),
                os.fsencode(rec),
                os.fsencode(rec.with_name(rec.name + ".again")),
            )

    def _log_address(self, log: Path) -> tuple[int, int]:
        """The address and length of the log file ``log`` mapped (a
        private mapping, never written: ctypes exports only writable
        buffers), mapped once."""
        if self._log is None:
            with open(log, "rb") as f:
                self._log = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
            self._log_export = (C.c_char * len(self._log)).from_buffer(self._log)
        return C.addressof(self._log_export), len(self._log)  # type: ignore[arg-type]  # ctypes/native-blob values are untyped

    def _release_log(self, lowest: int) -> None:
        """Let go of the mapped log's pages below byte ``lowest`` (the
        lowest log offset of the chunk just examined) once they pass
        LOG_RESIDENT bytes.  Chunks come in log order, so those pages are
        done with; left mapped, every page the check touched would stay in
        this process's resident set, and a 10^6-state check of a 400 MB log
        would hold all of it.  The mapping is private and never written:
        MADV_DONTNEED only drops this process's page-table entries (the
        page cache keeps the data), and a later touch maps them again."""
        assert self._log is not None
        lowest = min(lowest, len(self._log))  # past the end: the C call's fallback case
        lowest -= lowest % mmap.PAGESIZE
        if lowest - self._log_kept >= LOG_RESIDENT:
            self._log.madvise(mmap.MADV_DONTNEED, self._log_kept, lowest - self._log_kept)
            self._log_kept = lowest
        elif lowest < self._log_kept:  # an earlier epoch again (a restart): count from there
            self._log_kept = lowest

    def examine_chunk(
        self,
        size: int,
        used: int,
        log: Path,
        spans: Sequence[Sequence[tuple[int, int | None, int]]],
        label: Path,
    ) -> list[bytes | None]:
        """:meth:`examine` of each state over the same durable image, in one
        C call: a state's overlay is given as the spans of the log file
        ``log`` to write (``harness.states.model.item_spans``: device
        offset, log offset or None for zeros, length), read from the log
        mapped in memory."""
        addr = self._address(size)
        self._set_label(label)
        logaddr, loglen = self._log_address(log)
        n = len(spans)
        flat = [
            x
            for items in spans
            for o, src, k in items
            for x in (o, ZEROS if src is None else src, k)
        ]
        items = (C.c_uint64 * len(flat))(*flat)
        counts = (C.c_uint32 * n)(*(len(items_) for items_ in spans))
        rcs, lens = (C.c_int32 * n)(), (C.c_uint64 * n)()
        rc = self.L.rc_examine_chunk(
            self.ctx,
            addr,
            size,
            used,
            logaddr,
            loglen,
            items,
            counts,
            n,
            *self._labels,
            rcs,
            lens,
            C.byref(self._out),
            C.byref(self._outlen),
        )
        self.calls += n
        if rc != OK:
            raise MemoryError("rc_examine_chunk: out of memory")
        lowest = min(flat[1::3], default=ZEROS)  # the chunk's lowest log offset
        if lowest != ZEROS:
            self._release_log(lowest)
        blob = C.string_at(self._out.value, self._outlen.value)  # type: ignore[arg-type]  # ctypes/native-blob values are untyped
        out: list[bytes | None] = []
        at = 0
        for i in range(n):
            if rcs[i] == FALLBACK:
                self.fallbacks += 1
                out.append(None)
                continue
            out.append(blob[at : at + lens[i]])
            at += lens[i]
        return out

    def examine(
        self, size: int, used: int, writes: Sequence[tuple[int, bytes]], label: Path
    ) -> bytes | None:
        """The serialised facts of the state whose image is the durable
        image (``size`` bytes, zero past byte ``used``) with ``writes`` on
        top, as :func:`checkers.dhl_examine.examine_image` takes them of a block
        device's image named ``label``; None: take the Python path."""
        addr = self._address(size)
        self._set_label(label)
        n = len(writes)
        offs = (C.c_uint64 * n)(*(o for o, _ in writes))
        lens = (C.c_uint64 * n)(*(len(d) for _, d in writes))
        rc = self.L.rc_examine(
            self.ctx,
            addr,
            size,
            used,
            offs,
            lens,
            b"".join(d for _, d in writes),
            n,
            *self._labels,
            C.byref(self._out),
            C.byref(self._outlen),
        )
        self.calls += 1
        if rc == FALLBACK:
            self.fallbacks += 1
            return None
        if rc != OK:
            raise MemoryError("rc_examine: out of memory")
        return C.string_at(self._out.value, self._outlen.value)  # type: ignore[arg-type]  # ctypes/native-blob values are untyped
