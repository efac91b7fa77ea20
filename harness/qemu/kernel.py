"""The guest kernel: Debian's pinned kernel packages, fetched by set-up into a
cache and never installed, and the modules a guest needs, in load order.

Contract:

* ``harness/setup/qemu-kernel.txt`` pins the packages (``package=version``,
  one a line), the first one the default; :func:`pinned` reads it and is the
  only reader.  A file system whose driver the default lacks (F2FS is not in
  the cloud flavour) boots the first pinned kernel that has it
  (:func:`kernel_for`).
* ``fetch`` (run by set-up, idempotent): ``apt-get download`` into a
  temporary folder, ``dpkg -x`` into ``CACHE/kernel/<package>_<version>.tmp``,
  renamed when complete: a cache folder either is whole or does not exist.
* A package has no ``modules.dep``; :meth:`Kernel.load_order` reads each
  module's ``depends=`` from its ``.modinfo`` ELF section and orders the
  closure so that a module comes after everything it depends on (the order
  ``insmod`` needs).  Built-in drivers (``modules.builtin``, the config's
  ``=y``) need no module.
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from harness.env import ROOT, cache_root
from harness.errors import CrashlabError

PIN_FILE = ROOT / "harness" / "setup" / "qemu-kernel.txt"


@dataclass(frozen=True)
class KernelPin:
    package: str  # e.g. linux-image-6.1.0-50-cloud-amd64
    version: str  # the Debian version, e.g. 6.1.176-1

    def __str__(self) -> str:
        return f"{self.package}={self.version}"


def pinned() -> list[KernelPin]:
    """The pinned kernel packages, the default first."""
    pins = []
    for line in PIN_FILE.read_text().splitlines():
        word = line.split("#")[0].strip()
        if word:
            package, _, version = word.partition("=")
            if not version:
                raise CrashlabError(f"{PIN_FILE}: {word!r} is not package=version")
            pins.append(KernelPin(package, version))
    if not pins:
        raise CrashlabError(f"{PIN_FILE}: no kernel package pinned")
    return pins


def cache_dir(pin: KernelPin) -> Path:
    return cache_root() / "kernel" / f"{pin.package}_{pin.version}"


def _modinfo(data: bytes) -> dict[str, str]:
    """The ``key=value`` strings of an ELF64 module's ``.modinfo`` section."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise CrashlabError("not an ELF64 kernel module")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        base = shoff + i * shentsize
        (name,) = struct.unpack_from("<I", data, base)
        off, size = struct.unpack_from("<QQ", data, base + 24)
        return name, off, size

    _, stroff, _ = section(shstrndx)
    for i in range(shnum):
        name, off, size = section(i)
        end = data.index(b"\0", stroff + name)
        if data[stroff + name : end] == b".modinfo":
            info: dict[str, str] = {}
            for item in data[off : off + size].split(b"\0"):
                key, sep, value = item.partition(b"=")
                if sep:
                    info.setdefault(key.decode(), value.decode(errors="replace"))
            return info
    return {}


class Kernel:
    """One unpacked kernel package in the cache."""

    def __init__(self, pin: KernelPin) -> None:
        self.pin = pin
        self.dir = cache_dir(pin)
        if not (self.dir / "boot").is_dir():
            raise CrashlabError(f"the guest kernel {pin} is not in {self.dir} (run `make setup`)")

    @cached_property
    def release(self) -> str:
        """The kernel release (``uname -r`` in the guest)."""
        (release,) = [p.name for p in (self.dir / "lib" / "modules").iterdir()]
        return release

    @property
    def vmlinuz(self) -> Path:
        return self.dir / "boot" / f"vmlinuz-{self.release}"

    @property
    def modules_dir(self) -> Path:
        return self.dir / "lib" / "modules" / self.release

    @cached_property
    def config(self) -> dict[str, str]:
        out = {}
        for line in (self.dir / "boot" / f"config-{self.release}").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key.startswith("CONFIG_"):
                out[key] = value
        return out

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.vmlinuz.read_bytes()).hexdigest()

    @cached_property
    def _modules(self) -> dict[str, Path]:
        """Module name (``-`` as ``_``) -> its file."""
        out = {}
        for path in sorted((self.modules_dir / "kernel").rglob("*.ko*")):
            out[path.name.split(".ko")[0].replace("-", "_")] = path
        return out

    @cached_property
    def _builtin(self) -> set[str]:
        text = (self.modules_dir / "modules.builtin").read_text()
        return {Path(x).name.split(".ko")[0].replace("-", "_") for x in text.split()}

    def has(self, module: str) -> bool:
        """Whether ``module`` is available, as a module or built in."""
        key = module.replace("-", "_")
        return key in self._modules or key in self._builtin

    def module_bytes(self, module: str) -> bytes:
        path = self._modules[module.replace("-", "_")]
        data = path.read_bytes()
        return lzma.decompress(data) if path.name.endswith(".xz") else data

    def load_order(self, wanted: list[str]) -> list[str]:
        """The modules to insmod for ``wanted`` (built-ins dropped), each after
        its dependencies; CrashlabError names one that does not exist."""
        order: list[str] = []
        state: dict[str, int] = {}  # 1 visiting, 2 done

        def visit(name: str) -> None:
            key = name.replace("-", "_")
            if state.get(key) == 2 or key in self._builtin:
                return
            if key not in self._modules:
                raise CrashlabError(f"kernel {self.release} has no module {name}")
            if state.get(key) == 1:
                raise CrashlabError(f"module dependency cycle at {name}")
            state[key] = 1
            deps = _modinfo(self.module_bytes(key)).get("depends", "")
            for dep in filter(None, deps.split(",")):
                visit(dep)
            state[key] = 2
            order.append(key)

        for name in wanted:
            visit(name)
        return order


def kernel_for(modules: list[str]) -> Kernel:
    """The first pinned kernel that is fetched and has every one of
    ``modules`` (as a module or built in)."""
    reasons = []
    for pin in pinned():
        try:
            k = Kernel(pin)
        except CrashlabError as e:
            reasons.append(str(e))
            continue
        missing = [m for m in modules if not k.has(m)]
        if not missing:
            return k
        reasons.append(f"{pin.package} lacks {', '.join(missing)}")
    raise CrashlabError("no pinned guest kernel fits: " + "; ".join(reasons))


def fetch(pin: KernelPin) -> Path:
    """Download and unpack ``pin`` into the cache unless it is there."""
    dest = cache_dir(pin)
    if (dest / "boot").is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(partial, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="crashlab-kernel-", dir=dest.parent) as tmp:
        cmd = ["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", str(pin)]
        if os.geteuid() != 0:
            cmd = ["apt-get", "download", "-q", str(pin)]
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CrashlabError(f"apt-get download {pin}: {proc.stderr.strip().splitlines()[-1:]}")
        (deb,) = Path(tmp).glob("*.deb")
        proc = subprocess.run(
            ["dpkg-deb", "-x", str(deb), str(partial)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise CrashlabError(f"dpkg-deb -x {deb.name}: {proc.stderr.strip()}")
    os.replace(partial, dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.qemu.kernel")
    ap.add_argument("action", choices=["fetch", "show"])
    args = ap.parse_args(argv)
    try:
        for pin in pinned():
            if args.action == "fetch":
                fetch(pin)
            k = Kernel(pin)
            print(f"{pin}: {k.release} in {k.dir}")
    except CrashlabError as e:
        print(f"qemu kernel: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
