"""The root operations crashlab stacks up and tears down (recording, and
recovery by kernel mount): loop devices, their queue settings, mounts, and
waiting for a process.  Each teardown names exactly what its setup created,
never a pattern."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from harness.errors import CrashlabError

# What the e2fsprogs tools need to print plainly to a pipe.
TOOL_ENV = {"DEBUGFS_PAGER": "__none__", "PAGER": "cat"}

# The Debian package of each program crashlab runs: the one place a missing
# program is turned into what to install (harness/setup/apt-packages.txt
# lists the packages; `mount` is one of Debian's required packages).
DEBIAN_PACKAGES = {
    "mkfs.ext4": "e2fsprogs",
    "e2fsck": "e2fsprogs",
    "debugfs": "e2fsprogs",
    "dumpe2fs": "e2fsprogs",
    "mkfs.xfs": "xfsprogs",
    "xfs_db": "xfsprogs",
    "mkfs.btrfs": "btrfs-progs",
    "btrfs": "btrfs-progs",
    "mkfs.f2fs": "f2fs-tools",
    "fsck.f2fs": "f2fs-tools",
    "faketime": "faketime",
    "fusermount3": "fuse3",
    "losetup": "mount",
    "mount": "mount",
    "umount": "mount",
    "blockdev": "util-linux",
    "dmsetup": "dmsetup",
    "blkparse": "blktrace",
    "sqlite3": "sqlite3",
    "qemu-system-x86_64": "qemu-system-x86",
}
# The programs a file system's image recipe (images/build-image.sh) and its
# recovery run.
FS_PROGRAMS = {
    "ext4": ("mkfs.ext4", "e2fsck", "debugfs"),
    "xfs": ("mkfs.xfs", "xfs_db", "faketime"),
    "btrfs": ("mkfs.btrfs", "btrfs", "faketime"),
    "f2fs": ("mkfs.f2fs", "fsck.f2fs", "faketime"),
}
# What the host runs to record with each backend (qemu: a guest brings its own).
RECORD_PROGRAMS = {
    "fuse": ("losetup", "mount", "umount", "fusermount3"),
    "dm": ("losetup", "mount", "umount", "dmsetup"),
}


def missing_packages(programs: Iterable[str], path: str | None = None) -> str | None:
    """None when all of ``programs`` are on ``path`` (default: PATH); else
    what to say: the Debian packages of those that are not."""
    gone = [p for p in programs if shutil.which(p, path=path) is None]
    missing = sorted({DEBIAN_PACKAGES.get(p, p) for p in gone})
    if not missing:
        return None
    return f"needs the Debian packages {', '.join(missing)}: apt-get install {' '.join(missing)}"


def require_programs(programs: Iterable[str], what: str, path: str | None = None) -> None:
    """Before any work: CrashlabError (one line) naming the Debian packages
    of those of ``programs`` that are not on ``path`` (default: PATH)."""
    missing = missing_packages(programs, path)
    if missing:
        raise CrashlabError(f"{what} {missing}")


def tool(
    cmd: list[str], what: str, *, timeout: float = 120, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the tool ``cmd`` (text in and out, captured) and return how it
    went, whatever its exit status; CrashlabError naming ``what`` when the
    tool is not installed or does not finish within ``timeout`` seconds.
    The one way crashlab runs an external tool."""
    try:
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
            env={**os.environ, **TOOL_ENV},
        )
    except FileNotFoundError:
        pkg = DEBIAN_PACKAGES.get(cmd[0])
        how = f"apt-get install {pkg}" if pkg else "run `make setup`"
        raise CrashlabError(f"{what}: {cmd[0]} not found ({how})") from None
    except subprocess.TimeoutExpired:
        raise CrashlabError(f"{what}: `{' '.join(cmd)}` timed out after {timeout:.0f} s") from None


def run(cmd: list[str], what: str, *, timeout: float = 60) -> str:
    """Run ``cmd``; return its stdout, or raise CrashlabError naming ``what``
    with the command's stderr."""
    proc = tool(cmd, what, timeout=timeout)
    if proc.returncode != 0:
        msg = proc.stderr.strip().replace("\n", "; ") or f"exit status {proc.returncode}"
        raise CrashlabError(f"{what}: {msg}")
    return proc.stdout


def loop_attach(path: Path, *, direct_io: bool = True) -> str:
    """Attach ``path`` to a free loop device and return its name
    (``/dev/loopN``)."""
    cmd = ["losetup", "--find", "--show"]
    if direct_io:
        cmd.append("--direct-io=on")
    return run([*cmd, str(path)], f"losetup {path}").strip()


LOOP_RELEASE_S = 10.0


