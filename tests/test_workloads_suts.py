"""The SUT registry: one entry per SUT, a cited expectation for every
database invariant, runner arguments the runner accepts."""

from __future__ import annotations

import pytest

from checkers.invariants import DB_LEVEL
from harness.errors import CrashlabError
from workloads.suts import DB_INVARIANTS, SUTS, get_sut

REQUIRED = ["sqlite-delete-full", "sqlite-delete-extra", "sqlite-delete-normal",
            "sqlite-delete-off", "sqlite-truncate-full", "sqlite-persist-full",
            "sqlite-wal-full", "sqlite-wal-normal", "sqlite-memory", "sqlite-off"]


def test_registry_has_the_baselines():
    for name in REQUIRED:
        assert get_sut(name).name == name


def test_invariant_ids_are_the_checkers():
    assert set(DB_INVARIANTS) <= set(DB_LEVEL)


@pytest.mark.parametrize("name", sorted(SUTS))
def test_every_invariant_has_a_cited_expectation(name):
    sut = SUTS[name]
    assert tuple(g.invariant for g in sut.guarantees) == DB_INVARIANTS
    assert set(sut.promises) | set(sut.may_violate) == set(DB_INVARIANTS)
    assert not set(sut.promises) & set(sut.may_violate)
    for g in sut.guarantees:
        assert g.rule and g.source
    assert "--page-size" in sut.runner_args() and "4096" in sut.runner_args()


def test_documented_facts():
    assert "DB-DURABLE" in get_sut("sqlite-delete-full").may_violate
    assert "directory" in get_sut("sqlite-delete-full").guarantee("DB-DURABLE").rule
    assert set(get_sut("sqlite-delete-extra").promises) == set(DB_INVARIANTS)
    wal_normal = get_sut("sqlite-wal-normal")
    assert wal_normal.may_violate == ("DB-DURABLE",)
    for name in ("sqlite-memory", "sqlite-off", "sqlite-delete-off"):
        assert {"DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC"} <= set(get_sut(name).may_violate)
    assert "DB-DURABLE" in get_sut("sqlite-delete-off").may_violate


def test_unknown_sut_lists_the_choices():
    with pytest.raises(CrashlabError) as e:
        get_sut("sqlite-wal-extra-safe")
    assert "unknown SUT 'sqlite-wal-extra-safe'" in str(e.value)
    assert "sqlite-delete-full" in str(e.value) and "sqlite-off" in str(e.value)
