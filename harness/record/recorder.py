"""``crashlab record``: run a command on a recorded file system and leave a
run directory (``writes.log`` + ``meta.json``, see harness/rundir.py).

The working image and the log being written live in a private temporary
directory under CRASHLAB_TMPDIR (default /dev/shm, a tmpfs): a log written
straight to a disk file system made the daemon, and so the recorded file
system, stall now and then on the host's dirty-page writeback (a 1000-insert
run took 0.4-2.4 s instead of 0.2-0.6 s).  After teardown the log is copied
into the run directory under a temporary name and renamed; the directory is
removed unless something could not be torn down (it is then named in the
error)."""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.env import reap_work_folders, remove_work_folder, work_folder
from harness.errors import CrashlabError, writing
from harness.faults import DEVICE, Fault, by_stage
from harness.fs import FILESYSTEMS, get_fs
from harness.images import ensure_image
from harness.logformat import LogReader
from harness.outlock import locked_output
from harness.record.backend import Backend, BackendFailed, device_rules
from harness.record.backends import select_backend
from harness.rundir import ImageRef, RunDir, RunMeta
from harness.sysops import Interrupted, in_use_under, signals_deferred, signals_raise

# meta.json keys the recorder owns; extra_meta may not override them.
META_KEYS = frozenset(f.name for f in dataclasses.fields(RunMeta)) - frozenset(
    {"sut", "workload", "seed", "db", "runner", "continues_at", "continues", "extra"}
)


def _first_line(cmd: list[str]) -> str | None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (proc.stdout or proc.stderr).strip().splitlines()
    return out[0] if out else None


def tool_versions() -> dict[str, str | None]:
    """Versions of what shapes a recording: SQLite, each file system's
    tools, crashlab itself."""
    sqlite = _first_line(["sqlite3", "--version"])
    out: dict[str, str | None] = {
        "crashlab": importlib.metadata.version("crashlab"),
        "sqlite3": sqlite.split()[0] if sqlite else None,
    }
    for name in FILESYSTEMS:
        fs = get_fs(name)
        if fs.version_tool is not None:
            package, cmd = fs.version_tool
            line = _first_line(cmd)
            out[package] = fs.version(line) if line else None
    return out


@dataclass(frozen=True)
class RecordRequest:
    """What :func:`record` records: ``command`` run on a fresh copy of the
    ``fs`` base image, into the run directory ``out`` (created; it must
    not hold a run yet).

    The command runs with cwd = the mounted file system and environment
    ``env`` (default: this process's) plus CRASHLAB_MNT (the mount point) and
    the mark channel (CRASHLAB_MARK = the mark control file for ``fuse``,
    CRASHLAB_MARK_DM = the log-writes device name for ``dm``).  The file
    system is unmounted before the log is closed, so the log ends with the
    unmount's writes.  ``extra_meta`` is merged into meta.json (its keys may
    not clash with the recorder's).  ``final_image``, when given, receives a
    copy of the working image after teardown (tests compare it with a replay).
    ``fs="raw"`` records the bare device (a zero-filled base image, nothing
    mounted): the command gets its path in CRASHLAB_DEV (``DEV_ENV``) and runs
    in an empty scratch directory.  ``base`` = (image, sha256) records on
    that image instead of the ``fs`` base image (a crash state, to continue
    a workload after a crash).  ``faults`` (harness/faults.py): the device
    faults are injected while recording (eio by the backend's device, which
    must be able to; enospc by filling the file system after the mount);
    all of them, state and process faults too, are listed in meta.json's
    ``faults`` (a process fault is the caller's: workloads/run.py).
    ``blktrace``: also trace the recorded device (a backend that can: qemu)
    into RUN/blktrace.txt.  ``mount_options``: extra options of the file
    system's mount (a SUT's, e.g. ``data=journal``), kept in meta.json.
    ``nvram``: bytes of emulated NVRAM after the
    disk (a backend that has one: fuse): the working image is the disk
    (the size of the ``fs`` base image) followed by the NVRAM, whose content
    ``base`` carries past the disk's end when it has it (a crash state),
    else zeros; meta.json gets ``nvram`` = {offset, bytes}."""

    command: Sequence[str]
    out: Path
    fs: str = "ext4"
    backend: str = "auto"
    extra_meta: Mapping[str, Any] | None = None
    env: Mapping[str, str] | None = None
    final_image: Path | None = None
    base: tuple[Path, str] | None = None
    faults: Sequence[Fault] = ()
    blktrace: bool = False
    mount_options: str = ""
    nvram: int = 0

    def __post_init__(self) -> None:
        # the sequences kept as tuples: the request does not change later
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "faults", tuple(self.faults))


