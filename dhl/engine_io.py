"""The engine's I/O (``struct dhl_io``) served from Python: a capture of
every write and sync on a scratch file (:class:`CaptureIO`) and an image in
memory (:class:`MemIO`, the engine's own ``dhl_mem_io``)."""

from __future__ import annotations

import ctypes as C
import errno
import os
from dataclasses import dataclass

from dhl.headers import Headers, _decode_headers
from dhl.library import _PREAD, _PWRITE, _SIZE, _SYNC, _Io, _Mem, lib


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

    def __init__(
        self,
        image: bytes | bytearray | memoryview = b"",
        cap: int | None = None,
        *,
        blockdev: bool = False,
    ) -> None:
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
            self._buf[keep : self.used] = bytes(self.used - keep)
        self.mem.size = self.mem.writes = self.mem.syncs = self.mem.hiwater = 0

    def load(
        self,
        image: bytes | bytearray | memoryview,
        cap: int | None = None,
        *,
        used: int | None = None,
    ) -> MemIO:
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
