"""Every environment variable crashlab reads, and the one rule for where
working folders go.  Nothing else in crashlab reads ``os.environ`` for its
own settings (the variables crashlab *sets* for a recorded workload — the
mark channel, the mount point, the device — are the recording's contract,
documented in harness/record/README.md).

Variables, who reads them, and their defaults:

* ``CRASHLAB_TMPDIR`` (record, check, repro, bench): the parent of every
  working folder (``/dev/shm``, a tmpfs, else the system temp folder);
* ``CRASHLAB_RECOVERY`` (check): ``fast`` (default) or ``reference``: the
  ext4 recovery path, and the raw tier's (in memory, or through files);
  ``python``: as ``fast``, but the raw tier's DHL facts taken by the Python
  checker rather than by the native one (``checkers/dhl_native.py``);
  ``debugfs``: as ``fast``, but ext4's journal replayed and files extracted
  by the worker's debugfs for every state, not in process
  (``harness/fs/ext4/inproc.py``);
* ``CRASHLAB_LOGFUSE`` (record, fuse backend): the FUSE recording daemon
  (``harness/build/logfuse``);
* ``CRASHLAB_DM_LOG_SIZE`` (record, dm backend): bytes of the sparse log
  device (4 GiB);
* ``CRASHLAB_BENCH_SWEEP_STATES`` (bench): states of the sweep memory
  benchmark (1000000);
* ``CRASHLAB_CACHE`` (set-up, record with the qemu backend; an installed
  crashlab's base images, ``images/``): where the guest kernel packages
  and built initramfs images are kept (``$XDG_CACHE_HOME/crashlab``, else
  ``~/.cache/crashlab``);
* ``CRASHLAB_QEMU_TIMEOUT`` (record, qemu backend): seconds a guest may run
  before it is killed as hung (600);
* ``CRASHLAB_RUNNER`` (record): the workload runner binary instead of
  ``workloads/build/crashlab-runner`` (mutation testing runs a mutant's);
  ``DHL_LIB`` does the same for libdhl (read by ``dhl/binding.py``, which
  does not depend on the harness);
* ``CRASHLAB_WALDIO_LIB`` (check): the WALDIO VFS library the checkers load
  instead of the built one (mutation testing: a mutant's VFS, as its runner
  used); ``CRASHLAB_SELVFS_LIB`` the same for the selective-journaling VFS.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from harness.errors import CrashlabError, cause
from harness.sysops import in_use_under, signals_deferred, teardown_under

ROOT = Path(__file__).resolve().parent.parent

TMPDIR = "CRASHLAB_TMPDIR"
RECOVERY = "CRASHLAB_RECOVERY"
LOGFUSE = "CRASHLAB_LOGFUSE"
DM_LOG_SIZE = "CRASHLAB_DM_LOG_SIZE"
CACHE = "CRASHLAB_CACHE"
QEMU_TIMEOUT = "CRASHLAB_QEMU_TIMEOUT"
BENCH_SWEEP_STATES = "CRASHLAB_BENCH_SWEEP_STATES"
RUNNER = "CRASHLAB_RUNNER"
DHL_LIB = "DHL_LIB"
WALDIO_LIB = "CRASHLAB_WALDIO_LIB"
SELVFS_LIB = "CRASHLAB_SELVFS_LIB"
# set by the recorder for the workload it runs (harness/record/README.md)
MARK_FILE = "CRASHLAB_MARK"  # fuse: the mark control file
MARK_DM = "CRASHLAB_MARK_DM"  # dm: the log-writes device to message


def tmp_parent() -> Path:
    """Where working folders go: ``$CRASHLAB_TMPDIR``, else ``/dev/shm`` (a
    tmpfs: crash images and logs written there cost no disk I/O), else the
    system temp folder."""
    env = os.environ.get(TMPDIR)
    if env:
        return Path(env)
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else Path(tempfile.gettempdir())


def reap_parents() -> list[Path]:
    """Where working folders may be: :func:`tmp_parent`, and the places a
    command puts one on purpose elsewhere (``paper``'s images: the system
    temp folder, on disk, and ``/dev/shm``)."""
    out = [tmp_parent()]
    for p in (Path("/dev/shm"), Path(tempfile.gettempdir())):
        if p.is_dir() and p not in out:
            out.append(p)
    return out


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, field 22
    of /proc/PID/stat), or None when there is no such live process: with
    the PID it names a process uniquely (a PID alone may be reused)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


# A working folder's name: the caller's prefix, the owner process (PID and
# start time), then mkdtemp's random part.  Only names of this shape are
# ever reaped.
_OWNED = re.compile(r"^(crashlab-[a-z-]+?-)(\d+)\.(\d+)-[A-Za-z0-9_]+$")


def work_folder(prefix: str, parent: Path | None = None) -> Path:
    """A new private working folder under ``parent`` (default
    :func:`tmp_parent`; else one of :func:`reap_parents`), which is made if
    missing, named after this process (so that :func:`reap_work_folders`
    knows when its owner is gone); the caller removes it.  Every working
    folder is made here: ``prefix`` is ``crashlab-KIND-``.  A parent that
    cannot be made or written is a one-line error naming it."""
    if _OWNED.match(f"{prefix}1.1-x") is None:
        raise ValueError(f"a working folder's prefix is crashlab-KIND-, not {prefix!r}")
    parent = parent or tmp_parent()
    pid = os.getpid()
    try:
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{prefix}{pid}.{_start_time(pid)}-", dir=parent))
    except OSError as e:
        raise CrashlabError(
            f"{parent}: cannot make a working folder there ({cause(e)}; "
            f"set {TMPDIR} to another folder)"
        ) from None


# A working folder's record of the processes its owner started in their own
# sessions (so they outlive a SIGKILLed owner): one "KIND PID START" line
# each.  KIND "group": a command whose whole process group is killed before
# the folder's mounts are taken down; "daemon": a device daemon, which exits
# when its mount is taken down (and is killed by PID if it does not).
OWNED_PROCESSES = "owned-processes"
_DAEMON_EXIT_S = 5.0


def own_process(folder: Path, kind: str, pid: int) -> None:
    """Note in the working folder ``folder`` that its owner started process
    ``pid`` (a session leader) of ``kind`` ("group" or "daemon"), for
    :func:`reap_work_folders`."""
    with open(folder / OWNED_PROCESSES, "a") as f:
        f.write(f"{kind} {pid} {_start_time(pid)}\n")


def _owned_alive(folder: Path, kind: str) -> list[int]:
    """The processes of ``kind`` that ``folder``'s record names and that are
    still the same processes (PID and start time)."""
    try:
        lines = (folder / OWNED_PROCESSES).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        k, pid, start = (line.split() + ["", "", ""])[:3]
        if k == kind and pid.isdigit() and _start_time(int(pid)) == start:
            out.append(int(pid))
    return out


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait up to ``timeout`` s for ``pids`` (not our children) to end; the
    ones still alive."""
    starts = {pid: _start_time(pid) for pid in pids}
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if starts[p] is not None and _start_time(p) == starts[p]]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _end_owned(folder: Path) -> None:
    """Take down what a dead owner left in ``folder``: its command groups
    (SIGKILL), then every mount and loop device under it
    (:func:`harness.sysops.teardown_under`), then its daemons (they exit
    when their mount goes; SIGKILL by PID after a grace period)."""
    groups = _owned_alive(folder, "group")
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    _wait_gone(groups, _DAEMON_EXIT_S)
    daemons = _owned_alive(folder, "daemon")
    teardown_under(folder)
    for pid in _wait_gone(daemons, _DAEMON_EXIT_S):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _wait_gone(daemons, _DAEMON_EXIT_S)


