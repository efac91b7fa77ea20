"""What a write to a raw DHL device hit: its page, and both slot headers
of that page (TID, record count, commit field) as the crash left them and
as the write would leave them, with the FCC — all read through the DHL
binding (``dhl/binding.py``), which owns the format."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from harness.errors import CrashlabError
from harness.materialize import sparse_copy


def _binding():  # noqa: ANN202
    try:
        from dhl import binding
    except ImportError as e:  # the package is part of crashlab; the library may be unbuilt
        raise CrashlabError(f"DHL binding unavailable ({e}): run `make build`") from None
    return binding


def _slots(db: object, pgno: int) -> str:
    """``slot TIDs a/b`` plus the commit fields and the valid slot."""
    pi = db.page(pgno)  # type: ignore[attr-defined]  # the DHL binding loads lazily, so db is typed object
    s0, s1 = pi.slots
    commits = [f"commit {s.commit} in slot {i}" for i, s in enumerate((s0, s1)) if s.commit]
    valid = f"valid slot {pi.valid_slot}" if pi.valid_slot >= 0 else "no valid slot"
    what = "header page meta slots" if pgno == 0 else "slot"
    extra = f", {', '.join(commits)}" if commits else ""
    return f"{what} TIDs {s0.tid}/{s1.tid} (nrec {s0.nrec}/{s1.nrec}{extra}; {valid})"


class DhlExplainer:
    """Explains writes to a raw DHL device whose crash image is
    ``crash_image``; ``mode`` is the DHL commit protocol of the SUT."""

    def __init__(self, crash_image: Path, workdir: Path, mode: str = "tc") -> None:
        self.crash_image = crash_image
        self.workdir = workdir
        self.mode = mode
        b = _binding()
        try:
            with b.Database(crash_image, mode, readonly=True, recover=False) as db:
                info = db.info()
                self.page_size = info.page_size
                self.fcc: int | None = info.fcc
        except b.DhlError as e:
            self.page_size, self.fcc = 4096, None
            self.open_error: str | None = str(e)
        else:
            self.open_error = None

    def header(self) -> str:
        if self.fcc is None:
            return f"crash image does not open as DHL ({self.open_error}); pages of 4096 assumed"
        return f"crash image: FCC {self.fcc}, page size {self.page_size} (before DHL recovery)"

    def _read(self, image: Path, pgno: int) -> str:
        """The page's slot headers in ``image``, or why they cannot be read."""
        b = _binding()
        try:
            with b.Database(image, self.mode, readonly=True, recover=False) as db:
                return _slots(db, pgno)
        except b.DhlError as e:
            return f"the image does not open as DHL ({e})"

    def explain(self, writes: Sequence[tuple[int, bytes]]) -> list[list[str]]:
        """Per write: the pages it hits, their slot headers in the crash
        image (before recovery) and after applying the write on top of the
        writes before it (in the order given)."""
        after = self.workdir / "dhl-after.img"
        sparse_copy(self.crash_image, after)
        out: list[list[str]] = []
        ps = self.page_size
        for off, data in writes:
            fd = os.open(after, os.O_WRONLY)
            try:
                os.pwrite(fd, data, off)
            finally:
                os.close(fd)
            first, last = off // ps, (off + max(len(data), 1) - 1) // ps
            phrases: list[str] = []
            for pgno in range(first, last + 1):
                head = f"DHL page {pgno}"
                if off % ps or len(data) % ps:
                    head += (
                        f" bytes {max(off, pgno * ps) - pgno * ps}.."
                        f"{min(off + len(data), (pgno + 1) * ps) - pgno * ps}"
                    )
                now = self._read(self.crash_image, pgno)
                written = self._read(after, pgno)
                phrases.append(f"{head}: crash image {now}; with this write {written}")
            out.append(phrases)
        after.unlink(missing_ok=True)
        return out
