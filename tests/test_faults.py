"""Faults beyond power loss, device and process ones: the grammar
(harness/faults.py), the recording daemon failing requests, the runner's
txn-error marks, and the ERR invariants (checkers/ioerror.py) on real
recordings — including SUTs that must fail them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import crashlab

from checkers.ioerror import judge_errors
from checkers.verdict import failed, passed, skipped
from harness.check.check import CheckOptions, check_run
from harness.errors import CrashlabError
from harness.faults import fault_specs, format_fault, parse_fault, parse_faults
from harness.record.fuse import daemon_fault_args
from harness.rundir import RunDir
from harness.states import Options
from harness.sweep.matrix import Cell
from harness.sweep.sweep import record_cell

WAL = "sqlite:journal=wal,sync=full"
INSERT = "insert:txns=10,seed=1"
AT_5 = "eio:write,after=txn-begin:5"
AT_5_FAULT = parse_fault(AT_5)


# --- the grammar ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text,canonical",
    [
        ("eio:write,after=txn-begin:5,nth=1", "eio:write,after=txn-begin:5"),
        ("eio:flush,sticky,nth=2", "eio:flush,nth=2,sticky"),
        ("eio:read,range=4K-1M", "eio:read,range=4096-1048576"),
        ("enospc,left=64K", "enospc,left=65536"),
        ("process-crash,at=txn-ack:3", "process-crash,at=txn-ack:3"),
        ("corrupt,seed=0,bits=2", "corrupt,bits=2"),
        ("corrupt,file=db", "corrupt"),
        ("misdirect,file=wal,seed=3", "misdirect,seed=3,file=wal"),
    ],
)
def test_canonical_spelling_round_trips(text: str, canonical: str) -> None:
    f = parse_fault(text)
    assert format_fault(f) == canonical and parse_fault(canonical) == f


@pytest.mark.parametrize(
    "text,why",
    [
        ("eio", "eio needs an operation"),
        ("eio:erase", "eio needs an operation"),
        ("enospc", "enospc needs left=..."),
        ("eio:flush,range=0-4K", "a flush has no byte range"),
        ("eio:write,nth=0", "nth must be at least 1"),
        ("eio:write,range=8K-4K", "is empty"),
        ("eio:write,sticky=yes", "sticky takes no value"),
        ("eio:write,after=a,b", "unknown key 'b'"),
        ("lost-flush:write", "takes no operation"),
        ("bitrot", "unknown kind 'bitrot'"),
        ("corrupt,file=journal", "file must be one of db, wal"),
        ("lost-flush,file=wal", "unknown key 'file'"),
    ],
)
def test_bad_faults_say_why_in_one_line(text: str, why: str) -> None:
    with pytest.raises(CrashlabError, match=why) as e:
        parse_fault(text)
    assert "\n" not in str(e.value)


def test_typed_getters_give_a_value_or_its_default_and_refuse_another_shape() -> None:
    f = parse_fault("eio:write,range=4K-8K,after=go")
    assert f.get_range("range") == (4096, 8192)
    assert f.get_int("nth") == 1  # the default
    assert parse_fault("eio:flush").get_range("range") is None
    assert parse_fault("corrupt").get_int("bits") == 1
    assert parse_fault("corrupt,bits=3").get_int("bits") == 3
    for get, key in ((f.get_int, "range"), (f.get_int, "sticky"), (f.get_range, "after")):
        with pytest.raises(TypeError, match=key):
            get(key)


def test_the_daemon_gets_the_eio_rules_in_its_wire_form() -> None:
    faults = parse_faults(["eio:write,range=4K-8K,nth=2,sticky", "eio:flush,after=go"])
    assert daemon_fault_args(faults) == [
        "--fault",
        "write:2:1:4096:8192",
        "--fault",
        "flush:1:0:0:0:go",
    ]


def test_faults_join_with_plus_and_repeat_once() -> None:
    got = parse_faults(["eio:flush+enospc,left=1M", "eio:flush"])
    assert [format_fault(f) for f in got] == ["eio:flush", "enospc,left=1048576"]


def test_record_refuses_a_bad_fault_with_one_line(tmp_path: Path) -> None:
    p = crashlab("record", "--out", str(tmp_path / "run"), "--fault", "eio:nope", "--", "true")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "eio needs an operation" in p.stderr and not (tmp_path / "run").exists()
    p = crashlab(
        "record", "--out", str(tmp_path / "run"), "--fault", "process-crash,at=x", "--", "true"
    )
    assert p.returncode == 2 and "process-crash needs --sut" in p.stderr


# --- the judges on built label sequences: each verdict can fail -------------------------

ATOMIC_OK = passed("DB-ATOMIC", actual="4")
DURABLE_AT = {j: passed("DB-DURABLE", actual=j) for j in range(11)}


def _by_id(labels: list[str], content: list[Any]) -> dict[str, Any]:
    return {v.invariant: v for v in judge_errors(labels, content)}


def test_err_noack_fails_an_ack_after_an_error_without_a_new_attempt() -> None:
    bad = _by_id(["txn-begin:5", "txn-error:5;attempt=1", "txn-ack:5"], [ATOMIC_OK])
    assert bad["ERR-NOACK"].failed and "transaction 5" in bad["ERR-NOACK"].explanation
    # the order does not matter: an acknowledgement, then the error it ignored
    assert _by_id(["txn-begin:5", "txn-ack:5", "txn-error:5"], [ATOMIC_OK])["ERR-NOACK"].failed
    retried = ["txn-begin:5", "txn-error:5;attempt=1", "txn-begin:5;attempt=2", "txn-ack:5"]
    assert _by_id(retried, [ATOMIC_OK])["ERR-NOACK"].status == "pass"
    clean = _by_id(["txn-begin:1", "txn-ack:1"], [ATOMIC_OK])["ERR-NOACK"]
    assert clean.status == "pass" and not clean.exercised


def test_err_atomic_fails_a_partial_transaction_after_an_error() -> None:
    labels = ["txn-begin:5", "txn-error:5;attempt=1"]
    partial = _by_id(labels, [failed("DB-ATOMIC", "matches no oracle state")])
    assert partial["ERR-ATOMIC"].failed and partial["ERR-ATOMIC"].expected == "4 or 5"
    assert _by_id(labels, [ATOMIC_OK])["ERR-ATOMIC"].status == "pass"
    assert _by_id(labels, [skipped("DB-ATOMIC", "no db")])["ERR-ATOMIC"].status == "skip"
    assert _by_id(["txn-begin:5"], [ATOMIC_OK])["ERR-ATOMIC"].status == "skip"


def test_err_durable_fails_an_ack_after_a_fault_that_did_not_survive() -> None:
    labels = [
        "txn-ack:4",
        "txn-begin:5",
        "fault:eio-write;sector=8;sectors=8",
        "txn-ack:5",
        "txn-begin:6",
        "txn-ack:6",
    ]
    lost = _by_id(labels, [DURABLE_AT[4]])["ERR-DURABLE"]
    assert lost.failed and (lost.expected, lost.actual) == (6, 4)
    assert _by_id(labels, [DURABLE_AT[6]])["ERR-DURABLE"].status == "pass"
    # an ack before the fault is DB-DURABLE's business, not ERR-DURABLE's
    assert _by_id(labels[:2] + labels[2:3], [DURABLE_AT[3]])["ERR-DURABLE"].exercised is False
    assert _by_id(labels[:2], [DURABLE_AT[4]])["ERR-DURABLE"].status == "skip"
    # a failed transaction starts it too (a full file system fails no request)
    full = ["txn-begin:5", "txn-error:5;attempt=1", "txn-begin:5;attempt=2", "txn-ack:5"]
    assert _by_id(full, [DURABLE_AT[4]])["ERR-DURABLE"].failed


# --- real recordings ---------------------------------------------------------

RUNS = {
    # the device fails the first write after txn-begin:5 (a WAL frame)
    "eio-stop": (WAL, AT_5),
    # the same, but the application retries the transaction once
    "eio-retry": (WAL + ",onerror=retry", AT_5),
    # the fsyncgate bug on purpose: the failed fsync is retried, reports success
    "fsyncgate": (WAL + ",syncretry=1", AT_5),
    # a full file system: the set-up fits, a later transaction does not
    "enospc": ("sqlite:journal=delete,sync=extra", "enospc,left=96K"),
    # DHL on the raw device: the flush after txn-begin:5 fails
    "dhl-flush": ("dhl-tc-raw", "eio:flush,after=txn-begin:5"),
    # the runner dies at a mark; no power is lost
    "process": (WAL, "process-crash,at=txn-ack:5"),
    # no journal: a failed transaction's pages stay where they were written
    "off": ("sqlite-off", "eio:write,after=txn-begin:5,nth=2"),
}
WORKLOADS = {
    "enospc": "insert:txns=60,size=2000,seed=1",
    "off": "insert:txns=10,ops=3,tables=3,warmup=100,seed=1",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    root = tmp_path_factory.mktemp("faults")
    out = {}
    for name, (sut, fault) in RUNS.items():
        fs = "raw" if sut.endswith("-raw") else "ext4"
        cell = Cell(sut, WORKLOADS.get(name, INSERT), fs, faults=parse_faults(fault))
        out[name] = record_cell(cell, root / name, "fuse", False)
    return out


def _check(run: RunDir, strategy: str = "prefix") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    out = run.path / f"check-{strategy}"
    result = check_run(run, CheckOptions(states=Options(strategy=strategy), jobs=1), out)
    states = [json.loads(line) for line in (out / "states.jsonl").read_text().splitlines()]
    return dict(result), states


def _counts(result: dict[str, Any], inv: str) -> dict[str, int]:
    return result["verdicts"].get(inv, {})


@pytest.mark.needs_fuse
def test_a_failed_write_stops_the_runner_unacknowledged(runs: dict[str, RunDir]) -> None:
    meta = runs["eio-stop"].meta()
    assert meta.exit_status == 3 and meta.faults == (AT_5_FAULT,)
    marks = list(meta.marks)
    fault = next(i for i, m in enumerate(marks) if m.startswith("fault:eio-write;sector="))
    assert marks[fault - 1] == "txn-begin:5"
    assert marks[-1].startswith("txn-error:5;attempt=1;op=commit;why=COMMIT_disk_I_O_error")
    assert "txn-ack:5" not in marks and "workload-end" not in marks
    result, _states = _check(runs["eio-stop"], "reorder")
    assert result["violations"] == []
    for inv in ("ERR-NOACK", "ERR-ATOMIC", "DB-ATOMIC", "DB-DURABLE"):
        assert _counts(result, inv)["fail"] == 0 and _counts(result, inv)["pass"] > 0, inv


@pytest.mark.needs_fuse
def test_a_retried_transaction_is_acknowledged_and_durable(runs: dict[str, RunDir]) -> None:
    marks = list(runs["eio-retry"].meta().marks)
    i = marks.index("txn-begin:5;attempt=2")
    assert marks[i - 1].startswith("txn-error:5;attempt=1") and marks[i + 1] == "txn-ack:5"
    assert marks[-1] == "workload-end" and runs["eio-retry"].meta().exit_status == 0
    result, _states = _check(runs["eio-retry"])
    assert result["violations"] == []
    durable = _counts(result, "ERR-DURABLE")
    assert durable["pass"] - durable.get("not_exercised", 0) > 0  # acks after the fault, kept


@pytest.mark.needs_fuse
def test_fsyncgate_sut_fails_err_durable(runs: dict[str, RunDir]) -> None:
    """The runner's VFS retries the failed fsync and acknowledges: the WAL
    frame the device refused is gone, and every later transaction with it
    (WAL recovery stops at the first bad frame)."""
    marks = list(runs["fsyncgate"].meta().marks)
    assert not any(m.startswith("txn-error") for m in marks) and "txn-ack:10" in marks
    result, states = _check(runs["fsyncgate"])
    assert _counts(result, "ERR-DURABLE")["fail"] > 0
    assert _counts(result, "DB-DURABLE")["fail"] == _counts(result, "ERR-DURABLE")["fail"]
    assert _counts(result, "DB-ATOMIC")["fail"] == 0  # lost, not torn
    bad = next(f for s in states for f in s.get("fail", []) if f["invariant"] == "ERR-DURABLE")
    assert "acknowledged after an I/O error" in bad["explanation"]
    # its expectation: ERR-DURABLE (and so DB-DURABLE) not promised: held, not broken
    exp = Cell(WAL + ",syncretry=1", INSERT, faults=(AT_5_FAULT,)).expectation("prefix")
    assert "ERR-DURABLE" not in exp.guaranteed and "DB-DURABLE" not in exp.guaranteed
    assert "ERR-NOACK" in exp.guaranteed


@pytest.mark.needs_fuse
def test_a_full_file_system_fails_a_transaction_cleanly(runs: dict[str, RunDir]) -> None:
    meta = runs["enospc"].meta()
    err = next(m for m in meta.marks if m.startswith("txn-error:"))
    k = int(err.split(";")[0].split(":")[1])
    assert "database_or_disk_is_full" in err and 5 < k < 60, err
    assert meta.exit_status == 3 and f"txn-ack:{k}" not in meta.marks
    result, _states = _check(runs["enospc"])
    assert result["violations"] == []
    assert _counts(result, "ERR-ATOMIC")["pass"] > 0


@pytest.mark.needs_fuse
def test_dhl_is_fail_stop_after_a_failed_flush(runs: dict[str, RunDir]) -> None:
    marks = list(runs["dhl-flush"].meta().marks)
    assert "fault:eio-flush" in marks
    assert marks[-1].startswith("txn-error:5;attempt=1;op=commit;why=commit_sync_failed")
    result, _states = _check(runs["dhl-flush"], "reorder")
    assert result["violations"] == []
    assert _counts(result, "ERR-ATOMIC")["pass"] > 0


@pytest.mark.needs_fuse
def test_process_crash_keeps_everything_the_os_accepted(runs: dict[str, RunDir]) -> None:
    meta = runs["process"].meta()
    assert meta.exit_status == 137 and meta.marks[-1] == "txn-ack:5"
    result, states = _check(runs["process"])
    assert result["violations"] == []
    # the last state: the unmount wrote back everything; transaction 5 is in
    assert states[-1]["acked"] == 5 and states[-1]["v"]["DB-DURABLE"] == "pass"


@pytest.mark.needs_fuse
def test_without_a_journal_a_failed_transaction_is_partly_there(runs: dict[str, RunDir]) -> None:
    """SQLite with journal_mode=OFF cannot roll back: the failed
    transaction's pages written before the error stay, and ERR-ATOMIC fails
    (as its derived guarantee says it may)."""
    result, states = _check(runs["off"])
    assert _counts(result, "ERR-ATOMIC")["fail"] > 0
    bad = next(f for s in states for f in s.get("fail", []) if f["invariant"] == "ERR-ATOMIC")
    assert "a failed transaction is partly present" in bad["explanation"]
    assert (
        "ERR-ATOMIC"
        not in Cell("sqlite-off", "x", faults=(AT_5_FAULT,)).expectation("prefix").guaranteed
    )


@pytest.mark.needs_fuse
def test_a_read_fault_fails_a_read_past_the_cache(tmp_path: Path) -> None:
    """Reads reach the device only on a cache miss: a direct read after the
    arming mark gets EIO, and the daemon logs where."""
    script = (
        "dd if=/dev/urandom of=f bs=4k count=4 oflag=direct 2>/dev/null; "
        "echo go > $CRASHLAB_MARK; dd if=f of=/dev/null bs=4k iflag=direct"
    )
    p = crashlab(
        "record",
        "--backend",
        "fuse",
        "--out",
        str(tmp_path / "run"),
        "--fault",
        "eio:read,after=go",
        "--",
        "sh",
        "-c",
        script,
    )
    assert p.returncode == 1 and "Input/output error" in p.stderr, p.stderr
    marks = RunDir(tmp_path / "run").meta().marks
    assert marks[0] == "go" and marks[1].startswith("fault:eio-read;sector=")


@pytest.mark.needs_fuse
def test_no_fault_fired_is_said(tmp_path: Path) -> None:
    p = crashlab(
        "record",
        "--backend",
        "fuse",
        "--out",
        str(tmp_path / "run"),
        "--fault",
        "eio:write,after=never-written",
        "--",
        "sh",
        "-c",
        "echo x > f",
    )
    assert p.returncode == 0, p.stderr
    assert "warning: no eio fault fired" in p.stderr
    assert fault_specs(RunDir(tmp_path / "run").meta().faults) == ["eio:write,after=never-written"]