def reap_work_folders() -> list[Path]:
    """Remove the working folders under :func:`reap_parents` whose owner
    process is gone (a check, sweep or recording killed with SIGKILL, or a
    machine that lost power, had no chance to remove its own); return them.
    A folder is reaped only when its name has the shape :func:`work_folder`
    gives and its owner (PID and start time) is not alive.  What the owner
    left running in it is taken down first, by exact name and PID only: the
    processes its record names (:func:`own_process`), the mounts under it and
    the loop devices backed by files under it.  A folder that is still in use
    after that is left alone, never deleted into."""
    return [path for parent in reap_parents() for path in _reap_under(parent)]


def _reap_under(parent: Path) -> list[Path]:
    """:func:`reap_work_folders` in one parent folder."""
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    reaped = []
    for name in names:
        m = _OWNED.match(name)
        if m is None or _start_time(int(m.group(2))) == m.group(3):
            continue
        path = parent / name
        if not path.is_dir() or path.is_symlink():
            continue
        if in_use_under(path) or (path / OWNED_PROCESSES).exists():
            _end_owned(path)
        if not in_use_under(path):
            shutil.rmtree(path, ignore_errors=True)
            reaped.append(path)
    return reaped


@contextlib.contextmanager
def temporary_folder(
    prefix: str, parent: Path | None = None, *, keep: bool = False
) -> Iterator[Path]:
    """A :func:`work_folder`, removed on exit (unless ``keep``, or unless
    something is still mounted or attached under it: never delete into a
    live mount; the next :func:`reap_work_folders` takes it down).  It is
    made and removed with SIGINT and SIGTERM deferred: an interrupt between
    making the folder and entering the body would leave it behind, and one
    during the removal half of it."""
    made: Path | None = None
    try:
        with signals_deferred():
            made = work_folder(prefix, parent)
        yield made
    finally:
        if made is not None and not keep:
            remove_work_folder(made)


