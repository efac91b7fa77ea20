"""F2FS: recovered only by a kernel, in a qemu guest.

F2FS's roll-forward recovery (replaying the fsync'ed node blocks written
after the last checkpoint) runs only in the kernel at mount, and this host's
kernel has no F2FS, so crash images are recovered by a guest booted from the
pinned kernel that has the driver (harness/qemu/kernel.py: the generic
flavour; the cloud one lacks F2FS) with guest/recover.sh as its job.

* :meth:`F2fs.fast_recovery` (the check stage, one per worker): a
  :class:`RecoveryGuest` booted once and kept for every state the worker
  checks.  Per state: the crash image is copied (sparsely) into the guest's
  slot disk, the guest drops its caches, mounts (the kernel's recovery),
  writes every file as a tar archive onto its answer disk and unmounts;
  the host unpacks the files, never outside their folder
  (:func:`harness.fs.confined.unpack_tar`).  The guest dies with its worker.
* :meth:`F2fs.recover` (``crashlab repro``, reference recovery): the same
  on a guest booted for that one image.
* FUA writes are waited for (:attr:`F2fs.fua_waited`): its runs' crash
  states keep a checkpoint's commit block before any later write.
* FS-RECOVER's second half: ``fsck.f2fs -f --dry-run`` on the slot after
  the guest unmounted it: anything to repair beyond what the kernel's
  recovery did is reported (``needed_repair``).
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import CrashlabError
from harness.fs.base import FileSystem, FsRecovery, not_copied
from harness.fs.confined import unpack_tar
from harness.materialize import sparse_copy
from harness.sysops import tool

if TYPE_CHECKING:  # imported when a guest boots (start-up time)
    from harness.qemu.vm import Guest

ANSWER_SIZE = 64 << 20  # the answer disk: a tar archive of the recovered files
# f2fs's softdep "pre: crc32" names a crypto alias, which a package
# without modules.alias cannot resolve: its provider, named here
GUEST_MODULES = ("crc32_generic", "f2fs")
REQUEST_TIMEOUT_S = 120.0


class RecoveryGuest:
    """One recovery guest and its disks in ``workdir`` (see the module
    comment).  Booted on the first :meth:`recover`; :meth:`close` powers it
    off and removes its files.  The same ``recover`` signature as the fast
    ext4 path (harness/fs/ext4/fast.py): the crash image is only read, so
    nothing is reported written."""

    def __init__(
        self, workdir: Path, fsck: bool, fs: str = "f2fs", fs_modules: Sequence[str] = GUEST_MODULES
    ) -> None:
        self.dir = workdir / f"{fs}-guest"
        self.fs = fs
        self.fs_modules = tuple(fs_modules)  # what the guest loads for ``fs``
        self.fsck = fsck
        self.guest: Guest | None = None  # once booted
        self.size = 0
        self.stats = {"states": 0}

    def _boot(self, size: int) -> None:
        from harness.qemu.vm import Guest  # start-up: the guest runner (~14 ms) loads on a boot

        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        for name, n in (("slot.img", size), ("answer.img", ANSWER_SIZE)):
            with open(self.dir / name, "wb") as f:
                f.truncate(n)
        self.guest = Guest(
            self.fs,
            {"JOB": "recover"},
            [self.dir / "slot.img", self.dir / "answer.img"],
            self.dir,
            fs_modules=self.fs_modules,
        )
        self.size = size

    def recover(
        self,
        image: Path,
        out_dir: Path,
        *,
        overlay: Iterable[tuple[int, int]] = (),
        base: object = None,
        rebuild: Callable[[], Path] | None = None,
        want_files: Callable[[Any], bool] | None = None,
    ) -> tuple[FsRecovery, list[tuple[int, int]]]:
        """:meth:`recover_one` (the files are always written)."""
        return self.recover_one(image, out_dir), []

    def recover_one(self, image: Path, out_dir: Path) -> FsRecovery:
        size = os.path.getsize(image)
        if self.guest is None:
            self._boot(size)
        elif size != self.size:
            raise CrashlabError(
                f"{image}: {size} bytes, but the recovery guest's slot has {self.size}"
            )
        assert self.guest is not None
        rec = FsRecovery(self.fs, ok=False, journal_replayed=False, needed_repair=False)
        slot, answer = self.dir / "slot.img", self.dir / "answer.img"
        sparse_copy(image, slot)
        reply = self.guest.request("recover", REQUEST_TIMEOUT_S)
        self.stats["states"] += 1
        rec.steps.append(f"mount in the {self.fs} guest (the kernel's recovery)")
        if reply != "ok":
            rec.detail = f"{self.fs} recovery in the guest: {reply.removeprefix('fail ')}"
            return rec
        rec.journal_replayed = True  # the kernel does not say; mounting is the recovery
        try:
            rec.steps += not_copied(unpack_tar(answer, out_dir))
        except (OSError, tarfile.TarError) as e:
            rec.detail = f"the {self.fs} guest's archive of the files: {e}"
            return rec
        rec.ok, rec.files = True, out_dir
        if self.fsck:
            proc = tool(["fsck.f2fs", "-f", "--dry-run", str(slot)], "fsck.f2fs")
            rec.steps.append("fsck.f2fs -f --dry-run")
            bad = [ln.strip() for ln in proc.stdout.splitlines() if "[Fail]" in ln]
            if proc.returncode != 0 or bad:
                rec.needed_repair = True
                rec.detail = "fsck.f2fs: " + ("; ".join(bad) or f"exit status {proc.returncode}")
        return rec

    def close(self) -> None:
        if self.guest is not None:
            self.guest.close()
            self.guest = None
        shutil.rmtree(self.dir, ignore_errors=True)


class F2fs(FileSystem):
    name = "f2fs"
    guest_modules = GUEST_MODULES
    version_tool = ("f2fs-tools", ["mkfs.f2fs", "-V"])
    # F2FS writes FUA only for a checkpoint's commit block (PREFLUSH|FUA),
    # with every other operation blocked, and waits for it before writing
    # again (do_checkpoint: commit_checkpoint, then f2fs_wait_on_all_pages).
    # Without this, reorder states dropped a commit block but kept the next
    # checkpoint's writes to the other checkpoint pack: both packs broken, a
    # mount failure ("Structure needs cleaning") no real crash can leave.
    fua_waited = True
    guest_only = True
    recovered_on_host = False  # the guest recovers a copy; the host keeps the crash image

    @staticmethod
    def version(first_line: str) -> str | None:
        """``mkfs.f2fs 1.15.0 (2022-05-13)`` → ``1.15.0``."""
        words = first_line.split()
        return words[1] if len(words) > 1 else None

    def recover(
        self,
        image: Path,
        out_dir: Path,
        *,
        workdir: Path,
        db_name: str,
        fsck: bool = True,
        skip: tuple[str, ...] = (),
    ) -> FsRecovery:
        """A recovery guest booted for this one image, which is then replaced
        by the recovered image (as a kernel mount would leave it).  ``skip``
        is always empty here: F2FS is recorded only in a qemu guest, which
        injects no enospc fill."""
        guest = RecoveryGuest(workdir, fsck)
        try:
            rec = guest.recover_one(image, out_dir)
            if rec.journal_replayed:
                sparse_copy(guest.dir / "slot.img", image)
            return rec
        finally:
            guest.close()

    def fast_recovery(
        self, workdir: Path, fsck: bool, skip: tuple[str, ...] = (), shared: Path | None = None
    ) -> RecoveryGuest:
        return RecoveryGuest(workdir, fsck)

    def recovered_how(self, rec: FsRecovery) -> str:
        how = "mounted in a guest (F2FS roll-forward recovery by the kernel), every file read"
        return how + (
            "; fsck.f2fs found nothing to repair"
            if "fsck.f2fs -f --dry-run" in rec.steps
            else "; no fsck"
        )
