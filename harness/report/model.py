"""The report's content, computed once from a loaded sweep and rendered by
both html.py and md.py (so the two always say the same thing).

Colour classes of a verdict-matrix cell (one SUT × invariant × strategy):

* ``broken``  -- failures of an invariant the SUT guarantees (breaks the expectation)
* ``found``   -- failures of an invariant the cell must violate (a known weakness, found)
* ``allowed`` -- failures of an invariant the SUT does not promise
* ``missed``  -- no failure where one was required (the expectation broke)
* ``clean``   -- checked, no failure;  ``skipped`` -- every state skipped it
* ``absent``  -- the invariant was not checked in that cell
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.invariants import INVARIANTS
from harness.errors import CrashlabError
from harness.report import papers
from harness.report.distinct import Distinct, distinct_groups
from harness.report.iocost import RunCost, run_cost
from harness.report.load import Sweep, strategy_label
from harness.report.usersut import (
    USER_MODE,
    expected_actual,
    is_user_run,
    user_workloads,
    workload_of,
)
from harness.rundir import RunMeta
from harness.states.coverage import describe

DEFAULT_PER_GROUP = 5
KB = 1024.0
# Enumeration options shown per strategy, with what each means (the
# definitions are harness/states/strategies.py's Options and the check's).
OPTION_TEXT = {
    "strategy": "how crash states are generated from each epoch (between two flushes)",
    "window_start": "crash points before this mark are not enumerated",
    "window_end": "nor crash points after this one (null: up to the end of the log)",
    "max_exhaustive": "reorder: epochs of at most this many writes get every subset (2^n)",
    "max_drop": "reorder, larger epochs: subsets dropping at most this many writes",
    "sample": "reorder, larger epochs: this many seeded random subsets instead (null: off)",
    "seed": "seed of the sampled subsets",
    "tear_unit": "torn: bytes that persist all or nothing",
    "torn_pattern": "torn: which parts of a write survive (prefix, ends, subset)",
    "max_tears": "torn prefix/ends: split points per write at most",
    "max_subset_blocks": "torn subset: only writes of at most this many tear units",
    "dedup": "states with identical block overlays are checked once (folded)",
    "max_states": "stop after this many states (null: all)",
    "fsck": "ext4: e2fsck -fn after journal replay (FS-RECOVER)",
}
COMMON_OPTIONS = ("strategy", "window_start", "window_end", "dedup", "max_states", "fsck")
STRATEGY_OPTIONS = {
    "reorder": ("max_exhaustive", "max_drop", "sample", "seed"),
    "torn": ("tear_unit", "torn_pattern", "max_tears", "max_subset_blocks"),
    "torn-reorder": (
        "max_exhaustive",
        "max_drop",
        "sample",
        "seed",
        "tear_unit",
        "torn_pattern",
        "max_tears",
        "max_subset_blocks",
    ),
}


def relevant_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options that shaped this strategy's states, in a fixed order
    (unknown strategies keep every option)."""
    strategy = options.get("strategy")
    if strategy in ("prefix", "persistence-points", *STRATEGY_OPTIONS):
        keys = (*COMMON_OPTIONS, *STRATEGY_OPTIONS.get(strategy, ()))
    else:
        keys = tuple(options)
    return {k: options[k] for k in keys if k in options}


@dataclass
class MatrixCell:
    inv: str
    fail: int
    passed: int
    skip: int
    cls: str

    @property
    def text(self) -> str:
        return "–" if self.cls == "absent" else str(self.fail)

    @property
    def title(self) -> str:
        return f"{self.inv}: {self.fail} fail, {self.passed} pass, {self.skip} skip ({self.cls})"


@dataclass
class MatrixRow:
    sut: str
    workload: str
    fs: str
    checked: int
    ok: bool
    broken: list[str]
    cells: list[MatrixCell]
    status: str = "held"  # held, broken, error (a checker failed) or unverified


@dataclass
class ViolationGroup:
    sut: str
    total: int = 0
    breaking: int = 0  # of total, failures of a guaranteed invariant
    shown: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class InvariantGroup:
    inv: str
    category: str
    holds_when: str
    total: int = 0
    suts: dict[str, ViolationGroup] = field(default_factory=dict)


