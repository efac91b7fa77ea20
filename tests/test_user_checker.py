"""A user's own workload and checker (`crashlab record -- COMMAND`, `crashlab
check RUN --checker NAME=COMMAND`): the checker's verdicts are USER:NAME in
every output, a broken application is caught, a bad checker gives checker
errors (never a pass), and repro runs the checker again."""

from __future__ import annotations

import json
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest
from support import crashlab, tagged

from harness.rundir import RunDir

pytestmark = pytest.mark.needs_fuse

# A counter updated by the atomic-file-update protocol, one transaction per
# value, each acknowledged with the value as the mark's payload.
WORKLOAD = """set -e
for i in 1 2 3 4; do
  echo "txn-begin:$i" >> "$CRASHLAB_MARK"
  printf '%s\\n' "$i" > counter.tmp
  sync counter.tmp
  mv counter.tmp counter
  {dirsync}
  echo "txn-ack:$i;value=$i" >> "$CRASHLAB_MARK"
done
"""
# Holds when the counter is at least the value of the last acknowledgement
# that certainly came before the crash (read from the marks' payloads).
CHECKER = """import json, os, sys
s = json.load(open(os.environ["CRASHLAB_STATE_JSON"]))
acks = [int(m["payload"]["value"]) for m in s["marks"]["before"]
        if m["name"].startswith("txn-ack:")]
assert s["acked"] >= (acks[-1] if acks else 0)
want = acks[-1] if acks else 0
try:
    got = int(open("counter").read())
except FileNotFoundError:
    got = 0
if got >= want:
    print(f"counter {got} >= acknowledged {want}")
    sys.exit(0)
print(f"counter is {got} but value {want} was acknowledged")
sys.exit(1)
"""


