"""Booting one guest to run one job, and reading its answer (:func:`run_job`);
or one long-lived guest answering requests (:class:`Guest`, the F2FS
recovery guest).

Contract of :func:`run_job`: the guest boots the pinned kernel under TCG
(``-cpu max``: this machine's /dev/kvm cannot boot a stock kernel, and
without ``max`` the guest's getrandom stalls) with the base initramfs plus
the job archive, the given disks as ``/dev/vda``, ``/dev/vdb``, … in order
and an exchange disk after them; the guest's /init (guest/init.sh) runs the
job and writes ``/out`` and the job's output files as a tar archive onto the
exchange disk, then powers off.  The console goes to ``console`` (a file).

* Nothing is left running: qemu is started in its own session and, on
  success, error, timeout and interrupt alike, waited for by its PID (killed
  first unless it exited).  The caller owns ``workdir`` (initrd and
  exchange disk are written there) and removes it.
* A guest still running after ``timeout`` seconds is killed: GuestHung,
  whose message names the console log.
* A guest that wrote ``/out/error`` (a failed boot step or job step), or
  left no answer: CrashlabError with one line (the guest's, or the last
  console lines).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import os
import select
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CrashlabError
from harness.qemu.initramfs import Base, base_archive, guest_modules, job_archive
from harness.qemu.kernel import Kernel, kernel_for
from harness.sysops import missing_packages

QEMU = "qemu-system-x86_64"
EXCHANGE_SIZE = 256 << 20  # sparse; holds the answer's tar archive
MEMORY_MB = 512
# acpi=off: no ACPI tables to probe (about 15% faster to boot under TCG);
# the guest ends with a reset, which -no-reboot turns into qemu's exit
CMDLINE = "console=ttyS0 panic=-1 quiet rdinit=/init acpi=off"
PR_SET_PDEATHSIG = 1


class GuestHung(CrashlabError):
    """The guest did not power off within its time limit and was killed."""


@dataclass(frozen=True)
class GuestAnswer:
    files: dict[str, bytes]  # path in the guest (no leading /) -> content
    wall_s: float
    kernel: Kernel
    base: Base
    job_sha256: str

    def text(self, name: str) -> str:
        return self.files.get(name, b"").decode(errors="replace")


def qemu_available() -> tuple[bool, str]:
    missing = missing_packages([QEMU])
    if missing:
        return False, missing
    return True, f"{QEMU} (TCG)"


def disk_arg(path: Path, index: int) -> list[str]:
    # cache=unsafe: the host never syncs the image files (they are scratch
    # copies on tmpfs); the guest still sees a volatile write cache, so the
    # file system issues flushes and FUA writes as on a real disk.
    return ["-drive", f"file={path},format=raw,if=virtio,cache=unsafe,index={index}"]


def console_tail(console: Path, n: int = 3) -> str:
    try:
        lines = [ln.strip() for ln in console.read_text(errors="replace").splitlines()]
    except OSError:
        return "(no console output)"
    lines = [ln for ln in lines if ln]
    return " / ".join(lines[-n:]) or "(no console output)"


def params_text(params: Mapping[str, str]) -> bytes:
    """Shell assignments (single-quoted values) for /job/params."""
    out = []
    for key, value in params.items():
        out.append(f"{key}='" + value.replace("'", "'\\''") + "'\n")
    return "".join(out).encode()


def sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill qemu (by its PID) unless it has exited, then reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def guest_kernel(fs_modules: Sequence[str]) -> Kernel:
    """The pinned kernel a guest boots whose file system needs the modules
    ``fs_modules`` (FileSystem.guest_modules)."""
    return kernel_for(guest_modules(fs_modules))


def _boot_files(
    kernel: Kernel,
    fs: str,
    fs_modules: Sequence[str],
    job: Mapping[str, bytes],
    params: Mapping[str, str],
    disks: list[Path],
    workdir: Path,
    console: Path,
    host_files: Mapping[str, str] | None,
) -> tuple[list[str], Base, str, Path]:
    """The qemu command line of a guest, with its initrd and exchange disk
    written into ``workdir``; also the base archive, the job archive's sha256
    and the exchange disk."""
    base = base_archive(kernel, fs_modules)
    exchange = workdir / "exchange.img"
    with open(exchange, "wb") as f:
        f.truncate(EXCHANGE_SIZE)
    all_params = {
        "MODULES": " ".join(base.modules),
        "FS": fs,
        "EXCHANGE": f"/dev/vd{chr(ord('a') + len(disks))}",
        **params,
    }
    files = {"/job/params": params_text(all_params), **dict(job)}
    initrd = workdir / "initrd"
    job_data = job_archive(files, host_files or {}, base)
    with open(initrd, "wb") as f:
        f.write(base.data)
        f.write(job_data)
    argv = [
        QEMU,
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-machine",
        "pc",
        "-accel",
        "tcg",
        "-cpu",
        "max",
        "-smp",
        "1",
        "-m",
        str(MEMORY_MB),
        "-kernel",
        str(kernel.vmlinuz),
        "-initrd",
        str(initrd),
        "-append",
        CMDLINE,
        "-serial",
        f"file:{console}",
    ]
    for i, disk in enumerate([*disks, exchange]):
        argv += disk_arg(disk, i)
    return argv, base, hashlib.sha256(job_data).hexdigest(), exchange


def run_job(
    fs: str,
    job: Mapping[str, bytes],
    params: Mapping[str, str],
    disks: Iterable[Path],
    workdir: Path,
    console: Path,
    *,
    fs_modules: Sequence[str],
    host_files: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> GuestAnswer:
    """Boot a guest for one job on file system ``fs`` (its kernel and
    modules; see the module's contract), which needs the kernel modules
    ``fs_modules`` (FileSystem.guest_modules).  ``job``: extra /job files;
    ``params``: /job/params assignments (JOB, the role, is required; FS and
    MODULES are set); ``host_files``: guest path -> host file to copy in
    (ELF programs with their libraries)."""
    kernel = guest_kernel(fs_modules)
    argv, base, job_sha, exchange = _boot_files(
        kernel, fs, fs_modules, job, params, list(disks), workdir, console, host_files
    )
    t0 = time.monotonic()
    err_path = workdir / "qemu.err"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True
        )
    try:
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise GuestHung(
                f"the guest did not finish in {timeout:.0f} s and was killed; "
                f"console: {console_tail(console)}"
            ) from None
    finally:
        _stop(proc)
    wall = time.monotonic() - t0
    if rc != 0:
        qerr = err_path.read_text(errors="replace").strip().splitlines()
        raise CrashlabError(
            f"qemu exited with status {rc}: {qerr[-1] if qerr else console_tail(console)}"
        )
    answer = GuestAnswer(_read_tar(exchange), wall, kernel, base, job_sha)
    if "out/error" in answer.files:
        raise CrashlabError(f"in the guest: {answer.text('out/error').strip()}")
    if not any(k.startswith("out") for k in answer.files):
        raise CrashlabError(f"the guest left no answer; console: {console_tail(console)}")
    return answer


def _die_with_parent() -> None:
    # between fork and exec: qemu is killed when the process that started
    # it dies (a check worker killed with SIGKILL leaves no guest behind)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Guest:
    """A long-lived guest answering one-line requests on its second serial
    port (qemu's stdin and stdout); see guest/recover.sh.  Booted by the
    constructor, which returns once the guest says ``ready``; :meth:`close`
    asks it to power off and kills it by PID if it lingers.  qemu dies with
    the process that started it (PR_SET_PDEATHSIG).  ``fs_modules``: the
    kernel modules of file system ``fs`` (FileSystem.guest_modules)."""

    def __init__(
        self,
        fs: str,
        params: Mapping[str, str],
        disks: Iterable[Path],
        workdir: Path,
        *,
        fs_modules: Sequence[str],
        boot_timeout: float = 300,
    ) -> None:
        self.console = workdir / "console.log"
        self.kernel = guest_kernel(fs_modules)
        argv, self.base, _, _ = _boot_files(
            self.kernel, fs, fs_modules, {}, params, list(disks), workdir, self.console, None
        )
        argv += ["-serial", "stdio"]
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self._buf = b""
        try:
            line = self._line(boot_timeout)
            if line != "ready":
                raise CrashlabError(
                    f"the recovery guest said {line!r} instead of ready; "
                    f"console: {console_tail(self.console)}"
                )
        except BaseException:
            self.close()
            raise

    def _line(self, timeout: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise GuestHung(
                    f"the guest did not answer in {timeout:.0f} s; "
                    f"console: {console_tail(self.console)}"
                )
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise CrashlabError(f"the guest stopped; console: {console_tail(self.console)}")
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(errors="replace").strip()

    def request(self, line: str, timeout: float = 120) -> str:
        """Send one request line; return the guest's one-line reply."""
        if self.proc is None or self.proc.stdin is None:
            raise CrashlabError("the guest is closed")
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self._line(timeout)

    def close(self) -> None:
        """Power the guest off (``quit``), or kill it by PID.  Idempotent."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.write(b"quit\n")
                proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        _stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()


def _read_tar(exchange: Path) -> dict[str, bytes]:
    with open(exchange, "rb") as f:
        head = f.read(512)
        if not head.strip(b"\0"):
            return {}
        f.seek(0)
        try:
            with tarfile.open(fileobj=io.BufferedReader(f), mode="r:") as tar:
                out = {}
                for m in tar:
                    if m.isfile():
                        data = tar.extractfile(m)
                        out[m.name.lstrip("/")] = data.read() if data else b""
                return out
        except tarfile.TarError as e:
            raise CrashlabError(f"the guest's answer is not a tar archive: {e}") from None
