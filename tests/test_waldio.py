"""WALDIO (workloads/runner/waldiovfs.h) on real recordings: the WAL on
disk is 4 KiB blocks with the frame header embedded in each page, checked
here from the layout's definition, not from crashlab's C; a transaction is
one aligned write and one sync; every prefix, reorder and torn state of a
small recording holds what WAL+FULL promises; the checkers open a recovered
database through the VFS, and without it the same files do not recover;
the VFS without its sync is caught."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from support import Recordings, crashlab, record_runs

from checkers import sqlite as sqlite_checker
from harness.env import RUNNER
from harness.mutants import build as build_mutant
from harness.mutants import catalogue
from harness.rundir import RunDir
from workloads.generate import write_opstream
from workloads.oracle import Oracle, sqlite_digest
from workloads.run import runner_command, runner_path
from workloads.spec import parse_spec
from workloads.sqlite_grammar import parse_sqlite_name
from workloads.sqlite_rules import WALDIO_RULES, rule_for
from workloads.suts import get_sut
from workloads.vfs import WALDIO_VFS

SPEC = "insert:txns=4,ops=3,tables=3,warmup=40,seed=1"
TXNS = 4
BLK, FHDR = 4096, 24


def test_the_sut_promises_what_wal_full_promises() -> None:
    w, wal = get_sut("waldio"), get_sut("sqlite-wal-full")
    assert w.canonical == "sqlite:journal=wal,sync=full,waldio=100"
    assert w.promises == wal.promises and w.vfs == WALDIO_VFS
    assert ("--waldio", "100") in w.runner_options
    assert ("--wal-autocheckpoint", "100") in w.runner_options
    for g in w.guarantees[:4]:
        assert "WALDIO" in g.rule and "ATC '15" in g.source
    normal = get_sut("sqlite:journal=wal,sync=normal,waldio=8")
    assert normal.promises == get_sut("sqlite-wal-normal").promises
    # every WALDIO rule decides something
    configs = [
        parse_sqlite_name(f"sqlite:journal=wal,sync={s},waldio=8")
        for s in ("off", "normal", "full", "extra")
    ]
    used = {rule_for(c, i) for c in configs for i in ("DB-OPEN", "DB-DURABLE")}
    assert set(WALDIO_RULES) <= used


def _frames(wal: bytes) -> list[tuple[int, int, bytes]]:
    """The live frames of a WALDIO WAL image, (page number, commit size,
    page as SQLite reads it), after verifying wal.c's checksum chain over
    the on-disk layout: block 0 the header, block k + 1 frame k, its frame
    header in the last 24 bytes (read back as zeros)."""
    magic, _, page_size, _, salt1, salt2, c1, c2 = struct.unpack(">8I", wal[:32])
    assert magic == 0x377F0682 and page_size == BLK  # little-endian checksums
    assert len(wal) % BLK == 0 and wal[32:BLK] == bytes(BLK - 32)
    s = [c1, c2]
    out = []
    for k in range(1, len(wal) // BLK):
        blk = wal[k * BLK : (k + 1) * BLK]
        fh = blk[BLK - FHDR :]
        pgno, commit, f1, f2, k1, k2 = struct.unpack(">6I", fh)
        if (f1, f2) != (salt1, salt2):
            break
        page = blk[: BLK - FHDR] + bytes(FHDR)
        data = fh[:8] + page
        for i in range(0, len(data), 8):
            w0, w1 = struct.unpack("<2I", data[i : i + 8])
            s[0] = (s[0] + w0 + s[1]) & 0xFFFFFFFF
            s[1] = (s[1] + w1 + s[0]) & 0xFFFFFFFF
        assert (k1, k2) == tuple(s), f"frame {k - 1}: checksum chain broken"
        out.append((pgno, commit, page))
    return out


@pytest.fixture(scope="module")
def crash_image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Oracle]:
    """The runner killed right after its last acknowledgement (no close, no
    checkpoint): the database and its WAL as a crash leaves them."""
    d = tmp_path_factory.mktemp("waldio-image")
    spec = parse_spec(SPEC)
    ops = write_opstream(spec, d / "w.ops")
    cmd = runner_command(get_sut("waldio"), ops, d / "crashlab.db", marks=d / "marks")
    p = subprocess.run([*cmd, "--crash-at", f"txn-ack:{TXNS}"], capture_output=True, text=True)
    assert p.returncode == -9, p.stderr  # SIGKILL
    return d, Oracle(spec)


def test_the_wal_is_aligned_blocks_with_embedded_headers(crash_image: tuple[Path, Oracle]) -> None:
    d, _ = crash_image
    wal = (d / "crashlab.db-wal").read_bytes()
    assert len(wal) >= (1 + 100) * BLK  # pre-allocated
    frames = _frames(wal)
    commits = [f for f in frames if f[1]]
    assert len(commits) >= TXNS + 1  # the set-up, then each transaction
    assert frames[-1][1] > 0  # the log ends with a commit frame
    assert (d / "crashlab.db").read_bytes()[20] == FHDR  # the reserved bytes


def test_a_transaction_is_one_aligned_write_and_one_sync(tmp_path: Path) -> None:
    spec = parse_spec("insert:txns=6,ops=1,tables=1,warmup=0,seed=1")
    ops = write_opstream(spec, tmp_path / "w.ops")
    cmd = runner_command(
        get_sut("waldio"), ops, tmp_path / "x.db", marks=tmp_path / "m", stats=tmp_path / "s.json"
    )
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    w = json.loads((tmp_path / "s.json").read_text())["workload"]
    assert w["writes"] == 6 and w["file_syncs"] == 6
    assert w["bytes_written"] == 6 * BLK  # one frame, one block each


def test_the_checker_opens_through_the_vfs(
    crash_image: tuple[Path, Oracle], tmp_path: Path
) -> None:
    """The checker's path is the SUT's: through the VFS the crash image
    recovers every acknowledged transaction; through SQLite's default VFS
    the same files recover none of the WAL's frames."""
    d, oracle = crash_image
    for vfs in (WALDIO_VFS, ""):
        case = tmp_path / (vfs or "plain")
        case.mkdir()
        for name in ("crashlab.db", "crashlab.db-wal"):
            shutil.copy(d / name, case / name)
        facts = sqlite_checker.examine(case / "crashlab.db", vfs=vfs)
        if vfs:
            assert facts.open_error is None and facts.digest == oracle.digests[TXNS], facts
        else:
            assert facts.open_error is not None or facts.digest != oracle.digests[TXNS]


