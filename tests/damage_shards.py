"""Damaged inputs (tests/damage.py) of a shard folder (``sweep --shard
1/1``) given to ``crashlab merge`` or ``crashlab report``: its summary.json,
violations.jsonl and run folders."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

from damage_folders import WRONG
from damage_run import ANY, REFUSE, Damage

CELL_FIELDS = [
    "sut",
    "workload",
    "fs",
    "strategy",
    "run",
    "states",
    "verdicts",
    "expectation",
    "faults",
    "coverage",
]
RUN_PATHS = [
    "../x",
    "/etc",
    "runs/../../x",
    "runs",
    "runs/a/b",
    "",
    ".",
    "runs/nope",
    "runs/" + "x" * 300,
    7,
    None,
    ["runs/x"],
]


# long: one branch per kind of damage, picked by one seeded draw (the draws' order is the seed's)
def _shard_damages(rng: random.Random, shard: Path) -> Damage:
    """One damage of a real shard folder (``sweep --shard 1/1``) given to
    ``crashlab merge`` or ``crashlab report``."""
    summary = json.loads((shard / "summary.json").read_text())
    pick = rng.randrange(7)
    expect = REFUSE
    if pick == 0:  # a cell field of another type (or gone)
        i = rng.randrange(len(summary["cells"]))
        key = rng.choice(CELL_FIELDS)
        v = rng.choice(WRONG + ["__gone__"])
        cell = summary["cells"][i]
        if v == "__gone__":
            cell.pop(key, None)
        else:
            cell[key] = v
        what = f"cell {i} {key} = {json.dumps(v)[:30]}"
        if (
            key in ("faults", "coverage")
            or (key == "verdicts" and v == {})
            or (key in ("sut", "workload", "fs", "strategy") and isinstance(v, str))
        ):
            expect = ANY  # optional, or a value of the field's type
    elif pick == 1:
        v = rng.choice(RUN_PATHS)
        summary["cells"][0]["run"] = v
        what = f"cell run = {json.dumps(v)[:40]}"
    elif pick == 2:  # a nested count or line of the wrong type
        cell = summary["cells"][0]
        where, v = rng.choice(
            [
                ("states.checked", "x"),
                ("states.folded", -1),
                ("verdicts.DB-OPEN", {"fail": "1"}),
                ("verdicts", []),
                ("expectation.ok", "yes"),
                ("expectation.broken", [1]),
                ("states.checked", True),
                ("verdicts.X", {"fail": 10**30}),
            ]
        )
        head, _, tail = where.partition(".")
        if tail:
            cell[head][tail] = v
        else:
            cell[head] = v
        what = f"cell {where} = {json.dumps(v)[:30]}"
        expect = ANY if where == "verdicts.X" else REFUSE
    elif pick == 3:
        key, v = rng.choice(
            [
                ("shard", {"matrix": "m", "index": 2, "of": 1}),
                ("shard", {"matrix": 1, "index": 1, "of": 1}),
                ("shard", {"index": "1", "of": 1, "matrix": "m"}),
                ("shard", None),
                ("cells", {}),
                ("cells", None),
                ("sweep", 3),
                ("shard", {"matrix": "m", "index": 1, "of": 10**30}),
            ]
        )
        summary[key] = v
        what = f"{key} = {json.dumps(v)[:40]}"
    elif pick == 4:
        text = rng.choice(['{"cells": [', "[]", "\xff", '{"x": NaN}', "[" * 100000, ""])
        what = f"summary.json {text[:20]!r}"
        summary = None
        raw_summary = text
    elif pick == 5:  # violations.jsonl damaged
        what = rng.choice(
            [
                "violations: a line not JSON",
                "violations: a line a list",
                "violations: an extra line",
                "violations: not UTF-8",
                "violations: a FIFO",
            ]
        )
    else:  # the run folder: a link out, a FIFO
        what = rng.choice(
            [
                "run folder: a symlink out",
                "run folder: a FIFO inside",
                "run folder: a symlink to /etc/passwd as meta.json",
                "summary.json a FIFO",
                "summary.json a symlink to /dev/zero",
            ]
        )
    command = rng.choice(["merge", "merge", "report"])

    def make(folder: Path) -> list[str]:
        dst = folder / "shard"
        shutil.copytree(shard, dst, symlinks=True)
        runs = sorted((dst / "runs").iterdir())
        if summary is not None:
            (dst / "summary.json").write_text(json.dumps(summary))
        elif pick == 4:
            (dst / "summary.json").write_bytes(raw_summary.encode("utf-8", "surrogateescape"))
        v = dst / "violations.jsonl"
        if what == "violations: a line not JSON":
            v.write_text("{not json\n")
        elif what == "violations: a line a list":
            v.write_text("[1]\n")
        elif what == "violations: an extra line":
            v.write_text(v.read_text() + '{"repro": "x"}\n')
        elif what == "violations: not UTF-8":
            v.write_bytes(b"\xff\xfe\n")
        elif what == "violations: a FIFO":
            v.unlink()
            os.mkfifo(v)
        elif what == "run folder: a symlink out":
            (runs[0] / "escape").symlink_to("/etc")
        elif what == "run folder: a FIFO inside":
            os.mkfifo(runs[0] / "pipe")
        elif what == "run folder: a symlink to /etc/passwd as meta.json":
            (runs[0] / "meta.json").unlink()
            (runs[0] / "meta.json").symlink_to("/etc/passwd")
        elif what == "summary.json a FIFO":
            (dst / "summary.json").unlink()
            os.mkfifo(dst / "summary.json")
        elif what == "summary.json a symlink to /dev/zero":
            (dst / "summary.json").unlink()
            (dst / "summary.json").symlink_to("/dev/zero")
        if command == "report":
            return ["report", str(dst)]
        return ["merge", "--out", str(folder / "merged"), str(dst)]

    # (a report of a folder whose run folder or violations are damaged or
    # missing says so; it reads neither the shard's i/N nor its name's type)
    if command == "report" and (
        what.startswith(("run folder", "violations", "shard =", "sweep ="))
        or what.endswith('"runs/nope"')
    ):
        expect = ANY
    return Damage("shard", f"{command}: {what}", expect, make)
