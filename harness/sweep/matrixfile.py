"""Matrix files: the cells of a sweep, and a project's own SUTs, in TOML
(``crashlab sweep --matrix ./crashlab.toml``; the built-in ``default``
matrix is such a file, ``harness/sweep/matrices/default.toml``).

    [workloads]                       # names for workload specs (optional; the
    BIG = "insert:txns=1000,seed=1"   # built-in names MULTI, DHL_INSERT... are known)

    [sut.counter]                     # a SUT of yours
    run = "sh {here}/workload.sh"     # the workload (sh -c), in the recorded file system
    build = "make -C {here}"          # optional: once per sweep, before recording
    checker = "python3 {here}/check.py"   # or: checkers = { name = "command", ... }
                                      # (persist:COMMAND, py:FILE.py:FN as with --checker)
    recover = "python3 {here}/recover.py" # optional: before each checker, on its files
    timeout = 60                      # seconds per checker and state
    promises = ["FS-RECOVER", "USER:check"]  # default: FS-RECOVER and every checker
    must_violate_any = ["USER:check"] # a known-unsafe variant: what it must keep showing

    [[cell]]                          # a list value makes one cell per element
    sut = ["counter", "sqlite-wal-full"]   # yours, or a built-in SUT by name
    workload = "MULTI"                # built-in SUTs: a spec or a name from [workloads]
    fs = "ext4"                       # default ext4
    strategies = ["prefix", "reorder"]    # default prefix, reorder
    checkers = { rows = "python3 {here}/rows.py" }   # yours, on any cell's states
    must_violate_any = []             # default: the built-in SUT's known weakness
    waived = []                       # promises this cell does not hold the SUT to
    faults = ["corrupt,seed=1"]       # faults beyond power loss (harness/faults.py): device
                                      # and process ones while recording, state ones on
                                      # every crash state; the promises become the SUT's
    backend = "qemu"                  # record with this backend (default: the sweep's)
    blktrace = true                   # qemu: blktrace the device too (report: I/O timeline)
    states = { sample = 16 }          # enumeration options (`crashlab states --help`):
                                      # max_exhaustive, max_drop, sample, seed, tear_unit,
                                      # torn_pattern, max_tears, max_subset_blocks,
                                      # budget (states; 0: the run's tier's)

A floors file beside the matrix file (``NAME.floors.toml``, written by
``crashlab floors SWEEP``: harness/sweep/floors.py) gives its
cells coverage floors: the fewest states each may check per strategy.

``{here}`` in a command is the folder of the file and ``{python}`` the
Python crashlab runs on (both shell-quoted); a checker named by
``checker`` is called after its SUT (``USER:counter``).
Every key is checked: an unknown one is an error, not a silent default.
"""

from __future__ import annotations

import dataclasses
import itertools
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

from harness.check.multicrash import COMPOSITE
from harness.check.usercheck import (
    CHECKER_NAME,
    DEFAULT_TIMEOUT,
    UserChecker,
    parse_checker,
    unique,
)
from harness.confine import read_regular
from harness.errors import CrashlabError
from harness.faults import PROCESS, STATE, Fault, by_stage, parse_faults
from harness.fs import FILESYSTEMS
from harness.record.backends import BACKENDS
from harness.states import STRATEGIES, Options
from harness.states.inject import StateFaults
from harness.sweep.builtin_workloads import BUILTIN_WORKLOADS
from harness.sweep.cell import Cell, UserSut
from harness.sweep.floors import floors_path, load_floors
from workloads.run import check_sut_fs, check_workload
from workloads.suts import SUTS, get_sut

SUT_KEYS = {
    "run",
    "build",
    "checker",
    "checkers",
    "recover",
    "timeout",
    "promises",
    "must_violate_any",
}
CELL_KEYS = {
    "sut",
    "workload",
    "fs",
    "strategies",
    "checkers",
    "must_violate_any",
    "waived",
    "faults",
    "backend",
    "blktrace",
    "states",
}
# the enumeration options a cell may set (harness/states/strategies.py, Options)
STATE_KEYS = {
    "max_exhaustive": int,
    "max_drop": int,
    "sample": int,
    "seed": int,
    "tear_unit": int,
    "torn_pattern": str,
    "max_tears": int,
    "max_subset_blocks": int,
    "budget": int,  # states (0: the tier's); reorder, torn, torn-reorder
}
MATRICES_DIR = Path(__file__).resolve().parent / "matrices"
MATRIX_LIMIT = 1 << 20  # bytes: a matrix file is a page or two of TOML


