"""``crashlab paper``: the quick page opened in headless Chromium, and the
computed parts (normalisation, the per-row sentences, the rows of systems
that are not measured)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from support import crashlab

from harness.errors import CrashlabError
from harness.outlock import LOCK_NAME
from harness.paper import compare, throughput
from harness.report import papers, systems
from harness.report.systems import System, resolve

CHROMIUM = shutil.which("chromium-headless-shell") or shutil.which("chromium")
QUICK = ("WAL", "OFF_OPT", "DHL_CC", "MVBT")  # in the table's order


@pytest.fixture(scope="module")
def quick_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("paper") / "out"
    p = crashlab("paper", "--quick", "--systems", ",".join(QUICK), "--out", str(out), timeout=300)
    assert p.returncode == 0, p.stderr
    return out


@pytest.mark.needs_fuse
def test_quick_run_writes_every_file(quick_page: Path) -> None:
    paper = json.loads((quick_page / "paper.json").read_text())
    assert [s["key"] for s in paper["systems"]] == list(QUICK)
    rows = {s["key"]: s for s in paper["systems"]}
    wal = rows["WAL"]["volume"]
    assert wal["split"] and wal["total_kb"] > 0
    # every byte of the window is in one category
    assert sum(wal["kb"].values()) == pytest.approx(wal["total_kb"])
    assert wal["kb"]["log file"] > 0 and wal["files"]["crashlab.db-wal"] > 0
    assert rows["DHL_CC"]["volume"]["kb"]["log file"] == 0  # DHL has no log file
    assert wal["runner_syncs"] >= 1 and wal["flushes"] >= 1
    assert "not built" in rows["MVBT"]["volume_why"]
    # OFF_OPT is measured once its SUT is registered, and says so until then
    if resolve(systems.BY_KEY["OFF_OPT"]).measured:
        assert rows["OFF_OPT"]["volume"] is not None
    else:
        assert rows["OFF_OPT"]["volume_why"].startswith("SUT 'off-opt' not registered")
    assert paper["fig10"]["kinds"]["insert"]["1"]["WAL"]["best"] == 1.0
    assert paper["fig10"]["kinds"]["update"]["2"]["DHL_CC"]["min"] > 0
    fig9 = {r["key"]: r for r in paper["fig9"]["systems"]}
    assert list(fig9) == ["WAL", "MVBT", "DHL_CC", "OFF_OPT"]  # the thesis's panels, selected
    assert fig9["WAL"]["trace"]["regions"]["crashlab.db-wal"] > 0
    assert fig9["WAL"]["trace"]["txns"] == 10
    assert "not built" in fig9["MVBT"]["why"] and fig9["MVBT"]["trace"] is None
    for name in (
        "paper.md",
        "paper.html",
        *(f"plots/{n}.png" for n in ("fig10", "fig8", "syncs", "fig9")),
    ):
        assert (quick_page / name).stat().st_size > 0, name
    # no temporary file left by an atomic write (the output lock stays: harness/outlock.py)
    assert [p.name for p in quick_page.rglob(".*.*")] == [LOCK_NAME]


@pytest.mark.needs_fuse
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium-headless-shell (harness/setup)")
def test_page_in_headless_chromium(quick_page: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on(
                "console",
                lambda m: (
                    problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            page.goto((quick_page / "paper.html").as_uri(), wait_until="load")
            shot = tmp_path / "paper.png"
            page.screenshot(path=str(shot), full_page=True)
            rows = page.eval_on_selector_all(
                "#systems tbody tr", "rs => rs.map(r => r.dataset.system)"
            )
            images = page.eval_on_selector_all(
                "img", "is => is.map(i => i.complete && i.naturalWidth > 0)"
            )
        finally:
            browser.close()
    assert problems == []
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    assert rows == list(QUICK)  # a row per system, measured or not
    assert images and all(images)  # the three charts, inlined, decoded


def test_normalise_pairs_each_repeat_with_the_baselines() -> None:
    pts = throughput.normalise({"WAL": [100.0, 50.0, 200.0], "X": [200.0, 150.0, 100.0]}, "WAL")
    assert pts["WAL"].ratio == (1.0, 1.0, 1.0)
    assert pts["X"].ratio == (2.0, 3.0, 0.5)
    assert pts["X"].median == 2.0 and pts["X"].spread == (0.5, 3.0)
    assert pts["X"].best == 1.0 and pts["WAL"].best == 1.0  # 200 / 200: the best runs
    with pytest.raises(CrashlabError):
        throughput.normalise({"WAL": [0.0]}, "WAL")


def _vol(
    db: float,
    log: float,
    journal: float,
    meta: float = 0.0,
    other: float = 0.0,
    commits: float = 1.0,
    syncs: float = 1.0,
) -> dict:
    kb = {
        "database file": db,
        "log file": log,
        "ext4 journal": journal,
        "ext4 metadata": meta,
        "other": other,
    }
    return {
        "kb": kb,
        "total_kb": sum(kb.values()),
        "jbd2_commits": commits,
        "runner_syncs": syncs,
        "split": True,
    }


def test_sentence_names_the_region_that_differs() -> None:
    wal = papers.figure(papers.WALDIO, "WAL")
    assert wal is not None
    assert compare.table_sentence(wal, _vol(0, 8, 20)).startswith("Matches: 28 KB")
    delete = papers.figure(papers.WALDIO, "DELETE")
    assert delete is not None
    s = compare.table_sentence(delete, _vol(8, 16, 32, syncs=4))
    assert "mostly in the ext4 journal" in s and "Journal 32 KB against 56 (-6 blocks)" in s
    assert "1.00 jbd2 transactions per insert here, 32 KB each" in s
    assert "4.00 syncs per insert here, the paper 3" in s  # WALDIO: 3 fsyncs for DELETE
    off = papers.figure(papers.WALDIO, "OFF")
    assert off is not None
    s = compare.table_sentence(off, _vol(8, 0, 0, commits=0))
    assert "no jbd2 transaction here" in s and "journaled 3 blocks per insert" in s
    maw = papers.figure(papers.MAW, "DELETE")
    assert maw is not None
    s = compare.table_sentence(maw, _vol(8, 16, 32))
    assert "mostly in the data region" in s and "2.0 database pages per insert (MAW: 3)" in s


def test_table_rows_without_a_measurement_say_why() -> None:
    rows = compare.table_rows({"WAL": _vol(0, 8, 20)}, {"OFF": "SUT 'x' not registered"})
    by = {(r.source, r.mode): r for r in rows}
    assert len(rows) == len(papers.PAPER_IO)
    assert by[(papers.WALDIO, "WAL")].ours == {
        "data_kb": 8,
        "journal_kb": 20,
        "total_kb": 28,
        "syncs": 1.0,
    }
    assert by[(papers.WALDIO, "OFF")].ours is None
    assert by[(papers.WALDIO, "OFF")].sentence == "SUT 'x' not registered"
    assert by[(papers.MAW, "PERSIST")].sentence == "not selected (--systems)"


def test_fig8_sentence_against_the_thesis_text() -> None:
    t = papers.thesis_fig8("WAL")
    assert t is not None
    s = compare.fig8_sentence(t, _vol(0, 8, 20), None)
    assert s == "log file 8 KB against 8; jbd2 71% of the total against 68%"
    opt = papers.thesis_fig8("WAL_OPT")
    assert opt is not None
    assert (
        compare.fig8_sentence(opt, _vol(0, 8, 0), None)
        == "OFF_OPT is not measured here, so no ratio"
    )
    assert compare.fig8_sentence(opt, _vol(0, 8, 0), 4.0).startswith("2.0x OFF_OPT's total")
    tc, tc_opt = papers.thesis_fig8("DHL_TC"), papers.thesis_fig8("DHL_TC_OPT")
    assert tc is not None and tc_opt is not None
    assert "as DHL_TC_OPT and DHL_CC_OPT do here" in compare.fig8_sentence(tc, _vol(8, 0, 2), None)
    assert (
        compare.fig8_sentence(tc_opt, _vol(4, 0, 2), None)
        == "database file 4 KB against 4; log file 0 KB against 0"
    )


def test_unregistered_and_unbuilt_systems_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    r = resolve(System("NEW", "no-such-sut", ("x",), "a system nobody registered"))
    assert not r.measured
    assert r.why == "SUT 'no-such-sut' not registered in this build (unknown SUT 'no-such-sut')"
    mvbt = resolve(systems.BY_KEY["MVBT"])
    assert not mvbt.measured and "8,000 lines" in mvbt.why
    assert resolve(systems.BY_KEY["WAL_OPT"]).sut_name == "sqlite:journal=wal,sync=full,walopt=100"
    # a SUT that names a guest-only file system (Sut.needs_fs) is recorded in a guest
    import workloads.suts

    monkeypatch.setattr(
        workloads.suts, "get_sut", lambda name: SimpleNamespace(name=name, needs_fs="f2fs")
    )
    maw = resolve(systems.BY_KEY["MAW"])
    assert maw.measured and maw.fs == "f2fs" and maw.guest_only


def test_bad_system_name_is_one_line_exit_2(tmp_path: Path) -> None:
    with pytest.raises(CrashlabError, match="unknown system 'NOPE'"):
        systems.select("WAL,nope")
    p = crashlab("paper", "--systems", "WAL,NOPE", "--out", str(tmp_path / "x"))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [p.stderr.strip()]
    assert p.stderr.startswith("crashlab: error: unknown system 'NOPE'")


def test_sweep_report_links_the_paper_page(tmp_path: Path) -> None:
    from test_report_synth import make_sweep

    from harness.report.write import write_reports

    sweep = tmp_path / "sweep"
    make_sweep(sweep)
    out = write_reports(sweep)
    assert "paper/paper.html" not in out.html.read_text()
    (sweep / "paper").mkdir()
    (sweep / "paper" / "paper.html").write_text("<html></html>")
    out = write_reports(sweep)
    assert 'href="paper/paper.html"' in out.html.read_text()
    assert "[paper/paper.html](paper/paper.html)" in out.md.read_text()


def test_claims_are_checked_against_the_best_runs() -> None:
    from harness.paper.build import _claims

    def pt(m: float) -> dict:
        return {"best": m, "median": m, "min": m, "max": m}

    # the thesis's DHL_TC/DHL_CC embed their commit record (§IV): ours are
    # DHL_TC_OPT/DHL_CC_OPT; DHL_TC/DHL_CC here (header page) are not in
    # the thesis's figure, and their points must not count
    fig10 = {
        "systems": ["WAL", "DHL_CC", "DHL_TC", "DHL_CC_OPT", "DHL_TC_OPT", "WAL_OPT", "DASH"],
        "kinds": {
            "insert": {
                "1": {
                    "WAL": pt(1),
                    "DHL_CC_OPT": pt(1.5),
                    "DHL_TC_OPT": pt(1.2),
                    "DHL_TC": pt(0.5),
                    "WAL_OPT": pt(1.8),
                    "DASH": pt(0.5),
                },
                "2": {
                    "WAL": pt(1),
                    "DHL_CC_OPT": pt(1.3),
                    "DHL_TC_OPT": pt(0.9),
                    "DHL_CC": pt(2.0),
                    "DHL_TC": pt(0.5),
                    "WAL_OPT": pt(1.1),
                    "DASH": pt(0.6),
                },
            }
        },
    }
    claims = {c["claim"].split()[0]: c["here"] for c in _claims(fig10)}
    # DASH below WAL is allowed by the claim; DHL_TC_OPT at 2 ops is not
    assert (
        claims["other"] == "not everywhere: 1 of 6 points below WAL: DHL_TC_OPT insert ops=2 (0.90)"
    )
    assert claims["WAL_OPT"] == "up to 1.80x (insert, ops=1, best runs)"
    assert claims["when"] == (
        "DHL_CC_OPT/DHL_TC_OPT = 1.44 (insert, ops=2, best runs; the thesis's DHL_CC "
        "and DHL_TC embed their commit record)"
    )


def test_table2_and_xlog_figures_are_ratios_of_one_run() -> None:
    """WALDIO Table 2: the paper's operations per second over its WAL's
    beside this run's best one-operation ratio, only for systems measured;
    xLog's speed-up is its best one-operation ratio, its write
    amplification bytes written per byte of value, with and without the
    write-back."""
    from harness.paper.others import table2, xlog_claims

    def pt(m: float) -> dict:
        return {"best": m, "median": m, "min": m, "max": m}

    fig10 = {
        "systems": ["WAL", "DELETE", "XLOG"],
        "kinds": {
            k: {"1": {"WAL": pt(1), "DELETE": pt(0.25), "XLOG": pt(f)}}
            for k, f in (("insert", 12.0), ("update", 16.0), ("delete", 9.0))
        },
    }
    rows = {r["system"]: r["cells"] for r in table2(fig10)}
    assert list(rows) == ["DELETE", "WAL"]  # TRUNCATE, PERSIST, WALDIO not measured
    assert rows["DELETE"][0] == {
        "kind": "insert",
        "paper_ops": 98,
        "paper": pytest.approx(98 / 587),
        "ours": 0.25,
    }
    volumes = {
        "WAL": {"total_kb": 28.0, "files": {}},
        "XLOG": {"total_kb": 3.0, "files": {"NVRAM": 0.6}},
    }
    speed, wa = xlog_claims(fig10, volumes)
    assert speed["here"].startswith("up to 16.0x WAL's throughput (update")
    assert wa["here"] == (
        "bytes written per byte of a 100-byte value: WAL 287x, xLog 31x with its "
        "write-back to SQLite, 6.1x to the NVRAM alone"
    )


@pytest.mark.needs_qemu("f2fs")
@pytest.mark.slow
def test_guest_only_system_is_recorded_in_a_guest(tmp_path: Path) -> None:
    """A system on a guest-only file system (MAW's F2FS) is measured through
    the qemu backend; its volume has no ext4 split, only the total."""
    from harness.paper.volume import measure
    from harness.report.systems import Resolved

    res = Resolved(systems.BY_KEY["WAL"], "sqlite-wal-full", "f2fs", True)
    v = measure(res, 3, tmp_path)
    assert (v.fs, v.backend, v.split) == ("f2fs", "qemu", False)
    assert v.total_kb > 0 and v.kb == {"other": v.total_kb} and v.jbd2_commits is None
    assert v.runner_syncs == 1.0 and v.flushes >= 1
    assert not list(tmp_path.iterdir())  # the recording is not kept


@pytest.mark.needs_root
def test_throughput_mounts_a_file_system_per_mount_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SUT with ``mount_options`` (the agreed Sut field) runs on its own
    mount with them; the others share the plain one."""
    seen: list[str | None] = []
    real_mounted = throughput.loop_mounted

    def spy(image, mnt, fs, *, options=None, direct_io=False):
        seen.append(options)
        return real_mounted(image, mnt, fs, options=options, direct_io=direct_io)

    monkeypatch.setattr(throughput, "loop_mounted", spy)
    # selective journaling: a real SUT that needs ext4 mounted data=journal
    points, failed = throughput.measure(
        {"WAL": "sqlite-wal-full", "SEL": "selective"},
        baseline="WAL",
        txns=2,
        ops=(1,),
        repeats=1,
        device="tmpfs",
        kinds=("insert",),
    )
    assert failed == {} and sorted(seen, key=str) == [None, "data=journal"]
    assert points["insert"][1]["SEL"].ops_per_s[0] > 0
