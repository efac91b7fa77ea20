"""A run directory: the one definition of what a recorded run leaves on disk.

    RUN/writes.log   the dm-log-writes log of every block write
    RUN/meta.json    backend, fs, kernel, base image and its digest, command,
                     tool versions, marks, and (for workload runs) the SUT,
                     workload spec and seed from which the oracle is rebuilt
                     (:class:`RunMeta`, the one definition of its keys)

A run never holds a copy of its base image: ``meta.json`` names the image and
its digest, and replay refuses an image whose digest differs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.atomic import write_json_atomic
from harness.confine import confined, read_regular
from harness.errors import CrashlabError
from harness.logformat import LogReader

LOG_NAME = "writes.log"
META_NAME = "meta.json"
CHECK_DIR = "check"  # RUN/check/<strategy>-<options digest>/, one per check
STATES_NAME = "states.jsonl"  # a check's per-state records
RESULT_NAME = "result.json"  # a check's result, written last
RUN_NAME = "run.jsonl"  # a check's run-level records (harness/check/runlevel.py)
# what a check is (its options, the recording's meta.json digest), written
# when it starts: --resume continues a states.jsonl only for the same check
IDENTITY_NAME = "check.json"
# meta.json is small (its largest part: the marks, twice); anything larger
# is not one
META_LIMIT = 64 << 20


@dataclass(frozen=True)
class ImageRef:
    """The base image a run was recorded on."""

    fs: str
    path: str
    sha256: str


@dataclass(frozen=True)
class Continues:
    """A continuation (multicrash, recovery-crash): the run and crash state
    it continues, and what held at that first crash."""

    run: str
    state: str
    kind: str
    recovered_txn: int = 0
    acked: int = 0
    begun: int = 0


@dataclass(frozen=True)
class RunMeta:
    """``meta.json``.  The recorder's part (``harness/record/recorder.py``):
    how and where the run was recorded, and the log's summary.  A workload
    run's part (``workloads/run.py``): the SUT, the canonical workload spec
    and its seed (the oracle is rebuilt from them), the database file's
    name, the runner's counts, and for a continuation where it starts.
    A run recorded in a qemu guest also has ``guest``.
    Keys this class does not know (a caller's own) are kept in ``extra``."""

    fs: str = ""
    backend: str = ""
    backend_choice: str = ""
    # what a write's position in the log means for crash states (the
    # recording backend's; runs from before it was recorded: fuse's)
    log_order: str = "completion"
    kernel: str = ""
    image: ImageRef | None = None
    command: tuple[str, ...] = ()
    # shell convention: 128 + N when the command was killed by signal N
    exit_status: int | None = None
    signal: str | None = None
    interrupted: str | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    marks: tuple[str, ...] = ()
    log: dict[str, Any] | None = None  # LogReader.summary(), or {"error": ...}
    wall_time_s: float = 0.0
    started: str = ""
    # the faults beyond power loss given to the recording (harness/faults.py,
    # canonical spellings; written only when there are some): the check
    # stage applies the state kinds among them to every crash state
    faults: tuple[str, ...] = ()
    # a run recorded in a guest (backend qemu): kernel package and sha256s
    # of the kernel, the initramfs and the job archive (harness/record/qemu.py)
    guest: dict[str, Any] | None = None
    # extra mount options the recorder gave the file system (a SUT's
    # Sut.mount_options, e.g. ext4 data=journal; written only when some)
    mount_options: str = ""
    # a workload run
    sut: str | None = None
    workload: str | None = None
    seed: int | None = None
    db: str | None = None
    runner: dict[str, Any] | None = None  # crashlab-runner's --stats report
    continues_at: int | None = None  # the runner's --from-txn
    continues: Continues | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: object) -> RunMeta:
        """The meta of a parsed meta.json: an object whose known keys each
        have their field's type (:class:`MetaTypeError` names the first
        that does not); unknown keys go to ``extra``."""
        return _typed(d, cls, "meta.json")

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the recorder's keys always (null when unknown),
        a workload run's only when set, then ``extra``."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "extra" or (v is None and f.name in _OPTIONAL_KEYS) or (
                    f.name in ("faults", "mount_options") and not v):
                continue
            if dataclasses.is_dataclass(v):
                v = dataclasses.asdict(v)  # type: ignore[arg-type]
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return {**out, **self.extra}


class MetaTypeError(CrashlabError):
    """A meta.json value of the wrong type, named by its key path."""


