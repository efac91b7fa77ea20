"""File-system recovery of one crash image.

ext4 needs no root: ``e2fsck -E journal_only`` replays the journal on the
image file, a read-only ``e2fsck -fn`` then tells whether anything beyond
journal replay would need repair (FS-RECOVER), and ``debugfs rdump``
extracts the files.  A state that needs repairs is repaired with
``e2fsck -fy`` before extraction (what a booting machine's fsck would do) and
reported as such.  xfs and btrfs replay their logs only in the kernel, so
they are mounted (root) — see :func:`recover_by_mount`.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import CrashlabError

# e2fsck exit status bits (e2fsck(8)).
FSCK_CORRECTED = 1
FSCK_REBOOT = 2
FSCK_UNCORRECTED = 4
FSCK_OPERATIONAL = 8


@dataclass
class FsRecovery:
    """What file-system recovery did to one image."""

    fs: str
    ok: bool  # the file system could be recovered and its files extracted
    journal_replayed: bool
    needed_repair: bool  # problems beyond journal replay
    detail: str = ""  # fsck's complaints, or why recovery failed
    files: Path | None = None  # where the files were extracted
    steps: list[str] = field(default_factory=list)


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise CrashlabError(f"{cmd[0]} not found: run `make setup`") from None


def _complaints(out: str) -> str:
    """The lines of e2fsck output that name a problem (not the banner)."""
    keep = [
        ln.strip()
        for ln in out.splitlines()
        if ln.strip() and not ln.startswith(("Pass ", "e2fsck ")) and "files," not in ln
    ]
    return "; ".join(keep[:8])


def recover_ext4(image: Path, out_dir: Path, *, check: bool = True) -> FsRecovery:
    """Replay the journal of the ext4 ``image`` in place, check it, repair
    if needed, and extract every file under ``out_dir``."""
    rec = FsRecovery("ext4", ok=False, journal_replayed=False, needed_repair=False)
    p = _run(["e2fsck", "-fy", "-E", "journal_only", str(image)])
    rec.steps.append(f"e2fsck -E journal_only: exit {p.returncode}")
    if p.returncode & ~(FSCK_CORRECTED | FSCK_REBOOT):
        why = _complaints(p.stdout + p.stderr)
        rec.detail = f"journal replay failed (exit {p.returncode}): {why}"
        return rec
    rec.journal_replayed = "recovering journal" in (p.stdout + p.stderr)
    if check:
        p = _run(["e2fsck", "-fn", str(image)])
        rec.steps.append(f"e2fsck -fn: exit {p.returncode}")
        if p.returncode != 0:
            rec.needed_repair = True
            rec.detail = _complaints(p.stdout + p.stderr)
            p = _run(["e2fsck", "-fy", str(image)])
            rec.steps.append(f"e2fsck -fy: exit {p.returncode}")
            if p.returncode & (FSCK_UNCORRECTED | FSCK_OPERATIONAL):
                rec.detail += f"; repair failed (exit {p.returncode})"
                return rec
    out_dir.mkdir(parents=True, exist_ok=True)
    p = _run(["debugfs", "-R", f"rdump / {out_dir}", str(image)])
    rec.steps.append(f"debugfs rdump: exit {p.returncode}")
    if p.returncode != 0:
        rec.detail = f"file extraction failed: {p.stderr.strip()}"
        return rec
    rec.ok = True
    rec.files = out_dir
    return rec
