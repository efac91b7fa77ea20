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
import shlex
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.atomic import write_json_atomic
from harness.confine import confined, read_regular
from harness.errors import CrashlabError
from harness.faults import Fault, fault_specs, parse_fault

LOG_NAME = "writes.log"
META_NAME = "meta.json"
CHECK_DIR = "check"  # RUN/check/<strategy>-<options digest>/, one per check
STATES_NAME = "states.jsonl"  # a check's per-state records
RESULT_NAME = "result.json"  # a check's result, written last
RUN_NAME = "run.jsonl"  # a check's run-level records (harness/check/runlevel.py)
# what a check is (its options, the recording's meta.json digest), written
# when it starts: --resume continues a states.jsonl only for the same check
IDENTITY_NAME = "check.json"
# what makes a folder hold results that `--out` does not silently replace
# (harness/outlock.py: refuse_results): a check's, and a sweep's or merge's
CHECK_RESULTS = (RESULT_NAME, STATES_NAME)
SUMMARY_NAME = "summary.json"
RUNS_DIR = "runs"
SWEEP_RESULTS = (SUMMARY_NAME, RUNS_DIR)
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
    # the faults beyond power loss given to the recording (harness/faults.py:
    # parsed here, written in their canonical spellings, only when there are
    # some): the check stage applies the state kinds among them to every
    # crash state
    faults: tuple[Fault, ...] = ()
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

    def command_label(self) -> str:
        """The command the run recorded (``sh -c COMMAND``: COMMAND)."""
        cmd = [str(w) for w in self.command]
        if len(cmd) == 3 and cmd[:2] == ["sh", "-c"]:
            return cmd[2]
        return shlex.join(cmd)

    def sut_label(self) -> str:
        """What a table shows as the run's SUT: a workload run's, else
        ``command`` (a run of ``crashlab record -- COMMAND``)."""
        return self.sut if self.sut is not None else USER_COMMAND_SUT

    def workload_label(self) -> str:
        """What a table shows as the run's workload: a workload run's spec,
        else (a user's own SUT) the command it recorded."""
        return self.workload if self.workload is not None else self.command_label()

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the recorder's keys always (null when unknown),
        a workload run's only when set, then ``extra``."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if (
                f.name == "extra"
                or (v is None and f.name in _OPTIONAL_KEYS)
                or (f.name in ("faults", "mount_options") and not v)
            ):
                continue
            if f.name == "faults":
                v = fault_specs(v)
            elif dataclasses.is_dataclass(v):
                v = dataclasses.asdict(v)  # type: ignore[arg-type]  # is_dataclass also admits the class itself
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return {**out, **self.extra}


class MetaTypeError(CrashlabError):
    """A meta.json value of the wrong type, named by its key path."""