def load_matrix(path: Path) -> list[Cell]:
    """The cells of the matrix file ``path``; CrashlabError names the file
    and what is wrong."""
    try:
        text = read_regular(path, MATRIX_LIMIT, str(path)).decode("utf-8")
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise CrashlabError(f"{path}: no such matrix file") from None
    except UnicodeDecodeError as e:
        raise CrashlabError(f"{path}: not UTF-8 (byte {e.start})") from None
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        raise CrashlabError(f"{path}: not TOML: {e}") from None
    unknown = set(data) - {"workloads", "sut", "cell"}
    if unknown:
        raise CrashlabError(
            f"{path}: unknown table {sorted(unknown)[0]!r} (expected workloads, sut, cell)"
        )
    here = shlex.quote(str(path.resolve().parent))
    named = _table(data, "workloads", path)
    bad = next((k for k, v in named.items() if not isinstance(v, str)), None)
    if bad is not None:
        raise CrashlabError(
            f"{path}: [workloads] {bad} must be a workload spec string, not {named[bad]!r}"
        )
    workloads = {**BUILTIN_WORKLOADS, **named}
    suts = {
        name: _user_sut(name, spec, here, path) for name, spec in _table(data, "sut", path).items()
    }
    specs = data.get("cell", [])
    if not isinstance(specs, list):
        raise CrashlabError(f"{path}: `cell` must be an array of tables ([[cell]])")
    cells = [
        c for i, spec in enumerate(specs) for c in _cells(spec, i, suts, workloads, here, path)
    ]
    if not cells:
        raise CrashlabError(f"{path}: no [[cell]]")
    names = [c.name for c in cells]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise CrashlabError(f"{path}: two cells run in the same folder {dup!r}")
    floors = load_floors(floors_path(path))
    return [
        dataclasses.replace(c, floors=tuple(sorted(floors[c.name].items())))
        if c.name in floors
        else c
        for c in cells
    ]


