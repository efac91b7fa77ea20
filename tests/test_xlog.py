"""xLog (workloads/runner/xlog.c) on real recordings: the emulated NVRAM is
a region of the same log (FUA writes past the disk's sectors), crash states
include it, and the checkers replay it exactly as the SUT's open does.

* the record format's C unit test passes under ASan+UBSan;
* a recording puts every NVRAM write after the disk as a FUA write, and
  acknowledged transactions live only in the NVRAM at the end (the
  database file alone lacks them: the replay is what the checker relies on);
* the database the checker judges is the one the SUT's own restart leaves
  (the runner's open on the same files and NVRAM);
* prefix, reorder and torn states (MULTI; UPDATE and DELETE with prefix)
  and crashes during the NVRAM's replay (recovery-crash) hold every promise;
* the same recording with the NVRAM's FUA flag stripped (a volatile NVRAM)
  loses acknowledged transactions;
* a backend without an NVRAM refuses the SUT in one line.
xLog's mutants (tests/mutants/: ack before the NVRAM, write-back not durable,
a scan without the CRC) are killed by `make mutants`, each by the invariant
its catalogue entry names (`killed_by`).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import Recordings, build, resummarize

from checkers import xlog as xlog_checker
from harness.check.check import CheckOptions, check_run, options_for
from harness.check.multicrash import Composite
from harness.check.window import workload_window
from harness.check.worker import StateChecker
from harness.errors import CrashlabError
from harness.fs import get_fs
from harness.logformat import LogReader
from harness.materialize import replay
from harness.materialize.nvram import NVRAM_SUFFIX, nvram_region, read_nvram, strip_nvram_fua
from harness.record import recorder
from harness.rundir import RunDir
from harness.states import Enumeration, Options, state_from_id
from harness.sweep.matrix import DELETE, MULTI, UPDATE
from workloads.generate import write_opstream
from workloads.oracle import sqlite_digest
from workloads.run import oracle_from_meta, runner_command, spec_from_meta
from workloads.suts import XLOG_NVRAM_BYTES, get_sut

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {"MULTI": MULTI, "UPDATE": UPDATE, "DELETE": DELETE}


@pytest.fixture(scope="module")
def runs(recorded: Recordings) -> dict[str, RunDir]:
    return {name: recorded("xlog", wl) for name, wl in WORKLOADS.items()}


def _check(run: RunDir, strategy: str, out: Path, **comp: Any) -> dict[str, Any]:  # noqa: ANN401
    base = CheckOptions(states=Options(), jobs=2, composite=Composite(backend="fuse", **comp))
    return check_run(run, options_for(strategy, base), out)


def test_record_format_unit_test_under_asan() -> None:
    build("workloads/build/test_xlog")
    proc = subprocess.run(
        [str(ROOT / "workloads/build/test_xlog")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "test_xlog: ok" in proc.stdout


@pytest.mark.needs_fuse
def test_nvram_is_fua_writes_after_the_disk(runs: dict[str, RunDir], tmp_path: Path) -> None:
    run = runs["MULTI"]
    meta = run.meta()
    region = nvram_region(meta.extra)
    assert region is not None and region[1] == XLOG_NVRAM_BYTES == get_sut("xlog").nvram
    offset, size = region
    nv_writes = fua_elsewhere = 0
    with LogReader(run.log) as r:
        for e in r.entries():
            if not e.has_payload:
                continue
            at = e.sector * r.sectorsize
            if at >= offset:
                assert (
                    e.is_fua
                    and not e.is_flush
                    and at + e.nr_sectors * r.sectorsize <= offset + size
                )
                nv_writes += 1
            elif e.is_fua:
                fua_elsewhere += 1
    # a header at open, then one write per transaction, a reset per write-back
    assert nv_writes >= 10 and fua_elsewhere == 0
    # the final image: the database file alone lacks acknowledged
    # transactions that only the NVRAM holds; the checker's replay has them
    image = tmp_path / "final.img"
    assert meta.image is not None and meta.db is not None
    replay(Path(meta.image.path), run.log, image)
    files = tmp_path / "files"
    files.mkdir()
    (tmp_path / "w").mkdir()
    rec = get_fs(meta.fs).recover(image, files, workdir=tmp_path / "w", db_name=meta.db, fsck=False)
    assert rec.ok
    db = files / str(meta.db)
    (files / (str(meta.db) + NVRAM_SUFFIX)).write_bytes(read_nvram(image, region))
    oracle = oracle_from_meta(meta)
    plain = tmp_path / "plain.db"
    shutil.copyfile(db, plain)
    for side in ("-wal",):
        if (files / (str(meta.db) + side)).exists():
            shutil.copyfile(files / (str(meta.db) + side), str(plain) + side)
    alone = oracle.indices(sqlite_digest(plain))
    assert alone and max(alone) < 10, alone  # without the NVRAM: an older state
    facts = xlog_checker.examine(db)
    assert facts.open_error is None and oracle.indices(facts.digest or "") == [10]
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] > 0


@pytest.mark.needs_fuse
def test_checker_opens_as_the_sut_does(runs: dict[str, RunDir], tmp_path: Path) -> None:
    """For crash states spread over the run after the database was created
    (in the creation window the checker finds none, where the SUT would
    create an empty one), the database the checker judges
    (crashlab-xlog-recover) equals the one the SUT itself leaves when it is
    restarted on the same files: the runner, engine xlog, NVRAM from
    CRASHLAB_NVRAM, with no transaction left to run (--from-txn past the
    last)."""
    run = runs["MULTI"]
    meta = run.meta()
    sut, spec = spec_from_meta(meta)
    ops = write_opstream(spec, tmp_path / "w.ops")
    checker = StateChecker(run, tmp_path / "c", fsck=False)
    compared = replayed = 0
    try:
        with LogReader(run.log) as r:
            states = list(Enumeration(r, workload_window(run, Options(strategy="prefix"))))
            for state in states[::4]:
                keep = tmp_path / "keep"
                shutil.rmtree(keep, ignore_errors=True)
                keep.mkdir()
                checker.keep = keep
                checker.check(state)
                files = keep / "files"
                sut_dir = tmp_path / "sut"
                shutil.rmtree(sut_dir, ignore_errors=True)
                shutil.copytree(files, sut_dir)
                db = files / str(meta.db)
                nv = sut_dir / (str(meta.db) + NVRAM_SUFFIX)
                before = nv.read_bytes()
                facts = xlog_checker.examine(db)  # the checker's path, on files/
                cmd = runner_command(sut, ops, sut_dir / str(meta.db)) + [
                    "--from-txn",
                    str(spec.txns + 1),
                ]
                proc = subprocess.run(
                    cmd,
                    capture_output=True,
                    text=True,
                    timeout=120,
                    env={"CRASHLAB_NVRAM": str(nv), "PATH": "/usr/bin:/bin"},
                )
                assert proc.returncode == 0, proc.stderr
                assert sqlite_digest(sut_dir / str(meta.db)) == facts.digest, state.id
                compared += 1
                replayed += nv.read_bytes() != before  # the SUT's open emptied the NVRAM
    finally:
        checker.close()
    assert compared >= 8 and replayed > 0


@pytest.mark.needs_fuse
@pytest.mark.parametrize("strategy", ["prefix", "reorder", "torn"])
def test_multi_holds(runs: dict[str, RunDir], tmp_path: Path, strategy: str) -> None:
    result = _check(runs["MULTI"], strategy, tmp_path / strategy)
    assert result["states"]["checked"] > 30
    dbv = {k: v for k, v in result["verdicts"].items() if k.startswith("DB-")}
    assert all(v["fail"] == 0 and v["pass"] > 0 for v in dbv.values()), dbv
    if strategy != "torn":  # no file system promises a torn metadata block
        assert result["violations"] == [], result["violations"][:2]
        return
    # some states tear an NVRAM record write (a record over two sectors, the
    # first kept): the CRC rejects it, and its transaction was in flight
    run = runs["MULTI"]
    offset = nvram_region(run.meta().extra)[0]  # type: ignore[index]  # the run's extra names an nvram region
    ids = [
        json.loads(x)["id"] for x in (tmp_path / strategy / "states.jsonl").read_text().splitlines()
    ]
    with LogReader(run.log) as r:
        entries = list(r.entries())
        torn_nv = [
            i
            for i in ids
            if ".t" in i
            and any(
                entries[e].sector * r.sectorsize >= offset
                for e, _ in state_from_id(r, i, run.meta().log_order).torn_entries
            )
        ]
    assert torn_nv, "no torn NVRAM write was checked"


@pytest.mark.needs_fuse
@pytest.mark.parametrize("workload", ["UPDATE", "DELETE"])
def test_update_delete_hold(runs: dict[str, RunDir], tmp_path: Path, workload: str) -> None:
    result = _check(runs[workload], "prefix", tmp_path / workload)
    assert result["states"]["checked"] > 20
    assert result["violations"] == [], result["violations"][:2]


@pytest.mark.needs_fuse
def test_crash_during_nvram_replay_holds(recorded: Recordings, tmp_path: Path) -> None:
    run = recorded.copy(tmp_path / "run", "xlog", MULTI)  # the continuations go into the run
    result = _check(run, "recovery-crash", tmp_path / "rc", max_first=2)
    assert result["states"]["checked"] > 50
    assert result["violations"] == [], result["violations"][:2]
    # the continuations recorded the replay: WAL writes, then the NVRAM's reset
    replayed = 0
    for c in result["multicrash"]["continuations"]:
        nested = RunDir(run.path / "recovery-crash" / c["state"])
        offset = nvram_region(nested.meta().extra)[0]  # type: ignore[index]  # the run's extra names an nvram region
        with LogReader(nested.log) as r:
            nv = [e for e in r.entries() if e.has_payload and e.sector * r.sectorsize >= offset]
        assert all(e.is_fua for e in nv)
        replayed += bool(nv)
    assert replayed > 0


@pytest.mark.needs_fuse
def test_volatile_nvram_loses_acknowledged_transactions(
    runs: dict[str, RunDir], tmp_path: Path
) -> None:
    src = runs["MULTI"]
    broken = tmp_path / "no-fua"
    broken.mkdir()
    shutil.copyfile(src.meta_path, broken / "meta.json")
    region = nvram_region(src.meta().extra)
    assert region is not None
    assert strip_nvram_fua(src.log, broken / "writes.log", region) >= 10
    resummarize(broken)  # a log made on purpose: its summary in meta.json
    result = _check(RunDir(broken), "prefix", tmp_path / "check")
    fails = result["verdicts"]["DB-DURABLE"]["fail"]
    assert fails > 0, result["verdicts"]["DB-DURABLE"]
    assert {v["invariant"] for v in result["violations"]} == {"DB-DURABLE"}
    # the same log with the flag: nothing lost
    good = _check(src, "prefix", tmp_path / "good")
    assert good["verdicts"]["DB-DURABLE"]["fail"] == 0


def test_backends_without_nvram_refuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dm and qemu have no NVRAM: one line, before anything is recorded."""
    from harness.record import backends

    for name in ("dm", "qemu"):
        cls = backends.BACKENDS[name]
        monkeypatch.setattr(
            recorder, "select_backend", lambda _b, _fs, cls=cls: (cls(), "asked for")
        )
        with pytest.raises(CrashlabError, match=f"the {name} backend has no emulated NVRAM"):
            recorder.record(
                recorder.RecordRequest(["true"], tmp_path / name, nvram=XLOG_NVRAM_BYTES)
            )
        assert not (tmp_path / name).exists()
