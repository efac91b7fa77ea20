"""CI sharding: a matrix swept as 2 shards (``sweep --shard i/2``) and put
together with ``crashlab merge`` gives the summary.json, junit.xml and
violations.jsonl of one unsharded sweep of the same recordings, and the
same exit code; merge refuses an incomplete or mixed set of shards."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import crashlab

from harness.sweep.matrix import shard, unshard

# three cells (2 + 1 per shard), violations in two strategies of one cell
# (with its own enumeration options), and a cell whose expectation breaks (a
# safe SUT required to violate); small workloads: what is tested is the
# sharding and merging, not the size of the runs
MATRIX = """
[[cell]]
sut = "dhl-nolog-raw"
workload = "insert:txns=4,ops=2,tables=2,warmup=20,seed=1"
fs = "raw"
strategies = ["prefix", "reorder"]
states = { max_exhaustive = 3, sample = 4 }

[[cell]]
sut = "dhl-tc-raw"
workload = "insert:txns=4,ops=3,tables=2,size=400,warmup=10,seed=1"
fs = "raw"
strategies = ["prefix"]
must_violate_any = ["DB-ATOMIC"]

[[cell]]
sut = "sqlite-off"
workload = "MULTI"  # its weakness needs more transactions
strategies = ["prefix"]
"""


@given(st.lists(st.integers(), max_size=30), st.integers(1, 7))
def test_unshard_inverts_shard(cells: list[int], n: int) -> None:
    parts = [shard(cells, (i, n)) for i in range(1, n + 1)]
    assert sorted(x for p in parts for x in p) == sorted(cells)
    assert unshard(parts) == cells


@pytest.mark.needs_fuse
def test_two_shards_merge_into_the_unsharded_sweep(tmp_path: Path) -> None:
    matrix = tmp_path / "small.toml"
    matrix.write_text(MATRIX)
    shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
    for i, out in enumerate(shards, 1):
        p = crashlab(
            "sweep",
            "--matrix",
            str(matrix),
            "--shard",
            f"{i}/2",
            "--jobs",
            "2",
            "--out",
            str(out),
            "--no-progress",
        )
        assert p.returncode == (1 if i == 2 else 0), p.stderr  # dhl-tc-raw is in shard 2
    merged = tmp_path / "merged"
    p = crashlab("merge", "--out", str(merged), *map(str, shards))
    assert p.returncode == 1, p.stderr
    assert "expectation broken: dhl-tc-raw" in p.stderr
    merge_out = p.stdout

    # the reference: one unsharded sweep of the same recordings
    ref = tmp_path / "ref"
    for s in shards:
        shutil.copytree(s / "runs", ref / "runs", dirs_exist_ok=True)
    for check_dir in (ref / "runs").glob("*/check"):
        shutil.rmtree(check_dir)
    p = crashlab(
        "sweep",
        "--matrix",
        str(matrix),
        "--jobs",
        "2",
        "--out",
        str(ref),
        "--resume",
        "--no-progress",
    )
    assert p.returncode == 1, p.stderr

    for name in ("summary.json", "junit.xml"):
        assert (merged / name).read_bytes() == (ref / name).read_bytes(), name
    # the groups of failing states survive the merge: in summary.json (path-free
    # repro commands, so byte-identical above), violations.jsonl and the report
    cells = json.loads((merged / "summary.json").read_text())["cells"]
    groups = {g["id"]: c["run"] for c in cells for g in c.get("groups", [])}
    assert {c["sut"] for c in cells if c.get("groups")} == {"dhl-nolog-raw", "sqlite-off"}
    lines = [json.loads(x) for x in (merged / "violations.jsonl").read_text().splitlines()]
    assert all(v["group"] is None or v["group"] in groups for v in lines)
    assert any(v["group"] for v in lines)
    html = (merged / "report.html").read_text()
    assert html.count('<div class="group" id="group-') == sum(
        len(c.get("groups", [])) for c in cells
    )
    assert all(f"group <code>{gid}</code>" in html for gid in groups)
    assert "distinct violation" in merge_out, merge_out
    got = (merged / "violations.jsonl").read_text()
    assert got.count("\n") > 0 and str(shards[0]) not in got
    assert got.replace(str(merged), str(ref)) == (ref / "violations.jsonl").read_text()
    reorder = json.loads(
        next(merged.glob("runs/dhl-nolog-raw*/check/reorder-*/result.json")).read_text()
    )
    assert reorder["options"]["sample"] == 4 and reorder["options"]["max_exhaustive"] == 3
    # a complete report: the runs (their logs, for the I/O cost) are linked in
    report = (merged / "report.md").read_text()
    assert "BROKEN" in report and "incomplete" not in report

    for args, message in (
        ([str(shards[0])], "missing 2/2"),
        ([str(shards[0]), str(shards[0])], "twice 1/2"),
        ([str(shards[0]), str(ref)], "not a shard"),
    ):
        p = crashlab("merge", "--out", str(tmp_path / "bad"), *args)
        assert p.returncode == 2 and message in p.stderr, p.stderr
        assert p.stderr.startswith("crashlab: error: ") and p.stderr.count("\n") == 1
