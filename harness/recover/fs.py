"""File-system recovery of one crash image.

ext4 needs no root: ``e2fsck -E journal_only`` (without -f) replays the journal on the
image file, a read-only ``e2fsck -fn`` then tells whether anything beyond
journal replay would need repair (FS-RECOVER), and ``debugfs rdump``
extracts the files.  A state that needs repairs is repaired with
``e2fsck -fy`` before extraction (what a booting machine's fsck would do) and
reported as such.  xfs and btrfs replay their logs only in the kernel, so
they are mounted (root) — see :func:`recover_by_mount`.
"""

from __future__ import annotations

import shutil
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
    # No -f here: with -f, e2fsck runs its full check and repairs silently
    # despite journal_only, and FS-RECOVER could never fail.
    p = _run(["e2fsck", "-y", "-E", "journal_only", str(image)])
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


def recover_by_mount(image: Path, out_dir: Path, fs: str, workdir: Path) -> FsRecovery:
    """xfs and btrfs replay their logs only in the kernel: attach ``image``
    to a loop device, mount it (which replays the log), copy every file out
    to ``out_dir``, unmount and detach — each by the exact name created
    here, on success, error and interrupt alike.  Needs root."""
    from harness.sysops import loop_mounted

    rec = FsRecovery(fs, ok=False, journal_replayed=False, needed_repair=False)
    mnt = workdir / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    # Workers mount clones of one image at once: xfs refuses a duplicate
    # UUID unless told (btrfs handles single-device clones itself since
    # Linux 6.7).
    try:
        with loop_mounted(image, mnt, fs, options="nouuid" if fs == "xfs" else None):
            rec.steps.append("mount (kernel log replay)")
            rec.journal_replayed = True  # the kernel does not say; mounting is the replay
            try:
                shutil.copytree(mnt, out_dir, symlinks=True, dirs_exist_ok=True)
                rec.ok, rec.files = True, out_dir
            except OSError as e:
                rec.detail = f"reading files after mount failed: {e}"
    except CrashlabError as e:
        rec.detail = f"mount failed (log replay or a corrupt {fs}): {e}"
    return rec


def recover_raw(image: Path, out_dir: Path, db_name: str) -> FsRecovery:
    """No file system (a database on the raw device): the image *is* the
    database file; it is moved into ``out_dir`` under ``db_name``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.move(image, out_dir / db_name)
    return FsRecovery("raw", ok=True, journal_replayed=False, needed_repair=False,
                      files=out_dir, steps=["raw device: no file-system recovery"])


def recover_fs(fs: str, image: Path, out_dir: Path, *, workdir: Path, db_name: str,
               fsck: bool = True) -> FsRecovery:
    """File-system recovery of a crash image by file-system kind."""
    if fs == "ext4":
        return recover_ext4(image, out_dir, check=fsck)
    if fs in ("xfs", "btrfs"):
        return recover_by_mount(image, out_dir, fs, workdir)
    if fs == "raw":
        return recover_raw(image, out_dir, db_name)
    raise CrashlabError(f"no recovery for file system {fs!r}")
