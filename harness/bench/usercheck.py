"""A user's own checker, per-state process against persistent (issue 26's
speed goal): one recording each of two applications, every reorder state
checked twice on 2 workers, once with a checker started per state (a
program reading CRASHLAB_STATE_JSON) and once with the same logic as a
``py:`` checker (loaded once per worker, the persistent protocol).

* a trivial application: a JSON file replaced atomically six times; its
  checker reads the file and compares it with ``acked`` (goal: >= 500
  states/s persistent);
* a real storage library: the lmdb-bank example (workloads/examples/);
  its own check.py, per state, and run in-process by a ``py:`` function
  (goal: >= 50 states/s persistent).

Rates are states checked per second of the whole check; the ratio is
persistent / per-state, measured in the same run."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.check.check import CheckOptions, check_run
from harness.check.usercheck import parse_checker
from harness.env import temporary_folder
from harness.record.recorder import RecordRequest, record
from harness.rundir import RunDir
from harness.states import Options

NAME = "usercheck"
JOBS = 2
EXAMPLES = Path(__file__).resolve().parents[2] / "workloads" / "examples"

APP = """set -e
echo setup-done >> "$CRASHLAB_MARK"
for i in 1 2 3 4 5 6; do
    echo "txn-begin:$i" >> "$CRASHLAB_MARK"
    printf '{"n": %d}' "$i" > v.json.tmp
    sync v.json.tmp
    mv v.json.tmp v.json
    sync .
    echo "txn-ack:$i" >> "$CRASHLAB_MARK"
done
"""

# the trivial checker, as a function (py:) and as a program (per state)
CHECK = """import json, os, sys
from pathlib import Path


def check(files, state):
    p = Path(files) / "v.json"
    n = json.loads(p.read_text())["n"] if p.exists() else 0
    return None if n >= state["acked"] else f"v.json holds {n}, {state['acked']} acknowledged"


if __name__ == "__main__":
    why = check(".", json.load(open(os.environ["CRASHLAB_STATE_JSON"])))
    print(why or "holds")
    sys.exit(1 if why else 0)
"""

# lmdb-bank's own check.py, run in-process for each state (py:)
LMDB_PY = """import json, os, runpy, tempfile

CHECK = {check!r}


def check(files, state):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(state, f)
        f.flush()
        os.environ["CRASHLAB_STATE_JSON"] = f.name
        try:
            runpy.run_path(CHECK, run_name="__main__")
        except SystemExit as e:
            return None if not e.code else f"check.py exited {{e.code}}"
    return None
"""


def _rate(run: RunDir, spec: str, out: Path) -> tuple[int, float, dict[str, int]]:
    """(states checked, seconds, the checker's verdict counts) of a reorder
    check of ``run`` with ``spec``."""
    checker = parse_checker(spec)
    opts = CheckOptions(states=Options(strategy="reorder"), jobs=JOBS, checkers=(checker,))
    t0 = time.perf_counter()
    result = check_run(run, opts, out)
    took = time.perf_counter() - t0
    return result["states"]["checked"], took, dict(result["verdicts"][checker.invariant])


def _compare(title: str, run: RunDir, per_state: str, persistent: str, d: Path) -> None:
    n1, s1, v1 = _rate(run, per_state, d / "per-state")
    n2, s2, v2 = _rate(run, persistent, d / "persistent")
    r1, r2 = n1 / s1, n2 / s2
    print(
        f"{title}: per-state process {n1} states in {s1:.1f} s ({r1:.0f} states/s); "
        f"persistent {n2} states in {s2:.1f} s ({r2:.0f} states/s); {r2 / r1:.1f}x; "
        f"verdicts {'the same' if v1 == v2 else 'DIFFER'} ({v1}{'' if v1 == v2 else f' vs {v2}'})"
    )


def run() -> None:
    py = sys.executable
    with temporary_folder("crashlab-bench-usercheck-") as d:
        (d / "app.sh").write_text(APP)
        (d / "check_json.py").write_text(CHECK)
        trivial = record(RecordRequest(["sh", str(d / "app.sh")], d / "trivial"))
        _compare(
            f"trivial JSON checker (reorder, --jobs {JOBS}, goal >= 500 states/s persistent)",
            trivial,
            f"v={py} {d / 'check_json.py'}",
            f"v=py:{d / 'check_json.py'}:check",
            d / "trivial-checks",
        )
        bank = EXAMPLES / "lmdb-bank"
        (d / "lmdb_check.py").write_text(LMDB_PY.format(check=str(bank / "check.py")))
        lmdb_run = record(RecordRequest([py, str(bank / "bank.py")], d / "lmdb"))
        _compare(
            f"lmdb-bank's checker (reorder, --jobs {JOBS}, goal >= 50 states/s persistent)",
            lmdb_run,
            f"bank={py} {bank / 'check.py'}",
            f"bank=py:{d / 'lmdb_check.py'}:check",
            d / "lmdb-checks",
        )