def _typed(v: object, hint: Any, where: str) -> Any:  # noqa: ANN401
    """``v`` (parsed JSON) as a value of type ``hint`` (the dataclass
    annotations of this module: str, int, float, bool, None, unions,
    ``tuple[X, ...]`` from a list, ``dict[str, X]``, a :class:`Fault` from
    its spec (:func:`harness.faults.parse_fault`), and the dataclasses,
    whose unknown keys go to an ``extra`` field if they have one and are an
    error otherwise); MetaTypeError names ``where`` otherwise."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return v
    if hint is Fault:  # meta.json is where a run's faults enter: parsed once here
        if not isinstance(v, str):
            raise MetaTypeError(f"{where}: {quoted(v)} is not a fault spec")
        try:
            return parse_fault(v)
        except CrashlabError as e:
            raise MetaTypeError(f"{where}: {e}") from None
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
        raise MetaTypeError(f"{where}: {quoted(v)} is not {_name(hint)}")
    if dataclasses.is_dataclass(hint):
        return _typed_object(v, hint, where)
    if origin is tuple and isinstance(v, list):
        return tuple(_typed(x, args[0], f"{where}[{i}]") for i, x in enumerate(v))
    if origin is dict and isinstance(v, dict):
        return {k: _typed(x, args[1], f"{where}.{k}") for k, x in v.items()}
    ok = {str: str, int: int, float: int | float, bool: bool}.get(hint)
    if ok is not None and isinstance(v, ok) and (hint is bool or not isinstance(v, bool)):
        return v
    raise MetaTypeError(f"{where}: {quoted(v)} is not {_name(hint)}")


def _typed_object(v: object, cls: Any, where: str) -> Any:  # noqa: ANN401
    """A dataclass from a JSON object (see :func:`_typed`)."""
    if not isinstance(v, dict):
        raise MetaTypeError(f"{where}: {quoted(v)} is not an object")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    has_extra = "extra" in fields
    kw: dict[str, Any] = {}
    for k, x in v.items():
        if k in fields and k != "extra":
            kw[k] = _typed(x, hints[k], f"{where}: {k}")
        elif not has_extra:
            raise MetaTypeError(f"{where}: unknown key {quoted(k)}")
    missing = [
        n
        for n, f in fields.items()
        if n not in kw
        and n != "extra"
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
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
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        type(None): "null",
    }.get(hint, str(hint))


def quoted(v: object) -> str:
    """A JSON value as an error message quotes it (at most 40 characters)."""
    text = json.dumps(v)
    return text if len(text) <= 40 else text[:37] + "..."


# the SUT name of a run recorded with ``crashlab record -- COMMAND``
USER_COMMAND_SUT = "command"

# written only when set: a workload run's keys, and a guest's facts
_OPTIONAL_KEYS = ("sut", "workload", "seed", "db", "runner", "continues_at", "continues", "guest")


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
            raw = read_regular(
                confined(self.path, META_NAME, str(self.meta_path)), META_LIMIT, str(self.meta_path)
            )
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
        return RunDir(self.path / RUNS_DIR / cell_name)

    def cell_run(self, named: object, where: str) -> Path:
        """The run folder a summary cell's ``run`` names (``runs/<cell>``,
        as the sweep writes it), confined to this sweep folder; a
        CrashlabError naming ``where`` for anything else."""
        path = confined(self.path, named, f"{where}: run")
        parts = Path(str(named)).parts
        if len(parts) != 2 or parts[0] != RUNS_DIR:
            raise CrashlabError(f"{where}: run {named!r} is not runs/<cell>")
        return path

    @property
    def summary(self) -> Path:
        return self.path / SUMMARY_NAME

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


# the keys every cell of summary.json has (SweepDir)
CELL_KEYS = ("sut", "workload", "fs", "strategy", "run", "states", "verdicts", "expectation")


def check_cell(cell: object, where: str) -> None:
    """A summary.json cell as the report, junit.xml and ``crashlab merge``
    read it -- strings, counts (integers >= 0), the expectation's ``ok``
    and its lines, the optional lists and tables -- or a CrashlabError
    naming ``where`` and the first field that is not.  (Its ``run``:
    :meth:`SweepDir.cell_run`.)"""

    def bad(what: str) -> CrashlabError:
        return CrashlabError(f"{where}: {what}")

    if not isinstance(cell, dict):
        raise bad("not an object")
    missing = [k for k in CELL_KEYS if k not in cell]
    if missing:
        raise CrashlabError(f"{where} lacks {', '.join(missing)}")
    for k in ("sut", "workload", "fs", "strategy", "run"):
        if not isinstance(cell[k], str):
            raise bad(f"{k} must be a string")
    states = cell["states"]
    if (
        not isinstance(states, dict)
        or not all(_count(states.get(k, 0)) for k in ("checked", "folded", "generated"))
        or "checked" not in states
        or "folded" not in states
    ):
        raise bad("states must hold the counts checked and folded")
    verdicts = cell["verdicts"]
    if not isinstance(verdicts, dict) or not all(
        isinstance(c, dict) and all(_count(n) for n in c.values()) for c in verdicts.values()
    ):
        raise bad("verdicts must map invariants to counts")
    exp = cell["expectation"]
    if (
        not isinstance(exp, dict)
        or not isinstance(exp.get("ok"), bool)
        or not all(
            _strings(exp.get(k, []))
            for k in ("guaranteed", "must_violate_any", "broken", "unverified", "errors", "waived")
        )
        or not isinstance(exp.get("status", ""), str)
    ):
        raise bad("expectation must hold ok (true or false) and lists of lines")
    if not _strings(cell.get("faults", [])):
        raise bad("faults must be a list of strings")
    for k in ("coverage", "options", "skips", "errors"):
        if not isinstance(cell.get(k, {}), dict | None):
            raise bad(f"{k} must be an object")
    groups = cell.get("groups", [])
    if not isinstance(groups, list):
        raise bad("groups must be a list")
    if not isinstance(cell.get("triage_error", ""), str):
        raise bad("triage_error must be a string")
    for i, g in enumerate(groups):
        check_group(g, f"{where}: group {i}")


# a group of summary.json (harness/sweep/triaged.py): its string and count fields
GROUP_STRINGS = ("invariant", "minimal", "kind", "explanation", "repro")
GROUP_COUNTS = ("count", "minimised")
WRITE_STATUSES = ("persisted", "lost", "torn", "unwritten")


def check_group(g: object, where: str) -> None:
    """A group of a summary.json cell as the report and junit.xml read it
    (its ID a group ID, its strings, counts, lost roles and the writes of
    its picture), or a CrashlabError naming ``where`` and the field."""
    if not isinstance(g, dict):
        raise CrashlabError(f"{where}: not an object")
    check_group_ref(g.get("id"), where)
    if g.get("id") is None:
        raise CrashlabError(f"{where}: no id")
    for k in GROUP_STRINGS:
        if not isinstance(g.get(k), str):
            raise CrashlabError(f"{where}: {k} must be a string")
    for k in GROUP_COUNTS:
        if not _count(g.get(k)):
            raise CrashlabError(f"{where}: {k} must be a count")
    if not _strings(g.get("lost")):
        raise CrashlabError(f"{where}: lost must be a list of strings")
    writes = g.get("writes")
    if not isinstance(writes, list) or not all(
        isinstance(w, dict)
        and _count(w.get("entry"))
        and w.get("status") in WRITE_STATUSES
        and _strings(w.get("roles"))
        and isinstance(w.get("phase"), str)
        for w in writes
    ):
        raise CrashlabError(f"{where}: writes must be entries with status, roles and phase")


def check_group_ref(gid: object, where: str) -> None:
    """A group ID (10 lowercase hex digits, harness/triage/witness.py) or
    None, as a violations.jsonl line's ``group`` is; else a CrashlabError."""
    if gid is None:
        return
    if not (isinstance(gid, str) and len(gid) == 10 and all(c in HEX for c in gid)):
        raise CrashlabError(f"{where}: group {str(gid)[:40]!r} is not a group ID")


HEX = frozenset("0123456789abcdef")


def _count(v: object) -> bool:
    """A count: an integer 0 <= v < 2^63 (what the plots' arrays hold)."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63


def _strings(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)
