"""Fault specs are parsed once, where they enter, and printed only where
they leave (harness/faults.py; issue 28, item 6).

* Every spec form round-trips: for each kind, operation, set of keys (in
  either order), with default and other values, the parsed fault prints as
  the canonical spelling this test builds on its own (keys in the table's
  order, defaults left out), and that spelling parses to the same fault.
* Hostile text is a one-line CrashlabError, never another exception: a
  list of known traps, and a seeded fuzz over the grammar's characters.
* Only the edges call the parser: an AST scan of harness/, checkers/,
  workloads/ and dhl/ for the names ``parse_fault``/``parse_faults``
  (imports, calls, references) finds them in :data:`EDGES` alone, and every
  edge listed still uses it (the list stays true).
* The edges themselves: meta.json parses its faults (a bad one names the
  file in one line) and writes them back canonically; the ``--fault``
  option refuses a bad one in one line; the options' JSON prints the specs.
"""

from __future__ import annotations

import ast
import itertools
import json
import random
from pathlib import Path

import pytest
from support import crashlab

from harness.errors import CrashlabError
from harness.faults import (
    DEFAULTS,
    FLAGS,
    KINDS,
    Fault,
    by_stage,
    fault_specs,
    format_fault,
    format_faults,
    parse_fault,
    parse_faults,
)
from harness.rundir import RunDir, RunMeta
from harness.states import Options
from harness.states.synth import write_epochs_log

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "checkers", "workloads", "dhl")
PARSERS = ("parse_fault", "parse_faults")

# module (path from the repository root) -> the input it parses
EDGES: dict[str, str] = {
    "harness/faults.py": "the grammar itself",
    "harness/rundir.py": "meta.json (RunMeta.from_json)",
    "harness/cli/params.py": "the --fault option of record, states and check",
    "harness/sweep/matrixfile.py": "a matrix file's `faults`",
    "harness/sweep/matrix.py": "the built-in matrix's literal faults",
    "harness/mutants.py": "the mutant catalogue's `faults` (tests/mutants/catalogue.toml)",
}

# key -> [(text given, canonical value)]: one ordinary value and the edge ones
VALUES: dict[str, list[tuple[str, str]]] = {
    "after": [("txn-begin:5", "txn-begin:5")],
    "at": [("txn-ack:3", "txn-ack:3")],
    "nth": [("1", "1"), ("02", "2"), ("18446744073709551615", "18446744073709551615")],
    "range": [("4K-1M", "4096-1048576"), ("0-1", "0-1")],
    "left": [("96K", "98304"), ("0", "0"), ("2g", "2147483648")],
    "seed": [("0", "0"), ("7", "7")],
    "bits": [("1", "1"), ("4096", "4096")],
    "file": [("db", "db"), ("wal", "wal")],
}
# the defaults as the module comment of harness/faults.py documents them
DOCUMENTED_DEFAULTS = {
    "eio": {"nth": "1"},
    "misdirect": {"seed": "0", "file": "db"},
    "corrupt": {"seed": "0", "bits": "1", "file": "db"},
}


def spec_forms() -> list[tuple[str, str]]:
    """``(text, canonical)`` for every kind, operation and set of keys,
    each key with each of its values, given in table and reversed order."""
    out = []
    for kind, (_, ops, keys, required) in KINDS.items():
        for op in ops or ("",):
            head = f"{kind}:{op}" if op else kind
            for n in range(len(keys) + 1):
                for chosen in itertools.combinations(keys, n):
                    if not set(required) <= set(chosen) or (op == "flush" and "range" in chosen):
                        continue
                    choices = [
                        [(k, None, None)] if k in FLAGS else [(k, t, c) for t, c in VALUES[k]]
                        for k in chosen
                    ]
                    for combo in itertools.product(*choices):
                        items = [k if t is None else f"{k}={t}" for k, t, _ in combo]
                        canon = [
                            k if c is None else f"{k}={c}"
                            for k, _, c in combo
                            if c is None or DOCUMENTED_DEFAULTS.get(kind, {}).get(k) != c
                        ]
                        for order in (items, items[::-1]):
                            out.append((",".join([head, *order]), ",".join([head, *canon])))
    return out