@dataclass
class _Recording:
    """One recording under way: what :func:`record` settled before it
    started, and what happened (meta.json is made from it)."""

    req: RecordRequest
    run: RunDir
    be: Backend
    choice: str  # how the backend was chosen
    image: ImageRef  # the base image copied
    disk: int  # bytes of the disk before the NVRAM (0: no NVRAM)
    extra_meta: Mapping[str, Any] | None
    versions: dict[str, str | None] = dataclasses.field(default_factory=dict)
    started: str = ""
    wall: float = 0.0
    status: int | None = None
    interrupted: str | None = None


def record(req: RecordRequest) -> RunDir:
    """Record ``req`` (:class:`RecordRequest`) and return its run directory.

    A failing command still leaves the log and meta.json (``exit_status``);
    an interrupt (SIGINT/SIGTERM) tears everything down, writes meta.json
    with ``interrupted`` and re-raises."""
    if not req.command:
        raise CrashlabError("no command to record (give it after --)")
    clash = sorted(META_KEYS & set(req.extra_meta or {}))
    if clash:
        raise CrashlabError(f"extra_meta may not set {', '.join(clash)}")
    be, choice = _backend(req)
    base, digest = req.base or ensure_image(req.fs)
    disk = ensure_image(req.fs)[0].stat().st_size if req.nvram else 0
    extra_meta = req.extra_meta
    if req.nvram:
        extra_meta = {**(extra_meta or {}), "nvram": {"offset": disk, "bytes": req.nvram}}
    # one writer per run folder; a failure before any log leaves nothing behind
    with locked_output(req.out):
        return _record_into(
            _Recording(
                req,
                RunDir(req.out),
                be,
                choice,
                ImageRef(req.fs, str(base), digest),
                disk,
                extra_meta,
            )
        )


def _backend(req: RecordRequest) -> tuple[Backend, str]:
    """The backend for ``req`` and how it was chosen, set up for its faults,
    blktrace and NVRAM (a clear error when it cannot)."""
    # only fuse emulates an NVRAM: auto picks it for a SUT with one
    be, choice = select_backend(
        "fuse" if req.nvram and req.backend == "auto" else req.backend, req.fs
    )
    if device_rules(tuple(req.faults)) and not be.injects_faults:
        raise CrashlabError(
            f"the {be.name} backend cannot inject eio faults: record with --backend fuse"
        )
    if req.blktrace:
        if not be.can_blktrace:
            raise CrashlabError(
                f"--blktrace needs the qemu backend (this is {be.name}: "
                "the host kernel's blktrace is blocked here)"
            )
        be.blktrace = True
    if req.nvram:
        if not be.has_nvram:
            raise CrashlabError(
                f"the {be.name} backend has no emulated NVRAM (a SUT with one "
                "records with --backend fuse)"
            )
        be.nvram = req.nvram
    return be, choice


def _record_into(rec: _Recording) -> RunDir:
    """:func:`record` into the locked run folder ``rec.run``.  The working
    folder goes whatever happens (unless something in it could not be torn
    down: it is then named in the error); the log is copied into the run
    folder whole or not at all."""
    run = rec.run
    if run.log.exists() or run.meta_path.exists():
        raise CrashlabError(f"{run.path}: already holds a recorded run")
    rec.versions = tool_versions()
    reap_work_folders()  # what recorders killed outright left behind
    rec.started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    workdir: Path | None = None
    try:
        with signals_deferred():  # made and torn down as one, whatever arrives between
            workdir = work_folder("crashlab-rec-")
        with signals_raise():
            _run_backend(rec, workdir)
    finally:
        rec.wall = time.monotonic() - t0
        if workdir is not None:
            _tear_down(rec, workdir)
    return run


