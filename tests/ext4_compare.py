"""What tests/test_ext4_inproc.py compares the in-process ext4 path
with, and how: the debugfs path's steps on a crash image, the crash images
of a recording's states, a replay undone after noting what it wrote, and
images and file trees put side by side (the superblock's volatile fields
masked; a folder's access time left out)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from harness.check.window import default_window, workload_window
from harness.check.worker import StateChecker
from harness.fs.ext4 import inproc
from harness.fs.ext4.debugfs import DebugfsSession
from harness.fs.ext4.inproc import replay_and_extract
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.states import Enumeration, Options

VOLATILE = ((0x30, 4), (0x178, 8), (0x3FC, 4))  # s_wtime, s_kbytes_written, s_checksum


def masked(image: bytes) -> bytes:
    """``image`` (from its start) with the superblock's VOLATILE fields
    zeroed: what two replays may write differently."""
    b = bytearray(image)
    for off, n in VOLATILE:
        b[1024 + off : 1024 + off + n] = bytes(n)
    return bytes(b)


def tree(d: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under ``d`` (and ``d``): mode, owner, times, size,
    content, link count, extended attributes (a directory's access time
    left out: listing it moves it)."""
    out: dict[str, tuple[object, ...]] = {}
    for p in [d, *sorted(d.rglob("*"))]:
        st = p.lstat()
        link = p.is_symlink()
        out[p.relative_to(d).as_posix()] = (
            st.st_mode,
            st.st_uid,
            st.st_gid,
            st.st_mtime_ns,
            None if p.is_dir() else st.st_atime_ns,
            st.st_size,
            p.read_bytes() if p.is_file() else None,
            None if p.is_dir() else st.st_nlink,
            None if link else sorted((n, os.getxattr(p, n)) for n in os.listxattr(p)),
        )
    return out


def state_images(
    run: RunDir, strategy: str, limit: int, work: Path, workload: bool = False
) -> Iterator[tuple[str, Path]]:
    """(state id, its crash image: valid until the next) of the first
    ``limit`` states (``workload``: of those after the database was
    created, :func:`workload_window`)."""
    window = workload_window if workload else default_window
    sc = StateChecker(run, work, fast=False)
    try:
        with LogReader(run.log) as r:
            for n, state in enumerate(Enumeration(r, window(run, Options(strategy=strategy)))):
                if n >= limit:
                    break
                sc.image.advance(state.durable_upto)
                sc.image.invalidate()
                yield state.id, sc.image.scratch(sc.files._writes(state))
    finally:
        sc.close()


def debugfs_recovery(
    dbg: DebugfsSession, img: Path, out: Path, undo: Path, files: list[str]
) -> list[str] | None:
    """What the debugfs path does to ``img``: ``open -w -z undo``, ``jr``,
    ``rdump``, ``blocks`` of the journal and of ``files``, ``close``; for a
    crash image whose stale bitmap checksums keep debugfs from opening it
    for ``jr``, the replay of ``e2fsck -E journal_only -z undo`` (the
    reference's and the debugfs path's own step) and a read-only open.  The
    answers to ``blocks`` (None: neither could replay)."""
    undo.unlink(missing_ok=True)
    said = dbg.request([f"open -w -z {undo} {img}", "jr"])
    if "bitmap checksum does not match" in said[0]:
        undo.unlink(missing_ok=True)
        p = subprocess.run(
            ["e2fsck", "-y", "-E", "journal_only", "-z", str(undo), str(img)],
            capture_output=True,
            timeout=120,
        )
        if p.returncode & ~3:
            return None
        said = dbg.request([f"open {img}", "params"])
        said[0] = said[1] = ""
    banner = (
        "Overwriting existing filesystem; this can be undone using the command:\n"
        f"    e2undo {undo} {img}\n\n"
    )
    if said[0] not in ("", banner) or said[1]:
        dbg.request(["close"])
        return None
    said = dbg.request([f"rdump / {out}", "blocks <8>", *[f"blocks /{f}" for f in files], "close"])
    assert said[0] == "" and said[-1] == "", said
    return said[1:-1]


def blocks_of(ranges: list[tuple[int, int]], bs: int = 4096) -> set[int]:
    """The blocks the byte ``ranges`` (offset, length) touch."""
    return {b for off, n in ranges for b in range(off // bs, (off + n - 1) // bs + 1)}


def replay_undone(image: Path, out: Path, **memo: object) -> tuple[inproc.Recovered, bytes]:
    """Replay ``image`` in process (with ``memo``'s arguments), note what it
    did and the bytes it wrote (the superblock's volatile fields masked),
    then put the image back as it was."""
    undo: list[tuple[int, bytes]] = []
    shutil.rmtree(out, ignore_errors=True)
    got = replay_and_extract(image, out, undo=undo, **memo)  # type: ignore[arg-type]  # memo holds replay's keyword memos
    fd = os.open(image, os.O_RDWR)
    try:
        wrote = b"".join(
            masked(os.pread(fd, 4096, 0)) if off < 4096 else os.pread(fd, len(old), off)
            for off, old in undo
        )
        for off, old in reversed(undo):
            os.pwrite(fd, old, off)
    finally:
        os.close(fd)
    return got, wrote
