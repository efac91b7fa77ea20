"""Damaged inputs for the real ``crashlab`` command: a seeded generator over
four kinds -- a run folder's ``writes.log``, its ``meta.json``, matrix files
and command lines -- and the runner that feeds each to the command under a
memory and a time cap (tests/test_damaged_input.py; ``make fuzz``).  The
damages of a run folder (writes.log, meta.json) are in damage_folders.py,
those of a shard folder in damage_shards.py, the runner in damage_run.py;
matrix files and command lines here.

Each damage is classified: ``REFUSE`` when the folder (or file, or command
line) is inconsistent and must be refused with one error line and exit code
2 -- never a verdict -- and ``ANY`` when it may stay self-consistent (a
flipped payload byte, two entries swapped, a key with a default removed)
and so may be checked: exit 0, 1 or 2, but never a traceback and never a
hang.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Iterator
from pathlib import Path

from damage_folders import _log_damages, _meta_damages
from damage_run import ANY, KINDS, MEMORY_CAP, REFUSE, Damage, run_all, table
from damage_shards import _shard_damages

__all__ = ["KINDS", "MATRIX", "MEMORY_CAP", "damages", "run_all", "table"]


# --- matrix files -----------------------------------------------------------

MATRIX = """[workloads]
TINY = "insert:txns=2,ops=1,tables=1,seed=1"

