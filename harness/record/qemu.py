"""The ``qemu`` backend: the kernel's own dm-log-writes, in a guest.

A Debian kernel (harness/qemu/kernel.py, pinned, fetched by set-up) boots
under TCG with the working image as ``/dev/vda`` and a preallocated (sparse)
log disk as ``/dev/vdb``; the guest stacks ``log-writes`` on them, mounts
the file system on ``/dev/mapper/lw``, runs the command there with
``CRASHLAB_MARK_DM=lw`` (marks: ``dmsetup message lw 0 mark LABEL``),
unmounts, removes the target (which appends ``dm-log-writes-end``) and
powers off (harness/qemu/guest/record.sh).  The host cuts the log disk to
its last entry; the recorder copies it into the run folder as for every
backend.  No root is needed.

What runs in the guest: the command must exist there — busybox's applets,
``dmsetup``, or a host program named by absolute path (not Python: the
guest has no Python installation, and a Python workload is refused with
one line naming the fuse and dm backends).  Every argument that
is an absolute path of an existing host file is copied into the guest under
``/host`` (``/host/PATH``; an ELF program with its shared libraries, which
go to their own paths) and the argument rewritten; every argument that is
an absolute path that does not exist yet, in an existing host folder, is an
output: rewritten the same way and, if the command creates it, copied back.  The command's stdout
and stderr come back after the guest powers off.  Its environment: the
caller's ``CRASHLAB_*`` variables, PATH, HOME=/, TZ=UTC and the recording's
own (CRASHLAB_MNT or CRASHLAB_DEV, CRASHLAB_MARK_DM).

``blktrace = True`` (``crashlab record --blktrace``): the guest runs
blktrace on the recorded device while the command runs; blkparse's text is
left beside the log (RUN/blktrace.txt, harness/record/blktrace.py).

Failures (a step of the boot or of the recording) raise one line and leave
no log; a guest still running after CRASHLAB_QEMU_TIMEOUT seconds is killed
and its console log is kept in the run folder (``console.log``).  qemu is
always waited for by its PID (harness/qemu/vm.py).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.env import MARK_FILE, dm_log_size, qemu_timeout
from harness.errors import CrashlabError
from harness.faults import Fault
from harness.fs import get_fs
from harness.qemu import vm
from harness.qemu.initramfs import BASE_MODULES
from harness.qemu.kernel import Kernel, kernel_for
from harness.record.backend import Backend, BackendFailed
from harness.record.blktrace import TRACE_NAME, blkparse
from harness.record.command import python_in_guest
from harness.record.dm import DEFAULT_LOG_SIZE, log_end

TIMEOUT_S = 600.0
HOST_PREFIX = "/host"  # where the command's host files appear in the guest
# what the guest sets itself; a caller's values would be host paths
GUEST_OWN = frozenset({"CRASHLAB_MNT", "CRASHLAB_DEV", MARK_FILE, "CRASHLAB_MARK_DM"})


def split_paths(command: Sequence[str]) -> tuple[list[str], list[str]]:
    """The command's host files to copy in, and its outputs to copy back
    (see the module's comment)."""
    inputs, outputs = [], []
    for arg in command:
        if not arg.startswith("/"):
            continue
        p = Path(arg)
        if p.is_file():
            inputs.append(arg)
        elif not p.exists() and p.parent.is_dir():
            outputs.append(arg)
    return inputs, outputs


def guest_env(env: Mapping[str, str]) -> bytes:
    lines = [
        f"export {k}={shlex.quote(v)}\n"
        for k, v in sorted(env.items())
        if k.startswith("CRASHLAB_") and k not in GUEST_OWN and k.isidentifier()
    ]
    return "".join(lines).encode()


def _deliver(files: Mapping[str, bytes], outputs: Sequence[str], moved: Mapping[str, str]) -> None:
    """Leave what the guest's command left, as if it had run here: the
    ``outputs`` it wrote (``moved``: each one's path in the guest) and its
    stdout and stderr."""
    for path in outputs:
        data = files.get(moved[path].lstrip("/"))
        if data is not None:
            Path(path).write_bytes(data)
    sys.stdout.buffer.write(files.get("out/stdout", b""))
    sys.stdout.flush()
    sys.stderr.buffer.write(files.get("out/stderr", b""))
    sys.stderr.flush()


class QemuBackend(Backend):
    name = "qemu"
    log_order = "dm-log-writes"  # the guest kernel's own target

    can_blktrace = True

    def __init__(self) -> None:
        super().__init__()
        self.kernel: Kernel | None = None
        self.facts: dict[str, Any] | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = vm.qemu_available()
        if not ok:
            return ok, why
        try:
            k = kernel_for(list(BASE_MODULES))
        except CrashlabError as e:
            return False, str(e)
        if not Path("/bin/busybox").exists():
            return False, "/bin/busybox is missing (busybox-static; run `make setup`)"
        return True, f"{why}, guest kernel {k.release}"

    @classmethod
    def supports(cls, fs: str) -> tuple[bool, str]:
        try:
            return True, f"guest kernel {vm.guest_kernel(get_fs(fs).guest_modules).release}"
        except CrashlabError as e:
            return False, str(e)

    def attach(
        self,
        image: Path,
        log: Path,
        workdir: Path,  # noqa: ANN401
        faults: tuple[Fault, ...] = (),
    ) -> Any:
        raise CrashlabError("the qemu backend records inside a guest: it has no host device")

    def recorded_kernel(self) -> str:
        return self.kernel.release if self.kernel else super().recorded_kernel()

    def guest_facts(self) -> dict[str, Any] | None:
        return self.facts

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
        if faults:  # eio: injects_faults is False; enospc would fill the guest's mount
            raise CrashlabError(
                "the qemu backend injects no device faults (eio, enospc) yet: "
                "record them with --backend fuse"
            )
        why = python_in_guest(command)
        if why is not None:
            raise CrashlabError(f"qemu backend: {why}")
        modules = get_fs(fs).guest_modules  # the guest runner is told what to load
        self.kernel = vm.guest_kernel(modules)
        inputs, outputs = split_paths(command)
        with open(log, "wb") as f:
            f.truncate(dm_log_size(DEFAULT_LOG_SIZE))
        moved = {p: HOST_PREFIX + p for p in (*inputs, *outputs)}
        job = {
            "/job/command": (
                "exec " + shlex.join(moved.get(a, a) for a in command) + "\n"
            ).encode(),
            "/job/env": guest_env(env),
        }
        params = {
            "JOB": "record",
            "OUTPUTS": " ".join(moved[p] for p in outputs),
            "BLKTRACE": "1" if self.blktrace else "0",
            "MOUNT_OPTIONS": mount_options,
        }
        console = workdir / "console.log"
        try:
            answer = vm.run_job(
                fs,
                job,
                params,
                [image, log],
                workdir,
                console,
                fs_modules=modules,
                host_files={moved[p]: p for p in inputs},
                timeout=qemu_timeout(TIMEOUT_S),
            )
            os.truncate(log, log_end(log))
        except BaseException as e:
            # no half log: an interrupted or failed guest leaves no run
            log.unlink(missing_ok=True)
            if isinstance(e, vm.GuestHung):
                raise BackendFailed(f"qemu backend: {e}", keep={"console.log": console}) from None
            if isinstance(e, CrashlabError):
                raise CrashlabError(f"qemu backend: {e}") from None
            raise
        _deliver(answer.files, outputs, moved)
        if self.blktrace:
            self._blkparse(answer.files, workdir)
        kernel = answer.kernel
        self.facts = {
            "package": str(kernel.pin),
            "release": kernel.release,
            "kernel_sha256": kernel.sha256,
            "initramfs_sha256": answer.base.sha256,
            "job_sha256": answer.job_sha256,
            "files": {p: vm.sha256_file(p) for p in inputs},
            "boot_to_poweroff_s": round(answer.wall_s, 3),
        }
        try:
            return int(answer.text("out/status").strip())
        except ValueError:
            raise CrashlabError("qemu backend: the guest reported no exit status") from None

    def _blkparse(self, files: Mapping[str, bytes], workdir: Path) -> None:
        """The guest's binary trace, parsed by blkparse into an artifact."""
        trace = workdir / "blktrace"
        trace.mkdir()
        for name, data in files.items():
            if name.startswith("out/blktrace/"):
                (trace / Path(name).name).write_bytes(data)
        if not any(trace.iterdir()):
            raise CrashlabError("qemu backend: the guest left no blktrace")
        blkparse(trace, "lw", workdir / TRACE_NAME)
        self.artifacts[TRACE_NAME] = workdir / TRACE_NAME