@dataclass
class IoRow:
    sut: str
    workload: str
    fs: str
    mode: str
    txns: int
    kb_total: float | None
    kb_data: float | None
    kb_journal: float | None
    flushes: float | None
    fsyncs: float | None
    db_kb: float | None
    tail_kb: float | None
    note: str = ""
    matches_papers: bool = False
    journal_mode: str = ""
    user: bool = False  # a run of a user's own SUT (no runner, no SQLite figures)


@dataclass
class CellInfo:
    index: int
    sut: str
    workload: str
    fs: str
    strategy: str
    run: str
    states: dict[str, int]
    verdicts: dict[str, dict[str, int]]
    expectation: dict[str, Any]
    options: dict[str, Any] | None
    seconds: float | None
    log: dict[str, Any] | None
    coverage: str = "—"  # kept sets visited / possible (harness/states/coverage.py)
    skips: dict[str, dict[str, int]] = field(default_factory=dict)  # promised: reason -> n

    @property
    def status(self) -> str:
        """held, broken or unverified (a promised invariant judged nowhere)."""
        return str(self.expectation.get("status", "held" if self.expectation["ok"] else "broken"))

    @property
    def problems(self) -> list[str]:
        """What broke, then what was promised but not judged."""
        return (
            list(self.expectation["broken"])
            + list(self.expectation.get("errors", []))
            + list(self.expectation.get("unverified", []))
        )

    @property
    def rate(self) -> float | None:
        if not self.seconds:
            return None
        return self.states["checked"] / self.seconds


@dataclass
class Report:
    name: str
    path: Path
    ok: bool
    exit_status: int
    cells: list[CellInfo]
    invariants: list[str]
    strategies: list[str]
    matrix: dict[str, list[MatrixRow]]
    groups: list[InvariantGroup]
    violations_total: int
    io: list[IoRow]
    papers: list[dict[str, Any]]
    per_group: int
    plots: dict[str, str] = field(default_factory=dict)  # name → path relative to the sweep
    distinct: list[Distinct] = field(default_factory=list)  # groups of failing states

    @property
    def held(self) -> int:
        return sum(1 for c in self.cells if c.expectation["ok"])

    @property
    def broken_cells(self) -> list[CellInfo]:
        return [c for c in self.cells if not c.expectation["ok"]]

    @property
    def states_checked(self) -> int:
        return sum(c.states["checked"] for c in self.cells)

    @property
    def states_generated(self) -> int:
        return sum(c.states["generated"] for c in self.cells)

    @property
    def states_folded(self) -> int:
        return sum(c.states["folded"] for c in self.cells)

    def option_sets(self) -> list[tuple[dict[str, Any], list[CellInfo]]]:
        """Distinct enumeration option sets, each with the cells that used it
        (cells with no result.json are grouped under an empty set)."""
        out: list[tuple[dict[str, Any], list[CellInfo]]] = []
        for c in self.cells:
            opts = relevant_options(c.options) if c.options else {}
            for known, members in out:
                if known == opts:
                    members.append(c)
                    break
            else:
                out.append((opts, [c]))
        return out


def classify(inv: str, v: dict[str, int] | None, exp: dict[str, Any]) -> str:
    """A matrix cell's colour class (see the module comment)."""
    if v is None:
        return "absent"
    fail = v.get("fail", 0)
    if fail:
        if inv in exp.get("guaranteed", ()):
            return "broken"
        if inv in exp.get("must_violate_any", ()):
            return "found"
        return "allowed"
    # "missed" only when the must-violate expectation is what broke (the
    # sentence is harness/sweep/expectations.py's).
    if inv in exp.get("must_violate_any", ()) and any(
        b.startswith("expected a violation") for b in exp.get("broken", ())
    ):
        return "missed"
    if v.get("pass", 0) == 0 and v.get("skip", 0) > 0:
        return "skipped"
    return "clean"


def _order_invariants(ids: set[str]) -> list[str]:
    known = [i for i in INVARIANTS if i in ids]
    return known + sorted(ids - set(known))


def _runner_options(meta: RunMeta | None) -> dict[str, str]:
    """``--flag value`` pairs of the recorded runner command after ``--engine``."""
    cmd = list(meta.command) if meta is not None else []
    opts: dict[str, str] = {}
    if "--engine" not in cmd:
        return opts
    rest = cmd[cmd.index("--engine") :]
    for flag, value in zip(rest[::2], rest[1::2], strict=False):
        if flag.startswith("--") and flag not in ("--ops", "--db", "--stats", "--marks"):
            opts[flag[2:]] = value
    return opts


