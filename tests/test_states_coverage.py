"""Coverage of the crash-state space, the stratified sampler for large
epochs, and the ``torn-reorder`` strategy, on synthetic logs.

* the count of possible kept sets (FUA rule) equals a brute-force count;
* coverage per epoch and per run says exactly what reorder visited: all of
  a 10-write epoch, 151 of 65,536 kept sets of a 16-write one;
* the sampler draws kept sets of every size, distinct, seeded, stable;
* torn-reorder states are valid, include torn writes with later writes
  kept, and their IDs look up to the same state.
"""

from __future__ import annotations

from collections import Counter
from itertools import product
from math import comb
from pathlib import Path

import pytest

from harness.logformat import LogReader
from harness.states import Enumeration, Options, iter_epochs, state_from_id
from harness.states.coverage import describe, possible_kept_sets, summary
from harness.states.model import check_valid
from harness.states.stateid import StateKey
from harness.states.synth import write_epochs_log


def _epochs(log: Path) -> list:
    with LogReader(log) as r:
        return list(iter_epochs(r))


def _enumerate(log: Path, **opts) -> tuple[list, Enumeration]:
    with LogReader(log) as r:
        e = Enumeration(r, Options(**({"dedup": False, "budget": None} | opts)))
        return [(s.key, s.id) for s in e], e


@pytest.mark.parametrize("fua_every", [0, 2, 3])
def test_possible_kept_sets_is_the_brute_force_count(tmp_path: Path, fua_every: int) -> None:
    log = tmp_path / "fua.log"
    write_epochs_log(log, [0, 7, 9], fua_every=fua_every)
    for epoch in _epochs(log):
        n = epoch.nr_writes
        valid = 0
        for bits in product([0, 1], repeat=n):
            kept = sum(b << i for i, b in enumerate(bits))
            try:
                check_valid(epoch, StateKey(epoch.index, kept, ()))
                valid += 1
            except Exception:  # noqa: BLE001 - invalid: a completed FUA write lost
                pass
        assert possible_kept_sets(epoch) == valid
        if fua_every and n:
            assert valid < 2**n  # the FUA rule did remove kept sets


def test_coverage_says_what_reorder_visited(tmp_path: Path) -> None:
    log = tmp_path / "cov.log"
    write_epochs_log(log, [0, 10, 16])
    _, e = _enumerate(log, strategy="reorder")
    by_epoch = {c.epoch: c for c in e.stats.coverage}
    assert by_epoch[1].kept_checked == by_epoch[1].kept_possible == 2**10
    assert by_epoch[2].kept_possible == 2**16
    assert by_epoch[2].kept_checked == sum(comb(16, i) for i in range(3)) + 16 - 2 == 151
    cov = summary(e.stats.coverage)
    assert cov["kept_sets_checked"] == 1 + 1024 + 151
    assert cov["kept_sets_possible"] == 1 + 1024 + 65536
    assert cov["epochs_complete"] == 2 and 0 < cov["fraction"] < 1
    assert describe(cov) == "1176/66561 (1.77%)"
    _, p = _enumerate(log, strategy="prefix")
    assert summary(p.stats.coverage)["kept_sets_checked"] == 1 + 11 + 17


def test_huge_epochs_are_reported_in_log2(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    write_epochs_log(log, [0, 80], pages=512)
    _, e = _enumerate(log, strategy="prefix")
    cov = summary(e.stats.coverage)
    assert cov["kept_sets_possible"] is None  # 2^80 does not survive a JSON double
    assert cov["kept_sets_possible_log2"] == 80.0
    assert describe(cov) == f"82/2^80.0 ({100 * 82 / (2**80 + 1):.3g}%)"


def test_sampler_draws_every_size_seeded_and_distinct(tmp_path: Path) -> None:
    log = tmp_path / "sample.log"
    write_epochs_log(log, [0, 24], pages=256)
    opts = dict(strategy="reorder", sample=230, seed=3)
    got, _ = _enumerate(log, **opts)
    n = 24
    drawn = [k for k, _ in got if k.epoch == 1][n + 1 :]  # after the n+1 prefixes
    assert len(drawn) == 230 and len({k.kept for k in drawn}) == 230
    sizes = Counter(k.kept.bit_count() for k in drawn)
    assert set(sizes) == set(range(1, n))  # every size of kept set, not only ~n/2
    assert max(sizes.values()) - min(sizes.values()) <= 1
    again, _ = _enumerate(log, **opts)
    assert again == got
    other, _ = _enumerate(log, **{**opts, "seed": 4})
    assert other != got


def test_sampler_keeps_completed_fua_writes(tmp_path: Path) -> None:
    log = tmp_path / "fua-sample.log"
    write_epochs_log(log, [0, 20], fua_every=4, pages=256)
    got, _ = _enumerate(log, strategy="reorder", sample=60)
    epoch = _epochs(log)[1]
    for key, _ in got:
        if key.epoch == 1:
            check_valid(epoch, key)


@pytest.mark.parametrize("fua_every", [0, 3])
def test_torn_reorder_states_are_valid_and_look_up(tmp_path: Path, fua_every: int) -> None:
    log = tmp_path / "tr.log"
    write_epochs_log(log, [0, 4, 6], fua_every=fua_every)
    got, _ = _enumerate(log, strategy="torn-reorder")
    reorder, _ = _enumerate(log, strategy="reorder")
    torn = [(k, i) for k, i in got if k.torn]
    assert {k for k, _ in got if not k.torn} == {k for k, _ in reorder}
    assert 0 < len(torn) <= len(reorder)
    epochs = _epochs(log)
    middle = 0
    for key, sid in torn:
        check_valid(epochs[key.epoch], key)
        ((w, _units),) = key.torn
        middle += key.kept >> (w + 1) != 0  # a later write persisted, this one torn
        with LogReader(log) as r:
            assert state_from_id(r, sid).key == key
    assert middle > 0
    again, _ = _enumerate(log, strategy="torn-reorder")
    assert again == got
