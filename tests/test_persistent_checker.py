"""Persistent user checkers (``--checker NAME=persist:COMMAND``,
``NAME=py:TARGET``; harness/check/persist.py): one process per worker
serves many states; a checker that crashes, hangs, answers garbage or exits
mid-run gives checker errors for those states (never a pass) and the check
goes on to its end; its verdicts are those of the per-state path; a
``py:`` function's timeout is enforced; a checker that cannot run stops
the check before any state is checked; no process is left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support import CRASHLAB, ROOT, crashlab, tagged

from harness.check.usercheck import COMMAND, PERSIST, PY, parse_checker

pytestmark = pytest.mark.needs_fuse

EXAMPLES = ROOT / "workloads" / "examples"
WORKLOAD = """set -e
for i in 1 2 3 4; do
  echo "txn-begin:$i" >> "$CRASHLAB_MARK"
  printf '%s\\n' "$i" > counter
  sync counter
  echo "txn-ack:$i;value=$i" >> "$CRASHLAB_MARK"
done
"""
# Answers "pass" to each request, but misbehaves on its 3rd one (per
# process: a restarted one counts again) the way argv[1] says.
SERVER = """import json, os, sys, time
n = 0
for line in sys.stdin:
    req = json.loads(line)
    assert req["protocol"] == 1 and os.path.isdir(req["files"])
    n += 1
    if n == 3:
        mode = sys.argv[1]
        print("about to " + mode, file=sys.stderr, flush=True)
        if mode == "crash":
            os.kill(os.getpid(), 11)
        if mode == "hang":
            time.sleep(60)
        if mode == "garbage":
            print("this is not json", flush=True)
            continue
        if mode == "exit":
            sys.exit(0)
    print(json.dumps({"verdict": "pass", "explanation": req["state"]["state"]}), flush=True)
"""
# py: checkers; EXAMPLE runs an example's check.py (a per-state script) in
# the persistent process, as the per-state path runs it
PY_CHECKERS = """import contextlib, io, os, runpy, time

calls = 0


def slow(files, state):
    global calls
    calls += 1
    if calls == 2:
        time.sleep(60)


def example(files, state):
    os.environ["CRASHLAB_STATE_JSON"] = str(files.parent / "state.json")
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_path(os.environ["EXAMPLE_CHECK"], run_name="__main__")
        except SystemExit as e:
            code = e.code or 0
    return None if code == 0 else out.getvalue().strip()
