"""The SUT registry: one entry per SUT, a cited expectation for every
database invariant, runner arguments the runner accepts; SQLite as a name
grammar whose guarantees are derived from one rule table."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from checkers.invariants import DB_LEVEL
from harness.errors import CrashlabError
from workloads.fault_guarantees import fault_weaknesses, promised_under
from workloads.sqlite_grammar import JOURNALS, SYNCS, grid, parse_sqlite_name
from workloads.sqlite_rules import RULES, WEAKNESSES, rule_for
from workloads.suts import (
    DB_INVARIANTS,
    SQLITE_ALIASES,
    SUTS,
    TORN_WAIVED,
    get_sut,
    sqlite_grid,
)

REQUIRED = [
    "sqlite-delete-full",
    "sqlite-delete-extra",
    "sqlite-delete-normal",
    "sqlite-delete-off",
    "sqlite-truncate-full",
    "sqlite-persist-full",
    "sqlite-wal-full",
    "sqlite-wal-normal",
    "sqlite-memory",
    "sqlite-off",
]


def test_registry_has_the_baselines():
    for name in REQUIRED:
        assert get_sut(name).name == name


def test_invariant_ids_are_the_checkers():
    assert set(DB_INVARIANTS) <= set(DB_LEVEL)


@pytest.mark.parametrize("name", sorted(n for n, s in SUTS.items() if s.engine != "jlang"))
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


# --- SQLite as a name grammar (workloads/sqlite_grammar.py) ----------------

# The hand-typed guarantees and runner options of the 10 named SQLite SUTs as
# they were before the grammar (commit 72b8e1a), dumped from that registry.
BEFORE = json.loads((Path(__file__).parent / "data" / "sqlite_aliases_72b8e1a.json").read_text())


def test_the_fixture_covers_every_alias():
    assert set(BEFORE) == set(SQLITE_ALIASES) == set(REQUIRED)


@pytest.mark.parametrize("alias", sorted(BEFORE))
def test_derived_guarantees_reproduce_the_hand_typed_ones(alias):
    """Same invariants, same promise, same quoted rule and source, same runner
    options as the hand-typed registry had."""
    sut = get_sut(alias)
    was = BEFORE[alias]
    assert [list(o) for o in sut.runner_options] == was["runner_options"]
    assert [
        {"invariant": g.invariant, "promised": g.promised, "rule": g.rule, "source": g.source}
        for g in sut.guarantees
    ] == was["guarantees"]


@pytest.mark.parametrize("alias", sorted(SQLITE_ALIASES))
def test_an_alias_is_its_grammar_sut(alias):
    canonical = SQLITE_ALIASES[alias][0]
    a, g = get_sut(alias), get_sut(canonical)
    assert g.name == canonical and a.canonical == canonical == g.canonical
    assert replace(a, name=canonical, description=g.description) == g


# The derived table: per journal, per sync (off, normal, full, extra), the
# promised invariants (O = DB-OPEN, I = DB-INTEGRITY, A = DB-ATOMIC,
# D = DB-DURABLE, P = DB-PREFIX).  A rule edit that changes a promise shows here.
DERIVED = {
    "delete": ("P", "OIAP", "OIAP", "OIADP"),
    "truncate": ("P", "OIAP", "OIADP", "OIADP"),
    "persist": ("P", "OIADP", "OIADP", "OIADP"),
    "wal": ("P", "OIAP", "OIADP", "OIADP"),
    "memory": ("P", "DP", "DP", "DP"),
    "off": ("P", "DP", "DP", "DP"),
}
LETTER = {
    "DB-OPEN": "O",
    "DB-INTEGRITY": "I",
    "DB-ATOMIC": "A",
    "DB-DURABLE": "D",
    "DB-PREFIX": "P",
}


def _letters(sut) -> str:
    return "".join(LETTER[i] for i in sut.promises)


def test_the_grid_is_every_journal_and_sync():
    names = sqlite_grid()
    assert len(names) == len(set(names)) == len(JOURNALS) * len(SYNCS) == 24
    got = {
        j: tuple(_letters(get_sut(f"sqlite:journal={j},sync={s}")) for s in SYNCS) for j in JOURNALS
    }
    assert got == DERIVED


@pytest.mark.parametrize("name", sqlite_grid())
def test_every_combination_is_a_cited_sut(name):
    sut = get_sut(name)
    assert sut.name == name == parse_sqlite_name(name).name  # canonical round trip
    assert tuple(g.invariant for g in sut.guarantees) == DB_INVARIANTS
    for g in sut.guarantees:
        assert g.rule and g.source
        assert rule_for(sut.config, g.invariant).text == g.rule
    assert sut.mode == sut.config.journal
    assert sut.runner_args()[:8] == [
        "--engine",
        "sqlite",
        "--journal-mode",
        sut.config.journal.upper(),
        "--synchronous",
        sut.config.sync.upper(),
        "--page-size",
        "4096",
    ]


def test_every_rule_decides_something():
    configs = [*grid(), *(replace_locking(c) for c in grid())]
    used = {rule_for(c, i) for c in configs for i in DB_INVARIANTS}
    assert set(RULES) == used


def replace_locking(c):
    return parse_sqlite_name(c.name + ",locking=exclusive")


def test_options_change_no_promise_but_exclusive_delete():
    """page, autockpt, jlimit and walopt never change a promise; exclusive
    locking makes DELETE commit like PERSIST (durable under NORMAL and FULL)."""
    for c in grid():
        base = get_sut(c.name).guarantees
        variants = [",page=1024", ",page=65536"]
        if c.journal == "wal":
            variants += [",autockpt=0", ",autockpt=10", ",jlimit=0", ",walopt=100"]
        if c.journal == "persist":
            variants += [",jlimit=0", ",jlimit=65536"]
        for v in variants:
            assert get_sut(c.name + v).guarantees == base, c.name + v
        exclusive = get_sut(c.name + ",locking=exclusive")
        if c.journal == "delete" and c.sync in ("normal", "full"):
            assert exclusive.may_violate == ()
            assert exclusive.promises == DB_INVARIANTS
            assert "EXCLUSIVE" in exclusive.guarantee("DB-DURABLE").rule
        else:
            assert exclusive.guarantees == base, c.name


def test_the_new_combinations_say_why():
    tn = get_sut("sqlite:journal=truncate,sync=normal").guarantee("DB-DURABLE")
    assert not tn.promised and "resurrect" in tn.rule
    assert get_sut("sqlite:journal=persist,sync=normal").guarantee("DB-DURABLE").promised
    wal_off = get_sut("sqlite:journal=wal,sync=off")
    assert "checkpoint" in wal_off.guarantee("DB-ATOMIC").rule
    assert "FULL" in get_sut("sqlite:journal=wal,sync=extra").guarantee("DB-ATOMIC").rule
    assert get_sut("sqlite:journal=memory,sync=normal").promises == ("DB-DURABLE", "DB-PREFIX")


def test_any_spelling_gets_the_canonical_name():
    assert (
        get_sut("sqlite:sync=NORMAL, journal=Truncate").name
        == "sqlite:journal=truncate,sync=normal"
    )
    full = "sqlite:journal=wal,sync=full,page=8192,autockpt=10,locking=exclusive,jlimit=0"
    assert (
        get_sut(
            "sqlite:jlimit=0,locking=EXCLUSIVE,autockpt=10,page=8192,sync=full,journal=wal"
        ).name
        == full
    )
    assert (
        get_sut(
            "sqlite:journal=wal,sync=full,page=4096,autockpt=1000,locking=normal,jlimit=-1"
        ).name
        == "sqlite:journal=wal,sync=full"
    )
    walopt = get_sut("sqlite:journal=wal,sync=full,walopt=100")
    assert walopt.name == "sqlite:journal=wal,sync=full,walopt=100"
    assert ("--wal-prealloc", "100") in walopt.runner_options
    assert ("--wal-autocheckpoint", "100") in walopt.runner_options


@pytest.mark.parametrize(
    "name, why",
    [
        ("sqlite:", "is not KEY=VALUE"),
        ("sqlite:journal=wal", "sync= is required"),
        ("sqlite:sync=full", "journal= is required"),
        (
            "sqlite:journal=fast,sync=full",
            "journal=fast (choose from delete, truncate, persist, wal, memory, off)",
        ),
        ("sqlite:journal=wal,sync=maybe", "sync=maybe (choose from off, normal, full, extra)"),
        ("sqlite:journal=wal,sync=full,sync=off", "sync given twice"),
        ("sqlite:journal=wal,sync=full,speed=fast", "unknown key 'speed'"),
        ("sqlite:journal=wal,sync=full,page=1000", "page=1000 (a power of two, 512..65536)"),
        ("sqlite:journal=wal,sync=full,page=big", "page=big is not an integer"),
        (
            "sqlite:journal=wal,sync=full,locking=shared",
            "locking=shared (choose from normal, exclusive)",
        ),
        ("sqlite:journal=delete,sync=full,autockpt=10", "autockpt is for journal=wal only"),
        ("sqlite:journal=wal,sync=full,autockpt=-1", "autockpt=-1"),
        ("sqlite:journal=truncate,sync=full,jlimit=0", "jlimit is for a journal that outlives"),
        ("sqlite:journal=delete,sync=full,jlimit=0", "jlimit is for a journal that outlives"),
        ("sqlite:journal=persist,sync=full,jlimit=-2", "jlimit=-2"),
        (
            "sqlite:journal=persist,sync=full,walopt=10",
            "walopt=N (1 <= N <= 65536) is for journal=wal only",
        ),
        ("sqlite:journal=wal,sync=full,walopt=10,autockpt=20", "walopt sets the checkpoint"),
        ("sqlite:journal=wal,sync=full,walopt=10,jlimit=0", "walopt sets the checkpoint"),
    ],
)
def test_a_bad_grammar_name_is_one_clear_line(name, why):
    with pytest.raises(CrashlabError) as e:
        get_sut(name)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"bad SUT {name!r}: ") and why in msg, msg
    assert "(grammar: sqlite:journal=delete|truncate|persist|wal|memory|off," in msg


def test_exclusive_delete_takes_a_journal_limit():
    sut = get_sut("sqlite:journal=delete,sync=full,locking=exclusive,jlimit=0")
    assert ("--journal-size-limit", "0") in sut.runner_options
    assert ("--locking-mode", "EXCLUSIVE") in sut.runner_options


# --- known weaknesses (issue 28, item 5): beside the promises ---------------

# Per journal, per sync (off, normal, full, extra): what a power-loss sweep
# must keep finding, derived from WEAKNESSES (- none; A = DB-ATOMIC,
# DB-INTEGRITY, DB-OPEN; D = DB-DURABLE).  A table edit shows here.
WEAK = {
    "delete": ("-", "-", "D", "-"),
    "truncate": ("-", "D", "-", "-"),
    "persist": ("-", "-", "-", "-"),
    "wal": ("-", "-", "-", "-"),
    "memory": ("-", "A", "A", "A"),
    "off": ("-", "A", "A", "A"),
}
SHOWN = {(): "-", ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"): "A", ("DB-DURABLE",): "D"}


def test_the_grid_weaknesses_are_derived():
    got = {
        j: tuple(SHOWN[get_sut(f"sqlite:journal={j},sync={s}").weaknesses] for s in SYNCS)
        for j in JOURNALS
    }
    assert got == WEAK
    every_weakness = {w.shows for w in WEAKNESSES}
    assert every_weakness == {k for k in SHOWN if k}  # each table row matters


def test_a_weakness_is_never_promised():
    """Every SQLite configuration the options can spell (and every named
    SUT) is built, and building one whose weakness it promises fails."""
    for c in grid():
        for extra in ("", ",locking=exclusive", ",page=1024", ",syncretry=1", ",cksum=1"):
            sut = get_sut(c.name + extra)
            assert not set(sut.weaknesses) & set(sut.promises), sut.name
            assert not set(sut.error_weaknesses) & set(sut.error_promises), sut.name
    with pytest.raises(ValueError, match="both promised and a weakness"):
        replace(get_sut("sqlite-delete-extra"), weaknesses=("DB-DURABLE",))
    with pytest.raises(ValueError, match="both promised and a weakness"):
        replace(get_sut("sqlite-wal-full"), error_weaknesses=("ERR-DURABLE",))


def test_exclusive_delete_loses_the_weakness_it_no_longer_has():
    assert get_sut("sqlite:journal=delete,sync=full,locking=exclusive").weaknesses == ()
    assert get_sut("off-opt").weaknesses == get_sut("sqlite-off").weaknesses  # OFF_OPT


def test_the_hand_named_weaknesses():
    assert (
        get_sut("dhl-nolog").weaknesses
        == get_sut("dhl-nolog-raw").weaknesses
        == ("DB-ATOMIC", "DB-OPEN", "DB-INTEGRITY")
    )
    assert get_sut("maw-full").weaknesses == ("DB-DURABLE",)
    assert "DB-ATOMIC" in get_sut("maw-noioctl").weaknesses
    assert "DB-DURABLE" in get_sut("dash-rename-first").weaknesses
    safe = [n for n, s in SUTS.items() if set(s.promises) == set(DB_INVARIANTS)]
    assert safe and not any(SUTS[n].weaknesses for n in safe)


def test_error_weaknesses():
    swallows = get_sut("sqlite:journal=wal,sync=full,syncretry=1")
    assert swallows.error_weaknesses[0] == "ERR-DURABLE"
    assert get_sut("sqlite-off").error_weaknesses == ("ERR-ATOMIC",)
    assert get_sut("sqlite-wal-full").error_weaknesses == ()
    assert not any(s.error_weaknesses for s in SUTS.values() if s.engine == "dhl")


def test_torn_waived():
    assert get_sut("dhl-cc").torn_waived == TORN_WAIVED
    assert get_sut("dhl-tc").torn_waived == get_sut("sqlite-wal-full").torn_waived == ()


@pytest.mark.parametrize("kind", ["lost-flush", "misdirect", "corrupt"])
def test_a_fault_weakness_is_never_promised_under_the_fault(kind):
    for sut in [
        *SUTS.values(),
        *(get_sut(n) for n in sqlite_grid()),
        get_sut("sqlite:journal=delete,sync=extra,cksum=1"),
    ]:
        waived, added = promised_under(sut, (kind,))
        under = {i for i in sut.promises if i not in waived} | set(added)
        assert not set(fault_weaknesses(sut, kind)) & under, (sut.name, kind)


def test_fault_weaknesses():
    cksum = get_sut("sqlite:journal=delete,sync=extra,cksum=1")
    assert fault_weaknesses(cksum, "misdirect") == ("CORRUPT-DETECT",)
    assert fault_weaknesses(cksum, "corrupt") == ()  # detected: promised there
    assert fault_weaknesses(get_sut("sqlite-wal-full"), "corrupt") == ()  # reported only
    assert fault_weaknesses(get_sut("sqlite-wal-normal"), "lost-flush") == ()  # not promised
    assert fault_weaknesses(get_sut("xlog"), "lost-flush") == ()  # not measured
    with pytest.raises(ValueError, match="not a state fault"):
        fault_weaknesses(cksum, "eio")