def loop_detach(dev: str) -> None:
    """Detach the loop device ``dev`` (one we attached), and wait (up to
    ``LOOP_RELEASE_S``) until the kernel has let go of its backing file.
    ``losetup -d`` only marks a device that is still open (by a udev probe,
    a concurrent ``blkid``) for detaching at its last close; until then the
    backing file stays open, and a FUSE mount that holds it cannot be
    unmounted yet."""
    backing = Path("/sys/block") / Path(dev).name / "loop" / "backing_file"
    try:
        ours = backing.read_text()
    except OSError:
        ours = None
    run(["losetup", "-d", dev], f"losetup -d {dev}")
    deadline = time.monotonic() + LOOP_RELEASE_S
    while ours is not None and time.monotonic() < deadline:
        try:
            if backing.read_text() != ours:  # released (and maybe reused by another)
                return
        except OSError:
            return
        time.sleep(0.05)


def _queue_file(dev: str, name: str) -> Path:
    return Path("/sys/block") / Path(dev).name / "queue" / name


def set_queue(dev: str, settings: dict[str, str]) -> dict[str, str]:
    """Write queue settings of block device ``dev``; return the previous
    values (to give back to :func:`set_queue` on teardown).  On failure the
    ones already changed are restored before raising."""
    previous: dict[str, str] = {}
    try:
        for name, value in settings.items():
            f = _queue_file(dev, name)
            previous[name] = f.read_text().strip()
            f.write_text(value)
    except OSError as e:
        set_queue(dev, previous)
        raise CrashlabError(f"{dev}: cannot set queue settings {settings}: {e}") from None
    return previous


def mount(dev: str, mountpoint: Path, fs: str, options: str | None = None) -> None:
    opts = ["-o", options] if options else []
    run(["mount", "-t", fs, *opts, dev, str(mountpoint)], f"mount {dev} on {mountpoint}")


def umount(mountpoint: Path, *, tries: int = 20) -> None:
    """Unmount ``mountpoint``, retrying while it is busy (a workload process
    that has just been killed may still hold it for a moment)."""
    for attempt in range(tries):
        proc = subprocess.run(["umount", str(mountpoint)], capture_output=True, text=True)
        if proc.returncode == 0:
            return
        if attempt + 1 < tries:
            time.sleep(0.1 * (attempt + 1))
    raise CrashlabError(f"umount {mountpoint}: {proc.stderr.strip()}")


def is_mounted(mountpoint: Path) -> bool:
    target = os.path.realpath(mountpoint)
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 1 and fields[1].replace("\\040", " ") == target:
                return True
    return False


def in_use_under(path: Path) -> list[str]:
    """What keeps ``path``'s subtree busy at the root level: mount points
    under it, and loop devices whose backing file is under it."""
    prefix = os.path.realpath(path) + "/"
    with open("/proc/self/mounts") as f:
        used = [ln.split()[1] for ln in f if ln.split()[1].startswith(prefix)]
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            if backing.read_text().strip().startswith(prefix):
                used.append(f"/dev/{backing.parent.parent.name}")
        except OSError:
            continue
    return used


def _mounts_under(prefix: str) -> list[tuple[str, str]]:
    """(mount point, fs type) of every mount whose point is under ``prefix``
    (a path ending in "/"), deepest first."""
    with open("/proc/self/mounts") as f:
        rows = [ln.split() for ln in f]
    found = [
        (r[1].replace("\\040", " "), r[2])
        for r in rows
        if len(r) > 2 and r[1].replace("\\040", " ").startswith(prefix)
    ]
    return sorted(found, key=lambda m: m[0].count("/"), reverse=True)


def _force_umount(point: str, cmd: list[str]) -> None:
    """Unmount ``point`` with ``cmd``; if that fails (busy, or a FUSE mount
    whose daemon is gone), detach it lazily: it leaves the namespace now and
    is released when its last user is gone."""
    if tool(cmd, f"unmount {point}").returncode != 0:
        tool(["umount", "-l", point], f"umount -l {point}")


def teardown_under(path: Path) -> None:
    """Take down every mount under ``path`` (file systems first, deepest
    first, then FUSE mounts) and every loop device whose backing file is
    under it, each by its exact name: what a killed owner left in its own
    working folder (harness.env.reap_work_folders).  Best effort: what is
    still in use afterwards shows in :func:`in_use_under`."""
    prefix = os.path.realpath(path) + "/"
    mounts = _mounts_under(prefix)
    for point, fstype in mounts:
        if not fstype.startswith("fuse"):
            _force_umount(point, ["umount", point])
    for dev in in_use_under(path):
        if dev.startswith("/dev/loop"):
            tool(["losetup", "-d", dev], f"losetup -d {dev}")
    for point, fstype in mounts:
        if fstype.startswith("fuse"):
            _force_umount(point, ["fusermount3", "-u", point])