def _record(tmp: Path, name: str, dirsync: bool) -> RunDir:
    script = tmp / f"{name}.sh"
    script.write_text(WORKLOAD.format(dirsync="sync ." if dirsync else ": no directory sync"))
    p = crashlab("record", "--backend", "fuse", "--out", str(tmp / name), "--", "sh", str(script))
    assert p.returncode == 0, p.stderr
    return RunDir(tmp / name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    tmp = tmp_path_factory.mktemp("user")
    (tmp / "check_counter.py").write_text(CHECKER)
    return {
        "tmp": tmp,
        "safe": _record(tmp, "safe", True),  # type: ignore[dict-item]  # a mixed dict of paths and runs
        "nodirsync": _record(tmp, "nodirsync", False),
    }


def _check(
    run: RunDir, out: Path, *checker: str, strategy: str = "prefix"
) -> tuple[subprocess.CompletedProcess[str], dict]:
    args = [a for c in checker for a in ("--checker", c)]
    p = crashlab("check", str(run.path), "--strategy", strategy, "--out", str(out), *args)
    result = json.loads((out / "result.json").read_text()) if (out / "result.json").exists() else {}
    return p, result


def _counter(tmp: Path) -> str:
    return f"counter=python3 {tmp / 'check_counter.py'}"


def test_a_correct_application_holds(runs: dict, tmp_path: Path) -> None:
    p, r = _check(runs["safe"], tmp_path / "c", _counter(runs["tmp"]))
    assert p.returncode == 0, p.stderr
    v = r["verdicts"]["USER:counter"]
    assert v["pass"] == r["states"]["checked"] > 20 and v["fail"] == 0
    assert r["verdicts"]["FS-RECOVER"]["fail"] == 0


def test_a_missing_directory_sync_is_caught_and_reproduced(runs: dict, tmp_path: Path) -> None:
    p, r = _check(runs["nodirsync"], tmp_path / "c", _counter(runs["tmp"]))
    assert p.returncode == 1
    assert "USER:counter failed in" in p.stderr and "your checker 'counter' reported" in p.stderr
    v = r["violations"][0]
    assert v["invariant"] == "USER:counter" and v["category"] == "user"
    assert "was acknowledged" in v["explanation"]
    repro = subprocess.run(
        shlex.split(v["repro"].replace("crashlab", str(crashlab_path()), 1)),
        capture_output=True,
        text=True,
    )
    assert repro.returncode == 1
    assert f"FAIL USER:counter  {v['explanation']}" in repro.stdout


def crashlab_path() -> Path:
    from support import CRASHLAB

    return CRASHLAB


def test_a_bad_checker_is_an_error_never_a_pass(runs: dict, tmp_path: Path) -> None:
    token = f"crashlab-test-{uuid.uuid4().hex}"
    # each holds on the first state (else the check stops there: fail
    # fast, tests/test_persistent_checker.py) and misbehaves on the others
    first = '[ "$CRASHLAB_STATE" = e0.p0 ] && exit 0; '
    cases = {
        "crash": (f"crash={first}exit 3", "exited 3"),
        "signal": (f"killed={first}kill -SEGV $$", "killed by SIGSEGV"),
        "hang": (f"hang={first}sleep 30 # {token}", "did not finish within 0.5 s"),
    }
    for name, (spec, why) in cases.items():
        out = tmp_path / name
        p = crashlab(
            "check",
            str(runs["safe"].path),
            "--strategy",
            "prefix",
            "--out",
            str(out),
            "--checker",
            spec,
            "--checker-timeout",
            "0.5",
            "--max-states",
            "6",
        )
        assert p.returncode == 1, (name, p.stderr)
        r = json.loads((out / "result.json").read_text())
        inv = f"USER:{spec.split('=')[0]}"
        assert r["verdicts"][inv].get("pass", 0) == 1, name  # the first state
        assert r["verdicts"][inv]["error"] == r["states"]["checked"] - 1, name
        assert any(why in reason for reason in r["errors"][inv]), (name, r["errors"])
        assert f"checker error: {inv}" in p.stderr, name
    assert tagged(token) == [] and not [ln for ln in _ps() if token in ln]  # hung ones killed


def _ps() -> list[str]:
    return subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()


def test_garbage_output_is_shown_as_such(runs: dict, tmp_path: Path) -> None:
    p, r = _check(runs["safe"], tmp_path / "g", r"garbage=printf '\377\376 broken'; exit 1")
    assert p.returncode == 1
    assert "\ufffd\ufffd broken" in r["violations"][0]["explanation"]


def test_the_checker_sees_the_state_its_marks_and_payloads(runs: dict, tmp_path: Path) -> None:
    dump = tmp_path / "dumps"
    dump.mkdir()
    spec = (
        f'dump=cp "$CRASHLAB_STATE_JSON" {dump}/"$CRASHLAB_STATE".json && '
        'test "$PWD" = "$CRASHLAB_FILES" && test -d "$CRASHLAB_RUN"'
    )
    p, r = _check(runs["safe"], tmp_path / "d", spec)
    assert p.returncode == 0, p.stderr
    facts = [json.loads(f.read_text()) for f in sorted(dump.iterdir())]
    assert len(facts) == r["states"]["checked"]
    last = max(facts, key=lambda s: s["cut"][0])
    acks = [m for m in last["marks"]["before"] if m["name"].startswith("txn-ack:")]
    assert [m["payload"] for m in acks] == [{"value": str(i)} for i in range(1, 5)]
    assert last["acked"] == 4 and last["meta"]["command"][0] == "sh"


def test_a_run_without_sut_needs_a_checker(runs: dict) -> None:
    p = crashlab("check", str(runs["safe"].path))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith("crashlab: error:")
    assert "--checker NAME=COMMAND" in p.stderr


def test_contract_holes_are_closed(runs: dict, tmp_path: Path) -> None:
    """Found by review: none of these may read as a verdict on the SUT."""
    safe = str(runs["safe"].path)
    # two checkers judging one invariant: refused, one line, exit 2
    p = crashlab("check", safe, "--checker", "x=true", "--checker", "x=false")
    assert p.returncode == 2 and "two checkers are named 'x'" in p.stderr
    # an interpreter's checker is named after its script, not the interpreter
    p, r = _check(runs["safe"], tmp_path / "n", f"python3 {runs['tmp'] / 'check_counter.py'}")
    assert p.returncode == 0 and "USER:check_counter" in r["verdicts"]
    # a recovery command that is not there, a checker that dies with a
    # traceback (exit 1, nothing on stdout): checker errors, not violations,
    # which stop the check when they come on the first state
    for name, extra, why in (
        ("rec", ["--checker-recover", "no-such-recovery-tool ."], "exited 127"),
        ("tb", [], "ZeroDivisionError"),
    ):
        spec = "rec=true" if name == "rec" else "tb=python3 -c '1/0'"
        out = tmp_path / name
        p = crashlab(
            "check",
            safe,
            "--strategy",
            "prefix",
            "--max-states",
            "4",
            "--out",
            str(out),
            "--checker",
            spec,
            *extra,
        )
        # on the first state already: the check stops there (fail fast)
        assert p.returncode == 2 and f"checker USER:{name} failed on" in p.stderr, name
        assert why in p.stderr and not (out / "result.json").exists(), name
    # a background child of the checker does not outlive it, nor stall it
    nap = f"sleep 300.{uuid.uuid4().int % 10**9}"  # a command line no one else runs
    p = crashlab(
        "check",
        safe,
        "--strategy",
        "prefix",
        "--max-states",
        "3",
        "--out",
        str(tmp_path / "bg"),
        "--checker-timeout",
        "20",
        "--checker",
        f"bg={nap} & exit 0",
    )
    assert p.returncode == 0, p.stderr
    assert not [ln for ln in _ps() if ln.strip() == nap]
    # repro shows an errored checker instead of crashing
    state = json.loads((tmp_path / "n" / "states.jsonl").read_text().splitlines()[0])["id"]
    p = crashlab("repro", safe, state, "--checker", "tb=python3 -c '1/0'")
    assert p.returncode == 1 and "ERROR USER:tb" in p.stdout and "Traceback" not in p.stderr
