"""crashlab-runner's DHL engine on /dev/shm files: every DHL SUT x
insert/update/delete (transactions that split pages) ends with the oracle's
final digest (read back through libdhl) and complete, ordered marks; the
counters show the commit protocols' syncs and page writes; a failed commit
is never acknowledged; bad options and wrong databases fail with one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from runner_support import expected_marks, fail_a_commit, runner, shm_dir
from support import build

from dhl import Database
from workloads.generate import write_opstream
from workloads.oracle import Oracle
from workloads.run import run_workload, runner_command, runner_path
from workloads.spec import parse_spec
from workloads.suts import SUTS, get_sut

ROOT = Path(__file__).resolve().parent.parent
DHL_SUTS = sorted(n for n, s in SUTS.items() if s.engine == "dhl")
MODE = {
    "tc": "tc",
    "cc": "cc",
    "tc-opt": "tc_opt",
    "cc-opt": "cc_opt",
    "nolog": "nolog",
    "tc-thesis": "tc_thesis",
    "cc-thesis": "cc_thesis",
}
# 128-byte values, 3 ops on 3 trees per transaction, enough warm-up rows that
# each tree has several leaves: transactions touch >= 3 pages and split them.
WORKLOADS = [
    "insert:txns=40,ops=3,tables=3,size=128,warmup=100,seed=3",
    "update:txns=30,ops=3,tables=3,order=rand,size=128,warmup=60,seed=4",
    "delete:txns=30,ops=3,tables=3,order=rand,warmup=60,seed=5",
]


def dhl_mode(sut_name: str) -> str:
    """The libdhl mode of a DHL SUT: dhl-cc-opt-raw -> cc_opt."""
    core = sut_name.removeprefix("dhl-").removesuffix("-raw")
    return MODE[core]


@pytest.fixture(scope="module", autouse=True)
def _built():
    build(
        "workloads/build/crashlab-runner",
        "workloads/build/crashlab-runner-asan",
        "dhl/build/libdhl.so",
    )


@pytest.fixture
def shm():
    with shm_dir("crashlab-dhlrun-") as d:
        yield d


def dhl_digest(path: Path, mode: str) -> str:
    with Database(path, mode) as db:
        db.check()
        return db.digest()


def run_clean(tmp: Path, sut_name: str, text: str, *, asan: bool = False) -> dict:
    """Run ``text`` on ``sut_name`` into tmp/db; check digest and marks;
    return the runner's --stats."""
    spec = parse_spec(text)
    ops = write_opstream(spec, tmp / "ops")
    marks = tmp / "marks"
    marks.touch()
    env = dict(os.environ, CRASHLAB_MARK=str(marks))
    env.pop("CRASHLAB_MARK_DM", None)
    proc = run_workload(
        get_sut(sut_name),
        ops,
        tmp / "db",
        stats=tmp / "stats.json",
        runner=runner_path(asan=asan),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert dhl_digest(tmp / "db", dhl_mode(sut_name)) == Oracle(spec).final
    assert marks.read_text().splitlines() == expected_marks(spec.txns)
    stats = json.loads((tmp / "stats.json").read_text())
    assert stats["engine"] == "dhl" and stats["dhl_mode"] == dhl_mode(sut_name)
    assert stats["transactions"] == spec.txns
    return stats


def test_every_dhl_sut_is_registered():
    names = {f"dhl-{m}{r}" for m in MODE for r in ("", "-raw")}
    assert set(DHL_SUTS) == names
    for n in names:
        assert get_sut(n).raw == n.endswith("-raw")
    safe = {"DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX"}
    for n in ("dhl-tc", "dhl-cc", "dhl-tc-opt", "dhl-cc-opt"):
        assert set(get_sut(n).promises) == safe == set(get_sut(n + "-raw").promises)
    for n in ("dhl-nolog", "dhl-nolog-raw"):
        assert {"DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC"} <= set(get_sut(n).may_violate)


@pytest.mark.parametrize("text", WORKLOADS)
@pytest.mark.parametrize("sut_name", DHL_SUTS)
def test_clean_run_reaches_the_oracle(shm, sut_name, text):
    stats = run_clean(shm, sut_name, text)
    # Several pages per transaction: >= 3 data pages (one per tree) each.
    assert stats["workload"]["writes"] >= 3 * stats["transactions"]


def test_workloads_split_pages(shm):
    """The insert workload grows every tree past one leaf during the
    measured transactions (splits happen while the marks are written)."""
    text = WORKLOADS[0]
    spec = parse_spec(text)
    ops = write_opstream(spec, shm / "ops")
    db = shm / "db"
    stats = shm / "s.json"
    assert run_workload(get_sut("dhl-cc"), ops, db, stats=stats, marks=shm / "m").returncode == 0
    with Database(db, "cc") as d:
        pages_end = d.info().page_count
    short = parse_spec(text.replace("txns=40", "txns=1"))
    ops1 = write_opstream(short, shm / "ops1")
    assert run_workload(get_sut("dhl-cc"), ops1, shm / "db1", marks=shm / "m1").returncode == 0
    with Database(shm / "db1", "cc") as d:
        pages_start = d.info().page_count
    assert pages_end >= pages_start + 3  # new leaves: splits


@pytest.mark.parametrize("sut_name", ["dhl-tc", "dhl-cc-opt", "dhl-nolog"])
def test_clean_run_under_asan(shm, sut_name):
    run_clean(shm, sut_name, "app:gmail,txns=6,warmup=20", asan=True)


def test_sync_and_page_counts_follow_the_protocol(shm):
    """One 100-byte insert per transaction into one leaf (dhl/DESIGN.md figures):
    TC 2 syncs, CC 1; CC writes the leaf and the header page, CC_OPT and
    NOLOG only the leaf; TC_OPT skips the empty ordering sync.  The warm-up
    rows create the root first, so no measured transaction changes the
    header page (which would add a header write and, in TC_OPT, a sync)."""
    text = "insert:txns=20,ops=1,tables=1,warmup=5"
    per = {}
    for sut in ("dhl-tc", "dhl-cc", "dhl-tc-opt", "dhl-cc-opt", "dhl-nolog"):
        d = shm / sut
        d.mkdir()
        per[sut] = run_clean(d, sut, text)["workload"]
    n = 20
    assert per["dhl-tc"]["file_syncs"] == 2 * n
    assert per["dhl-cc"]["file_syncs"] == n
    assert per["dhl-tc-opt"]["file_syncs"] == n
    assert per["dhl-cc-opt"]["file_syncs"] == n
    assert per["dhl-nolog"]["file_syncs"] == n
    assert per["dhl-tc"]["writes"] == per["dhl-cc"]["writes"] == 2 * n
    assert per["dhl-cc-opt"]["writes"] == per["dhl-nolog"]["writes"] == n
    for p in per.values():
        assert p["bytes_written"] == 4096 * p["writes"]
        assert p["dir_syncs"] == 0  # the directory is synced once, at creation


def test_multi_page_transactions_sync_counts(shm):
    """Transactions of 3 pages: still TC = 2 and CC = 1 sync per transaction."""
    text = "insert:txns=15,ops=3,tables=3,warmup=50"
    tc = run_clean(_sub(shm, "tc"), "dhl-tc", text)["workload"]
    cc = run_clean(_sub(shm, "cc"), "dhl-cc", text)["workload"]
    assert tc["file_syncs"] == 30 and cc["file_syncs"] == 15
    assert tc["writes"] == cc["writes"] >= 4 * 15


def _sub(parent: Path, name: str) -> Path:
    d = parent / name
    d.mkdir()
    return d


def test_creation_syncs_the_directory_once(shm):
    stats = run_clean(shm, "dhl-cc", "insert:txns=3")
    assert stats["total"]["dir_syncs"] == 1
    # Reopening an existing database creates nothing: no directory sync.
    ops = write_opstream(parse_spec("insert:txns=3,seed=2,warmup=0"), shm / "ops2")
    sut = get_sut("dhl-cc")
    # insert keys collide with the first run's: the runner must refuse them.
    proc = run_workload(sut, ops, shm / "db", stats=shm / "s2.json", marks=shm / "m2")
    assert proc.returncode == 1
    assert "txn 1: insert: insert t0 key" in proc.stderr and "DHL_EEXISTS" in proc.stderr


def test_fdatasync_option(shm):
    sut = get_sut("dhl-cc")
    spec = parse_spec("update:txns=10,warmup=20")
    ops = write_opstream(spec, shm / "ops")
    cmd = runner_command(sut, ops, shm / "db", stats=shm / "s.json", marks=shm / "m")
    cmd[cmd.index("--sync") + 1] = "fdatasync"
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads((shm / "s.json").read_text())
    assert stats["sync"] == "fdatasync" and stats["workload"]["file_syncs"] == 10
    assert dhl_digest(shm / "db", "cc") == Oracle(spec).final


@pytest.mark.parametrize("sut_name", ["dhl-tc", "dhl-cc", "dhl-tc-opt", "dhl-cc-opt"])
def test_failed_commit_is_never_acknowledged(shm, sut_name):
    """A file-size limit makes the commit that grows the database past it
    fail (EFBIG): the runner stops with a commit error, that transaction has
    txn-begin but no txn-ack, and the reopened (recovered) database holds
    the state before it."""
    proc, k, spec = fail_a_commit(sut_name, shm)
    assert "DHL_EIO" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert dhl_digest(shm / "db", dhl_mode(sut_name)) == Oracle(spec).digests[k - 1]


def test_bad_input_exits_nonzero_with_one_line(shm):
    ops = write_opstream(parse_spec("insert:txns=3"), shm / "ops")
    db = str(shm / "db")
    sqlite_db = shm / "sqlite.db"
    assert run_workload(get_sut("sqlite-wal-full"), ops, sqlite_db).returncode == 0
    base = ["--ops", str(ops), "--engine", "dhl"]
    env = {k: v for k, v in os.environ.items() if k != "CRASHLAB_DEV"}
    cases = [
        (
            [*base, "--db", db, "--dhl-mode", "fast"],
            1,
            "bad DHL mode fast (choose from tc, cc, tc_opt, cc_opt, nolog, tc_thesis, cc_thesis)",
        ),
        (
            [*base, "--db", db, "--sync", "sometimes"],
            1,
            "bad sync call sometimes (choose from fsync, fdatasync)",
        ),
        ([*base, "--db", db, "--page-size", "1000"], 1, "bad page size 1000"),
        ([*base, "--db-env", "CRASHLAB_DEV"], 2, "--db-env CRASHLAB_DEV: the variable is not set"),
        ([*base, "--db", db, "--db-env", "HOME"], 2, "give --db or --db-env, not both"),
        ([*base, "--db", str(sqlite_db)], 1, "not a DHL database (bad magic)"),
        ([*base, "--db", "/dev/null"], 1, "neither a regular file nor a block device"),
        ([*base, "--db", str(shm)], 1, "Is a directory"),
    ]
    for args, code, needle in cases:
        proc = runner(args, env)
        assert proc.returncode == code, (args, proc.stderr)
        assert proc.stderr.startswith("crashlab-runner: ")
        lines = proc.stderr.splitlines()
        assert needle in lines[0], proc.stderr
        # one line; usage errors (exit 2) add the usage line
        assert len(lines) == (2 if code == 2 else 1) and lines[-1].startswith(
            "crashlab-runner: " if code == 1 else "usage: "
        ), proc.stderr


def test_wrong_mode_or_page_size_for_an_existing_database(shm):
    ops = write_opstream(parse_spec("insert:txns=3"), shm / "ops")
    assert run_workload(get_sut("dhl-nolog"), ops, shm / "db", marks=shm / "m").returncode == 0
    ops2 = write_opstream(parse_spec("insert:txns=3,seed=7,warmup=0"), shm / "ops2")
    proc = run_workload(get_sut("dhl-tc"), ops2, shm / "db", marks=shm / "m")
    assert proc.returncode == 1 and "DHL_EMODE" in proc.stderr
    cmd = runner_command(get_sut("dhl-nolog"), ops2, shm / "db", marks=shm / "m")
    cmd[cmd.index("--page-size") + 1] = "8192"
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 1 and "DHL_EPAGESIZE" in proc.stderr


def test_db_env_names_the_database(shm):
    spec = parse_spec("delete:txns=5,warmup=10")
    ops = write_opstream(spec, shm / "ops")
    target = shm / "via-env.db"
    cmd = runner_command(get_sut("dhl-cc-raw"), ops, None, db_env="CRASHLAB_DEV", marks=shm / "m")
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=dict(os.environ, CRASHLAB_DEV=str(target))
    )
    assert proc.returncode == 0, proc.stderr
    assert dhl_digest(target, "cc") == Oracle(spec).final
