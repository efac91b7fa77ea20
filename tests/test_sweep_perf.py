"""The sweep's fast paths give the reference verdicts, and clean up.

* fast ext4 recovery (one debugfs per worker, undo-file restore, cached
  ``e2fsck -fn``) vs the reference (full copy, fresh e2fsck/debugfs per
  state): identical states.jsonl and result.json on recorded runs, including
  states whose FS-RECOVER, DB-INTEGRITY and DB-ATOMIC fail;
* the scratch image restored range by range equals a full copy;
* the undo file names every byte debugfs wrote;
* the debugfs session ends on close, on error and with its parent; an
  interrupted check leaves no debugfs process and no work folder.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support import Recordings, alive, interrupt_group, tagged

from harness.check.check import CheckOptions, check_run
from harness.fs.ext4.debugfs import DebugfsError, DebugfsSession
from harness.fs.ext4.undo import written_ranges
from harness.images import ensure_image
from harness.logformat import LogReader
from harness.materialize import DurableImage, sparse_copy
from harness.rundir import RESULT_NAME, STATES_NAME, RunDir
from harness.states import Enumeration, Options
from harness.states.synth import write_epochs_log

ROOT = Path(__file__).resolve().parent.parent


# --- no root: images, undo files, the session ------------------------------


def test_restored_scratch_equals_a_full_copy(tmp_path: Path) -> None:
    """Scratch images built by restoring dirty ranges (after overlays,
    'recovery' writes reported with mark_dirty, and durable advances) are
    byte-identical to the durable image plus the overlay made afresh."""
    log = tmp_path / "w.log"
    write_epochs_log(log, [4, 6, 3, 5, 2], pages=48)
    base = tmp_path / "base.img"
    base.write_bytes(bytes(range(256)) * (48 * 4096 // 256))
    (tmp_path / "work").mkdir(), (tmp_path / "ref").mkdir()
    img = DurableImage(base, log, tmp_path / "work")
    ref = DurableImage(base, log, tmp_path / "ref")
    rng = random.Random(1)
    n = 0
    with LogReader(log) as r:
        for state in Enumeration(r, Options(strategy="reorder")):
            img.advance(state.durable_upto)
            got = img.scratch(state.extents(img.reader)).read_bytes()
            ref.advance(state.durable_upto)
            ref.invalidate()  # always a full copy
            want = ref.scratch(state.extents(ref.reader)).read_bytes()
            assert got == want, state.id
            # what a recovery would do: write somewhere and say so
            ranges = [
                (rng.randrange(0, 48 * 4096 - 5000), rng.randrange(1, 5000)) for _ in range(3)
            ]
            fd = os.open(img.scratch_path, os.O_WRONLY)
            for off, ln in ranges:
                os.pwrite(fd, os.urandom(ln), off)
            os.close(fd)
            img.mark_dirty(ranges)
            n += 1
    assert n > 100 and img.full_copies == 1
    img.close(), ref.close()


def test_undo_file_names_every_byte_debugfs_wrote(tmp_path: Path) -> None:
    base, _ = ensure_image("ext4")
    img = tmp_path / "a.img"
    sparse_copy(base, img)
    before = img.read_bytes()
    undo = tmp_path / "u.undo"
    payload = tmp_path / "payload"
    payload.write_bytes(os.urandom(50_000))
    with DebugfsSession() as dbg:
        out = dbg.request(
            [f"open -w -z {undo} {img}", "mkdir d", f"write {payload} d/f", "mkdir e", "close"]
        )
    assert out[0].startswith("Overwriting existing filesystem") and out[1] == "", out
    assert "Allocated inode" in out[2] and out[3:] == ["", ""], out
    after = img.read_bytes()
    ranges = written_ranges(undo)
    assert ranges
    covered = bytearray(len(after))
    for off, n in ranges:
        covered[off : off + n] = b"\1" * n
    changed = [i for i in range(0, len(after), 512) if before[i : i + 512] != after[i : i + 512]]
    assert changed
    assert all(covered[i : i + 512] == b"\1" * 512 for i in changed)


def test_debugfs_session_ends_on_close_error_and_kill() -> None:
    dbg = DebugfsSession()
    pid = dbg.pid
    out = dbg.request(["no-such-request", "open /nonexistent.img"])
    assert "Unknown request" in out[0] and "nonexistent" in out[1]
    dbg.close()
    assert not alive(pid)
    dbg.close()  # idempotent
    with pytest.raises(DebugfsError):
        dbg.request(["open x"])
    # debugfs killed under us: the request says so, nothing is left
    dbg = DebugfsSession()
    os.kill(dbg.pid, signal.SIGKILL)
    with pytest.raises(DebugfsError):
        dbg.request(["params"])
    assert not alive(dbg.pid)


def test_debugfs_dies_with_its_parent(tmp_path: Path) -> None:
    """A worker killed outright (SIGKILL: no cleanup runs) takes its debugfs
    with it."""
    code = (
        "import sys, time; from harness.fs.ext4.debugfs import DebugfsSession; "
        "d = DebugfsSession(); print(d.pid, flush=True); time.sleep(60)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.stdout is not None
    child = int(p.stdout.readline())
    assert alive(child)
    p.kill()
    p.wait()
    for _ in range(100):
        if not alive(child):
            break
        time.sleep(0.02)
    assert not alive(child)


# --- root: recorded runs, fast vs reference --------------------------------


@pytest.fixture(scope="module")
def runs(recorded: Recordings) -> dict[str, RunDir]:
    return recorded.many(
        {
            "sqlite-off": "insert:txns=5,ops=3,tables=2,warmup=50,seed=1",
            "sqlite-delete-extra": "insert:txns=4,ops=3,tables=2,warmup=50,seed=1",
        }
    )


def _check(
    run: RunDir,
    strategy: str,
    out: Path,
    mode: str,
    max_states: int | None,
    monkeypatch: pytest.MonkeyPatch,
    budget: int = 0,
) -> dict[str, object]:
    monkeypatch.setenv("CRASHLAB_RECOVERY", mode)
    states = Options(strategy=strategy, budget=budget)
    return check_run(run, CheckOptions(states=states, jobs=2, max_states=max_states), out)


# sqlite-off: a budget of 150 kept sets (torn: 515 of 1,138 states, every
# FS-RECOVER, DB-INTEGRITY and DB-ATOMIC failure of the whole run among
# them; reorder: 130 of 753), the reference path being the slow one
@pytest.mark.parametrize(
    ("sut", "strategy", "limit", "budget"),
    [
        ("sqlite-off", "torn", None, 150),  # FS-RECOVER, DB-INTEGRITY, DB-ATOMIC failures
        ("sqlite-off", "reorder", None, 150),
        ("sqlite-delete-extra", "reorder", 400, 0),
    ],
)
@pytest.mark.needs_fuse
def test_fast_recovery_gives_the_reference_verdicts(
    runs: dict[str, RunDir],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sut: str,
    strategy: str,
    limit: int | None,
    budget: int,
) -> None:
    args = (limit, monkeypatch, budget)
    fast = _check(runs[sut], strategy, tmp_path / "fast", "fast", *args)
    ref = _check(runs[sut], strategy, tmp_path / "ref", "reference", *args)
    fast_states = (tmp_path / "fast" / STATES_NAME).read_bytes()
    assert fast_states == (tmp_path / "ref" / STATES_NAME).read_bytes()
    assert (tmp_path / "fast" / RESULT_NAME).read_bytes() == (
        tmp_path / "ref" / RESULT_NAME
    ).read_bytes()
    fast.pop("timing"), ref.pop("timing")
    assert fast == ref
    if strategy == "torn":  # the fallback to the reference path was exercised
        assert ref["verdicts"]["FS-RECOVER"]["fail"] > 0  # type: ignore[index]  # result.json read as untyped JSON
        assert ref["verdicts"]["DB-INTEGRITY"]["fail"] > 0  # type: ignore[index]  # result.json read as untyped JSON


@pytest.mark.needs_fuse
def test_interrupted_check_leaves_no_debugfs_and_no_folder(
    runs: dict[str, RunDir],
    tmp_path: Path,
) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it)
    in the middle of a 2-worker check: the check stops with the interrupt
    (no result.json), every process of the run is gone and the work
    folders are removed.  The check cannot finish first: after its first
    chunk its progress callback waits (the workers go on) until the
    signal; the whole check takes a fraction of a second, less than a
    loaded machine may take between two lines of this test.  The child
    starts with Ctrl-C at its default, as in a terminal, also when this
    test runs in a background job (which ignores SIGINT)."""
    token = f"CRASHLAB_TEST_TOKEN={uuid.uuid4().hex}"
    work = tmp_path / "tmp"
    work.mkdir()
    code = (
        "import signal, sys, time; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from pathlib import Path; from harness.rundir import RunDir; "
        "from harness.states import Options; "
        "from harness.check.check import CheckOptions, check_run; "
        "check_run(RunDir(Path(sys.argv[1])), "
        "CheckOptions(states=Options(strategy='reorder'), jobs=2), Path(sys.argv[2]), "
        "on_progress=lambda g, c: (print(c, flush=True), time.sleep(60)))"
    )
    env = {**os.environ, "CRASHLAB_TMPDIR": str(work), token.split("=")[0]: token.split("=")[1]}
    p = subprocess.Popen(
        [sys.executable, "-c", code, str(runs["sqlite-delete-extra"].path), str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert p.stdout is not None
    assert p.stdout.readline().strip().isdigit()  # a first chunk is done, the workers run
    assert len(tagged(token)) >= 3  # parent, 2 workers (+ debugfs)
    _, err = interrupt_group(p, "check")
    assert p.returncode != 0 and err.rstrip().endswith("Interrupted: SIGINT"), err
    assert not (tmp_path / "out" / RESULT_NAME).exists()
    deadline = time.monotonic() + 5
    while tagged(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tagged(token) == []
    assert list(work.iterdir()) == []
    shutil.rmtree(work)


@pytest.mark.needs_fuse
@pytest.mark.parametrize("sut", ["sqlite-delete-extra", "sqlite-off"])
@pytest.mark.parametrize("mode", ["fast", "debugfs"])
def test_fast_path_is_taken(
    runs: dict[str, RunDir], tmp_path: Path, sut: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parity above is not parity by fallback: nearly every state goes
    the fast way (sqlite-off's crash images often need e2fsck's replay
    first on the debugfs path: stale bitmap checksums), full copies are
    rare, and e2fsck results are reused; by default in process, the debugfs
    session not even started.  The workload's states (after ``setup-done``):
    the creation window's first ones have no database to take facts of."""
    from harness.check.window import workload_window
    from harness.check.worker import StateChecker

    monkeypatch.setenv("CRASHLAB_RECOVERY", mode)
    run = runs[sut]
    sc = StateChecker(run, tmp_path / "w", fast=True)
    try:
        assert sc.files.fast is not None
        with LogReader(run.log) as r:
            states = Enumeration(r, workload_window(run, Options(strategy="reorder")))
            n = 0
            for state in states:
                sc.check(state)
                n += 1
                if n == 300:
                    break
        st = sc.files.fast.stats
        assert st["fast"] >= 0.9 * n, st
        assert st["fsck_cached"] > st["fsck_run"], st
        assert sc.image.full_copies <= st["fallback"] + 1
        pid = sc.files.fast.session.pid if sc.files.fast.session else None
        hits, unwritten = sc.files.cache_hits, sc.files.files_unwritten
    finally:
        sc.close()
    if mode == "fast":
        assert st["inproc"] >= 0.9 * n and pid is None, st
        # DB facts taken from the extraction's memory without writing the
        # files (cache hits), and misses whose files were written
        assert 0 < unwritten <= hits < n, (unwritten, hits, n)
    else:
        assert st["inproc"] == 0 and pid is not None and not alive(pid)
        assert unwritten == 0