def _typed(v: object, hint: Any, where: str) -> Any:  # noqa: ANN401
    """``v`` (parsed JSON) as a value of type ``hint`` (the dataclass
    annotations of this module: str, int, float, bool, None, unions,
    ``tuple[X, ...]`` from a list, ``dict[str, X]``, and the dataclasses,
    whose unknown keys go to an ``extra`` field if they have one and are an
    error otherwise); MetaTypeError names ``where`` otherwise."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return v
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        some = [a for a in args if a is not type(None)]
        if len(some) == 1:  # X | None: X's own error, which says more
            return _typed(v, some[0], where)
        for a in some:
            try:
                return _typed(v, a, where)
            except MetaTypeError:
                continue
        raise MetaTypeError(f"{where}: {_short(v)} is not {_name(hint)}")
    if dataclasses.is_dataclass(hint):
        return _typed_object(v, hint, where)
    if origin is tuple and isinstance(v, list):
        return tuple(_typed(x, args[0], f"{where}[{i}]") for i, x in enumerate(v))
    if origin is dict and isinstance(v, dict):
        return {k: _typed(x, args[1], f"{where}.{k}") for k, x in v.items()}
    ok = {str: str, int: int, float: int | float, bool: bool}.get(hint)
    if ok is not None and isinstance(v, ok) and (hint is bool or not isinstance(v, bool)):
        return v
    raise MetaTypeError(f"{where}: {_short(v)} is not {_name(hint)}")


def _typed_object(v: object, cls: Any, where: str) -> Any:  # noqa: ANN401
    """A dataclass from a JSON object (see :func:`_typed`)."""
    if not isinstance(v, dict):
        raise MetaTypeError(f"{where}: {_short(v)} is not an object")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    has_extra = "extra" in fields
    kw: dict[str, Any] = {}
    for k, x in v.items():
        if k in fields and k != "extra":
            kw[k] = _typed(x, hints[k], f"{where}: {k}")
        elif not has_extra:
            raise MetaTypeError(f"{where}: unknown key {_short(k)}")
    missing = [n for n, f in fields.items() if n not in kw and n != "extra"
               and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise MetaTypeError(f"{where}: missing key {missing[0]!r}")
    if has_extra:
        kw["extra"] = {k: x for k, x in v.items() if k not in fields or k == "extra"}
    return cls(**kw)


def _name(hint: Any) -> str:  # noqa: ANN401
    """A type as an error message says it."""
    if dataclasses.is_dataclass(hint) or hint is dict or typing.get_origin(hint) is dict:
        return "an object"
    if typing.get_origin(hint) is tuple:
        return f"a list ({_name(typing.get_args(hint)[0])} each)"
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_name(a) for a in typing.get_args(hint))
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false",
            type(None): "null"}.get(hint, str(hint))


def _short(v: object) -> str:
    """A JSON value as an error message quotes it (at most 40 characters)."""
    text = json.dumps(v)
    return text if len(text) <= 40 else text[:37] + "..."


# written only when set: a workload run's keys, and a guest's facts
_OPTIONAL_KEYS = ("sut", "workload", "seed", "db", "runner", "continues_at", "continues",
                  "guest")


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def log(self) -> Path:
        return self.path / LOG_NAME

    @property
    def meta_path(self) -> Path:
        return self.path / META_NAME

    def meta(self) -> RunMeta:
        """meta.json, parsed strictly (:meth:`RunMeta.from_json`): a
        CrashlabError names the file and what is wrong with it."""
        try:
            raw = read_regular(confined(self.path, META_NAME, str(self.meta_path)),
                               META_LIMIT, str(self.meta_path))
        except FileNotFoundError:
            raise CrashlabError(f"{self.path}: not a run directory (no {META_NAME})") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise CrashlabError(f"{self.meta_path}: not UTF-8 (byte {e.start})") from None
        except (json.JSONDecodeError, RecursionError) as e:
            raise CrashlabError(f"{self.meta_path}: corrupt JSON ({e})") from None
        try:
            return RunMeta.from_json(data)
        except MetaTypeError as e:
            raise CrashlabError(f"{self.meta_path}: not a crashlab {e}") from None

    @property
    def log_order(self) -> str:
        """What log order means for this run's crash states: the recording
        backend's (meta.json), except that a run in the kernel's
        ``dm-log-writes`` order on a file system that waits for each FUA write
        before issuing the next write (:attr:`FileSystem.fua_waited`) keeps
        its FUA writes ordered before every write logged after them, which is
        ``completion`` order (harness/states/model.py)."""
        from harness.fs import get_fs  # harness.fs imports from this module's users

        meta = self.meta()
        if meta.log_order == "dm-log-writes" and meta.fs and get_fs(meta.fs).fua_waited:
            return "completion"
        return meta.log_order

    def write_meta(self, meta: RunMeta) -> None:
        write_json_atomic(self.meta_path, meta.to_json())

    def check_dir(self, tag: str) -> Path:
        """Where a check of this run with options ``tag`` writes."""
        return self.path / CHECK_DIR / tag

    def check_results(self) -> list[Path]:
        """Every finished check's result.json."""
        return sorted((self.path / CHECK_DIR).glob(f"*/{RESULT_NAME}"))