[[cell]]
sut = "dhl-tc-raw"
workload = "TINY"
fs = "raw"
strategies = ["prefix"]
"""
BAD_VALUES = [
    "1",
    "-1",
    "0",
    '""',
    '"nope"',
    "[]",
    "[1]",
    "{}",
    "{ a = 1 }",
    "true",
    "1.5",
    '"../../etc"',
    '"' + "x" * 5000 + '"',
    "1970-01-01",
    "nan",
    "inf",
    '"\\u0000"',
    '["prefix", 1]',
    "[[1]]",
    "{ sample = -1 }",
    '{ sample = "x" }',
    "{ max_drop = 1e300 }",
    '"sqlite:journal=X"',
    '"lost-flush,nth=-1"',
    '["corrupt,seed=x"]',
    '["lost-flush", "lost-flush"]',
    "9223372036854775808",
]
CELL_KEYS = [
    "sut",
    "workload",
    "fs",
    "strategies",
    "checkers",
    "must_violate_any",
    "waived",
    "faults",
    "backend",
    "blktrace",
    "states",
    "bogus",
]

# sections added to the matrix file (a top-level key goes above its tables)
SECTIONS = [
    "[sut.x]\nrun = 1\n",
    '[sut.x]\nrun = "true"\n',
    '[sut.sqlite-off]\nrun = "true"\nchecker = "true"\n',
    '[sut.y]\nrun = "true"\nchecker = "true"\ntimeout = -1\n',
    '[sut.y]\nrun = "true"\nchecker = "true"\nbogus = 1\n',
    "[workloads]\nX = 1\n",
    "workloads = 3\n",
    "cell = 3\n",
    "[[cell]]\n",
    '[[cell]]\nsut = "nope"\nworkload = "TINY"\n',
    "[other]\n",
    "sut = [1]\n",
]
# whole matrix files in place of MATRIX
WHOLE_FILES = [
    "",
    "\xff\xfe",
    "[[cell]]\n" * 3,
    "x" * 100,
    "[workloads]\n",
    MATRIX.replace("dhl-tc-raw", "sqlite-off"),  # needs a file system
    MATRIX.replace('"raw"', '"zfs"'),
    MATRIX.replace('TINY"\nfs', 'insert:txns=-3"\nfs'),
    MATRIX.replace("strategies", 'faults = ["bogus"]\nstrategies'),
]


def _sweep_argv(matrix_file: Path, folder: Path) -> list[str]:
    """The command line of a sweep of ``matrix_file`` into ``folder/out``."""
    return [
        "sweep",
        "--matrix",
        str(matrix_file),
        "--out",
        str(folder / "out"),
        "--no-progress",
        "--jobs",
        "1",
    ]


def _matrix_damages(rng: random.Random) -> Damage:
    """One damaged matrix file given to ``crashlab sweep --matrix``."""
    pick = rng.randrange(6)
    text = MATRIX
    if pick == 0:  # a TOML syntax error
        at = rng.randrange(len(text))
        text = text[:at] + rng.choice(["[", "]", "=", '"', "\n[[", "{", "\x00", "\\"]) + text[at:]
        what, expect = f"syntax: a character inserted at {at}", ANY
    elif pick == 1:
        key = rng.choice(CELL_KEYS)
        v = rng.choice(BAD_VALUES)
        text = "\n".join(line for line in text.splitlines() if not line.startswith(key + " "))
        text += f"\n{key} = {v}\n"
        what, expect = f"cell {key} = {v[:30]}", ANY
    elif pick == 2:
        text = text.replace('strategies = ["prefix"]', "strategies = []")
        what, expect = "strategies = []", REFUSE
    elif pick == 3:
        section = rng.choice(SECTIONS)
        text = (
            section + text
            if section.startswith(("workloads", "cell =", "sut ="))
            else text + "\n" + section
        )
        what, expect = f"section {section.splitlines()[0]!r}", ANY
    elif pick == 4:
        text = rng.choice(WHOLE_FILES)
        what, expect = f"whole file {text[:20]!r}", ANY
    else:
        special = rng.choice(["directory", "fifo", "missing", "symlink-dev", "binary"])

        def make_special(folder: Path) -> list[str]:
            path = folder / "m.toml"
            if special == "directory":
                path.mkdir()
            elif special == "fifo":
                os.mkfifo(path)
            elif special == "symlink-dev":
                path.symlink_to("/dev/zero")
            elif special == "binary":
                path.write_bytes(bytes(rng.randrange(256) for _ in range(200)))
            return _sweep_argv(path, folder)

        return Damage("matrix", f"matrix file a {special}", REFUSE, make_special)

    def make(folder: Path) -> list[str]:
        path = folder / "m.toml"
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        return _sweep_argv(path, folder)

    return Damage("matrix", what, expect, make)


# --- command lines ----------------------------------------------------------

NUMBERS = [
    "-3",
    "-1",
    "0",
    "1e3",
    "nan",
    "inf",
    "-inf",
    "x",
    "",
    "99999999999999999999",
    "1/0",
    " 1",
    "0x10",
    "1.5",
]
OPTIONS = {
    "check": [
        "--jobs",
        "--max-states",
        "--crashsafe-sample",
        "--max-first",
        "--depth",
        "--checker-timeout",
        "--max-exhaustive",
        "--max-drop",
        "--sample",
        "--seed",
        "--tear-unit",
        "--max-tears",
        "--strategy",
        "--then",
        "--window-start",
        "--window-end",
        "--fault",
        "--log-order",
        "--executor",
        "--scheduler",
        "--torn-pattern",
        "--checker",
        "--bogus",
    ],
    "states": [
        "--max-exhaustive",
        "--max-drop",
        "--sample",
        "--seed",
        "--tear-unit",
        "--max-tears",
        "--strategy",
        "--window-start",
        "--show",
        "--fault",
        "--log-order",
        "--bogus",
    ],
    "repro": ["--checker-timeout", "--checker", "--bogus"],
    "replay": ["--limit", "--end-mark", "--base", "--bogus"],
    "log show": ["--bogus", "--salvage"],
    "log stat": ["--bogus"],
    "sweep": [
        "--jobs",
        "--max-states",
        "--shard",
        "--backend",
        "--matrix",
        "--depth",
        "--max-first",
        "--bogus",
    ],
    "merge": ["--out", "--bogus"],
    "report": ["--bogus"],
    "record": ["--sut", "--workload", "--fs", "--backend", "--fault", "--bogus"],
}
TEXTS = [
    "",
    "nope",
    "x" * 4096,
    "-",
    "--",
    "e99999.p0",
    "e1.k",
    "../..",
    "/etc/passwd",
    "setup-done",
    "ünïcode",
    "lost-flush,nth=-1",
    "corrupt,bits=0",
    "a=b",
    "=cmd",
    "tcp://127.0.0.1:1",
    "1/0",
    "0/2",
    "3/2",
]


def _cli_damages(rng: random.Random, run: Path) -> Damage:
    """A command line with a bad option value (or a bad argument)."""
    cmd = rng.choice(sorted(OPTIONS))
    opt = rng.choice(OPTIONS[cmd])
    value = rng.choice(NUMBERS + TEXTS)

    def make(folder: Path) -> list[str]:
        out = str(folder / "out")
        head = cmd.split()
        target = {
            "check": [str(run)],
            "states": [str(run), "--count"],
            "repro": [str(run), "e1.p0"],
            "replay": [str(run), "--out", out],
            "log show": [str(run)],
            "log stat": [str(run)],
            "sweep": ["--matrix", str(folder / "m.toml"), "--out", out],
            "merge": [str(folder)],
            "report": [str(folder / "none")],
            "record": ["--out", out],
        }[cmd]
        if cmd == "sweep":
            (folder / "m.toml").write_text(MATRIX)
        if cmd in ("check", "sweep"):
            target += ["--no-progress", "--jobs", "1"] if opt != "--jobs" else ["--no-progress"]
        if cmd == "check":
            target += (
                ["--out", out, "--strategy", "prefix"]
                if opt not in ("--strategy",)
                else ["--out", out]
            )
        if cmd == "record" and opt not in ("--sut", "--workload"):
            target += (
                ["--sut", "dhl-tc-raw", "--fs", "raw", "--workload", "insert:txns=1"]
                if opt != "--fs"
                else ["--sut", "dhl-tc-raw", "--workload", "insert:txns=1"]
            )
        if opt == "--bogus":
            return [*head, *target, "--bogus"]
        if rng_flag:
            return [*head, *target, opt]  # the option without its value
        return [*head, *target, opt, value]

    rng_flag = rng.random() < 0.1
    if opt == "--bogus" or (rng_flag and opt not in FLAGS):
        expect = REFUSE
    else:
        expect = ANY if rng_flag else _cli_expect(opt, value)
    return Damage(
        "cli", f"{cmd} {opt} {value[:30]!r}" + (" (no value)" if rng_flag else ""), expect, make
    )


# the numeric options and their ranges (what the command line must refuse
# outside them): (type, lowest, highest)
RANGES: dict[str, tuple[type, float, float]] = {
    "--jobs": (int, 0, 1024),
    "--max-states": (int, 1, math.inf),
    "--max-first": (int, 1, math.inf),
    "--sample": (int, 1, math.inf),
    "--tear-unit": (int, 1, math.inf),
    "--crashsafe-sample": (int, 0, math.inf),
    "--max-drop": (int, 0, math.inf),
    "--max-tears": (int, 0, math.inf),
    "--limit": (int, 0, math.inf),
    "--max-exhaustive": (int, 0, 24),
    "--depth": (int, 2, 16),
    "--seed": (int, 0, 2**64 - 1),
    "--checker-timeout": (float, 1e-300, 86400),
}
FLAGS = {"--salvage"}


def _cli_expect(opt: str, value: str) -> str:
    """REFUSE for a value outside a numeric option's type or range."""
    spec = RANGES.get(opt)
    if spec is None:
        return ANY
    kind, lo, hi = spec
    try:
        v = kind(value)
    except ValueError:
        return REFUSE
    return ANY if math.isfinite(v) and lo <= v <= hi else REFUSE


def damages(
    kind: str,
    n: int,
    seed: int,
    runs: list[Path],
    devices: dict[Path, int],
    shard: Path | None = None,
) -> Iterator[Damage]:
    """``n`` damaged inputs of ``kind`` (seeded: the same list each time);
    ``shard``: a shard folder, for kind ``shard``."""
    rng = random.Random(f"{kind}-{seed}")
    for _ in range(n):
        run = rng.choice(runs)
        if kind == "shard":
            assert shard is not None
            yield _shard_damages(rng, shard)
        elif kind == "log":
            yield _log_damages(rng, run, devices[run])
        elif kind == "meta":
            yield _meta_damages(rng, run)
        elif kind == "matrix":
            yield _matrix_damages(rng)
        else:
            yield _cli_damages(rng, run)
