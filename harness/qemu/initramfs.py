"""The guest's initramfs, built from files on this machine, byte for byte the
same for the same inputs (harness/qemu/cpio.py).

* The **base archive** (:func:`base_archive`): static busybox, ``dmsetup``
  and ``blktrace`` with the shared libraries ``ldd`` names, the guest scripts of
  ``harness/qemu/guest/`` (``/init`` and the roles under
  ``/lib/crashlab/``), and the kernel modules the guest's file system needs
  (named by the caller: ``FileSystem.guest_modules``; this package knows no
  file system) with the virtio disks and dm-log-writes, flat under
  ``/lib/modules/NAME.ko``.  Its sha256 goes into a run's
  meta.json.  It is rebuilt in memory for each guest (reading ~15 MB of
  files takes milliseconds; nothing to go stale) and kept per process.
* A **job archive** (:func:`job_archive`), appended after it: the job's
  ``/job/*`` files and the host files a command needs in the guest, each at
  the guest path its caller chose, with its shared libraries at their own
  paths (:func:`with_libraries`).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CrashlabError
from harness.qemu import cpio
from harness.qemu.kernel import Kernel

GUEST_DIR = Path(__file__).resolve().parent / "guest"
BUSYBOX = "/bin/busybox"  # Debian's busybox-static
TOOLS = ("/usr/sbin/dmsetup", "/usr/sbin/blktrace")
# virtio disks and the log-writes target; the caller adds the file
# system's (FileSystem.guest_modules).  Loaded in this order after dependencies.
BASE_MODULES = ("virtio_pci", "virtio_blk", "dm-log-writes")
_LDD_LINE = re.compile(r"(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)")


def libraries(binary: str) -> list[str]:
    """The shared libraries ``binary`` loads, as ``ldd`` names them (the
    dynamic loader included); none for a static binary."""
    proc = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if proc.returncode != 0:
        if "not a dynamic executable" in proc.stdout + proc.stderr:
            return []
        raise CrashlabError(f"ldd {binary}: {proc.stderr.strip() or proc.stdout.strip()}")
    if "not found" in proc.stdout:
        raise CrashlabError(f"ldd {binary}: a library is missing: {proc.stdout.strip()}")
    return sorted({m.group(1) for m in _LDD_LINE.finditer(proc.stdout)})


def _is_elf(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def with_libraries(
    paths: Mapping[str, str] | Iterable[str], skip: Iterable[str] = ()
) -> list[cpio.Member]:
    """Members for the host files ``paths`` (guest path -> host path, or
    host paths kept where they are; mode kept) and for the shared libraries
    of the ELF ones at their own paths, except the paths in ``skip``."""
    out: dict[str, cpio.Member] = {}
    skipped = set(skip)
    pairs = paths.items() if isinstance(paths, Mapping) else ((p, p) for p in paths)
    for dest, path in pairs:
        p = Path(path)
        mode = p.stat().st_mode
        out[dest] = cpio.file(dest, p.read_bytes(), executable=bool(mode & 0o111))
        if _is_elf(path):
            for lib in libraries(path):
                if lib not in skipped and lib not in out:
                    out[lib] = cpio.file(lib, Path(lib).read_bytes(), executable=True)
    return [out[k] for k in sorted(out)]


@dataclass(frozen=True)
class Base:
    data: bytes  # the uncompressed archive
    sha256: str
    modules: tuple[str, ...]  # module names in the archive
    files: tuple[str, ...]  # every file path in the archive (a job skips these)


def guest_modules(fs_modules: Sequence[str]) -> list[str]:
    """The modules a guest loads: the base ones and ``fs_modules``, its
    file system's (FileSystem.guest_modules, from the caller)."""
    return [*BASE_MODULES, *fs_modules]


_BASES: dict[tuple[str, tuple[str, ...]], Base] = {}


def base_archive(kernel: Kernel, fs_modules: Sequence[str]) -> Base:
    """The base archive of a guest of ``kernel`` whose file system needs the
    modules ``fs_modules``: only those (unpacking every file system's took
    seconds under TCG)."""
    key = (kernel.release, tuple(fs_modules))
    cached = _BASES.get(key)
    if cached is not None:
        return cached
    modules = kernel.load_order(guest_modules(fs_modules))
    members = [cpio.file(BUSYBOX, Path(BUSYBOX).read_bytes(), executable=True)]
    if libraries(BUSYBOX):
        raise CrashlabError(f"{BUSYBOX} is not static (install busybox-static)")
    members.append(cpio.symlink("/bin/sh", "busybox"))  # /init's interpreter
    members += with_libraries(TOOLS)
    members.append(cpio.file("/init", (GUEST_DIR / "init.sh").read_bytes(), executable=True))
    for script in sorted(GUEST_DIR.glob("*.sh")):
        if script.name != "init.sh":
            members.append(cpio.file(f"/lib/crashlab/{script.name}", script.read_bytes()))
    for m in modules:
        members.append(cpio.file(f"/lib/modules/{m}.ko", kernel.module_bytes(m)))
    for d in (
        "/dev",
        "/proc",
        "/sys",
        "/mnt",
        "/tmp",
        "/out",
        "/etc",
        "/sbin",
        "/usr/bin",
        "/usr/sbin",
    ):
        members.append(cpio.Member(d, 0o040755))
    data = cpio.archive(members)
    base = Base(
        data,
        hashlib.sha256(data).hexdigest(),
        tuple(modules),
        tuple(m.path for m in members if m.mode & 0o100000),
    )
    _BASES[key] = base
    return base


def job_archive(files: Mapping[str, bytes], host_files: Mapping[str, str], base: Base) -> bytes:
    """The job archive: ``files`` (guest path -> content) and ``host_files``
    (guest path -> host path) with their libraries (those not in ``base``)."""
    members = [cpio.file(p, data, executable=p.endswith(".sh")) for p, data in files.items()]
    members += with_libraries(host_files, skip=base.files)
    return cpio.archive(members)
