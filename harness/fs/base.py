"""What crashlab needs of a file system, as one object (CrashMonkey's
``FsSpecific``): how to recover a crash image and extract its files, how to
map a file's blocks on the device, how to explain a block, which facts of
it shape the expectations, and which tools it needs.  One subclass per file
system, in its own module of ``harness/fs/``; :func:`harness.fs.get_fs` is
the one factory, and nothing outside ``harness/fs/`` branches on a file
system's name.

A subclass registers itself by defining ``name``; ``harness/fs/__init__.py``
imports every module of the folder, so a new file system is one new module
(plus its image recipe in ``images/build-image.sh`` and its tests).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from harness.errors import CrashlabError

if TYPE_CHECKING:
    from harness.explain.context import ExplainContext, Explainer
    from harness.logformat import LogReader

REGISTRY: dict[str, type[FileSystem]] = {}
RECOVERED_MOUNT = "nodev,nosuid,noexec"  # how a recovered file system is mounted


def not_copied(skipped: list[str]) -> list[str]:
    """A recovery's steps naming what its extraction did not write
    (harness/fs/confined.py)."""
    return [f"not extracted: {s}" for s in skipped]


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
    # False: a fast path found the files but did not write them, because
    # the caller's ``want_files`` said it needs none (FastRecovery.recover)
    extracted: bool = True


@dataclass(frozen=True)
class BlockMap:
    """Device byte ranges that hold bytes of one file:
    ``(dev_start, dev_end, file_start)`` sorted by ``dev_start``."""

    spans: tuple[tuple[int, int, int], ...]

    @classmethod
    def identity(cls, size: int) -> BlockMap:
        return cls(((0, size, 0),))

    def pieces(self, dev_off: int, length: int) -> Iterator[tuple[int, int, int]]:
        """``(file_off, start_in_data, n)`` for the parts of the device range
        ``[dev_off, dev_off + length)`` that hold file bytes."""
        starts = [s[0] for s in self.spans]
        i = max(0, bisect.bisect_right(starts, dev_off) - 1)
        end = dev_off + length
        while i < len(self.spans) and self.spans[i][0] < end:
            a, b, f = self.spans[i]
            lo, hi = max(a, dev_off), min(b, end)
            if lo < hi:
                yield f + (lo - a), lo - dev_off, hi - lo
            i += 1

    def device_ranges(self, file_off: int, length: int) -> Iterator[tuple[int, int, int]]:
        """``(dev_off, start_in_range, n)`` for a file byte range."""
        end = file_off + length
        for a, b, f in self.spans:
            fa, fb = f, f + (b - a)
            lo, hi = max(fa, file_off), min(fb, end)
            if lo < hi:
                yield a + (lo - fa), lo - file_off, hi - lo


class FastRecovery(Protocol):
    """A per-worker recovery path kept across states (ext4: a debugfs
    session; F2FS: a recovery guest), with the reference's verdicts."""

    stats: dict[str, int]  # how often each way was taken (the bench's profile)

    def recover(
        self,
        image: Path,
        out_dir: Path,
        *,
        overlay: Iterable[tuple[int, int]],
        base: object,
        rebuild: Callable[[], Path],
        want_files: Callable[[Any], bool] | None = None,
    ) -> tuple[FsRecovery, list[tuple[int, int]] | None]:
        """Recover ``image`` into ``out_dir``; also the byte ranges written
        to the image (None: unknown, the image must be rebuilt).  A path
        that can read the files before writing them may call
        ``want_files(reader)`` (ext4: ``extract.FileReader``) and, when it
        answers False, leave them unwritten (``FsRecovery.extracted``)."""
        ...

    def close(self) -> None: ...


