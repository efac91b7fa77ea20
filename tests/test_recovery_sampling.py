"""REC-CRASHSAFE crashes DHL's recovery where it has work to do, at subsets
of every size of its writes, and says how much it did."""

from __future__ import annotations

import json
from collections import Counter
from math import comb
from pathlib import Path

import pytest
from support import Recordings

from checkers.recovery import IoOp, recovery_states
from harness.check.check import CheckOptions, check_run
from harness.check.runlevel import spread_ids
from harness.states import Options
from harness.sweep.matrix import DHL_INSERT


def test_a_limit_cuts_every_size_alike() -> None:
    ops = [IoOp("write", i * 4096, b"x") for i in range(9)] + [IoOp("sync")]
    states = list(recovery_states(ops, 64))
    assert len(states) == 64
    sizes = Counter(len(s.kept) for s in states)
    assert set(sizes) == set(range(9))  # 0..8 writes kept: every size, not the small ones first
    assert all(sizes[r] >= min(comb(9, r), 7) for r in range(9))  # an even share each
    assert len({s.kept for s in states}) == 64
    assert [s.kept for s in recovery_states(ops, 64)] == [s.kept for s in states]
    few = [IoOp("write", i * 4096, b"x") for i in range(3)]
    assert len(list(recovery_states(few, 64))) == 7  # every proper subset of 3 writes


def test_spread_order_starts_inside_the_run(tmp_path: Path) -> None:
    p = tmp_path / "states.jsonl"
    p.write_text("".join(json.dumps({"id": f"s{i}"}) + "\n" for i in range(16)))
    order = spread_ids(p)
    assert sorted(order) == sorted(f"s{i}" for i in range(16))
    assert order[:3] == ["s8", "s4", "s12"] and order[-1] == "s0"
    assert spread_ids(p, 3) == ["s8", "s4", "s12"]  # the first k of the same order
    p.write_text(p.read_text().rstrip("\n"))  # a last line without its newline counts
    assert sorted(spread_ids(p)) == sorted(f"s{i}" for i in range(16))
    big = tmp_path / "big.jsonl"  # longer than one read of the counting pass
    big.write_text(
        "".join(json.dumps({"id": f"s{i}", "pad": "x" * 300}) + "\n" for i in range(5000))
    )
    assert spread_ids(big, 2) == ["s4096", "s2048"]  # 13-bit reversal of 1, 2


@pytest.mark.needs_fuse
def test_sampled_states_are_ones_whose_recovery_writes(
    recorded: Recordings, tmp_path: Path
) -> None:
    run = recorded("dhl-cc-raw", DHL_INSERT, "raw")
    result = check_run(
        run,
        CheckOptions(states=Options(strategy="reorder"), jobs=2, crashsafe_sample=4),
        tmp_path / "out",
    )
    assert result["crashsafe"]["states"] == 4
    recs = [json.loads(x) for x in (tmp_path / "out" / "run.jsonl").read_text().splitlines()]
    sampled = [r for r in recs if "REC-CRASHSAFE" in r["v"]]
    assert len(sampled) == 4 and all(r["v"]["REC-CRASHSAFE"] == "pass" for r in sampled)
    assert all(r["recovery_states"] > 0 for r in sampled)
    assert result["crashsafe"]["recovery_states"] == sum(r["recovery_states"] for r in sampled)