@dataclass(frozen=True)
class SweepDir:
    """A sweep folder: the one definition of what a sweep leaves on disk.

        SWEEP/runs/<cell>/      one run folder per cell (:class:`RunDir`)
        SWEEP/summary.json      the cells: verdict counts, expectations
        SWEEP/violations.jsonl  every failing verdict, with its repro command
        SWEEP/junit.xml         one test case per cell and strategy
        SWEEP/timing.json       seconds per recording and per check
        SWEEP/report.html, report.md, plots/   the reports (harness/report/)
    """

    path: Path

    def run(self, cell_name: str) -> RunDir:
        return RunDir(self.path / "runs" / cell_name)

    def cell_run(self, named: object, where: str) -> Path:
        """The run folder a summary cell's ``run`` names (``runs/<cell>``,
        as the sweep writes it), confined to this sweep folder; a
        CrashlabError naming ``where`` for anything else."""
        path = confined(self.path, named, f"{where}: run")
        parts = Path(str(named)).parts
        if len(parts) != 2 or parts[0] != "runs":
            raise CrashlabError(f"{where}: run {named!r} is not runs/<cell>")
        return path

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    @property
    def violations(self) -> Path:
        return self.path / "violations.jsonl"

    @property
    def junit(self) -> Path:
        return self.path / "junit.xml"

    @property
    def timing(self) -> Path:
        return self.path / "timing.json"

    @property
    def report_html(self) -> Path:
        return self.path / "report.html"

    @property
    def report_md(self) -> Path:
        return self.path / "report.md"

    @property
    def plots(self) -> Path:
        return self.path / "plots"


# Runs this process has validated, by folder and the identity and change
# stamps of meta.json and the log: a command validates a run once, however
# many of its stages (and forked workers) ask.
_VALID: dict[tuple[object, ...], RunMeta] = {}
NVRAM_LIMIT = 1 << 30  # an emulated NVRAM is a few MiB (workloads/suts.py)


def validate(run: RunDir) -> RunMeta:
    """Check a run folder before any work on it; return its meta.json.

    A CrashlabError (one line) unless: meta.json is an object with each key
    of its type (:meth:`RunMeta.from_json`) and sane values (a known file
    system and log order, parseable faults, ``db`` a relative path that
    stays in its folder, ``nvram`` placed within the base image); the log is
    a regular file inside the folder with a valid header; its base image
    is there with the recorded digest; and one streaming pass over the
    log's headers (payloads are not read) finds every entry well formed,
    every write and discard within the device (the base image's size, or
    the disk's plus the NVRAM's where the SUT has one), and the counts meta.json's ``log``
    summary and ``marks`` record -- entries, writes, bytes, flushes, FUA,
    discards, marks in order, epochs, salvaged entries -- equal to the
    log's.  A finished workload run must hold the marks its checks stand on
    (``setup-done`` and ``workload-end``)."""
    from harness.images import verified_base_for_run  # it imports this module

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
        raise CrashlabError(f"{run.meta_path}: no summary of the log{why}: not a run that "
                            "can be checked")
    device = _device_bytes(run, meta, os.stat(verified_base_for_run(run)).st_size)
    with LogReader(log, salvage=True, device_bytes=device) as reader:
        actual = dataclasses.asdict(reader.summary())
    for k, v in actual.items():
        if recorded.get(k) != v:
            raise CrashlabError(f"{run.path}: {LOG_NAME} does not agree with {META_NAME}: "
                                f"log {k} {_short(v)}, meta.json's {_short(recorded.get(k))}")
    if list(meta.marks) != actual["marks"]:
        raise CrashlabError(f"{run.path}: {META_NAME} marks {_short(list(meta.marks))} are not "
                            f"the log's {_short(actual['marks'])}")
    if meta.sut is not None and meta.exit_status == 0 and meta.continues_at is None:
        missing = [m for m in ("setup-done", "workload-end") if m not in actual["marks"]]
        if missing:
            raise CrashlabError(f"{run.path}: a finished workload run without its "
                                f"{missing[0]!r} mark")
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
    from harness.faults import parse_faults
    from harness.fs import FILESYSTEMS
    from harness.states.model import LOG_ORDERS

    where = str(run.meta_path)
    if meta.fs not in FILESYSTEMS:
        raise CrashlabError(f"{where}: unknown fs {_short(meta.fs)}")
    if meta.log_order not in LOG_ORDERS:
        raise CrashlabError(f"{where}: unknown log_order {_short(meta.log_order)}")
    if meta.image is None:
        raise CrashlabError(f"{where}: names no base image")
    if meta.db is not None:
        confined(run.path / "files", meta.db, f"{where}: db")
    parse_faults(list(meta.faults))


def _device_bytes(run: RunDir, meta: RunMeta, base: int) -> int:
    """The recorded device's size: the base image's (``base`` bytes), or,
    for a SUT with an NVRAM (meta.json ``nvram``), the disk's and then the
    NVRAM's -- the recorder truncates its copy of the base to that (a
    continuation's base already holds the NVRAM)."""
    nv = meta.extra.get("nvram")
    if nv is None:
        return base
    if not (isinstance(nv, dict) and set(nv) == {"offset", "bytes"}
            and all(type(x) is int for x in nv.values())
            and 0 < nv["offset"] <= base and 0 < nv["bytes"] <= NVRAM_LIMIT):
        raise CrashlabError(f"{run.meta_path}: nvram {_short(nv)} is not "
                            f'{{"offset": <1..{base}>, "bytes": <1..{NVRAM_LIMIT}>}}')
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
