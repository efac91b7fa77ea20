"""The package build compiles crashlab's C parts with the Makefile's own
targets and puts them into the wheel at the paths a checkout has them
(``dhl/build/libdhl.so``, ``workloads/build/crashlab-runner``, ...): the
code finds them next to its modules either way.  The base images' recipe
goes in as ``harness/build/build-image.sh`` (harness/images.py).  Needs
the Debian packages of harness/setup/apt-packages.txt (a C compiler,
make, libfuse3-dev, libsqlite3-dev, libxxhash-dev)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# What the code loads or runs at run time: no test programs, no sanitizer
# builds, no MAW runner (it needs SQLite's amalgamation: `make build`).
NATIVE = (
    "dhl/build/libdhl.so",
    "checkers/build/librawcheck.so",
    "harness/build/logfuse",
    "workloads/build/crashlab-runner",
    "workloads/build/crashlab-xlog-recover",
    "workloads/build/libcrashlab-cksumvfs.so",
    "workloads/build/libcrashlab-waldiovfs.so",
    "workloads/build/libcrashlab-selvfs.so",
)
IMAGE_RECIPE = ("images/build-image.sh", "harness/build/build-image.sh")


class BuildWithNative(build_py):
    """build_py, then the C parts built by make and copied into the build."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable checkout: `make build` builds them in place
        subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *NATIVE], check=True)
        copies = [(rel, rel) for rel in NATIVE] + [IMAGE_RECIPE]
        for src, dst in copies:
            target = Path(self.build_lib) / dst
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / src, target)


class NativeDistribution(Distribution):
    """A platform wheel (it carries machine code), not a pure-Python one."""

    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass={"build_py": BuildWithNative}, distclass=NativeDistribution)
