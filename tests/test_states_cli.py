"""``crashlab states``: listing, counts, one state by ID, errors."""

from __future__ import annotations

import json

from support import crashlab

from harness.states.synth import write_epochs_log


def test_states_command(tmp_path):
    log = tmp_path / "w.log"
    write_epochs_log(log, [2, 3])
    res = crashlab("states", str(log), "--strategy", "reorder", "--no-dedup")
    assert res.returncode == 0
    assert res.stdout.split() == [
        "e0.p0",
        "e0.p1",
        "e0.p2",
        "e0.k1",
        "e1.p0",
        "e1.p1",
        "e1.p2",
        "e1.p3",
        "e1.k1-2",
        "e1.k0,2",
        "e1.k2",
        "e1.k1",
    ]
    assert "12 states (12 generated, 0 folded) over 2 epochs" in res.stderr
    # per epoch, each prefix and the next write torn on it (7 tears a write):
    # (2+1+2*7) + (3+1+3*7) = 42; the budget affords the reorder kept sets
    # too: 1 + 4 more
    res = crashlab("states", str(log), "--strategy", "torn", "--count", "--budget", "off")
    assert res.returncode == 0 and res.stdout.startswith("torn: 42 states"), res.stdout
    res = crashlab("states", str(log), "--strategy", "torn", "--count")
    assert res.returncode == 0 and res.stdout.startswith("torn: 47 states"), res.stdout
    res = crashlab("states", str(log), "--json", "--window-start", "txn-ack:1")
    recs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["id"] for r in recs] == ["e1.p0", "e1.p1", "e1.p2", "e1.p3"]
    assert recs[0]["acked"] == 1 and recs[0]["cut"] == [4, 9]
    res = crashlab("states", str(log), "--show", "e1.k0,2")
    assert res.returncode == 0
    assert json.loads(res.stdout)["dropped"] == [7]


def test_states_command_errors(tmp_path):
    log = tmp_path / "w.log"
    write_epochs_log(log, [2])
    for args, why in [
        (["--show", "e0.k0-1"], "a prefix is written 'e0.p2'"),
        (["--show", "e5.p0"], "no epoch 5"),
        (["--window-end", "nope"], "no mark named 'nope'"),
        (["--tear-unit", "100"], "power of two"),
    ]:
        res = crashlab("states", str(log), *args)
        assert res.returncode == 2, args
        assert res.stderr.startswith("crashlab: error:") and why in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    res = crashlab("states", str(tmp_path / "missing"))
    assert res.returncode == 2 and "no such run directory or log" in res.stderr