def wait_pid(proc: subprocess.Popen[bytes], timeout: float, what: str) -> int:
    """Wait for ``proc`` (by its PID); SIGKILL it if it outlives ``timeout``."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise CrashlabError(
            f"{what} (pid {proc.pid}) did not exit in {timeout:.0f} s: killed"
        ) from None


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived (``args[0]`` is the signal's name); it
    unwinds like Ctrl-C so that every ``finally`` tears down what it built."""

    @property
    def signum(self) -> int:
        return int(signal.Signals[self.args[0]]) if self.args else int(signal.SIGINT)


Handler = Callable[[int, FrameType | None], None]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _on_stop_signals(handler: Handler) -> Iterator[None]:
    """While active, ``handler`` receives SIGINT and SIGTERM; the previous
    handlers come back afterwards.  An ignored signal stays ignored (a pool
    worker leaves Ctrl-C to its parent; a background job of a script was
    started so).  Signal handlers belong to the main thread: elsewhere this
    does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {
        s: signal.signal(s, handler)
        for s in STOP_SIGNALS
        if signal.getsignal(s) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _raiser(received: list[int]) -> Handler:
    """A handler that notes the signal in ``received`` and raises
    :class:`Interrupted`."""

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise Interrupted(signal.Signals(signum).name)

    return handler


def _raise_if_any(received: list[int]) -> Callable[[], None]:
    def check() -> None:
        if received:
            raise Interrupted(signal.Signals(received[0]).name)

    return check


@contextlib.contextmanager
def signals_raise() -> Iterator[Callable[[], None]]:
    """While active, SIGINT and SIGTERM raise :class:`Interrupted` in the main
    thread (so that ``finally`` blocks tear everything down).  Yields a
    function for safe points: it raises :class:`Interrupted` if one arrived
    in the meantime.  Python drops an exception raised while it runs a
    ``__del__`` or a weakref callback (multiprocessing closes a worker's
    pipes in one: "Exception ignored in: <Finalize object, dead>"), and
    a Ctrl-C must not be lost so."""
    received: list[int] = []
    with _on_stop_signals(_raiser(received)):
        yield _raise_if_any(received)


def raise_on_stop_signals() -> Callable[[], None]:
    """From now on (main thread), SIGINT and SIGTERM raise :class:`Interrupted`,
    also when the process was started ignoring them (a background job of a
    script): ``timeout`` and CI runners send SIGTERM, and its default action
    would kill the process with its workers, helpers and work folder left
    behind.  Then both are unblocked: one that was held back while the
    process started (the crashlab launcher blocks them) is raised now.  One
    that Python has to drop (raised in a ``__del__`` or weakref callback)
    is not printed: it is raised again by the returned safe-point check
    (as :func:`signals_raise`'s)."""
    received: list[int] = []
    if threading.current_thread() is threading.main_thread():
        for s in STOP_SIGNALS:
            signal.signal(s, _raiser(received))
        sys.unraisablehook = _quiet_about_interrupts(sys.unraisablehook)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    return _raise_if_any(received)


def _quiet_about_interrupts(hook: Callable[[Any], None]) -> Callable[[Any], None]:
    """``hook`` (what reports an exception Python drops) for all but an
    :class:`Interrupted`, which the safe-point check raises again."""

    def quiet(unraisable: Any) -> None:  # noqa: ANN401
        if not isinstance(unraisable.exc_value, Interrupted):
            hook(unraisable)

    return quiet


def worker_signals() -> None:
    """In a forked pool worker: SIGTERM (what ``Pool.terminate`` sends) ends
    it at once, and a terminal's Ctrl-C is left to the parent, which stops
    the pool in order; the worker inherited the parent's handlers, and
    both signals blocked (:func:`signals_blocked`): one sent before this
    point was held, and now takes effect."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """While active, SIGINT and SIGTERM are blocked in this thread: the
    kernel holds them until the end.  A process forked (and a thread
    started) meanwhile starts with them blocked too, so that it cannot
    receive one before it has set its own handlers
    (:func:`worker_signals`)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """While active (a teardown), SIGINT and SIGTERM are noted, not raised;
    one that arrived is raised as :class:`Interrupted` afterwards, unless an
    exception is already on its way out."""
    pending: list[int] = []
    with _on_stop_signals(lambda signum, frame: pending.append(signum)):
        yield
    if pending:
        raise Interrupted(signal.Signals(pending[0]).name)


@contextlib.contextmanager
def loop_mounted(
    image: Path, mountpoint: Path, fs: str, *, options: str | None = None, direct_io: bool = False
) -> Iterator[str]:
    """Attach ``image`` to a loop device and mount it on ``mountpoint``
    (which must exist); yield the device.  Unmount and detach exactly what
    was created, on success, error and SIGINT/SIGTERM alike."""
    with signals_deferred():
        dev = loop_attach(image, direct_io=direct_io)
    try:
        with signals_deferred():
            mount(dev, mountpoint, fs, options)
        try:
            yield dev
        finally:
            with signals_deferred():
                if is_mounted(mountpoint):
                    umount(mountpoint)
    finally:
        with signals_deferred():
            loop_detach(dev)