@pytest.fixture(scope="module")
def run(recorded: Recordings) -> RunDir:
    return recorded("waldio", SPEC)


@pytest.mark.needs_fuse
@pytest.mark.parametrize("strategy", ["prefix", "reorder", "torn"])
def test_every_state_holds(run: RunDir, strategy: str, tmp_path: Path) -> None:
    p = crashlab("check", str(run.path), "--strategy", strategy, "--out", str(tmp_path / "c"))
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads((tmp_path / "c" / "result.json").read_text())
    v = result["verdicts"]
    for inv in ("DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX"):
        assert v[inv]["fail"] == 0 and v[inv]["pass"] > 0, (inv, v[inv])


@pytest.mark.needs_fuse
def test_a_recovered_state_needs_the_vfs(run: RunDir, tmp_path: Path) -> None:
    """A prefix state right after the last acknowledgement, materialised
    and recovered by crashlab (file system first): its WAL is WALDIO's."""
    p = crashlab("check", str(run.path), "--strategy", "prefix", "--out", str(tmp_path / "c"))
    assert p.returncode == 0, p.stdout + p.stderr
    states = (tmp_path / "c" / "states.jsonl").read_text().splitlines()
    state = next(json.loads(s)["id"] for s in states if json.loads(s)["acked"] == TXNS)
    p = crashlab("repro", str(run.path), state, "--out", str(tmp_path / "r"))
    assert p.returncode == 0, p.stdout + p.stderr
    files = tmp_path / "r" / "files"
    assert len(_frames((files / "crashlab.db-wal").read_bytes())) > TXNS
    oracle = Oracle(parse_spec(SPEC))
    plain = tmp_path / "plain"
    shutil.copytree(files, plain)
    facts = sqlite_checker.examine(files / "crashlab.db", vfs=WALDIO_VFS)
    assert facts.open_error is None and facts.digest == oracle.digests[TXNS]
    facts = sqlite_checker.examine(plain / "crashlab.db", vfs="")
    assert facts.open_error is not None or facts.digest != oracle.digests[TXNS]


