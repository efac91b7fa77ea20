"""A run folder checked before any work on it: :func:`validate` (and
:func:`resolve_log`, which validates a run folder it is given).

A run folder may come from another machine or person; what it may and may
not be is the README's "Safety" section.  Validation sits above
``rundir.py`` (the folder's layout and ``meta.json``'s types) and
``images.py`` (the base image's digest), which it uses both.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from harness.confine import confined
from harness.errors import CrashlabError
from harness.fs import FILESYSTEMS
from harness.images import verified_base_for_run
from harness.logformat import LogReader
from harness.rundir import LOG_NAME, META_NAME, RunDir, RunMeta, quoted
from harness.states.model import LOG_ORDERS

# Runs this process has validated, by folder and the identity and change
# stamps of meta.json and the log: a command validates a run once, however
# many of its stages (and forked workers) ask.
_VALID: dict[tuple[object, ...], RunMeta] = {}
NVRAM_LIMIT = 1 << 30  # an emulated NVRAM is a few MiB (workloads/suts.py)


def validate(run: RunDir) -> RunMeta:
    """Check a run folder before any work on it; return its meta.json.

    A CrashlabError (one line) unless: meta.json is an object with each key
    of its type (:meth:`RunMeta.from_json`, which parses its faults) and
    sane values (a known file system and log order, ``db`` a relative path
    that stays in its folder, ``nvram`` placed within the base image); the log is
    a regular file inside the folder with a valid header; its base image
    is there with the recorded digest; and one streaming pass over the
    log's headers (payloads are not read) finds every entry well formed,
    every write and discard within the device (the base image's size, or
    the disk's plus the NVRAM's where the SUT has one), and the counts meta.json's ``log``
    summary and ``marks`` record -- entries, writes, bytes, flushes, FUA,
    discards, marks in order, epochs, salvaged entries -- equal to the
    log's.  A finished workload run must hold the marks its checks stand on
    (``setup-done`` and ``workload-end``)."""
    log = confined(run.path, LOG_NAME, str(run.log))
    stamps = tuple(_stamp(p) for p in (run.meta_path, log))
    key = (str(run.path.resolve()), *stamps)
    if key in _VALID:
        return _VALID[key]
    meta = run.meta()
    _check_values(run, meta)
    recorded = meta.log
    if recorded is None or "error" in recorded:
        why = f" ({recorded['error']})" if recorded else ""
        raise CrashlabError(
            f"{run.meta_path}: no summary of the log{why}: not a run that can be checked"
        )
    device = _device_bytes(run, meta, os.stat(verified_base_for_run(run)).st_size)
    with LogReader(log, salvage=True, device_bytes=device) as reader:
        actual = dataclasses.asdict(reader.summary())
    for k, v in actual.items():
        if recorded.get(k) != v:
            raise CrashlabError(
                f"{run.path}: {LOG_NAME} does not agree with {META_NAME}: "
                f"log {k} {quoted(v)}, meta.json's {quoted(recorded.get(k))}"
            )
    if list(meta.marks) != actual["marks"]:
        raise CrashlabError(
            f"{run.path}: {META_NAME} marks {quoted(list(meta.marks))} are not "
            f"the log's {quoted(actual['marks'])}"
        )
    if meta.sut is not None and meta.exit_status == 0 and meta.continues_at is None:
        missing = [m for m in ("setup-done", "workload-end") if m not in actual["marks"]]
        if missing:
            raise CrashlabError(
                f"{run.path}: a finished workload run without its {missing[0]!r} mark"
            )
    _VALID[key] = meta
    return meta


def _stamp(path: Path) -> tuple[int, ...]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return ()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _check_values(run: RunDir, meta: RunMeta) -> None:
    """The values of meta.json that its types do not settle."""
    where = str(run.meta_path)
    if meta.fs not in FILESYSTEMS:
        raise CrashlabError(f"{where}: unknown fs {quoted(meta.fs)}")
    if meta.log_order not in LOG_ORDERS:
        raise CrashlabError(f"{where}: unknown log_order {quoted(meta.log_order)}")
    if meta.image is None:
        raise CrashlabError(f"{where}: names no base image")
    if meta.db is not None:
        confined(run.path / "files", meta.db, f"{where}: db")


def _device_bytes(run: RunDir, meta: RunMeta, base: int) -> int:
    """The recorded device's size: the base image's (``base`` bytes), or,
    for a SUT with an NVRAM (meta.json ``nvram``), the disk's and then the
    NVRAM's -- the recorder truncates its copy of the base to that (a
    continuation's base already holds the NVRAM)."""
    nv = meta.extra.get("nvram")
    if nv is None:
        return base
    if not (
        isinstance(nv, dict)
        and set(nv) == {"offset", "bytes"}
        and all(type(x) is int for x in nv.values())
        and 0 < nv["offset"] <= base
        and 0 < nv["bytes"] <= NVRAM_LIMIT
    ):
        raise CrashlabError(
            f"{run.meta_path}: nvram {quoted(nv)} is not "
            f'{{"offset": <1..{base}>, "bytes": <1..{NVRAM_LIMIT}>}}'
        )
    return nv["offset"] + nv["bytes"]


def resolve_log(target: Path | str) -> Path:
    """A log path from either a run directory (validated first:
    :func:`validate`) or a log file."""
    p = Path(target)
    if p.is_dir():
        run = RunDir(p)
        if run.meta_path.exists() or run.meta_path.is_symlink():
            validate(run)
        p = run.log
    if not p.exists():
        raise CrashlabError(f"{target}: no such run directory or log")
    return p