def _table(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    t = data.get(key, {})
    if not isinstance(t, dict):
        raise CrashlabError(f"{path}: [{key}] must be a table")
    return t


def _sub(command: str, here: str) -> str:
    """``{here}``: the file's folder; ``{python}``: the Python crashlab runs
    on (with its virtualenv's packages)."""
    return command.replace("{here}", here).replace("{python}", shlex.quote(sys.executable))


def _user_sut(name: str, spec: Any, here: str, path: Path) -> UserSut:  # noqa: ANN401
    where = f"{path}: [sut.{name}]"
    if not isinstance(spec, dict):
        raise CrashlabError(f"{where} must be a table")
    if name in SUTS:
        raise CrashlabError(f"{where}: {name!r} is a built-in SUT; name yours differently")
    unknown = set(spec) - SUT_KEYS
    if unknown:
        raise CrashlabError(
            f"{where}: unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(SUT_KEYS))})"
        )
    run = _str(spec, "run", where)
    if not run.strip():
        raise CrashlabError(f"{where}: `run` (the workload command) is required")
    timeout = _number(spec, "timeout", DEFAULT_TIMEOUT, where)
    recover = _sub(_str(spec, "recover", where), here)
    named = {name: _str(spec, "checker", where)} if "checker" in spec else {}
    checkers = _checkers({**named, **_dict(spec, "checkers", where)}, here, timeout, where, recover)
    if not checkers:
        raise CrashlabError(f"{where}: give it a `checker` (or `checkers`)")
    return UserSut(
        name,
        _sub(run, here),
        _sub(_str(spec, "build", where), here),
        str(path.resolve().parent),
        checkers,
        _strs(spec, "promises", where) if "promises" in spec else None,
        _strs(spec, "must_violate_any", where),
    )


def _str(spec: dict[str, Any], key: str, where: str) -> str:
    v = spec.get(key, "")
    if not isinstance(v, str):
        raise CrashlabError(f"{where}: `{key}` must be a string, not {v!r}")
    return v


def _strs(spec: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    v = spec.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise CrashlabError(f"{where}: `{key}` must be a list of strings, not {v!r}")
    return tuple(v)


def _dict(spec: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    v = spec.get(key, {})
    if not isinstance(v, dict):
        raise CrashlabError(f'{where}: `{key}` must be a table of name = "command", not {v!r}')
    return v


def _number(spec: dict[str, Any], key: str, default: float, where: str) -> float:
    v = spec.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
        raise CrashlabError(f"{where}: `{key}` must be a positive number of seconds, not {v!r}")
    return float(v)


def _checkers(
    table: Any,
    here: str,
    timeout: float,
    where: str,  # noqa: ANN401
    recover: str = "",
) -> tuple[UserChecker, ...]:
    out = []
    for name, command in table.items():
        if not isinstance(command, str) or not CHECKER_NAME.fullmatch(name):
            raise CrashlabError(
                f"{where}: checker {name!r} = {command!r}: a name of letters, "
                "digits, _ . - and a command string"
            )
        if not command.strip():
            raise CrashlabError(f"{where}: checker {name!r}: empty command")
        # its kind (persist:, py:) is a prefix of the command, as with --checker
        uc = parse_checker(f"{name}={_sub(command, here)}", timeout)
        out.append(dataclasses.replace(uc, recover=recover))
    unique(out, where)
    return tuple(out)


def _states(spec: dict[str, Any], where: str) -> tuple[tuple[str, Any], ...]:
    """A cell's ``states`` table: enumeration options, checked as the
    command line checks them."""
    table = spec.get("states", {})
    if not isinstance(table, dict):
        raise CrashlabError(f"{where}: `states` must be a table of enumeration options")
    for key, value in table.items():
        kind = STATE_KEYS.get(key)
        if kind is None:
            raise CrashlabError(
                f"{where}: unknown states option {key!r} (known: {', '.join(sorted(STATE_KEYS))})"
            )
        if isinstance(value, bool) or not isinstance(value, kind):
            raise CrashlabError(f"{where}: states.{key} must be {kind.__name__}, not {value!r}")
    try:
        Options(**table).validate()
    except CrashlabError as e:
        raise CrashlabError(f"{where}: states: {e}") from None
    return tuple(sorted(table.items()))


def _check_builtin(sut: str, workload: str, fs: str, where: str) -> None:
    """A built-in SUT's workload spec parses and its device kind fits ``fs``
    (what recording would find out later, mid-sweep)."""
    try:
        check_sut_fs(get_sut(sut), fs)
        check_workload(get_sut(sut), workload)
    except CrashlabError as e:
        raise CrashlabError(f"{where}: {e}") from None


def _builtin(name: str) -> bool:
    """A SUT of the registry (a name or a SQLite grammar name)."""
    try:
        get_sut(name)
    except CrashlabError:
        return False
    return True


def _faults(spec: dict[str, Any], where: str) -> tuple[Fault, ...]:
    """The cell's ``faults``, parsed (device and process ones are injected
    while recording, state ones by the check stage: at most one of each
    state kind)."""
    try:
        faults = parse_faults(_strs(spec, "faults", where))
        StateFaults.of(by_stage(faults, STATE))
    except CrashlabError as e:
        raise CrashlabError(f"{where}: {e}") from None
    return faults


def _listed(spec: dict[str, Any], key: str, default: Any, where: str) -> list[Any]:  # noqa: ANN401
    """A cell key's values (a list makes one cell per element; never none)."""
    v = spec.get(key, default)
    if v == []:
        raise CrashlabError(f"{where}: `{key}` is an empty list: the cell would run nothing")
    return list(v) if isinstance(v, list) else [v]


def _strategies(spec: dict[str, Any], where: str) -> tuple[str, ...]:
    """A cell's ``strategies`` (default prefix and reorder): known, and
    at least one."""
    strategies = _strs(spec, "strategies", where) if "strategies" in spec else ("prefix", "reorder")
    if not strategies:
        raise CrashlabError(f"{where}: `strategies` is empty: the cell would check nothing")
    bad = [s for s in strategies if s not in (*STRATEGIES, *COMPOSITE)]
    if bad:
        raise CrashlabError(f"{where}: unknown strategy {bad[0]!r}")
    return strategies


def _cell_sut(
    sut: object,
    workload: object,
    fs: object,
    suts: dict[str, UserSut],
    strategies: tuple[str, ...],
    where: str,
) -> UserSut | None:
    """One (sut, workload, fs) of a cell, checked: a known fs, and a known
    SUT that fits the workload and strategies; the user's SUT, or None for
    a built-in one."""
    if not (isinstance(sut, str) and isinstance(workload, str) and isinstance(fs, str)):
        raise CrashlabError(f"{where}: sut, workload and fs are strings or lists of strings")
    if fs not in FILESYSTEMS:
        raise CrashlabError(f"{where}: unknown fs {fs!r} (choose from {', '.join(FILESYSTEMS)})")
    user = suts.get(sut)
    if user is None and not _builtin(sut):
        raise CrashlabError(
            f"{where}: unknown SUT {sut!r} (yours: "
            f"{', '.join(suts) or 'none'}; built-in: {', '.join(SUTS)}, "
            "or sqlite:journal=J,sync=S,...)"
        )
    if user is not None and set(strategies) & set(COMPOSITE):
        raise CrashlabError(
            f"{where}: {', '.join(COMPOSITE)} continue a built-in SUT's "
            f"workload after a crash; {sut!r} is yours"
        )
    if user is None and not workload:
        raise CrashlabError(f"{where}: the built-in SUT {sut!r} needs a workload")
    if user is not None and workload:
        raise CrashlabError(
            f"{where}: {sut!r} is yours: it runs its own `run` command, not a workload"
        )
    return user


def _cells(
    spec: Any,
    i: int,
    suts: dict[str, UserSut],
    workloads: dict[str, str],  # noqa: ANN401
    here: str,
    path: Path,
) -> list[Cell]:
    where = f"{path}: cell {i + 1}"
    if not isinstance(spec, dict):
        raise CrashlabError(f"{where} must be a table")
    unknown = set(spec) - CELL_KEYS
    if unknown:
        raise CrashlabError(
            f"{where}: unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(CELL_KEYS))})"
        )
    strategies = _strategies(spec, where)
    extra = _checkers(_dict(spec, "checkers", where), here, DEFAULT_TIMEOUT, where)
    waived = _strs(spec, "waived", where)
    faults = _faults(spec, where)
    if faults and set(strategies) & set(COMPOSITE):
        raise CrashlabError(
            f"{where}: faults apply to the log strategies, not to {', '.join(COMPOSITE)}"
        )
    backend = spec.get("backend")
    if backend is not None and (not isinstance(backend, str) or backend not in BACKENDS):
        raise CrashlabError(
            f"{where}: unknown backend {backend!r} (choose from {', '.join(BACKENDS)})"
        )
    blktrace = spec.get("blktrace", False)
    if not isinstance(blktrace, bool):
        raise CrashlabError(f"{where}: `blktrace` must be true or false, not {blktrace!r}")
    states = _states(spec, where)
    out = []
    if "sut" not in spec:
        raise CrashlabError(f"{where}: `sut` is required")
    for sut, workload, fs in itertools.product(
        _listed(spec, "sut", None, where),
        _listed(spec, "workload", "", where),
        _listed(spec, "fs", "ext4", where),
    ):
        user = _cell_sut(sut, workload, fs, suts, strategies, where)
        must = (
            _strs(spec, "must_violate_any", where)
            if "must_violate_any" in spec
            else get_sut(sut).weaknesses
            if user is None
            else user.must_violate_any
        )
        spec_text = workloads.get(workload, workload)
        if user is None:
            _check_builtin(sut, spec_text, fs, where)
        kinds = {f.where for f in faults}
        if user is not None and kinds & {STATE, PROCESS}:
            raise CrashlabError(
                f"{where}: state and process faults are for the built-in SUTs "
                f"(their promises under a fault are known; process-crash kills "
                f"crashlab's workload runner); {sut!r} is yours"
            )
        cell = Cell(
            sut,
            spec_text,
            fs,
            strategies,
            must,
            waived,
            extra,
            user,
            faults=faults,
            backend=backend,
            blktrace=blktrace,
            states=states,
        )
        unique(cell.all_checkers, where)
        out.append(cell)
    return out
