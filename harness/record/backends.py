"""Choosing a recording backend.  ``auto`` takes the first available in
ORDER and says which and why; a new backend is one class added here."""

from __future__ import annotations

from harness.errors import CrashlabError
from harness.record.backend import Backend
from harness.record.dm import DmBackend
from harness.record.fuse import FuseBackend
from harness.record.qemu import QemuBackend

# qemu last: it works anywhere qemu and the guest kernel are, but each
# recording boots a guest under TCG (seconds), so a host backend is preferred
ORDER: tuple[type[Backend], ...] = (DmBackend, FuseBackend, QemuBackend)
BACKENDS: dict[str, type[Backend]] = {cls.name: cls for cls in ORDER}
CHOICES = ("auto", *BACKENDS)


def select_backend(name: str = "auto", fs: str | None = None) -> tuple[Backend, str]:
    """An instance of the backend ``name`` (or the first available one for
    ``auto``) and a sentence saying which was picked and why; CrashlabError
    when it (or every one) is unavailable, with the reasons.  With ``fs``,
    the backend must also be able to record that file system
    (:meth:`Backend.supports`: the host kernel has no F2FS, a guest's does)."""
    if name == "auto":
        skipped: list[str] = []
        for each in ORDER:
            ok, why = each.available()
            if ok and fs is not None:
                can, whynot = each.supports(fs)
                if not can:
                    ok, why = False, whynot
            if ok:
                note = f"backend {each.name} ({why})"
                if skipped:
                    note += "; skipped " + "; ".join(skipped)
                return each(), note
            skipped.append(f"{each.name}: {why}")
        raise CrashlabError("no recording backend is available: " + "; ".join(skipped))
    cls = BACKENDS.get(name)
    if cls is None:
        raise CrashlabError(f"unknown backend {name!r} (choose from {', '.join(CHOICES)})")
    ok, why = cls.available()
    if not ok:
        raise CrashlabError(f"the {name} backend is unavailable: {why}")
    if fs is not None:
        can, whynot = cls.supports(fs)
        if not can:
            raise CrashlabError(f"the {name} backend cannot record {fs}: {whynot}")
    return cls(), f"backend {name} ({why})"