def _mode_label(opts: dict[str, str]) -> str:
    if "journal-mode" in opts:  # SQLite's runner options
        return f"{opts['journal-mode']}, synchronous={opts.get('synchronous', '?')}"
    return ", ".join(f"{k}={v}" for k, v in opts.items() if k != "engine") or opts.get(
        "engine", "?"
    )


def _matches_papers(workload: str, fs: str) -> bool:
    """The papers' setting: ext4, insert, one 100-byte value per transaction."""
    from workloads.spec import parse_spec

    try:
        spec = parse_spec(workload)
    except CrashlabError:
        return False
    return (
        fs == papers.PAPERS_FS
        and getattr(spec, "kind", None) == "insert"
        and getattr(spec, "ops", None) == 1
        and getattr(spec, "size", None) == 100
    )


def _kb(cost: RunCost, value: float | None) -> float | None:
    v = cost.per_txn(value)
    return None if v is None else v / KB


def _io_rows(sweep: Sweep, commands: dict[str, str]) -> list[IoRow]:
    rows: list[IoRow] = []
    seen: set[str] = set()
    for cell in sweep.cells:
        if cell["run"] in seen:
            continue
        seen.add(cell["run"])
        meta = sweep.metas.get(cell["run"])
        opts = _runner_options(meta)
        user = is_user_run(meta)
        row = IoRow(
            cell["sut"],
            workload_of(cell, commands),
            cell["fs"],
            USER_MODE if user else _mode_label(opts),
            0,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            matches_papers=_matches_papers(cell["workload"], cell["fs"]),
            journal_mode=opts.get("journal-mode", "").upper(),
            user=user,
        )
        log = sweep.run_dir(cell) / "writes.log"
        if meta is None or not log.exists():
            row.note = "run folder incomplete (no meta.json or writes.log)"
            rows.append(row)
            continue
        try:
            cost = run_cost(sweep.run_dir(cell), meta)
        except CrashlabError as e:
            row.note = f"log unreadable: {e}"
            rows.append(row)
            continue
        row.txns = cost.txns
        row.kb_total = _kb(cost, cost.window_bytes)
        row.kb_data = _kb(cost, cost.data_bytes)
        row.kb_journal = _kb(cost, cost.journal_bytes)
        row.flushes = cost.per_txn(cost.flushes)
        row.fsyncs = cost.per_txn(cost.fsyncs)
        row.db_kb = _kb(cost, cost.db_bytes)
        row.tail_kb = cost.tail_bytes / KB
        notes = []
        if cost.journal_bytes is None:
            notes.append("journal region unknown for this fs")
        if cost.runner is None and not user:  # a user's command has no runner stats
            notes.append("no runner stats in meta.json")
        row.note = "; ".join(notes)
        rows.append(row)
    return rows


def _paper_rows(io: list[IoRow]) -> list[dict[str, Any]]:
    """One row per journal mode the papers measured: their figures and ours
    from every run of this sweep in the same setting and mode (none when
    every run is of a user's own SUT: the papers measured SQLite)."""
    if all(r.user for r in io):
        return []
    out = []
    for mode in papers.modes():
        ours = [r for r in io if r.matches_papers and r.journal_mode == mode]
        out.append(
            {
                "mode": mode,
                "waldio": papers.figure(papers.WALDIO, mode),
                "maw": papers.figure(papers.MAW, mode),
                "ours": ours,
            }
        )
    return out


def _shown(v: dict[str, Any], breaks: bool, workload: str) -> dict[str, Any]:
    """A violation record as the renderers show it: every column present
    (a checker may leave out what it could not determine, e.g. ``actual``;
    a user checker's are filled from the state's facts), ``workload``
    where the record has none (a user SUT's command)."""
    shown: dict[str, Any] = {
        k: ""
        for k in (
            "state",
            "strategy",
            "workload",
            "fs",
            "explanation",
            "expected",
            "actual",
            "repro",
        )
    }
    shown.update({k: ("" if val is None else val) for k, val in v.items()})
    shown["workload"] = shown["workload"] or workload
    if not shown["expected"] and not shown["actual"]:
        shown["expected"], shown["actual"] = expected_actual(v)
    shown["strategy"] = strategy_label(v)
    shown["dropped"] = v.get("dropped") or []
    shown["torn"] = v.get("torn") or []
    shown["breaks"] = breaks
    return shown