"""


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("persist")
    (tmp / "server.py").write_text(SERVER)
    (tmp / "pychecks.py").write_text(PY_CHECKERS)
    return tmp


def _record(tmp: Path, name: str, *command: str) -> Path:
    out = tmp / name
    if not out.exists():
        p = crashlab("record", "--backend", "fuse", "--out", str(out), "--", *command)
        assert p.returncode == 0, p.stderr
    return out


@pytest.fixture(scope="module")
def run(tmp: Path) -> Path:
    (tmp / "w.sh").write_text(WORKLOAD)
    return _record(tmp, "counter", "sh", str(tmp / "w.sh"))


def _check(
    run: Path, out: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """``crashlab check`` (one worker: requests in states.jsonl order)."""
    argv = [str(CRASHLAB), "check", str(run), "--strategy", "prefix", "--jobs", "1"]
    p = subprocess.run(
        [*argv, "--out", str(out), *args], capture_output=True, text=True, cwd=ROOT, env=env
    )
    states = out / "states.jsonl"
    recs = [json.loads(ln) for ln in states.read_text().splitlines()] if states.exists() else []
    return p, recs


def _ps(token: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [ln for ln in ps.splitlines() if token in ln]


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("crash", "exited 139 without a reply"),  # sh: 128 + SIGSEGV
        ("hang", "gave no reply within 1 s (killed)"),
        ("garbage", "not JSON: 'this is not json'"),
        ("exit", "exited 0 without a reply"),
    ],
)
def test_a_misbehaving_checker_errs_on_those_states_and_the_check_goes_on(
    run: Path, tmp: Path, tmp_path: Path, mode: str, why: str
) -> None:
    token = f"t{uuid.uuid4().hex}"
    server = tmp_path / f"{token}.py"
    server.write_text(SERVER)
    spec = f"x=persist:{sys.executable} {server} {mode}"
    args = ("--checker", spec, "--checker-timeout", "1", "--max-states", "12")
    p, recs = _check(run, tmp_path / "out", *args)
    assert p.returncode == 1, p.stderr  # checker errors, no violation
    assert len(recs) == 12 and (tmp_path / "out" / "result.json").exists()
    status = [r["v"]["USER:x"] for r in recs]
    # the 3rd request of each process errs, the process is restarted
    assert status == ["pass", "pass", "error"] * 4, status
    for r in recs:
        if r["v"]["USER:x"] == "error":
            assert why in r["error"]["USER:x"] and f"about to {mode}" in r["error"]["USER:x"]
    assert _ps(token) == []  # the hung one killed, the last one ended


def test_a_py_checkers_timeout_is_enforced(run: Path, tmp: Path, tmp_path: Path) -> None:
    token = f"t{uuid.uuid4().hex}"
    (tmp_path / f"{token}.py").write_text(PY_CHECKERS)
    spec = f"slow=py:{tmp_path / token}.py:slow"
    # 8 states: four kills and restarts (each waits out the 1 s timeout)
    args = ("--checker", spec, "--checker-timeout", "1", "--max-states", "8")
    p, recs = _check(run, tmp_path / "out", *args)
    status = [r["v"]["USER:slow"] for r in recs]
    assert p.returncode == 1 and len(recs) == 8
    # the 2nd call of each process hangs; it is killed and started again
    assert status == (["pass", "error"] * len(status))[: len(status)], status
    assert "gave no reply within 1 s" in recs[1]["error"]["USER:slow"]
    assert _ps(token) == []


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("x=persist:no-such-program-{token}", "no-such-program-"),
        ("x=py:no_such_module_{token}:check", "No module named 'no_such_module_"),
        ("x=no-such-program-{token}", "exited 127"),
    ],
)
def test_a_checker_that_cannot_run_stops_the_check_before_any_state(
    run: Path, tmp_path: Path, spec: str, why: str
) -> None:
    token = uuid.uuid4().hex
    env = {**os.environ, "CRASHLAB_TEST_TOKEN": token}
    p, recs = _check(run, tmp_path / "out", "--checker", spec.format(token=token), env=env)
    assert p.returncode == 2, p.stderr
    assert recs == [] and not (tmp_path / "out" / "result.json").exists()
    errors = [ln for ln in p.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and errors[0].startswith("crashlab: error: checker USER:x failed on")
    assert why in errors[0] and "Traceback" not in p.stderr
    assert tagged(token) == []


@pytest.mark.parametrize(
    ("example", "command", "persistent"),
    [
        # the example's own check(files, state), as its crashlab.toml names it
        ("lmdb-bank", ("{python}", "{here}/bank.py", "--nometasync"), "py:{here}/check.py:check"),
        # its script run in-process
        (
            "atomic-update",
            ("sh", "{here}/update.sh", "no-dir-fsync"),
            "py:{tmp}/pychecks.py:example",
        ),
    ],
)
def test_per_state_and_persistent_verdicts_are_identical_on_the_examples(
    tmp: Path, tmp_path: Path, example: str, command: tuple[str, ...], persistent: str
) -> None:
    here = EXAMPLES / example
    argv = [c.format(python=sys.executable, here=here) for c in command]
    run = _record(tmp, example, *argv)
    check = str(here / "check.py")
    env = {**os.environ, "EXAMPLE_CHECK": check}
    verdicts = {}
    for spec in (f"x={sys.executable} {check}", "x=" + persistent.format(here=here, tmp=tmp)):
        p, recs = _check(run, tmp_path / str(len(verdicts)), "--checker", spec, env=env)
        assert p.returncode in (0, 1), p.stderr
        verdicts[spec] = [
            (r["id"], r["v"]["USER:x"], [f["explanation"] for f in r.get("fail", [])]) for r in recs
        ]
    per_state, persistent = verdicts.values()
    assert per_state == persistent
    assert any(status == "fail" for _, status, _ in per_state)  # the example is caught


def test_the_kind_is_a_prefix_of_the_command() -> None:
    assert parse_checker("a=persist:python3 s.py").kind == PERSIST
    c = parse_checker("py:my.mod:check_it")
    assert (c.kind, c.name, c.command, c.spec) == (
        PY,
        "check_it",
        "my.mod:check_it",
        "check_it=py:my.mod:check_it",
    )
    assert parse_checker("persist:python3 serve.py").name == "serve"
    assert parse_checker("python3 check.py").kind == COMMAND