@pytest.mark.needs_fuse
def test_the_vfs_without_its_sync_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutant waldio-no-group-sync (tests/mutants/): its commits sit in
    the device's cache when acknowledged, and reorder states lose them
    (the transactions' states: the window after the set-up, sampled)."""
    m = next(m for m in catalogue() if m.name == "waldio-no-group-sync")
    monkeypatch.setenv(RUNNER, str(build_mutant(m) / "workloads/build/crashlab-runner"))
    bad = record_runs(tmp_path, {"waldio": SPEC})["waldio"]
    # a budget's sample of the window's reorder states: 42 of 172 lose a
    # commit (measured), of ~1,600 without the budget
    window = ("--window-start", "setup-done", "--budget", "200")
    p = crashlab("check", str(bad.path), "--strategy", "reorder", *window)
    assert p.returncode == 1, p.stdout + p.stderr
    result = json.loads(next((bad.path / "check").glob("reorder-*/result.json")).read_text())
    assert result["verdicts"]["DB-DURABLE"]["fail"] > 0


@pytest.mark.parametrize(
    "name", ["sqlite:journal=wal,sync=normal,waldio=8", "sqlite:journal=wal,sync=full,waldio=8"]
)
def test_a_small_wal_overwritten_from_its_start_reaches_the_oracle(
    tmp_path: Path, name: str
) -> None:
    """8 frames: checkpointed and restarted from its first block many times,
    with transactions larger than the file (it grows) and larger than one
    write (gmail's set-up), under the ASan runner."""
    spec = parse_spec("app:gmail,txns=8,warmup=200,seed=1")
    ops = write_opstream(spec, tmp_path / "w.ops")
    cmd = runner_command(
        get_sut(name), ops, tmp_path / "x.db", marks=tmp_path / "m", runner=runner_path(asan=True)
    )
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert sqlite_digest(tmp_path / "x.db", WALDIO_VFS) == Oracle(spec).final


@pytest.mark.needs_fuse
def test_without_the_zero_fill_each_commit_journals_its_extents(
    run: RunDir, recorded: Recordings, tmp_path: Path
) -> None:
    """WALDIO §5.1's hazard (`waldio-nofill`: the pre-allocated blocks left
    unwritten): on this kernel the log-commit's fdatasync journals the
    extents its direct write converted (one jbd2 commit per transaction,
    none with the zero-fill), so no crash state loses or mixes a
    transaction: the hazard costs the journaling WALDIO removes instead."""
    from harness.paper.volume import analyse

    nofill = recorded("waldio-nofill", SPEC)
    for strategy in ("prefix", "reorder"):
        out = tmp_path / strategy
        p = crashlab("check", str(nofill.path), "--strategy", strategy, "--out", str(out))
        assert p.returncode == 0, p.stdout + p.stderr
        v = json.loads((out / "result.json").read_text())["verdicts"]
        for inv in ("DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX"):
            assert v[inv]["fail"] == 0 and v[inv]["pass"] > 0, (inv, v[inv])
    assert analyse(run, tmp_path / "fill").jbd2_commits == 0
    assert (analyse(nofill, tmp_path / "nofill").jbd2_commits or 0) >= 1
