"""The budget: the enumeration chosen by the size of the whole window's
state space, not by epoch, on synthetic logs.

* every valid kept set, generated without building the invalid ones,
  equals the brute force (both log orders, with FUA writes) and, for an
  epoch the per-epoch rule covered too, comes in the same order;
* a window whose kept sets fit the budget is checked exhaustively (100%),
  large epochs included, for reorder, torn and torn-reorder;
* beyond the budget, a deterministic stratified sample of at most the
  budget, small epochs still whole;
* without a budget, the per-epoch rule as before (tags and counts kept).
"""

from __future__ import annotations

import dataclasses
from itertools import product
from pathlib import Path

import pytest

from harness.errors import CrashlabError
from harness.logformat import LogReader
from harness.states import Enumeration, Options, iter_epochs
from harness.states.coverage import possible_kept_sets, summary
from harness.states.enumerate import plan_quotas
from harness.states.model import check_valid
from harness.states.stateid import StateKey
from harness.states.strategies import _every_kept_set, reorder_states
from harness.states.synth import write_epochs_log


def _valid(epoch) -> set[int]:  # noqa: ANN001
    out = set()
    for bits in product([0, 1], repeat=epoch.nr_writes):
        kept = sum(b << i for i, b in enumerate(bits))
        try:
            check_valid(epoch, StateKey(epoch.index, kept, ()))
        except CrashlabError:
            continue
        out.add(kept)
    return out


@pytest.mark.parametrize("order", ["completion", "dm-log-writes"])
@pytest.mark.parametrize("fua_every", [0, 2, 3])
def test_every_kept_set_is_the_brute_force(tmp_path: Path, order: str, fua_every: int) -> None:
    log = tmp_path / "fua.log"
    write_epochs_log(log, [0, 7, 10], fua_every=fua_every)
    with LogReader(log) as r:
        epochs = list(iter_epochs(r, order))
    for epoch in epochs:
        n = epoch.nr_writes
        prefixes = {(1 << m) - 1 for m in range(n + 1)}
        got = [k for k, _ in _every_kept_set(epoch)]
        assert len(got) == len(set(got))
        assert set(got) | prefixes == _valid(epoch)
        assert len(got) + n + 1 == possible_kept_sets(epoch)
        # the per-epoch rule's exhaustive order (n <= max_exhaustive): the same states
        legacy = [k for k, _ in reorder_states(epoch, Options())][n + 1 :]
        assert got == legacy


def test_plan_quotas_fills_small_epochs_first() -> None:
    spaces = [(0, 1, 0), (1, 11, 1013), (2, 17, 65519), (3, 5, 11)]
    assert plan_quotas(spaces, 10**6) == {0: 0, 1: 1013, 2: 65519, 3: 11}
    q = plan_quotas(spaces, 2000)
    assert q[0] == 0 and q[3] == 11  # whole
    assert (q[1], q[2]) == (977, 978)  # the rest shared: samples of both
    assert plan_quotas(spaces, 10) == {0: 0, 1: 0, 2: 0, 3: 0}  # prefixes only


def _run(log: Path, **opts) -> Enumeration:  # noqa: ANN003
    with LogReader(log) as r:
        e = Enumeration(r, Options(dedup=False, **opts))
        e.ids = [s.id for s in e]  # type: ignore[attr-defined]  # kept for the asserts
        return e


@pytest.mark.parametrize("strategy", ["reorder", "torn", "torn-reorder"])
def test_a_window_that_fits_is_exhaustive(tmp_path: Path, strategy: str) -> None:
    log = tmp_path / "cov.log"
    write_epochs_log(log, [0, 10, 16], fua_every=5)
    e = _run(log, strategy=strategy, budget=10**6)
    cov = summary(e.stats.coverage)
    assert cov["fraction"] == 1.0 and not e.sampled
    assert cov["kept_sets_checked"] == cov["kept_sets_possible"] > 2**13
    legacy = summary(_run(log, strategy=strategy, budget=None).stats.coverage)
    assert legacy["fraction"] < 0.1  # the per-epoch rule: the 16-write epoch barely


def test_beyond_the_budget_a_seeded_stratified_sample(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    write_epochs_log(log, [0, 6, 20])
    e = _run(log, strategy="reorder", budget=5000)
    cov = summary(e.stats.coverage)
    assert e.sampled and e.stats.generated <= 5000
    by_epoch = {c["epoch"]: c for c in cov["epochs"]}
    assert by_epoch[1]["kept_checked"] == 2**6  # the small epoch whole
    assert by_epoch[2]["kept_checked"] > 4000
    again = _run(log, strategy="reorder", budget=5000)
    assert again.ids == e.ids  # type: ignore[attr-defined]  # deterministic
    other = _run(log, strategy="reorder", budget=5000, seed=1)
    assert other.ids != e.ids  # type: ignore[attr-defined]  # seeded


def test_no_budget_is_the_per_epoch_rule(tmp_path: Path) -> None:
    log = tmp_path / "cov.log"
    write_epochs_log(log, [0, 10, 16])
    e = _run(log, strategy="reorder", budget=None)
    assert e.quotas is None and e.stats.generated == 1 + 1024 + 151
    assert "budget" not in Options(budget=None).record()  # a check's tag as before the budget
    assert Options(budget=7).record()["budget"] == 7
    with pytest.raises(CrashlabError, match="budget must be >= 1"):
        dataclasses.replace(Options(), budget=-1).validate()
    auto = _run(log, strategy="reorder")  # AUTO_BUDGET, no tier: DEFAULT_BUDGET
    assert auto.stats.generated == 1 + 1024 + 2**16
