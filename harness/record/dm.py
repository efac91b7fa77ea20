"""The ``dm`` backend: the kernel's own dm-log-writes target, through
dmsetup.  The working image and the log file each go on a loop device; a
``log-writes`` device stacks on them; marks are ``dmsetup message NAME 0
mark LABEL``.  Teardown, by the exact names created: ``dmsetup remove NAME``
(the kernel then appends its ``dm-log-writes-end`` mark), ``losetup -d`` of
both loop devices, and the log file is cut to the end of its last entry
(the log device is a sparse file of CRASHLAB_DM_LOG_SIZE bytes, 4 GiB by
default, because a log device cannot grow).

Needs a kernel with CONFIG_DM_LOG_WRITES; where it is missing (this
development machine) :meth:`DmBackend.available` says why, and ``auto``
falls through to the next backend."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from harness.env import dm_log_size
from harness.errors import CrashlabError
from harness.faults import Fault
from harness.logformat import LogReader
from harness.marks import check_label
from harness.record.backend import Backend, Device
from harness.sysops import (
    RECORD_PROGRAMS,
    loop_attach,
    loop_detach,
    missing_packages,
    run,
    signals_deferred,
)

DEFAULT_LOG_SIZE = 4 << 30
# Without udev (containers, minimal VMs) dmsetup would wait for a udev
# cookie forever; this makes libdevmapper create the /dev/mapper node itself.
DM_ENV = {"DM_DISABLE_UDEV": "1"}


def dmsetup(args: list[str], what: str) -> str:
    env = {**os.environ, **DM_ENV}
    try:
        proc = subprocess.run(
            ["dmsetup", *args], capture_output=True, text=True, env=env, timeout=60
        )
    except FileNotFoundError:
        raise CrashlabError(f"{what}: dmsetup is not installed") from None
    if proc.returncode != 0:
        msg = proc.stderr.strip().splitlines()
        raise CrashlabError(f"{what}: {msg[0] if msg else f'exit status {proc.returncode}'}")
    return proc.stdout


def dm_mark(name: str, label: str) -> None:
    """Log a mark on the log-writes device ``name`` (what a C workload does
    with ``CRASHLAB_MARK_DM=name``: ``dmsetup message NAME 0 mark LABEL``)."""
    check_label(label)
    dmsetup(["message", name, "0", "mark", label], f"mark {label!r} on {name}")


def log_end(log: Path) -> int:
    """The byte offset just past the last entry of ``log``."""
    with LogReader(log) as reader:
        end = reader.sectorsize
        for entry in reader.entries():
            end = entry.end_offset(reader.sectorsize)
    return end


class DmBackend(Backend):
    name = "dm"
    log_order = "dm-log-writes"  # the kernel logs non-FUA writes at the next flush

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if os.geteuid() != 0:
            return False, "needs root (device-mapper and loop devices)"
        missing = missing_packages(RECORD_PROGRAMS["dm"])
        if missing:
            return False, missing
        try:
            targets = dmsetup(["targets"], "dmsetup targets")
        except CrashlabError as e:
            return False, f"no device-mapper in this kernel ({e})"
        names = {line.split()[0] for line in targets.splitlines() if line.strip()}
        if "log-writes" not in names:
            return (
                False,
                "the kernel's device-mapper has no log-writes target (CONFIG_DM_LOG_WRITES)",
            )
        return True, "dmsetup targets lists log-writes"

    @contextlib.contextmanager
    def attach(
        self, image: Path, log: Path, workdir: Path, faults: tuple[Fault, ...] = ()
    ) -> Iterator[Device]:
        size = dm_log_size(DEFAULT_LOG_SIZE)
        # The log device must read as zeros beyond what the kernel writes.
        with open(log, "wb") as f:
            f.truncate(size)
        name = f"crashlab-{os.getpid()}-{secrets.token_hex(4)}"
        # As in the fuse backend: each step registers its undo in the same
        # signal-deferred block; undos run in reverse order.
        with contextlib.ExitStack() as stack:
            stack.push(_LogCut(log))
            with signals_deferred():
                data_dev = loop_attach(image, direct_io=False)
                stack.callback(_deferred, loop_detach, data_dev)
            with signals_deferred():
                log_dev = loop_attach(log, direct_io=False)
                stack.callback(_deferred, loop_detach, log_dev)
            sectors = run(["blockdev", "--getsz", data_dev], "blockdev").strip()
            table = f"0 {sectors} log-writes {data_dev} {log_dev}"
            with signals_deferred():
                dmsetup(["create", name, "--table", table], f"dmsetup create {name}")
                stack.callback(_deferred, _remove, name)
            yield Device(
                f"/dev/mapper/{name}",
                lambda label: dm_mark(name, label),
                {"CRASHLAB_MARK_DM": name},
            )


def _deferred(fn: Callable[..., object], *args: object) -> None:
    with signals_deferred():
        fn(*args)


class _LogCut:
    """Exit callback, run last: cut the sparse log device file to the end of
    its last entry (raised, or a note on an exception already in flight)."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def __call__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            with signals_deferred():
                os.truncate(self.log, log_end(self.log))
        except CrashlabError as e:
            if exc is None:
                raise CrashlabError(f"the dm log does not read back: {e}") from None
            exc.add_note(f"dm teardown: the log does not read back: {e}")
        return False


def _remove(name: str, tries: int = 20) -> None:
    """``dmsetup remove NAME``, retrying while the device is still busy."""
    for attempt in range(tries):
        try:
            dmsetup(["remove", name], f"dmsetup remove {name}")
            return
        except CrashlabError:
            if attempt + 1 == tries:
                raise
            time.sleep(0.1 * (attempt + 1))
