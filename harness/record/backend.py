"""The recording backend interface.  Every backend writes the same
dm-log-writes log; callers (the recorder) only use :meth:`Backend.run`, so a
backend that cannot hand the host a block device (a future ``qemu`` backend
runs the command inside a guest) overrides ``run`` and nothing else changes.

A backend that works on a host block device implements :meth:`attach`: it
attaches a working image and a log and yields a :class:`Device` (the block
device to put the file system on, a ``mark`` callable, and the environment
that tells a workload how to write marks itself).  The base class stacks the
file system mount and the command on top of it — or, with no file system
(``raw``), the command alone: it gets the device's path in ``DEV_ENV`` and writes to it
directly (a database on the raw device, no file system)."""

from __future__ import annotations

import contextlib
import errno
import os
import platform
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from harness.errors import CrashlabError
from harness.faults import FILL_NAME, Fault
from harness.fs import get_fs
from harness.record.proc import run_command
from harness.sysops import is_mounted, mount, signals_deferred, umount

# no file system: the environment variable that names the recorded block device.
DEV_ENV = "CRASHLAB_DEV"
# the emulated NVRAM's file, for a SUT that has one (Backend.has_nvram)
NVRAM_ENV = "CRASHLAB_NVRAM"


class BackendFailed(CrashlabError):
    """Recording failed; ``keep`` names working files (run-folder name ->
    path) the run folder keeps to show why (a hung guest's console log)."""

    def __init__(self, message: str, *, keep: Mapping[str, Path] | None = None) -> None:
        super().__init__(message)
        self.keep = dict(keep or {})


@dataclass(frozen=True)
class Device:
    """A recorded block device, live while :meth:`Backend.attach` is."""

    path: str  # the block device, e.g. /dev/loop3 or /dev/mapper/crashlab-...
    mark: Callable[[str], None]  # log a mark now, in line with the writes
    mark_env: dict[str, str]  # tells a workload how to write marks itself


@dataclass(frozen=True)
class Mounted:
    """The recorded file system, mounted; live while :meth:`Backend.mounted` is."""

    mountpoint: Path
    device: Device
    env: dict[str, str] = field(default_factory=dict)  # CRASHLAB_MNT + the mark channel


