"""The ``fuse`` backend: the logfuse daemon (harness/fuse/logfuse.c) exposes
the working image as a file, a loop device with direct I/O turns it into a
block device, and the daemon logs every write, flush, discard and mark
before it replies.  Stacking: daemon -> ``losetup --direct-io=on`` -> loop
queue settings (one log entry per bio).  Teardown, in reverse and by the
exact names created: queue settings restored, ``losetup -d DEV``,
``fusermount3 -u MOUNTPOINT`` (tried again while busy), then the daemon is
waited for by its PID; a mount that stayed busy gets its daemon killed by
PID and is then detached lazily (``fusermount3 -u -z``), so nothing is left
mounted either way."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from harness.env import logfuse_path, own_process
from harness.errors import CrashlabError
from harness.faults import Fault
from harness.marks import check_label
from harness.record.backend import NVRAM_ENV, Backend, Device
from harness.sysops import (
    RECORD_PROGRAMS,
    is_mounted,
    loop_attach,
    loop_detach,
    missing_packages,
    run,
    set_queue,
    signals_deferred,
    tool,
    wait_pid,
)

ROOT = Path(__file__).resolve().parents[2]
# nomerges=2: the loop queue merges no bios, so each bio is one FUSE write
# and one log entry; max_sectors_kb=1024: no request exceeds FUSE's 1 MiB
# max_write (which would split it into two writes).
QUEUE_SETTINGS = {"nomerges": "2", "max_sectors_kb": "1024"}
DAEMON_EXIT_S = 30.0
UNMOUNT_BUSY_S = 10.0


def write_mark(mark_file: Path, label: str) -> None:
    """Log a mark through the daemon's control file: one line, one write();
    the daemon logs it before the write returns."""
    raw = check_label(label) + b"\n"
    fd = os.open(mark_file, os.O_WRONLY)
    try:
        if os.write(fd, raw) != len(raw):
            raise CrashlabError(f"{mark_file}: short write of mark {label!r}")
    finally:
        os.close(fd)


def daemon_fault_args(faults: tuple[Fault, ...]) -> list[str]:
    """logfuse's ``--fault`` arguments for the eio faults (the wire form
    OP:NTH:STICKY:LO:HI[:AFTER] of harness/fuse/faultrules.h)."""
    args: list[str] = []
    for f in faults:
        lo, hi = f.get_range("range") or (0, 0)
        after = f.get("after")
        rule = f"{f.op}:{f.get('nth')}:{int(bool(f.get('sticky')))}:{lo}:{hi}"
        args += ["--fault", f"{rule}:{after}" if after else rule]
    return args


class FuseBackend(Backend):
    name = "fuse"
    injects_faults = True
    has_nvram = True

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if os.geteuid() != 0:
            return False, "needs root (loop devices and mounts)"
        if not Path("/dev/fuse").exists():
            return False, "no /dev/fuse"
        if not Path("/dev/loop-control").exists():
            return False, "no loop devices (/dev/loop-control)"
        missing = missing_packages(RECORD_PROGRAMS["fuse"])
        if missing:
            return False, missing
        if not os.access(logfuse_path(), os.X_OK):
            return False, f"{logfuse_path()} is not built (run `make build`)"
        return True, "/dev/fuse, loop devices and logfuse are present"

    @contextlib.contextmanager
    def attach(
        self, image: Path, log: Path, workdir: Path, faults: tuple[Fault, ...] = ()
    ) -> Iterator[Device]:
        fdir = workdir / "fuse"
        fdir.mkdir()
        err_path = workdir / "logfuse.err"
        # the NVRAM: the image's last self.nvram bytes (the daemon's `nvram` file)
        nvram_args = ["--nvram", str(self.nvram)] if self.nvram else []
        # Each step creates one thing and registers its undo in the same
        # signal-deferred block, so an interrupt can never fall between the
        # two; undos run in reverse order on success, error and interrupt.
        with contextlib.ExitStack() as stack:
            with signals_deferred(), open(err_path, "wb") as err:
                daemon = subprocess.Popen(
                    [
                        str(logfuse_path()),
                        "--image",
                        str(image),
                        "--log",
                        str(log),
                        *nvram_args,
                        *daemon_fault_args(faults),
                        str(fdir),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,  # a terminal's Ctrl-C must not reach it
                )
                own_process(workdir, "daemon", daemon.pid)
                stack.push(_DaemonStop(daemon, fdir, err_path))
            assert daemon.stdout is not None
            ready = daemon.stdout.readline()
            daemon.stdout.close()
            if ready != b"ready\n":
                raise CrashlabError(f"logfuse did not start: {_tail(err_path, daemon)}")
            with signals_deferred():
                dev = loop_attach(fdir / "disk")
                stack.callback(_deferred, loop_detach, dev)
            with signals_deferred():
                previous = set_queue(dev, QUEUE_SETTINGS)
                stack.callback(_deferred, set_queue, dev, previous)
            mark_file = fdir / "mark"
            nvram_env = {NVRAM_ENV: str(fdir / "nvram")} if self.nvram else {}
            yield Device(
                dev,
                lambda label: write_mark(mark_file, label),
                {"CRASHLAB_MARK": str(mark_file), **nvram_env},
            )


def _deferred(fn: Callable[..., object], *args: object) -> None:
    with signals_deferred():
        fn(*args)


class _DaemonStop:
    """Exit callback: unmount the daemon's mount point (the exact path) and
    wait for the daemon by its PID.  A failure is raised, or added as a note
    when another exception is already on its way out."""

    def __init__(self, daemon: subprocess.Popen[bytes], fdir: Path, err_path: Path) -> None:
        self.daemon, self.fdir, self.err_path = daemon, fdir, err_path

    def __call__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        errors: list[str] = []
        with signals_deferred():
            unmounted = self._unmount(errors)
            try:
                rc = wait_pid(self.daemon, DAEMON_EXIT_S if unmounted else 0.1, "logfuse")
            except CrashlabError as e:
                errors.append(str(e))
                rc = 0
            if not unmounted:
                # the daemon is gone now: detach its dead mount lazily, so
                # nothing is left in the namespace
                tool(["fusermount3", "-u", "-z", str(self.fdir)], f"fusermount3 -u -z {self.fdir}")
        if rc != 0 and not errors:
            errors.append(f"logfuse exited with status {rc}: {_tail(self.err_path)}")
        if errors:
            if exc is None:
                raise CrashlabError("; ".join(errors))
            exc.add_note("fuse teardown: " + "; ".join(errors))
        return False

    def _unmount(self, errors: list[str]) -> bool:
        """Unmount the daemon's mount point, trying again for up to
        ``UNMOUNT_BUSY_S`` while it is busy (a loop device's detach can
        finish after ``losetup -d`` returns); False, with the error noted,
        if it stayed mounted."""
        deadline = time.monotonic() + UNMOUNT_BUSY_S
        while is_mounted(self.fdir):
            try:
                run(["fusermount3", "-u", str(self.fdir)], f"fusermount3 -u {self.fdir}")
            except CrashlabError as e:
                if time.monotonic() >= deadline:
                    errors.append(str(e))
                    return False
                time.sleep(0.2)
        return True


def _tail(path: Path, daemon: subprocess.Popen[bytes] | None = None) -> str:
    """The daemon's last stderr lines, for an error message (after waiting
    for ``daemon`` to exit, when given)."""
    if daemon is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            daemon.wait(timeout=DAEMON_EXIT_S)
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no output)"
    return " / ".join(lines[-3:]) or "(no output)"
