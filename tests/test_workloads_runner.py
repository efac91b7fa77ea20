"""crashlab-runner end to end: every SUT x workload kind on /dev/shm ends
with the oracle's final digest and complete, ordered marks; bad input; a
forced commit failure is never acknowledged."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from runner_support import expected_marks, fail_a_commit, runner, shm_dir
from support import build

from workloads.generate import write_opstream
from workloads.oracle import Oracle, sqlite_digest
from workloads.run import run_workload, runner_path
from workloads.spec import parse_spec
from workloads.suts import SUTS, get_sut, sqlite_grid

# The DHL SUTs have their own runner tests (tests/test_dhl_runner.py).
# (not the MAW SUTs: bound to F2FS, which tmpfs is not; tests/test_maw.py)
SQLITE_SUTS = sorted(n for n, s in SUTS.items() if s.engine == "sqlite" and not s.needs_fs)
# Grammar SUTs with every runner option the grammar has.
OPTION_SUTS = [
    "sqlite:journal=delete,sync=full,locking=exclusive",
    "sqlite:journal=delete,sync=normal,locking=exclusive,jlimit=0",
    "sqlite:journal=persist,sync=normal,jlimit=0",
    "sqlite:journal=wal,sync=normal,page=1024,autockpt=10,locking=exclusive,jlimit=8192",
    "sqlite:journal=wal,sync=full,walopt=100",
    "sqlite:journal=truncate,sync=extra,page=65536",
]

WORKLOADS = [
    "insert:txns=12,ops=2,tables=3",
    "insert:txns=10,ops=3,order=rand,size=128,warmup=5",
    "update:txns=12,ops=2,order=rand,warmup=20",
    "delete:txns=12,ops=2,order=rand",
    "app:gmail,txns=6,warmup=20",
    "app:facebook,txns=15,warmup=20",
    "app:hangout,txns=15,warmup=20",
    "app:kakaotalk,txns=15,warmup=20",
]


@pytest.fixture(scope="module", autouse=True)
def _built():
    build("workloads/build/crashlab-runner", "workloads/build/crashlab-runner-asan")


@pytest.fixture
def shm():
    with shm_dir("crashlab-wl-") as d:
        yield d


def run_clean(tmp: Path, sut_name: str, text: str, *, asan: bool = False) -> dict:
    spec = parse_spec(text)
    ops = write_opstream(spec, tmp / "ops")
    marks = tmp / "marks"
    marks.touch()  # CRASHLAB_MARK names an existing control file
    env = dict(os.environ, CRASHLAB_MARK=str(marks))
    env.pop("CRASHLAB_MARK_DM", None)
    proc = run_workload(
        get_sut(sut_name),
        ops,
        tmp / "db",
        stats=tmp / "stats.json",
        latency=tmp / "lat.tsv",
        runner=runner_path(asan=asan),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert sqlite_digest(tmp / "db") == Oracle(spec).final
    assert marks.read_text().splitlines() == expected_marks(spec.txns)
    stats = json.loads((tmp / "stats.json").read_text())
    assert stats["transactions"] == spec.txns
    lat = (tmp / "lat.tsv").read_text().splitlines()
    assert lat[0] == "txn\tlatency_us" and len(lat) == spec.txns + 1
    return stats


@pytest.mark.parametrize("text", WORKLOADS)
@pytest.mark.parametrize("sut_name", SQLITE_SUTS)
def test_clean_run_reaches_the_oracle(shm, sut_name, text):
    run_clean(shm, sut_name, text)


@pytest.mark.parametrize("sut_name", SQLITE_SUTS)
def test_clean_run_under_asan(shm, sut_name):
    run_clean(shm, sut_name, "app:hangout,txns=10,warmup=10", asan=True)


@pytest.mark.parametrize("text", WORKLOADS[:1] + WORKLOADS[4:5])
@pytest.mark.parametrize("sut_name", [*sqlite_grid(), *OPTION_SUTS])
def test_every_grammar_sut_reaches_the_oracle(shm, sut_name, text):
    """Every journal x sync combination and every option runs, and the
    runner reports the settings SQLite confirmed."""
    stats = run_clean(shm, sut_name, text)
    c = get_sut(sut_name).config
    assert c is not None
    assert (stats["journal_mode"], stats["synchronous"], stats["page_size"]) == (
        c.journal.upper(),
        c.sync.upper(),
        c.page,
    )
    assert (
        stats["locking_mode"],
        stats["wal_autocheckpoint"],
        stats["journal_size_limit"],
        stats["wal_prealloc"],
    ) == (c.locking.upper(), c.autockpt, c.jlimit, c.walopt)


def test_syncs_the_derived_rules_rest_on(shm):
    """What the rule table says of the combinations nobody typed, counted:
    TRUNCATE+NORMAL does not sync its truncation (2 syncs per commit against
    FULL's 4), PERSIST syncs the zeroed header under NORMAL (3), no journal
    or an in-memory one still syncs the database under NORMAL (1), exclusive
    DELETE zeroes and syncs the journal instead of unlinking it (no directory
    sync), and WAL+EXTRA syncs as WAL+FULL does."""
    per = {}
    for name in (
        "sqlite:journal=truncate,sync=normal",
        "sqlite:journal=truncate,sync=full",
        "sqlite:journal=persist,sync=normal",
        "sqlite:journal=memory,sync=normal",
        "sqlite:journal=off,sync=normal",
        "sqlite:journal=wal,sync=extra",
        "sqlite:journal=delete,sync=full,locking=exclusive",
        "sqlite:journal=wal,sync=off",
    ):
        d = shm / name.replace(":", "-").replace(",", "-")
        d.mkdir()
        per[name] = run_clean(d, name, "insert:txns=20")["workload"]
    assert per["sqlite:journal=truncate,sync=normal"]["file_syncs"] == 2 * 20
    assert per["sqlite:journal=truncate,sync=full"]["file_syncs"] == 4 * 20
    assert per["sqlite:journal=persist,sync=normal"]["file_syncs"] == 3 * 20
    assert per["sqlite:journal=memory,sync=normal"]["file_syncs"] == 20
    assert per["sqlite:journal=off,sync=normal"]["file_syncs"] == 20
    assert per["sqlite:journal=wal,sync=extra"]["file_syncs"] == 20
    assert per["sqlite:journal=wal,sync=off"]["fsyncs"] == 0
    exclusive = per["sqlite:journal=delete,sync=full,locking=exclusive"]
    assert exclusive["dir_syncs"] == 0 and exclusive["file_syncs"] == 4 * 20


def test_wal_prealloc_writes_the_frames_at_open(shm):
    """walopt=100: 100 frames of zeros are written (and synced) before the
    workload, none during it; the workload writes what plain WAL writes."""
    plain, opt = shm / "plain", shm / "opt"
    plain.mkdir()
    opt.mkdir()
    a = run_clean(plain, "sqlite:journal=wal,sync=full,autockpt=100", "insert:txns=20")
    b = run_clean(opt, "sqlite:journal=wal,sync=full,walopt=100", "insert:txns=20")
    assert b["workload"] == a["workload"]
    frames = 100 * (24 + 4096) + 32
    extra = b["total"]["bytes_written"] - a["total"]["bytes_written"]
    assert 0 < extra <= frames and extra > frames - 10 * (24 + 4096)
    assert b["total"]["file_syncs"] == a["total"]["file_syncs"] + 1


def test_sync_counts_follow_the_sut(shm):
    """The counting VFS sees what each setting does: no syncs with
    synchronous=OFF, one WAL sync per commit with WAL+FULL, none per commit
    with WAL+NORMAL, one more directory sync per commit with EXTRA."""
    text = "insert:txns=20"
    per = {}
    for name in (
        "sqlite-delete-full",
        "sqlite-delete-extra",
        "sqlite-delete-off",
        "sqlite-wal-full",
        "sqlite-wal-normal",
        "sqlite-persist-full",
    ):
        d = shm / name
        d.mkdir()
        per[name] = run_clean(d, name, text)["workload"]
    assert per["sqlite-delete-off"]["fsyncs"] == 0
    assert per["sqlite-wal-normal"]["fsyncs"] == 0
    assert per["sqlite-wal-full"]["file_syncs"] == 20
    full, extra = per["sqlite-delete-full"], per["sqlite-delete-extra"]
    assert extra["dir_syncs"] == full["dir_syncs"] + 20
    assert extra["file_syncs"] == full["file_syncs"] >= 40
    assert per["sqlite-persist-full"]["file_syncs"] > full["file_syncs"]
    assert all(p["writes"] > 0 and p["bytes_written"] > 0 for p in per.values())


def test_marks_file_option_and_no_channel(shm):
    spec = parse_spec("insert:txns=3")
    ops = write_opstream(spec, shm / "ops")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRASHLAB_MARK")}
    proc = run_workload(get_sut("sqlite-wal-full"), ops, shm / "db", marks=shm / "m.txt", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (shm / "m.txt").read_text().splitlines() == expected_marks(3)
    proc = run_workload(get_sut("sqlite-wal-full"), ops, shm / "db2", env=env)
    assert proc.returncode == 0, proc.stderr


def test_dm_channel_runs_dmsetup_message(shm):
    """No device-mapper here: a stand-in `dmsetup` on PATH records its argv,
    which is what the channel must produce (one synchronous call per mark)."""
    fake = shm / "bin"
    fake.mkdir()
    log = shm / "dmsetup.log"
    (fake / "dmsetup").write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    (fake / "dmsetup").chmod(0o755)
    ops = write_opstream(parse_spec("insert:txns=2"), shm / "ops")
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", CRASHLAB_MARK_DM="lw0")
    env.pop("CRASHLAB_MARK", None)
    proc = run_workload(get_sut("sqlite-delete-full"), ops, shm / "db", env=env)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines() == [f"message lw0 0 mark {m}" for m in expected_marks(2)]
    # a failing dmsetup stops the run at the first mark
    (fake / "dmsetup").write_text("#!/bin/sh\nexit 1\n")
    proc = run_workload(get_sut("sqlite-delete-full"), ops, shm / "db2", env=env)
    assert proc.returncode == 1
    assert "dmsetup message lw0 failed" in proc.stderr


def test_bad_input_exits_nonzero_with_one_line(shm):
    ops = write_opstream(parse_spec("insert:txns=3"), shm / "ops")
    cases = [
        ([], 2, "--ops FILE is required"),
        (["--ops", str(ops)], 2, "--db PATH is required"),
        (
            ["--ops", str(ops), "--db", str(shm / "db"), "--engine", "oracle"],
            2,
            "unknown engine oracle (choose from sqlite, dhl, xlog)",
        ),
        (
            ["--ops", str(ops), "--db", str(shm / "db"), "--journal-mode", "FAST"],
            1,
            "bad journal mode FAST (choose from DELETE, TRUNCATE, PERSIST, WAL, MEMORY, OFF)",
        ),
        (
            ["--ops", str(ops), "--db", str(shm / "db"), "--synchronous", "MAYBE"],
            1,
            "choose from OFF, NORMAL, FULL, EXTRA",
        ),
        (
            ["--ops", str(ops), "--db", str(shm / "db"), "--page-size", "1000"],
            1,
            "bad page size 1000",
        ),
        (
            ["--ops", str(ops), "--db", str(shm / "db"), "--locking-mode", "SHARED"],
            1,
            "bad locking mode SHARED (choose from NORMAL, EXCLUSIVE)",
        ),
        (
            ["--ops", str(ops), "--db", str(shm / "db"), "--wal-prealloc", "10"],
            1,
            "--wal-prealloc needs journal mode WAL, not DELETE",
        ),
        (
            ["--ops", str(ops), "--db", str(shm / "db"), "--wal-prealloc", "0"],
            2,
            "bad --wal-prealloc 0 (an integer, 1..65536)",
        ),
        (
            ["--ops", str(ops), "--db", str(shm / "db"), "--wal-autocheckpoint", "-1"],
            2,
            "bad --wal-autocheckpoint -1",
        ),
        (
            ["--ops", str(ops), "--db", str(shm / "db"), "--journal-size-limit", "x"],
            2,
            "bad --journal-size-limit x",
        ),
        (["--ops", str(ops), "--db", str(shm / "db"), "--bogus"], 2, "unknown or incomplete"),
        (["--ops", str(shm / "missing"), "--db", str(shm / "db")], 2, "No such file"),
    ]
    for args, code, needle in cases:
        proc = runner(args)
        assert proc.returncode == code, (args, proc.stderr)
        assert proc.stderr.startswith("crashlab-runner: ")
        assert needle in proc.stderr.splitlines()[0], proc.stderr
    data = ops.read_bytes()
    (shm / "cut").write_bytes(data[:-5])
    proc = runner(["--ops", str(shm / "cut"), "--db", str(shm / "db3")])
    assert proc.returncode == 2 and "op stream" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_runner_refuses_a_stream_that_disagrees_with_the_database(shm):
    """An update of a row that is not there is an error, not a silent no-op."""
    ops = write_opstream(parse_spec("update:txns=3,warmup=5"), shm / "ops")
    sut = get_sut("sqlite-delete-full")
    assert run_workload(sut, ops, shm / "db").returncode == 0
    proc = run_workload(sut, ops, shm / "db")  # warm-up inserts now collide
    assert proc.returncode == 1
    assert "txn 0: insert" in proc.stderr and "UNIQUE" in proc.stderr


@pytest.mark.parametrize(
    "sut_name", ["sqlite-delete-full", "sqlite-wal-full", "sqlite-truncate-full"]
)
def test_failed_commit_is_never_acknowledged(shm, sut_name):
    """A file-size limit makes the commit that grows the database past it
    fail (EFBIG): the runner stops with a commit error, that transaction has
    txn-begin but no txn-ack, and the database holds the state before it."""
    proc, k, spec = fail_a_commit(sut_name, shm)
    assert sqlite_digest(shm / "db") == Oracle(spec).digests[k - 1]