def remove_work_folder(folder: Path) -> None:
    """Remove the working folder ``folder`` unless something is mounted or
    attached under it.  A helper killed a moment ago (a debugfs that dies
    by PDEATHSIG) may still write one more file: retry briefly.  A SIGINT or
    SIGTERM meanwhile is raised once the folder is gone."""
    with signals_deferred():
        if in_use_under(folder):
            return
        for _ in range(20):
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                return
            time.sleep(0.05)


@contextlib.contextmanager
def recovery_path(mode: str) -> Iterator[None]:
    """Within: ``CRASHLAB_RECOVERY=mode`` (for this process and the check
    workers it forks), then as before."""
    old = os.environ.get(RECOVERY)
    os.environ[RECOVERY] = mode
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(RECOVERY, None)
        else:
            os.environ[RECOVERY] = old


def reference_recovery() -> bool:
    """True when ``CRASHLAB_RECOVERY=reference`` asks for the reference
    paths: e2fsprogs instead of the fast ext4 path, files instead of memory
    on the raw tier."""
    return os.environ.get(RECOVERY, "fast") == "reference"


def ext4_in_process() -> bool:
    """False when ``CRASHLAB_RECOVERY=debugfs`` asks the fast ext4 path to
    replay and extract with its debugfs for every state."""
    return os.environ.get(RECOVERY, "fast") != "debugfs"


def native_checks() -> bool:
    """False when ``CRASHLAB_RECOVERY`` is ``python`` or ``reference``: the
    raw tier's DHL facts are then taken by the Python checker."""
    return os.environ.get(RECOVERY, "fast") not in ("python", "reference")


def logfuse_path() -> Path:
    return Path(os.environ.get(LOGFUSE, ROOT / "harness" / "build" / "logfuse"))


def dm_log_size(default: int) -> int:
    return int(os.environ.get(DM_LOG_SIZE, default))


def cache_root() -> Path:
    """Where fetched and built artefacts that outlive a checkout are kept."""
    env = os.environ.get(CACHE)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "crashlab"


def qemu_timeout(default: float) -> float:
    return float(os.environ.get(QEMU_TIMEOUT, default))


def bench_sweep_states() -> int:
    return int(os.environ.get(BENCH_SWEEP_STATES, "1000000"))


def runner_override() -> Path | None:
    """``$CRASHLAB_RUNNER``: a runner binary to use instead of the built one."""
    env = os.environ.get(RUNNER)
    return Path(env) if env else None


def mark_channel() -> tuple[str, str] | None:
    """Inside a recorded workload: where its marks go, as ``(MARK_FILE,
    path)`` or ``(MARK_DM, device)``; None outside one."""
    for name in (MARK_FILE, MARK_DM):
        if os.environ.get(name):
            return name, os.environ[name]
    return None


def library_override(var: str) -> Path | None:
    """``$var`` (``CRASHLAB_WALDIO_LIB``, ``CRASHLAB_SELVFS_LIB``): a VFS
    library to load instead of the built one."""
    env = os.environ.get(var)
    return Path(env) if env else None
