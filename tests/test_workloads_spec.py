"""Workload specs, deterministic generation, the op stream format and the
synthetic app profiles."""

from __future__ import annotations

import pytest

from harness.errors import CrashlabError
from workloads import opstream
from workloads.apps import PROFILES
from workloads.generate import generate, opstream_bytes
from workloads.opstream import DELETE, INSERT, SELECT, UPDATE
from workloads.spec import AppSpec, MobibenchSpec, parse_spec

SPECS = [
    "insert:txns=30,ops=4,size=128,order=rand,tables=2,warmup=10,seed=3",
    "insert",
    "update:order=rand,txns=50",
    "delete:order=seq,txns=40,ops=2",
    "app:gmail,txns=20,seed=2",
    "app:kakaotalk,txns=80",
]


@pytest.mark.parametrize("text", SPECS)
def test_canonical_form_round_trips(text):
    spec = parse_spec(text)
    assert parse_spec(str(spec)) == spec
    assert str(parse_spec(str(spec))) == str(spec)


def test_defaults_follow_mobibench():
    assert parse_spec("insert") == MobibenchSpec("insert", 100, 1, 100, "seq", 3, 0, 1)
    assert parse_spec("update").warmup == 300
    assert MobibenchSpec("update").warmup_rows == 300  # resolved, never None
    # delete pre-fills enough rows for every delete that lands on one table
    assert parse_spec("delete:txns=1000,tables=2").warmup == 500
    assert parse_spec("app:facebook") == AppSpec("facebook", 100, 200, 1)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("scan:txns=3", ["unknown workload kind 'scan'", "insert, update, delete", "app:gmail"]),
        ("insert:rows=3", ["unknown key 'rows'", "txns, ops, size, order, tables, warmup, seed"]),
        ("insert:txns", ["not KEY=VALUE", "txns, ops"]),
        ("insert:order=zigzag", ["bad order 'zigzag'", "seq, rand"]),
        ("insert:txns=ten", ["bad txns 'ten'", "integer"]),
        ("insert:txns=0", ["bad txns 0", "1..10000000"]),
        ("insert:ops=5000", ["bad ops 5000", "1..4096"]),
        ("insert:txns=1,txns=2", ["given twice"]),
        ("app:myspace", ["unknown app 'myspace'", "gmail, facebook, hangout, kakaotalk"]),
        ("app:gmail,ops=3", ["unknown key 'ops'", "txns, warmup, seed"]),
        ("delete:txns=100,warmup=5", ["needs warmup>=34"]),
        ("update:warmup=0", ["needs warmup>=1"]),
    ],
)
def test_bad_specs_name_the_valid_choices(text, needles):
    with pytest.raises(CrashlabError) as e:
        parse_spec(text)
    msg = str(e.value)
    assert "\n" not in msg
    for needle in needles:
        assert needle in msg


@pytest.mark.parametrize("text", SPECS)
def test_same_seed_byte_identical_stream(text):
    assert opstream_bytes(parse_spec(text)) == opstream_bytes(parse_spec(text))


def _rows(data: bytes) -> tuple[list[int], list[bytes]]:
    _, _, records = opstream.decode(data)
    keys, values = [], []
    for r in records:
        if r.op in (INSERT, UPDATE, DELETE, SELECT):
            keys.append(r.key)
            values.append(r.value)
    return keys, values


@pytest.mark.parametrize(
    "text", ["insert:order=rand", "update:order=rand", "delete:order=rand", "app:hangout"]
)
def test_different_seed_different_keys_and_values(text):
    a = _rows(opstream_bytes(parse_spec(text + ",seed=1")))
    b = _rows(opstream_bytes(parse_spec(text + ",seed=2")))
    assert a[0] != b[0]
    assert a[1] != b[1]


def test_sequential_insert_keys_continue_after_warmup():
    keys, values = _rows(opstream_bytes(parse_spec("insert:txns=4,tables=2,warmup=3")))
    # warm-up: keys 1..3 in t0 then t1; then ops alternate tables: t0 4, t1 4, t0 5, t1 5
    assert keys == [1, 2, 3, 1, 2, 3, 4, 4, 5, 5]
    assert all(len(v) == 100 for v in values)


def test_stream_layout_and_index():
    spec = parse_spec("update:txns=5,ops=3,warmup=4,tables=2")
    data = opstream_bytes(spec)
    ntables, ntxns, records = opstream.decode(data)
    recs = list(records)
    assert (ntables, ntxns) == (2, 5)
    assert [r.op for r in recs[:1]] == [opstream.BEGIN] and recs[0].txn == 0
    marks = [r.label for r in recs if r.op == opstream.MARK]
    assert marks == ["setup-done"]
    begins = [r for r in recs if r.op == opstream.BEGIN and r.txn > 0]
    assert [r.txn for r in begins] == [1, 2, 3, 4, 5]
    assert recs[-1].op == opstream.END and recs[-1].txn == 5
    # Any damage is caught by the decoder.
    for bad in (data[:-1], data + b"\0", b"XXOPSTRM" + data[8:]):
        with pytest.raises(CrashlabError):
            list(opstream.decode(bad)[2])


def test_no_warmup_means_no_setup_transaction():
    data = opstream_bytes(parse_spec("insert:txns=2"))
    recs = list(opstream.decode(data)[2])
    assert recs[0].op == opstream.MARK and recs[0].label == "setup-done"


def test_operations_target_existing_rows():
    """Every update/delete/select names a live row, every insert a new key."""
    for text in [
        "update:order=rand,txns=300",
        "delete:order=rand,txns=300",
        "app:gmail,txns=60",
        "app:facebook,txns=300,warmup=0",
        "app:kakaotalk,txns=300,warmup=1",
    ]:
        setup, txns = generate(parse_spec(text))
        live: set[tuple[int, int]] = set()
        for txn in [setup, *txns]:
            for op, t, k, _ in txn.ops:
                if op == INSERT:
                    assert (t, k) not in live
                    live.add((t, k))
                else:
                    assert (t, k) in live, (text, txn.number, op, t, k)
                    if op == DELETE:
                        live.remove((t, k))


@pytest.mark.parametrize("app", sorted(PROFILES))
def test_app_profiles_match_published_shape(app):
    prof = PROFILES[app]
    _, txns = generate(parse_spec(f"app:{app},txns=4000,seed=7"))
    sizes, single_select, single_update = [], 0, 0
    for txn in txns:
        sizes.append(len(txn.ops))
        if len(txn.ops) == 1 and txn.ops[0][0] == SELECT:
            single_select += 1
        if len(txn.ops) == 1 and txn.ops[0][0] == UPDATE:
            single_update += 1
    mean = sum(sizes) / len(sizes)
    assert abs(mean - prof.published_ops_per_txn) / prof.published_ops_per_txn < 0.07, mean
    multi = sum(1 for s in sizes if s > 1) / len(sizes)
    if app == "gmail":
        assert multi > 0.6
    if app == "facebook":
        assert abs(single_select / len(sizes) - 0.70) < 0.03
    if app == "hangout":
        assert abs(single_select / len(sizes) - 0.50) < 0.03
        assert abs(single_update / len(sizes) - 0.20) < 0.03
    if app == "kakaotalk":
        assert single_update / len(sizes) > 0.5
