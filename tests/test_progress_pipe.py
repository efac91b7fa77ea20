"""Outside a terminal (stderr a pipe, as in CI) ``crashlab sweep`` and
``crashlab check`` are never silent: whole progress lines at each start and
end and every ``--progress-interval`` seconds (harness/cli/progress.py),
each well formed, the last saying the run finished; ``--no-progress``
prints none.  The commands run beside two CPU hogs, two at a time, so the
progress thread has to get its turn on a loaded machine; nothing asserted
depends on how fast the machine is, only that a check lasts longer than
the 0.1 s interval."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import CRASHLAB, ROOT, record_runs

from harness.cli.progress import Lines, _Tally, clock
from harness.rundir import RunDir

pytestmark = pytest.mark.needs_fuse

SUT = "sqlite-wal-full"
WORKLOAD = "insert:txns=8,ops=2,tables=1,seed=1"
MATRIX = f'[[cell]]\nsut = "{SUT}"\nworkload = "{WORKLOAD}"\nstrategies = ["prefix", "reorder"]\n'
INTERVAL = "0.1"

COUNT = r"\d{1,3}(?:,\d{3})*"
RATE = rf"{COUNT}\.\d"
CLOCK = r"\d+:\d\d(?::\d\d)?"
WHERE = r"(?:sweep (?P<i>\d+)/(?P<n>\d+) cells, |check )"
LABEL = r"(?P<label>\S+ \S+)"
# every kind of line, by name; a line must be exactly one of them
LINES = {
    "cell started": r"sweep (?P<i>\d+)/(?P<n>\d+) cells: (?P<cell>\S+) started",
    "cell done": rf"sweep (?P<i>\d+)/(?P<n>\d+) cells: (?P<cell>\S+) done in {CLOCK}",
    "check started": rf"{WHERE}{LABEL}: started(?:, (?P<total>{COUNT}) states)?",
    "tick": rf"{WHERE}{LABEL}: (?P<done>{COUNT})/(?P<total>{COUNT}|\?) states, "
    rf"(?P<rate>{RATE}|\?) states/s, ETA (?P<eta>{CLOCK}|\?)",
    "tick elapsed": rf"{WHERE}(?P<doing>.+): {CLOCK} elapsed",
    "check finished": rf"{WHERE}{LABEL}: finished, (?P<checked>{COUNT}) states in {CLOCK}, "
    rf"(?P<rate>{RATE}) states/s, expectation (?P<status>\w+)",
    "check finished earlier": rf"{WHERE}{LABEL}: finished earlier, (?P<checked>\d+) states, "
    r"expectation (?P<status>\w+)",
    "step": rf"{WHERE}write summary\.json, violations\.jsonl, junit\.xml and the reports",
    "sweep finished": rf"sweep finished: (?P<n>\d+) cells in {CLOCK}, every expectation held",
}


def parse(stderr: str) -> list[tuple[str, dict[str, str]]]:
    """Each line of ``stderr`` as (kind, fields); every line is whole,
    carries no carriage return and is exactly one kind."""
    assert stderr.endswith("\n") and "\r" not in stderr, stderr
    out = []
    for line in stderr.splitlines():
        assert line.startswith("crashlab: "), line
        body = line.removeprefix("crashlab: ")
        kinds = [(k, m) for k, rx in LINES.items() if (m := re.fullmatch(rx, body))]
        assert len(kinds) == 1, (line, [k for k, _ in kinds])
        kind, m = kinds[0]
        out.append((kind, {k: v for k, v in m.groupdict().items() if v is not None}))
    return out


def number(text: str) -> float:
    return float(text.replace(",", ""))


def seconds(text: str) -> int:
    parts = [int(x) for x in text.split(":")]
    return sum(x * 60**i for i, x in enumerate(reversed(parts)))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    return record_runs(tmp_path_factory.mktemp("progress"), {SUT: WORKLOAD})[SUT]


@pytest.fixture
def hogs() -> Iterator[None]:
    """Two processes that spin on the CPU while the test runs; killed by
    their PIDs afterwards."""
    procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def two_at_once(*commands: tuple[list[str], dict[str, str]]) -> list[tuple[int, str]]:
    """Run the ``crashlab`` commands (arguments, extra environment) at the
    same time, stdout and stderr pipes; their (exit code, stderr)."""
    procs = [
        subprocess.Popen(
            [str(CRASHLAB), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, **env},
        )
        for args, env in commands
    ]
    try:
        errs = [p.communicate(timeout=600)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p.returncode, err) for p, err in zip(procs, errs, strict=True)]


def interval_by_option_and_by_env(args: list[str]) -> list[tuple[list[str], dict[str, str]]]:
    """``args`` twice: with --progress-interval, and with its variable."""
    return [
        ([*args[:-1], f"{args[-1]}1", "--progress-interval", INTERVAL], {}),
        ([*args[:-1], f"{args[-1]}2"], {"CRASHLAB_PROGRESS_INTERVAL": INTERVAL}),
    ]


def check_lines(lines: list[tuple[str, dict[str, str]]], label: str, result: dict) -> None:
    """The lines of one check: started with the states its strategy makes,
    ticks in between whose counts only grow, finished with the states
    checked.  A reorder check (about 1,000 states: a second or more, ten
    ticks or more) has ticks with a rate and an ETA."""
    kinds = [(k, f) for k, f in lines if f.get("label") == label]
    assert kinds[0] == ("check started", kinds[0][1]), kinds
    assert number(kinds[0][1]["total"]) == result["states"]["generated"]
    end, fields = kinds[-1]
    assert end == "check finished" and fields["status"] == "held", kinds
    assert number(fields["checked"]) == result["states"]["checked"] and number(fields["rate"]) > 0
    ticks = [f for k, f in kinds[1:-1]]
    assert all(k == "tick" for k, _ in kinds[1:-1]), kinds
    done = [number(f["done"]) for f in ticks]
    assert done == sorted(done) and all(d <= result["states"]["generated"] for d in done)
    assert all(f["total"] == kinds[0][1]["total"] for f in ticks)
    timed = [f for f in ticks if f["rate"] != "?" and f["eta"] != "?"]
    assert timed or not label.endswith("reorder"), f"no tick with a rate and an ETA: {kinds}"
    assert all(number(f["rate"]) > 0 and seconds(f["eta"]) >= 0 for f in timed)


def test_a_sweep_through_a_pipe_prints_progress_lines(
    tmp_path: Path, private_tmp: Path, hogs: None
) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX)
    args = ["sweep", "--matrix", str(matrix), "--jobs", "1", "--out", str(tmp_path / "s")]
    ran = two_at_once(*interval_by_option_and_by_env(args))
    for (code, stderr), out in zip(ran, (tmp_path / "s1", tmp_path / "s2"), strict=True):
        assert code == 0, stderr
        lines = parse(stderr)
        cells = json.loads((out / "summary.json").read_text())["cells"]
        name = cells[0]["run"].removeprefix("runs/")
        kinds = [k for k, _ in lines]
        assert lines[0] == ("cell started", {"i": "1", "n": "1", "cell": name})
        assert lines[-1] == ("sweep finished", {"n": "1"})
        assert kinds.count("cell done") == kinds.count("step") == 1
        assert kinds.index("cell done") < kinds.index("step")
        assert all(f.get("i", "1") == f.get("n", "1") == "1" for _, f in lines)
        for c in cells:
            check_lines(lines, f"{SUT} {c['strategy']}", c)

    # again with --resume: every check read back, said so; --no-progress: silence
    ((code, stderr),) = two_at_once(
        (["sweep", "--matrix", str(matrix), "--resume", "--out", str(tmp_path / "s1")], {})
    )
    assert code == 0, stderr
    earlier = [f for k, f in parse(stderr) if k == "check finished earlier"]
    assert sorted(f["label"] for f in earlier) == [f"{SUT} prefix", f"{SUT} reorder"]
    ((code, stderr),) = two_at_once(
        (
            [
                "sweep",
                "--matrix",
                str(matrix),
                "--resume",
                "--no-progress",
                "--out",
                str(tmp_path / "s2"),
            ],
            {},
        )
    )
    assert code == 0 and stderr == "", stderr


def test_a_check_through_a_pipe_prints_progress_lines(
    run: RunDir, tmp_path: Path, private_tmp: Path, hogs: None
) -> None:
    args = [
        "check",
        str(run.path),
        "--strategy",
        "reorder",
        "--jobs",
        "2",  # a pool: it reads the states ahead of the checks
        "--out",
        str(tmp_path / "c"),
    ]
    ran = two_at_once(*interval_by_option_and_by_env(args))
    for (code, stderr), out in zip(ran, (tmp_path / "c1", tmp_path / "c2"), strict=True):
        assert code == 0, stderr
        lines = parse(stderr)
        # a slow start (two copies beside CPU hogs) ticks before the check starts
        while lines[0][0] == "tick elapsed" and lines[0][1]["doing"] == "starting":
            lines.pop(0)
        assert lines[-1][0] == "check finished" and lines[0][0] == "check started"
        assert all("i" not in f for _, f in lines)  # no "sweep i/n cells" in a check
        check_lines(lines, f"{SUT} reorder", json.loads((out / "result.json").read_text()))
    ((code, stderr),) = two_at_once(
        ([*args[:-1], str(tmp_path / "c3"), "--no-progress", "--progress-interval", INTERVAL], {})
    )
    assert code == 0 and stderr == "", stderr


@pytest.mark.unit
def test_ticks_never_land_outside_their_check(tmp_path: Path) -> None:
    """Ticks every 0.1 ms beside 2,000 checks' start and end lines: no tick
    of a check comes before its start or after its end (each line is
    written with the change it reports), and none after the sweep's end."""
    result: Any = {"states": {"checked": 1}, "timing": {"seconds": 0.5, "resumed_from": 0}}
    log = tmp_path / "stderr"
    lines = Lines("sweep", 0.0001)
    lines.fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        with lines.ticking():
            lines.cell(1, 1, "cell")
            for i in range(2000):
                lines.check(f"s{i} prefix", 1)(1, 1)
                lines.checked(f"s{i} prefix", result, "held")
            lines.finished(True)
            time.sleep(0.01)  # a hundred ticks' time after the end
    finally:
        os.close(lines.fd)
    parsed = parse(log.read_text())
    assert parsed[-1][0] == "sweep finished"
    at = None  # the check whose start was the last start or end line
    for kind, f in parsed:
        if kind == "check started":
            at = f["label"]
        elif kind == "check finished":
            assert f["label"] == at
            at = None
        elif kind == "tick":
            assert f["label"] == at, (kind, f)


@pytest.mark.unit
def test_a_tick_line_says_states_rate_and_eta() -> None:
    t = _Tally("sqlite-wal-full reorder", 5678, started=0.0)
    assert t.line(5.0) == "sqlite-wal-full reorder: 0/5,678 states, ? states/s, ETA ?"
    t.first = (10.0, 1000, 900)
    t.done, t.checked = 1000, 900
    assert t.line(12.0) == "sqlite-wal-full reorder: 1,000/5,678 states, ? states/s, ETA ?"
    t.done, t.checked = 2234, 2000  # 1,234 done and 1,100 checked in 11 s
    assert t.line(21.0) == "sqlite-wal-full reorder: 2,234/5,678 states, 100.0 states/s, ETA 0:31"
    assert _Tally("x multicrash", None, started=0.0).line(62.4) == "x multicrash: 1:02 elapsed"
    assert [clock(s) for s in (0, 59.6, 3599, 3600, 36061)] == [
        "0:00",
        "1:00",
        "59:59",
        "1:00:00",
        "10:01:01",
    ]
