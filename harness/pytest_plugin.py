"""crashlab's pytest plugin (entry point ``pytest11``): crash-test your own
code from an ordinary pytest test.

    def transfer(mark):                  # runs in a fresh recorded file system (cwd)
        ...                              # your code's writes
        mark("txn-ack:1;amount=20")      # marks, as in the mark protocol

    def bank_ok(files, state):           # once per crash state, on the recovered files
        assert balance(files) == 100, "money was lost"

    def test_bank(crashlab):
        run = crashlab.record(transfer)                  # fs="ext4" by default
        crashlab.check(run, bank_ok, strategy="reorder")  # fails with the states

``record`` runs a *module-level* function (it is imported again, by its
module's file, in the process that runs inside the recorded file system) and
needs what recording needs (root, loop devices, /dev/fuse: the test is
skipped with the reason where they are missing).  ``check`` judges every
crash state with the checker (``USER:<function name>``) and fails the test
with the failing state IDs, explanations and ``crashlab repro`` commands;
it returns the check's result (result.json) either way.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.marks import check_label
from harness.rundir import RunDir

if TYPE_CHECKING:  # imported when used: pytest loads this plugin at every start
    from harness.check.records import CheckResult

MAX_SHOWN = 5


class Crashlab:
    """The ``crashlab`` fixture: records and checks in the test's own
    temporary folder."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._runs = 0

    def record(
        self,
        workload: Callable[[Callable[[str], None]], object],
        *,
        fs: str = "ext4",
        backend: str = "auto",
    ) -> RunDir:
        """Record ``workload(mark)`` running in a fresh recorded file system
        (its cwd); ``mark(label)`` logs a mark in line with its writes."""
        from harness.record.backends import select_backend
        from harness.record.recorder import RecordRequest, record

        try:
            select_backend(backend)
        except Exception as e:  # noqa: BLE001  (no backend here: say why)
            pytest.skip(f"crashlab: no recording backend: {e}")
        module = inspect.getmodule(workload)
        qual = getattr(workload, "__qualname__", "")
        if module is None or not getattr(module, "__file__", None) or "<locals>" in qual:
            raise TypeError("crashlab.record needs a module-level function of a module file")
        self._runs += 1
        out = self.tmp / f"run{self._runs}"
        cmd = [sys.executable, "-m", "harness.pytest_plugin", str(module.__file__), qual]
        run = record(RecordRequest(cmd, out, fs=fs, backend=backend))
        status = run.meta().exit_status
        if status != 0:
            raise AssertionError(
                f"the workload {qual} exited {status} while recording (see {run.meta_path})"
            )
        return run

    def check(
        self,
        run: RunDir,
        checker: Callable[[Path, dict[str, Any]], object],
        *,
        strategy: str = "prefix",
        jobs: int = 1,
        fail: bool = True,
        **options: Any,
    ) -> CheckResult:  # noqa: ANN401
        """Judge every crash state of ``run`` with ``checker(files, state)``;
        fail the test where it is violated or raises (``fail=False``: only
        return the result).  ``options``: the crash-state options
        (``harness.states.Options``, e.g. ``max_drop=3``)."""
        from harness.check.check import CheckOptions, check_run
        from harness.check.usercheck import PyChecker
        from harness.states import Options

        name = checker.__name__
        opts = CheckOptions(
            states=Options(strategy=strategy, **options),
            jobs=jobs,
            checkers=(PyChecker(name, checker),),
        )
        self._runs += 1
        result = check_run(run, opts, self.tmp / f"check{self._runs}")
        bad = result["violations"]
        errors = result.get("errors", {})
        if fail and (bad or errors):
            text = _describe(result, bad, errors)
            if bad:
                text += _groups(self.tmp / f"check{self._runs}", checker.__name__, opts)
            pytest.fail(text, pytrace=False)
        return result


def _describe(result: CheckResult, bad: list[Any], errors: dict[str, Any]) -> str:
    lines = [
        f"crashlab: {len(bad)} violations in {result['states']['checked']} crash states "
        f"of {result['run']} ({result['strategy']})"
    ]
    for v in bad[:MAX_SHOWN]:
        first = (v["explanation"].splitlines() or [""])[0]
        lines.append(f"  {v['state']}: {v['invariant']}: {first}")
        lines.append(f"      {v['repro']}")
    if len(bad) > MAX_SHOWN:
        lines.append(f"  ... and {len(bad) - MAX_SHOWN} more (result.json)")
    for inv, reasons in errors.items():
        for why, n in reasons.items():
            lines.append(f"  checker error ({inv}, {n} states): {why}")
    return "\n".join(lines)


def _groups(folder: Path, name: str, opts: Any) -> str:  # noqa: ANN401
    """The distinct violations of a failing check (crashlab triage): per
    group its minimal state, lost writes, explanation and repro command."""
    from harness.triage.groups import triage

    t = triage(folder, checkers=opts.checkers)
    lines = [f"crashlab triage: {len(t.groups)} distinct violation(s) ({folder / 'triage.json'})"]
    for g in t.groups:
        lost = ", ".join("+".join(x.roles) for x in g.witness.lost) or "none"
        lines.append(f"  group {g.id} {g.invariant}: {g.count} states, lost: {lost}")
        lines.append(f"      {g.explanation}")
        lines.append(f"      {g.repro}")
    return "\n" + "\n".join(lines)


@pytest.fixture
def crashlab(tmp_path: Path) -> Crashlab:
    """Record a workload function and check its crash states (see the
    module's comment)."""
    return Crashlab(tmp_path)


def _mark(label: str) -> None:
    """A workload's ``mark``: the label on the backend's mark channel (a
    line of the fuse backend's control file; a dm message)."""
    import subprocess

    from harness.env import MARK_FILE, mark_channel

    raw = check_label(label)
    channel = mark_channel()
    if channel is None:
        raise RuntimeError("crashlab: mark() outside a recorded workload")
    kind, where = channel
    if kind == MARK_FILE:
        with open(where, "ab") as f:
            f.write(raw + b"\n")
    else:
        subprocess.run(["dmsetup", "message", where, "0", "mark", label], check=True)


def _run_workload(file: str, qualname: str) -> None:
    """In the recorded file system: import the test module by its file and
    call the workload function with ``_mark``."""
    import importlib.util

    sys.path.insert(0, str(Path(file).parent))
    spec = importlib.util.spec_from_file_location("crashlab_workload_module", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn: Any = module
    for part in qualname.split("."):
        fn = getattr(fn, part)
    fn(_mark)


if __name__ == "__main__":
    _run_workload(sys.argv[1], sys.argv[2])