def test_every_spec_form_round_trips() -> None:
    forms = spec_forms()
    assert len(forms) > 200 and {t.partition(",")[0].partition(":")[0] for t, _ in forms} == set(
        KINDS
    )
    for text, canonical in forms:
        f = parse_fault(text)
        assert format_fault(f) == str(f) == canonical, text
        assert parse_fault(canonical) == f and format_fault(parse_fault(canonical)) == canonical
        assert all(v != DEFAULTS.get(f.kind, {}).get(k) for k, v in f.params)
    joined = [parse_fault(t) for t, _ in forms[:40]]
    assert parse_faults(format_faults(tuple(joined))) == tuple(dict.fromkeys(joined))
    assert parse_faults([format_fault(f) for f in joined] * 2) == tuple(dict.fromkeys(joined))


def test_the_typed_fault_answers_without_the_string() -> None:
    f = parse_fault("eio:write,after=txn-begin:5,range=4K-8K,sticky")
    assert (f.where, f.get("nth"), f.get("range"), f.get("sticky")) == (
        "device",
        1,
        (4096, 8192),
        True,
    )
    assert parse_fault("eio:flush").get("sticky") is False
    assert (
        Fault("corrupt") == parse_fault("corrupt,seed=0,bits=1")
        and str(Fault("corrupt")) == "corrupt"
    )
    mixed = parse_faults("lost-flush+eio:flush+process-crash,at=x")
    assert [by_stage(mixed, w)[0].kind for w in ("state", "device", "process")] == [
        "lost-flush",
        "eio",
        "process-crash",
    ]


HOSTILE = [
    "",
    ",",
    ":",
    "eio:",
    "eio:write,",
    "eio:write,,",
    "eio:write,nth=",
    "eio:write,=1",
    "eio:write,nth=-1",
    "eio:write,nth=1e3",
    "eio:write,nth=0x10",
    "eio:write,nth= 1",
    "eio:write,nth=1,nth=2",
    "corrupt,seed=\u00b2",
    "eio:write,nth=\u0663",  # ², Arabic 3
    "enospc,left=1\u212a",  # the Kelvin sign, which re.IGNORECASE takes for K
    "enospc,left=\uff11",  # a full-width 1
    "corrupt,seed=" + "9" * 5000,  # beyond int()'s digit limit
    "enospc,left=" + "9" * 5000,
    "enospc,left=17179869184G",
    "corrupt,seed=18446744073709551616",
    "corrupt,bits=0",
    "corrupt,bits=4097",
    "enospc,left=1T",
    "enospc,left=-1",
    "eio:write,range=5-5",
    "eio:write,range=-",
    "eio:write,range=1-2-3",
    "eio:read,range=4K",
    "eio:write,after=",
    "eio:write,after=a b",
    "eio:write,after=x+y",
    "process-crash,at=a\nb",
    "process-crash,at=" + "m" * 600,
    "corrupt\x00",
    "corrupt,seed=1\x00",
    "EIO:write",
    "eio:WRITE",
    "lost-flush:",
    "misdirect,bits=1",
    "enospc",
    "process-crash",
    "corrupt,seed",
    "eio:write,sticky=1",
    "\u202eeio:write",
    "eio:write,after=txn\udcff",
]


@pytest.mark.parametrize("text", HOSTILE, ids=[str(i) for i in range(len(HOSTILE))])
def test_hostile_specs_are_one_line_errors(text: str) -> None:
    with pytest.raises(CrashlabError) as e:
        parse_fault(text)
    assert str(e.value).startswith("bad fault ") and "\n" not in str(e.value)