def _groups(
    sweep: Sweep, per_group: int, commands: dict[str, str]
) -> tuple[list[InvariantGroup], int]:
    workloads = {(c["sut"], c["fs"]): workload_of(c, commands) for c in sweep.cells}
    guaranteed = {
        (c["sut"], c["workload"], c["fs"], strategy_label(c)): set(c["expectation"]["guaranteed"])
        for c in sweep.cells
    }
    groups: dict[str, InvariantGroup] = {}
    total = 0
    for v in sweep.violations():
        total += 1
        inv = v["invariant"]
        if inv not in groups:
            meta = INVARIANTS.get(inv)
            groups[inv] = InvariantGroup(
                inv,
                meta.category if meta else v.get("category", "?"),
                meta.holds_when if meta else "",
            )
        g = groups[inv]
        g.total += 1
        sg = g.suts.setdefault(v["sut"], ViolationGroup(v["sut"]))
        sg.total += 1
        key = (v["sut"], v.get("workload"), v.get("fs"), strategy_label(v))
        breaks = inv in guaranteed.get(key, set())
        sg.breaking += breaks
        if len(sg.shown) < per_group:
            sg.shown.append(_shown(v, breaks, workloads.get((v["sut"], v.get("fs")), "")))
    for g in groups.values():  # SUTs whose violations break an expectation first
        g.suts = dict(sorted(g.suts.items(), key=lambda kv: kv[1].breaking == 0))
    order = _order_invariants(set(groups))
    return [groups[i] for i in order], total


def build_report(sweep: Sweep, *, per_group: int = DEFAULT_PER_GROUP) -> Report:
    """Everything both renderers show, from the sweep's files."""
    cells: list[CellInfo] = []
    inv_ids: set[str] = set()
    strategies: list[str] = []
    commands = user_workloads(sweep)
    for i, c in enumerate(sweep.cells):
        inv_ids.update(c["verdicts"])
        label = strategy_label(c)
        if label not in strategies:
            strategies.append(label)
        res = sweep.results.get(i)
        run_name = Path(c["run"]).name
        t = sweep.timing.get(run_name, {}).get(c["strategy"])
        meta = sweep.metas.get(c["run"])
        cells.append(
            CellInfo(
                i,
                c["sut"],
                workload_of(c, commands),
                c["fs"],
                label,
                c["run"],
                c["states"],
                c["verdicts"],
                c["expectation"],
                (res or {}).get("options"),
                float(t) if isinstance(t, int | float) else None,
                meta.log if meta is not None else None,
                describe(c["coverage"]) if c.get("coverage") else "—",
                c.get("skips") or {},
            )
        )
    invariants = _order_invariants(inv_ids)
    matrix: dict[str, list[MatrixRow]] = {s: [] for s in strategies}
    for cell in cells:
        row = MatrixRow(
            cell.sut,
            cell.workload,
            cell.fs,
            cell.states["checked"],
            cell.expectation["ok"],
            cell.problems,
            [],
            cell.status,
        )
        for inv in invariants:
            v = cell.verdicts.get(inv)
            row.cells.append(
                MatrixCell(
                    inv,
                    (v or {}).get("fail", 0),
                    (v or {}).get("pass", 0),
                    (v or {}).get("skip", 0),
                    classify(inv, v, cell.expectation),
                )
            )
        matrix[cell.strategy].append(row)
    groups, total = _groups(sweep, per_group, commands)
    io = _io_rows(sweep, commands)
    ok = bool(sweep.summary.get("ok", all(cell.expectation["ok"] for cell in cells)))
    return Report(
        name=sweep.name,
        path=sweep.path,
        ok=ok,
        exit_status=0 if ok else 1,
        cells=cells,
        invariants=invariants,
        strategies=strategies,
        matrix=matrix,
        groups=groups,
        violations_total=total,
        io=io,
        papers=_paper_rows(io),
        per_group=per_group,
        distinct=distinct_groups(sweep.cells),
    )


def fmt(value: float | None, digits: int = 1) -> str:
    """A figure for a table: ``n/a`` when unknown."""
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"