class Backend(ABC):
    name: ClassVar[str]
    # What a write's position in this backend's log means for crash states
    # (harness/states/model.py): "completion" or "dm-log-writes".
    log_order: ClassVar[str] = "completion"
    # The device can fail requests on demand (eio faults, harness/faults.py).
    injects_faults: ClassVar[bool] = False
    # can trace the recorded device with blktrace (``blktrace = True``)
    can_blktrace: ClassVar[bool] = False
    # can expose an emulated NVRAM beside the disk (``nvram`` = its bytes):
    # the last ``nvram`` bytes of the working image, written by the workload
    # through the file named in NVRAM_ENV and logged as FUA writes at the
    # sectors after the disk's (harness/states/README.md, "NVRAM")
    has_nvram: ClassVar[bool] = False

    def __init__(self) -> None:
        self.blktrace = False
        self.nvram = 0
        # run-folder name -> working file the recorder copies beside the log
        self.artifacts: dict[str, Path] = {}

    @classmethod
    @abstractmethod
    def available(cls) -> tuple[bool, str]:
        """Whether this backend can record on this host, and why (not)."""

    @classmethod
    def supports(cls, fs: str) -> tuple[bool, str]:
        """Whether this backend can record file system ``fs``, and why (not):
        a host backend needs the host kernel's driver (/proc/filesystems)."""
        if not get_fs(fs).has_files:
            return True, "no file system"
        try:
            with open("/proc/filesystems") as f:
                known = {line.split()[-1] for line in f if line.strip()}
        except OSError as e:
            return False, f"cannot read /proc/filesystems: {e}"
        if fs in known:
            return True, f"the host kernel has {fs}"
        return False, f"the host kernel has no {fs} (/proc/filesystems)"

    def recorded_kernel(self) -> str:
        """The kernel that ran the recorded file system (after :meth:`run`)."""
        return platform.release()

    def guest_facts(self) -> dict[str, Any] | None:
        """What a guest-based backend ran (meta.json ``guest``), after :meth:`run`."""
        return None

    @abstractmethod
    def attach(
        self, image: Path, log: Path, workdir: Path, faults: tuple[Fault, ...] = ()
    ) -> contextlib.AbstractContextManager[Device]:
        """Attach the working ``image`` (modified in place) with its writes
        logged to ``log``; ``workdir`` is a private scratch directory.  On exit
        (success, error or interrupt) everything created is torn down, by the
        exact names created, and the log is complete.  ``faults``: the eio
        faults the device injects (only where ``injects_faults``)."""

    @contextlib.contextmanager
    def mounted(
        self,
        image: Path,
        log: Path,
        workdir: Path,
        fs: str,
        faults: tuple[Fault, ...] = (),
        mount_options: str = "",
    ) -> Iterator[Mounted]:
        """Attach, then mount ``fs`` from the device on ``workdir/mnt``; the
        unmount on exit comes before the detach, so the log ends with the
        unmount's writes.  An ``enospc`` fault fills the file system right
        after the mount (:func:`fill_file_system`).  ``mount_options``: extra
        options of the mount (a SUT's)."""
        with self.attach(image, log, workdir, device_rules(faults)) as dev:
            mnt = workdir / "mnt"
            mnt.mkdir()
            try:
                with signals_deferred():  # an interrupt lands after mount() returns
                    mount(dev.path, mnt, fs, mount_options or None)
                for f in faults:
                    if f.kind == "enospc":
                        fill_file_system(mnt, int(f.get("left")))  # type: ignore[arg-type]  # Fault.get is untyped: left is an int
                env = {"CRASHLAB_MNT": str(mnt), **dev.mark_env}
                yield Mounted(mnt, dev, env)
            finally:
                with signals_deferred():
                    if is_mounted(mnt):
                        umount(mnt)

    def run(
        self,
        command: Sequence[str],
        *,
        image: Path,
        log: Path,
        workdir: Path,
        fs: str,
        env: Mapping[str, str],
        faults: tuple[Fault, ...] = (),
        mount_options: str = "",
    ) -> int:
        """Run ``command`` with cwd = the mounted file system and ``env`` plus
        CRASHLAB_MNT and the mark channel; return its exit status.  With no
        file system (``raw``) nothing is mounted: cwd is an empty scratch
        directory and ``env`` gets DEV_ENV (the block device) and the mark
        channel.  ``faults``: the recording's device faults (the recorder has
        checked that this backend can inject them).  ``mount_options``: extra
        options of the file system's mount (none without a file system)."""
        if not get_fs(fs).has_files:
            if any(f.kind == "enospc" for f in faults):
                raise CrashlabError("enospc fills a file system: give --fs other than raw")
            with self.attach(image, log, workdir, device_rules(faults)) as dev:
                cwd = workdir / "raw-cwd"
                cwd.mkdir()
                return run_command(
                    command, cwd=cwd, env={**env, DEV_ENV: dev.path, **dev.mark_env}, owner=workdir
                )
        with self.mounted(image, log, workdir, fs, faults, mount_options) as m:
            return run_command(command, cwd=m.mountpoint, env={**env, **m.env}, owner=workdir)


def device_rules(faults: tuple[Fault, ...]) -> tuple[Fault, ...]:
    """The faults the device itself injects (eio); enospc is the harness's."""
    return tuple(f for f in faults if f.kind == "eio")


def fill_file_system(mnt: Path, left: int) -> None:
    """Fill the file system mounted at ``mnt`` so that ``left`` bytes remain
    for the workload: one file, ``FILL_NAME``, grown by fallocate (no data
    written, only metadata) in halving steps until not one more block fits,
    then cut by ``left`` bytes, which frees exactly those blocks.  (The free
    counts of statvfs are no guide: ext4 keeps clusters back that even root
    cannot use.)  CrashlabError when the file system cannot preallocate."""
    fd = os.open(mnt / FILL_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        block = os.statvfs(mnt).f_frsize
        size, step = 0, os.statvfs(mnt).f_blocks * block
        while step >= block:
            try:
                os.posix_fallocate(fd, size, step)
                size += step
            except OSError as e:
                if e.errno == errno.EOPNOTSUPP:
                    raise CrashlabError(f"enospc: {mnt} cannot preallocate") from None
                if e.errno != errno.ENOSPC:
                    raise
                step = step // 2 // block * block
        os.ftruncate(fd, max(0, size - left))
        os.fsync(fd)
    finally:
        os.close(fd)