class FileSystem:
    """One file system.  The defaults describe a file system crashlab can
    recover but not look inside (no block map, writes explained as byte
    ranges)."""

    name: ClassVar[str]
    # False: no file system at all (the database is the recorded device)
    has_files: ClassVar[bool] = True
    # measured: its copy-on-write fsync never leaves a transaction of an
    # in-place SUT partly on disk, so such weaknesses do not show on it
    cow_fsync: ClassVar[bool] = False
    # recover() moves the crash image into the extracted files (no copy)
    recovery_moves_image: ClassVar[bool] = False
    # recover() leaves the image it was given recovered, on the host: what
    # a user's checker may read (the state contract's ``image``); F2FS
    # recovers in a guest and the host keeps the crash image
    recovered_on_host: ClassVar[bool] = True
    # (package, command) whose first output line is the tool version a run records
    version_tool: ClassVar[tuple[str, list[str]] | None] = None
    # the kernel modules a qemu guest loads to mount it (harness/qemu/); a
    # driver the guest kernel has built in is skipped
    guest_modules: ClassVar[tuple[str, ...]] = ()
    # every FUA write it issues is waited for before it issues another write
    # (F2FS: a checkpoint's commit block): then, in the kernel's dm-log-writes
    # order too, no write logged after a FUA write persisted without it, and
    # its runs' states follow completion order (RunDir.log_order)
    fua_waited: ClassVar[bool] = False
    # recorded and recovered only in a qemu guest (the host kernel has no
    # driver): seconds per recording, a few states/s; the nightly matrix
    # leaves it to the qemu matrix
    guest_only: ClassVar[bool] = False

    @staticmethod
    def version(first_line: str) -> str | None:
        """The version a run records, from ``version_tool``'s first line."""
        return first_line

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if "name" in cls.__dict__:
            REGISTRY[cls.name] = cls

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
        """Recover the crash ``image`` (in place: it may be written) and
        extract every file under ``out_dir`` but the root entries named in
        ``skip`` (an enospc fault's fill file); ``fsck``: also check that
        nothing beyond journal replay needs repair."""
        raise NotImplementedError

    def recovered_how(self, rec: FsRecovery) -> str:
        """FS-RECOVER's explanation of a clean recovery: what was checked."""
        return "journal replayed" if rec.journal_replayed else "clean, nothing to replay"

    def fast_recovery(
        self, workdir: Path, fsck: bool, skip: tuple[str, ...] = (), shared: Path | None = None
    ) -> FastRecovery | None:
        """A faster recovery path with byte-identical verdicts (None: the
        reference :meth:`recover` is all there is).  ``shared``: a folder
        of this run only, shared by the processes checking its states (for
        results they can reuse), or None."""
        return None

    def block_map(self, image: Path, path: str) -> BlockMap | str:
        """Where the file ``path`` lies on the device of the recovered
        ``image``, or why that cannot be told."""
        return f"no block-to-page map for {self.name}"

    @property
    def block_mapped(self) -> bool:
        """Whether :meth:`block_map` can map files (what trace checks need)."""
        return type(self).block_map is not FileSystem.block_map

    def explainer(self, ctx: ExplainContext) -> tuple[Explainer, list[str]]:
        """What explains a state's writes on this file system, and notes on
        its limits."""
        from harness.explain.context import RangeExplainer

        return RangeExplainer(self.name), [
            f"{self.name}: writes are shown as byte ranges only (no block map for {self.name})"
        ]

    def journal_ranges(self, reader: LogReader, base: Path | None) -> list[tuple[int, int]] | None:
        """Device byte ranges of the file system's journal, for the I/O-cost
        split (None: unknown — never guessed)."""
        return None


class MountedFileSystem(FileSystem):
    """A file system whose log is replayed only by the kernel: recovered by
    mounting a loop device of the image (root), then copying every file."""

    # options for mounting a clone of an image another worker has mounted
    clone_mount_options: ClassVar[str | None] = None

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
        """Attach ``image`` to a loop device, mount it (which replays the
        log), copy every file but the root entries in ``skip`` out to
        ``out_dir``, unmount and detach — each
        by the exact name created here, on success, error and interrupt
        alike.  No read-only fsck runs (``fsck`` is ignored; FS-RECOVER's
        explanation says so)."""
        from harness.fs.confined import copy_tree
        from harness.sysops import loop_mounted

        rec = FsRecovery(self.name, ok=False, journal_replayed=False, needed_repair=False)
        mnt = workdir / "mnt"
        mnt.mkdir(parents=True, exist_ok=True)
        # the recovered file system is the log's maker's: no device node of
        # it opens a host device, nothing of it runs or gains privileges
        options = ",".join(o for o in (RECOVERED_MOUNT, self.clone_mount_options) if o)
        try:
            with loop_mounted(image, mnt, self.name, options=options):
                rec.steps.append("mount (kernel log replay)")
                rec.journal_replayed = True  # the kernel does not say; mounting is the replay
                try:
                    rec.steps += not_copied(copy_tree(mnt, out_dir, skip))
                    rec.ok, rec.files = True, out_dir
                except OSError as e:
                    rec.detail = f"reading files after mount failed: {e}"
        except CrashlabError as e:
            rec.detail = f"mount failed (log replay or a corrupt {self.name}): {e}"
        return rec

    def recovered_how(self, rec: FsRecovery) -> str:
        return f"mounted ({self.name}'s log replayed by the kernel) and every file read; no fsck"