def test_fuzzed_specs_parse_and_round_trip_or_fail_in_one_line() -> None:
    """Random text over the grammar's characters (and a few traps): a spec
    that parses round-trips; any other is a one-line CrashlabError."""
    rng = random.Random(28)
    words = [
        *KINDS,
        *(k for v in KINDS.values() for k in v[2]),
        "write",
        "flush",
        "read",
        ":",
        ",",
        "=",
        "-",
        "+",
        "K",
        "G",
        "0",
        "1",
        "4096",
        "9" * 25,
        "\u00b2",
        " ",
        "\n",
    ]
    parsed = 0
    for _ in range(4000):
        text = "".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        try:
            faults = parse_faults(text)
        except CrashlabError as e:
            assert "\n" not in str(e), text
            continue
        parsed += 1
        assert parse_faults(format_faults(faults)) == faults, text
    assert parsed > 50  # the fuzz reaches the parse, not only the first check


# --- only the edges parse ------------------------------------------------------


def parser_uses(root: Path) -> dict[str, list[int]]:
    """Module path -> the lines that import, call or name a parser of fault
    specs (:data:`PARSERS`), over the packages under ``root``."""
    out: dict[str, list[int]] = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            lines = [
                node.lineno
                for node in ast.walk(tree)
                if (isinstance(node, ast.Name) and node.id in PARSERS)
                or (isinstance(node, ast.Attribute) and node.attr in PARSERS)
                or (isinstance(node, ast.ImportFrom) and any(a.name in PARSERS for a in node.names))
                or (isinstance(node, ast.FunctionDef) and node.name in PARSERS)
            ]
            if lines:
                out[path.relative_to(root).as_posix()] = sorted(set(lines))
    return out


def test_only_the_edges_parse_fault_specs() -> None:
    uses = parser_uses(ROOT)
    inside = {m: lines for m, lines in uses.items() if m not in EDGES}
    assert not inside, (
        f"fault specs parsed away from the edges (pass the parsed Fault objects instead): {inside}"
    )
    stale = sorted(set(EDGES) - set(uses))
    assert not stale, f"EDGES lists modules that no longer parse fault specs: {stale}"


# --- the edges -----------------------------------------------------------------


def test_meta_json_parses_its_faults_and_writes_them_canonically() -> None:
    meta = RunMeta.from_json({"fs": "ext4", "faults": ["eio:write,nth=1,after=go", "corrupt"]})
    assert meta.faults == (parse_fault("eio:write,after=go"), Fault("corrupt"))
    assert meta.to_json()["faults"] == ["eio:write,after=go", "corrupt"]
    assert "faults" not in RunMeta.from_json({"fs": "ext4"}).to_json()


@pytest.mark.parametrize(
    "faults,why",
    [
        (["bogus"], "faults[0]: bad fault 'bogus': unknown kind"),
        (["corrupt", 3], "faults[1]: 3 is not a fault spec"),
        ("corrupt", "is not a list"),
    ],
)
def test_a_bad_fault_in_meta_json_is_one_line(tmp_path: Path, faults: object, why: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"fs": "ext4", "faults": faults}))
    with pytest.raises(CrashlabError) as e:
        RunDir(run).meta()
    assert why in str(e.value) and "meta.json" in str(e.value) and "\n" not in str(e.value)


def test_options_print_their_faults_only_as_json() -> None:
    opts = Options(faults=parse_faults("corrupt,seed=0,bits=2+lost-flush,nth=1"))
    assert opts.record()["faults"] == ["corrupt,bits=2", "lost-flush,nth=1"]
    assert opts.to_json()["faults"] == fault_specs(opts.faults)
    assert "faults" not in Options().record() and Options().to_json()["faults"] == []


@pytest.mark.parametrize(
    "fault,why",
    [
        ("bitrot", "unknown kind 'bitrot'"),
        ("eio:write", "is a device fault"),
        ("corrupt+corrupt,seed=3", "two corrupt faults"),
        ("corrupt,seed=\u00b2", "seed must be an integer"),
    ],
)
def test_the_fault_option_refuses_in_one_line(tmp_path: Path, fault: str, why: str) -> None:
    log = tmp_path / "e.log"
    write_epochs_log(log, [2, 1])
    p = crashlab("states", str(log), "--count", "--fault", "corrupt", "--fault", fault)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("crashlab: error: ") and why in p.stderr
    ok = crashlab(
        "states", str(log), "--count", "--fault", "corrupt+lost-flush", "--fault", "corrupt,seed=0"
    )
    assert ok.returncode == 0, ok.stderr
