"""Report cells of a user's own SUT (a matrix file's ``[sut.NAME] run =
COMMAND``): they have no workload spec, runner options or SQLite figures,
so the report shows their command as the workload and fills a
violation's expected / actual from the state's facts and the checker's
verdict."""

from __future__ import annotations

from typing import Any

from checkers.invariants import USER_PREFIX
from harness.report.load import Sweep
from harness.rundir import RunMeta

USER_MODE = "own command"  # the I/O table's mode column for a user SUT


def is_user_run(meta: RunMeta | None) -> bool:
    """Whether ``meta`` is of a run of a user's SUT (the sweep wrote its name)."""
    return meta is not None and isinstance(meta.extra.get("user_sut"), str)


def user_workloads(sweep: Sweep) -> dict[str, str]:
    """run -> the command shown as its workload, for the runs of user SUTs."""
    return {
        run: meta.command_label()
        for run, meta in sweep.metas.items()
        if meta is not None and is_user_run(meta)
    }


def workload_of(cell: dict[str, Any], commands: dict[str, str]) -> str:
    """A summary cell's workload as the report shows it: its spec, or a
    user SUT's command."""
    return str(cell["workload"]) or commands.get(cell["run"], "")


def expected_actual(v: dict[str, Any]) -> tuple[str, str]:
    """A user checker's violation's expected / actual (a built-in checker
    gives its own): the invariant held on what was acknowledged, and what
    the checker found."""
    inv = str(v.get("invariant", ""))
    if not inv.startswith(USER_PREFIX):
        return "", ""
    acked, begun = v.get("acked"), v.get("begun")
    facts = []
    if isinstance(acked, int) and acked > 0:
        facts.append(f"acknowledged up to txn {acked}")
    if isinstance(acked, int) and isinstance(begun, int) and begun > acked:
        doubt = f"{acked + 1}..{begun}" if begun > acked + 1 else str(begun)
        facts.append(f"txn {doubt} in doubt")
    expected = f"{inv} holds" + (f" ({'; '.join(facts)})" if facts else "")
    actual = "checker error" if v.get("status") == "error" else f"{inv} violated"
    return expected, actual