def _run_backend(rec: _Recording, workdir: Path) -> None:
    """Copy the base image into ``workdir`` and run the command on it
    through the backend (``rec.status``: its exit status); then the final
    image and the backend's artifacts, if any.  A backend that failed but
    kept files (a guest's console) has them copied into the run folder."""
    req, be = rec.req, rec.be
    image = workdir / "disk.img"
    shutil.copyfile(rec.image.path, image)
    if req.nvram:  # the disk, then the NVRAM (a crash state's, or zeros)
        os.truncate(image, rec.disk + req.nvram)
    try:
        rec.status = be.run(
            req.command,
            image=image,
            log=workdir / "writes.log",
            workdir=workdir,
            fs=req.fs,
            env=dict(os.environ if req.env is None else req.env),
            faults=by_stage(tuple(req.faults), DEVICE),
            mount_options=req.mount_options,
        )
    except Interrupted as e:
        rec.interrupted = str(e)
        raise
    except BackendFailed as e:
        kept = []
        for name, path in e.keep.items():
            if path.exists():
                shutil.copyfile(path, rec.run.path / name)
                kept.append(str(rec.run.path / name))
        if not kept:
            raise
        raise CrashlabError(f"{e} (kept {', '.join(kept)})") from None
    if req.final_image is not None:
        shutil.copyfile(image, req.final_image)
    for name, path in be.artifacts.items():
        _copy_whole(path, rec.run.path / name)


def _tear_down(rec: _Recording, workdir: Path) -> None:
    """After the backend, whatever happened: the log copied into the run
    folder (whole), the working folder removed unless something in it is
    still in use (then an error names it), meta.json written beside the
    log (or the log removed: a log without its meta.json is no run)."""
    run = rec.run
    work_log = workdir / "writes.log"
    left = in_use_under(workdir)
    try:
        if work_log.exists():
            _copy_whole(work_log, run.log)
    finally:
        remove_work_folder(workdir)  # never into a live mount: it would delete inside it
    if run.log.exists():
        try:
            _write_meta(rec)
        except BaseException:
            run.log.unlink()  # a log without its meta.json is no run
            raise
    if left:
        raise CrashlabError(
            f"still in use after teardown: {', '.join(left)} (working directory {workdir} kept)"
        )


def _copy_whole(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` under a temporary name, then rename: ``dst``
    is whole or absent (a full disk is a one-line error naming ``dst``)."""
    partial = dst.with_name(f".{dst.name}.partial")
    try:
        with writing(dst):
            shutil.copyfile(src, partial)
            os.replace(partial, dst)
    finally:
        partial.unlink(missing_ok=True)


def _write_meta(rec: _Recording) -> None:
    """The run's meta.json: the recorder's keys and ``rec.extra_meta`` (a
    workload run's, workloads/run.py)."""
    run, backend, status = rec.run, rec.be, rec.status
    try:
        with LogReader(run.log, salvage=True) as reader:
            summary: dict[str, Any] | None = dataclasses.asdict(reader.summary())
    except CrashlabError as e:
        summary = {"error": str(e)}
    meta = RunMeta(
        backend=backend.name,
        backend_choice=rec.choice,
        log_order=backend.log_order,
        fs=rec.image.fs,
        kernel=backend.recorded_kernel(),
        image=rec.image,
        command=tuple(rec.req.command),
        exit_status=None if status is None else (status if status >= 0 else 128 - status),
        signal=signal.Signals(-status).name if status is not None and status < 0 else None,
        interrupted=rec.interrupted,
        versions=rec.versions,
        marks=tuple(summary.get("marks", []) if summary else []),
        log=summary,
        wall_time_s=round(rec.wall, 3),
        started=rec.started,
        faults=tuple(rec.req.faults),
        guest=backend.guest_facts(),
        mount_options=rec.req.mount_options,
    )
    run.write_meta(RunMeta.from_json({**meta.to_json(), **(rec.extra_meta or {})}))
