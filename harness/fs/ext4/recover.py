"""ext4's reference recovery of one crash image, with e2fsprogs alone.

It needs no root: ``e2fsck -E journal_only`` (without -f) replays the journal on the
image file, a read-only ``e2fsck -fn`` then tells whether anything beyond
journal replay would need repair (FS-RECOVER), and ``debugfs rdump``
extracts the files, never outside their folder (``tree.py``).  A state
that needs repairs is repaired with ``e2fsck -fy`` before extraction (what
a booting machine's fsck would do) and reported as such.  The fast path
(``fast.py``) gives byte-identical verdicts and falls back to this one for
anything unusual.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.fs.base import FsRecovery, not_copied
from harness.fs.ext4.debugfs import DebugfsError
from harness.fs.ext4.ondisk import Unsupported
from harness.fs.ext4.tree import list_tree, place, rdump_request
from harness.sysops import tool

# e2fsck exit status bits (e2fsck(8)).
FSCK_CORRECTED = 1
FSCK_REBOOT = 2
FSCK_UNCORRECTED = 4
FSCK_OPERATIONAL = 8


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return tool(cmd, cmd[0], timeout=120)


def _complaints(out: str) -> str:
    """The lines of e2fsck output that name a problem (not the banner)."""
    keep = [
        ln.strip()
        for ln in out.splitlines()
        if ln.strip() and not ln.startswith(("Pass ", "e2fsck ")) and "files," not in ln
    ]
    return "; ".join(keep[:8])


def recover_ext4(
    image: Path, out_dir: Path, *, check: bool = True, skip: tuple[str, ...] = ()
) -> FsRecovery:
    """Replay the journal of the ext4 ``image`` in place, check it, repair
    if needed, and extract every file under ``out_dir`` but the root
    entries named in ``skip``."""
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
    # the tree read here first: rdump writes into out_dir only a tree it
    # cannot escape from, else each file's inode into a private folder (tree.py)
    try:
        tree = list_tree(image, skip)
        request, private = rdump_request(tree, out_dir)
    except (Unsupported, DebugfsError) as e:
        rec.detail = f"file extraction refused: {e}"
        return rec
    p = (
        _run(["debugfs", "-R", request, str(image)])
        if request
        else subprocess.CompletedProcess([], 0, "", "")
    )
    rec.steps.append(f"debugfs rdump: exit {p.returncode}")
    if tree.placed:
        rec.steps += not_copied(place(tree, out_dir, private))
    if p.returncode != 0:
        rec.detail = f"file extraction failed: {p.stderr.strip()}"
        return rec
    rec.ok = True
    rec.files = out_dir
    return rec
