"""Repro reruns the checker that failed, whatever its kind (issue 26): the
``crashlab repro`` line that check, triage and the pytest plugin print,
pasted into a shell from the user's folder, runs the same per-state,
``persist:`` or ``py:`` checker again and shows its failure (exit 1, the
USER: verdict failing), not only the file system's ``PASS FS-RECOVER``."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support import CRASHLAB

pytestmark = pytest.mark.needs_fuse

# A counter rewritten in place, never synced: a crash loses acknowledged values.
WORKLOAD = """set -e
for i in 1 2 3; do
  echo "txn-begin:$i" >> "$CRASHLAB_MARK"
  printf '%s\\n' "$i" > counter
  echo "txn-ack:$i;value=$i" >> "$CRASHLAB_MARK"
done
"""
# The same judgement three ways: the counter is at least the acknowledged value.
JUDGE = """import json, os, sys
from pathlib import Path


def counter_kept(files, state):
    p = Path(files) / "counter"
    got = int(p.read_text() or 0) if p.exists() else 0
    assert got >= state["acked"], f"counter is {got} but {state['acked']} was acknowledged"
"""
PER_STATE = (
    JUDGE
    + """
state = json.load(open(os.environ["CRASHLAB_STATE_JSON"]))
try:
    counter_kept(os.environ["CRASHLAB_FILES"], state)
except AssertionError as e:
    print(e)
    sys.exit(1)
"""
)
SERVER = (
    JUDGE
    + """
for line in sys.stdin:
    req = json.loads(line)
    try:
        counter_kept(req["files"], req["state"])
        reply = {"verdict": "pass", "explanation": ""}
    except AssertionError as e:
        reply = {"verdict": "fail", "explanation": str(e)}
    print(json.dumps(reply), flush=True)
"""
)
TEAM_TEST = """
import json
import os

from judge import counter_kept


def unsynced(mark):
    for i in range(1, 4):
        mark(f"txn-begin:{i}")
        with open("counter", "w") as f:
            f.write(str(i))
        mark(f"txn-ack:{i};value={i}")


def test_unsynced(crashlab):
    crashlab.check(crashlab.record(unsynced), counter_kept)
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's project folder: the checkers' files and a recorded run."""
    home = tmp_path_factory.mktemp("team")
    (home / "judge.py").write_text(JUDGE)
    (home / "per_state.py").write_text(PER_STATE)
    (home / "server.py").write_text(SERVER)
    (home / "w.sh").write_text(WORKLOAD)
    p = _shell(home, f"crashlab record --backend fuse --out run -- sh {home / 'w.sh'}")
    assert p.returncode == 0, p.stderr
    return home


def _shell(cwd: Path, line: str) -> subprocess.CompletedProcess[str]:
    """``line`` run as pasted into a shell in ``cwd``, crashlab on the PATH."""
    env = {**os.environ, "PATH": f"{CRASHLAB.parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        shlex.split(line), capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


def _repro_lines(out: str) -> list[str]:
    """The ``crashlab repro`` commands printed in ``out``."""
    return [
        ln[ln.index("crashlab repro ") :].strip()
        for ln in out.splitlines()
        if "crashlab repro " in ln
    ]


def _reproduces(cwd: Path, line: str, invariant: str) -> None:
    """The pasted ``line`` shows ``invariant`` failing, and exits 1."""
    p = _shell(cwd, line)
    assert p.returncode == 1, f"{line}\n{p.stdout}{p.stderr}"
    assert f"FAIL USER:{invariant}" in p.stdout and "was acknowledged" in p.stdout, p.stdout


@pytest.mark.parametrize(
    "spec",
    [
        "count=python3 {home}/per_state.py",
        "count=persist:python3 {home}/server.py",
        "count=py:{home}/judge.py:counter_kept",
    ],
    ids=["per-state", "persist", "py"],
)
def test_the_printed_repro_line_reruns_the_failing_checker(home: Path, spec: str) -> None:
    checker = shlex.quote(spec.format(home=home))
    out = f"c-{spec.split('=')[1].split(':')[0].split()[0]}"
    p = _shell(home, f"crashlab check run --strategy prefix --out {out} --checker {checker}")
    assert p.returncode == 1, p.stdout + p.stderr
    lines = _repro_lines(p.stdout)  # the first violation's, and its triaged group's
    assert len(lines) >= 2 and all("--checker" in ln for ln in lines), p.stdout
    for line in lines:
        _reproduces(home, line, "count")
    t = _shell(home, f"crashlab triage {out} --checker {checker}")
    assert t.returncode == 1 and _repro_lines(t.stdout), t.stdout + t.stderr
    _reproduces(home, _repro_lines(t.stdout)[0], "count")


def test_the_pytest_plugins_repro_line_reruns_its_python_checker(home: Path) -> None:
    (home / "test_team.py").write_text(TEAM_TEST)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_team.py"]
    p = subprocess.run(argv, capture_output=True, text=True, cwd=home, timeout=600)
    assert p.returncode == 1 and "1 failed" in p.stdout, p.stdout + p.stderr
    lines = _repro_lines(p.stdout)
    assert lines and all("py:" in ln for ln in lines), p.stdout
    for line in lines[:2]:
        _reproduces(home, line, "counter_kept")


def test_a_sweeps_repro_line_reruns_its_checker(home: Path) -> None:
    (home / "m.toml").write_text(
        f'[sut.unsynced]\nrun = "sh {home}/w.sh"\n'
        f'checkers = {{ count = "py:{home}/judge.py:counter_kept" }}\n'
        'promises = ["FS-RECOVER"]\nmust_violate_any = ["USER:count"]\n'
        '[[cell]]\nsut = "unsynced"\nstrategies = ["prefix"]\n'
    )
    p = _shell(home, "crashlab sweep --matrix m.toml --backend fuse --out sw")
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln.split("  (in ")[0] for ln in _repro_lines(p.stdout)]  # run: relative to sw
    assert lines and all("--checker" in ln for ln in lines), p.stdout
    _reproduces(home / "sw", lines[0], "count")
    first = (home / "sw" / "violations.jsonl").read_text().splitlines()[0]
    _reproduces(home, json.loads(first)["repro"], "count")  # run: as the sweep was given
