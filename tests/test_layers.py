"""Layers import one way: the layer plan of the design (its "Principles":
"layers import downward only, never back up and never in a circle"; issue
28, item 2), kept by a test.

The import graph of harness/, workloads/, checkers/ and dhl/ is read from
the code (``ast``, no module is imported) and held against the layer plan:

(a) no import runs from a lower layer to a higher one (``LAYERS``, bottom
    first; a file is on the layer of the longest path in the table that
    holds it, and every file must be on one);
(b) no circle: no two modules import each other, directly or round a loop
    (strongly connected components of more than one module), and no two
    folders one below a package (``harness/fs/``, ``harness/explain/``,
    ``checkers/native/`` ...) do either;
(c) none of the imports the plan names as never to exist (``NEVER``).

What counts as an import: every ``import`` and ``from ... import``
statement at any depth (in functions and under ``if TYPE_CHECKING:`` too),
relative ones resolved; ``from pkg import name`` imports the module
``pkg.name`` when there is one, else ``pkg``; ``importlib.import_module`` of
a literal name.  Not seen: imports of computed names (the file-system
registry, ``harness/fs/__init__.py``, imports every module of its folder;
``checkers/engines.py`` imports the checker a table names); both stay
inside one layer.  Importing ``a.b.c`` is an arrow to ``a/b/c.py`` alone,
not to the ``__init__.py`` files Python runs on the way.

C: in each folder of C sources (``C_FOLDERS``), the units (``x.c``) call
each other one way.  A unit uses another when it calls a function the
other defines (a definition: a line at column 0 that is not ``static`` and
names ``f(``, whose body follows; a name defined in two units of a folder,
such as each program's ``main``, belongs to none; a call: that name
followed by ``(`` anywhere else, comments and strings left out); the units
must hold no circle.  Macros and ``static inline`` helpers of a header
belong to no unit.

``KNOWN`` lists what exists today in files that are being reworked
elsewhere, each with why it is still there; the test fails on anything not
in it and on an entry that no longer occurs, so the list only shrinks.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "workloads", "checkers", "dhl")

# Bottom first.  A path ending in "/" is a folder (everything under it).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("engine", ("dhl/",)),  # the DHL engine: imports nothing of harness
    (
        "ground",
        (
            "harness/__init__.py",
            "harness/logformat.py",
            "harness/marks.py",
            "harness/faults.py",
            "harness/sysops.py",
            "harness/errors.py",
            "harness/atomic.py",
            "harness/env.py",
            "harness/outlock.py",
            "harness/confine.py",
        ),
    ),
    ("states", ("harness/states/",)),
    ("materialize", ("harness/materialize/",)),
    ("vm", ("harness/qemu/",)),  # the qemu guest runner: below fs and record, which use it
    ("fs", ("harness/fs/", "harness/explain/")),
    (
        "record",
        (
            "harness/record/",
            "harness/images.py",
            "harness/rundir.py",
            "harness/validate.py",
            "harness/filetrace.py",
        ),
    ),
    ("workloads", ("workloads/",)),
    ("checkers", ("checkers/",)),
    ("check", ("harness/check/",)),
    ("triage", ("harness/triage/",)),  # judges candidate states with the check stage
    ("report", ("harness/report/", "harness/paper/")),
    # the sweep drives record, check and report in turn: it sits above them
    ("sweep", ("harness/sweep/",)),
    ("face", ("harness/cli/", "harness/bench/", "harness/mutants.py", "harness/pytest_plugin.py")),
)

# (from layer, to layer, why): imports that must never exist, as the design
# names them.  Each is upward under LAYERS too; listed for its reason, and so
# that no reordering of LAYERS lets one through.
NEVER: tuple[tuple[str, str, str], ...] = (
    ("ground", "states", "the ground knows no layer above it"),
    ("states", "materialize", "states are names, not images"),
    ("materialize", "fs", "an image knows no file system"),
    ("fs", "record", "recovery knows nothing of recording"),
    ("fs", "check", "recovery is called, it does not call back"),
    ("record", "workloads", "the recorder knows no workload"),
    ("checkers", "check", "judges do not drive the pipeline"),
    ("check", "sweep", "a check knows no matrix"),
    ("report", "face", "reports know no CLI"),
    ("report", "sweep", "a report reads a sweep's files, not its code"),
    ("vm", "fs", "the guest runner is told what to load"),
    ("vm", "record", "the guest runner knows no recorder"),
)

# What exists today and is fixed elsewhere: finding -> why it is still here.
KNOWN: dict[tuple[str, ...], str] = {}


# --- the Python import graph ------------------------------------------------


def modules_of(root: Path, packages: Iterable[str]) -> dict[str, str]:
    """Dotted module name -> file path (relative to ``root``, with "/")."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root)
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = rel.as_posix()
    return out


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module a ``from`` statement of ``module`` names, relative ones resolved."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _imported_names(
    module: str, is_package: bool, tree: ast.AST
) -> Iterable[tuple[str, bool, int]]:
    """``(dotted name, may be a module's member, line)`` of every import."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, False, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, is_package, node)
            for alias in node.names:
                yield f"{base}.{alias.name}", True, node.lineno
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                getattr(node.func, "attr", None) == "import_module"
                or getattr(node.func, "id", None) in ("import_module", "__import__")
            )
        ):
            yield node.args[0].value, False, node.lineno


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, dict[str, int]]:
    """File -> {file it imports: line of the first such import}, for the
    modules of ``packages`` under ``root`` (imports of other modules left out)."""
    mods = modules_of(root, packages)
    graph: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        is_package = path.endswith("__init__.py")
        edges = graph.setdefault(path, {})
        tree = ast.parse((root / path).read_text(), filename=path)
        for target, member, line in _imported_names(name, is_package, tree):
            if member and target not in mods:
                target = target.rpartition(".")[0]  # a name defined in the module
            while target and target not in mods:
                target = target.rpartition(".")[0]  # a.b.c where only a.b is ours
            if target and mods[target] != path:
                edges.setdefault(mods[target], line)
    return graph


# --- the checks --------------------------------------------------------------


def layer_of(path: str, layers: Sequence[tuple[str, Sequence[str]]]) -> str | None:
    """The layer whose longest path holds ``path`` (None: no layer)."""
    best, length = None, -1
    for name, prefixes in layers:
        for p in prefixes:
            if (path == p or (p.endswith("/") and path.startswith(p))) and len(p) > length:
                best, length = name, len(p)
    return best


def circles(graph: Mapping[str, Iterable[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one node, each
    sorted (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.append(n)
                    if n == node:
                        break
                if len(comp) > 1:
                    out.append(tuple(sorted(comp)))
    return sorted(out)


def unit_of(path: str) -> str:
    """The folder of a file one below a package (``harness/fs/`` for
    ``harness/fs/ext4/fast.py``), or the file itself (``harness/env.py``,
    ``checkers/dhl.py``)."""
    parts = path.split("/")
    return "/".join(parts[:2]) + "/" if len(parts) > 2 else path


def findings(
    graph: Mapping[str, Mapping[str, int]],
    layers: Sequence[tuple[str, Sequence[str]]] = LAYERS,
    never: Sequence[tuple[str, str, str]] = NEVER,
) -> dict[tuple[str, ...], str]:
    """Everything wrong with ``graph`` under the plan: finding -> text.
    ("up", a, b): a imports b of a higher layer; ("never", a, b): an import
    the plan forbids; ("circle", *files) and ("unit circle", *units);
    ("no layer", a): a file on no layer."""
    rank = {name: i for i, (name, _) in enumerate(layers)}
    forbidden = {(a, b): why for a, b, why in never}
    out: dict[tuple[str, ...], str] = {}
    for src, targets in graph.items():
        la = layer_of(src, layers)
        if la is None:
            out[("no layer", src)] = f"{src} is on no layer (add it to LAYERS)"
            continue
        for dst, line in targets.items():
            lb = layer_of(dst, layers)
            if lb is None:
                continue  # reported as its own finding
            if rank[lb] > rank[la]:
                out[("up", src, dst)] = f"{src}:{line} ({la}) imports {dst} ({lb}), a higher layer"
            if (la, lb) in forbidden:
                out[("never", src, dst)] = (
                    f"{src}:{line} ({la}) imports {dst} ({lb}): "
                    f"never {la} -> {lb}: {forbidden[(la, lb)]}"
                )
    for comp in circles(graph):
        out[("circle", *comp)] = "modules import each other: " + ", ".join(comp)
    units: dict[str, set[str]] = {}
    for src, targets in graph.items():
        for dst in targets:
            if unit_of(src) != unit_of(dst):
                units.setdefault(unit_of(src), set()).add(unit_of(dst))
    for comp in circles(units):
        if not any(u.endswith("/") for u in comp):
            continue  # files alone: the circle of modules above
        ties = sorted(
            f"{s} -> {d}"
            for s, ts in graph.items()
            for d in ts
            if unit_of(s) in comp and unit_of(d) in comp and unit_of(s) != unit_of(d)
        )
        out[("unit circle", *comp)] = (
            "folders import each other: " + ", ".join(comp) + " (" + "; ".join(ties) + ")"
        )
    return out


# --- C: the units of dhl/src ------------------------------------------------

_C_NOISE = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", re.S)
_C_DEF = re.compile(r"^(?!static\b)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\(", re.M)
C_FOLDERS = ("dhl/src", "checkers/native", "harness/fuse", "workloads/runner")


def c_unit_graph(src: Path) -> dict[str, set[str]]:
    """Unit (``x.c``) -> the units whose functions it calls (rule: module docstring)."""
    texts = {p.name: _C_NOISE.sub(" ", p.read_text()) for p in sorted(src.glob("*.c"))}
    owners: dict[str, set[str]] = {}
    for unit, text in texts.items():
        for m in _C_DEF.finditer(text):
            rest = text[m.end() :]
            if not re.match(r"[^;{]*\)\s*\{", rest):
                continue  # a prototype, not a definition
            owners.setdefault(m.group(1), set()).add(unit)
    owner = {name: units.pop() for name, units in owners.items() if len(units) == 1}
    graph: dict[str, set[str]] = {}
    for unit, text in texts.items():
        for name in re.findall(r"\b([A-Za-z_]\w*)\s*\(", text):
            other = owner.get(name)
            if other is not None and other != unit:
                graph.setdefault(unit, set()).add(other)
    return graph


# --- the tests ---------------------------------------------------------------


def against_known(
    found: Mapping[tuple[str, ...], str], known: Mapping[tuple[str, ...], str]
) -> tuple[list[str], list[str]]:
    """What is found and not known, and what is known and no longer found."""
    new = [text for key, text in sorted(found.items()) if key not in known]
    gone = [f"{' '.join(key)} ({why})" for key, why in known.items() if key not in found]
    return new, gone


def test_layers_one_way_and_no_circle() -> None:
    new, gone = against_known(findings(import_graph(ROOT, PACKAGES)), KNOWN)
    assert not new, "imports against the layer plan:\n" + "\n".join(new)
    assert not gone, "KNOWN entries that no longer occur (strike them from KNOWN):\n" + "\n".join(
        gone
    )


@pytest.mark.parametrize("folder", C_FOLDERS)
def test_c_units_call_one_way(folder: str) -> None:
    graph = c_unit_graph(ROOT / folder)
    assert graph, f"no call between {folder} units found: the rule reads nothing"
    assert circles(graph) == [], folder


def test_every_layer_path_exists() -> None:
    """A path in LAYERS that names nothing is a typo that hides a file."""
    missing = [p for _, paths in LAYERS for p in paths if not (ROOT / p).exists()]
    assert not missing


# --- the checks can fail: a tiny house in tmp_path ------------------------------

SAMPLE_LAYERS = (("low", ("pkg/low/",)), ("high", ("pkg/high/", "pkg/__init__.py")))


def _sample(tmp_path: Path, files: Mapping[str, str]) -> dict[tuple[str, ...], str]:
    base = {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/high/__init__.py": "",
        "pkg/low/a.py": "import os\n",
        "pkg/low/b.py": "from pkg.low import a\n",
        "pkg/high/c.py": "from pkg.low.a import thing\nfrom . import d\n",
        "pkg/high/d.py": "from ..low import b\n",
        "pkg/high/e.py": "",
    }
    for rel, text in {**base, **files}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return findings(
        import_graph(tmp_path, ["pkg"]), SAMPLE_LAYERS, (("low", "high", "low knows no high"),)
    )


def test_sample_house_is_clean(tmp_path: Path) -> None:
    assert _sample(tmp_path, {}) == {}
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg/high/c.py"] == {"pkg/low/a.py": 1, "pkg/high/d.py": 2}
    assert graph["pkg/high/d.py"] == {"pkg/low/b.py": 1}  # relative, two dots
    assert graph["pkg/low/b.py"] == {"pkg/low/a.py": 1}  # `from pkg.low import a`: a module


def test_sample_upward_import_in_a_function_fails(tmp_path: Path) -> None:
    found = _sample(tmp_path, {"pkg/low/a.py": "def f():\n    from pkg.high import e\n"})
    assert set(found) == {
        ("up", "pkg/low/a.py", "pkg/high/e.py"),
        ("never", "pkg/low/a.py", "pkg/high/e.py"),
        ("unit circle", "pkg/high/", "pkg/low/"),
    }  # high/ imports low/
    assert (
        "pkg/low/a.py:2 (low) imports pkg/high/e.py (high)"
        in found[("up", "pkg/low/a.py", "pkg/high/e.py")]
    )


def test_sample_type_checking_import_counts(tmp_path: Path) -> None:
    found = _sample(
        tmp_path,
        {
            "pkg/low/a.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ..high.e import X\n"
        },
    )
    assert set(found) == {
        ("up", "pkg/low/a.py", "pkg/high/e.py"),
        ("never", "pkg/low/a.py", "pkg/high/e.py"),
        ("unit circle", "pkg/high/", "pkg/low/"),
    }  # high/ imports low/


def test_sample_circle_fails(tmp_path: Path) -> None:
    found = _sample(tmp_path, {"pkg/low/a.py": "import pkg.low.b\n"})
    assert set(found) == {("circle", "pkg/low/a.py", "pkg/low/b.py")}


def test_sample_circle_of_folders_fails(tmp_path: Path) -> None:
    """Two folders of one layer that import each other, without a circle
    of modules (one of the imports by ``importlib.import_module``)."""
    for rel, text in {
        "pkg/__init__.py": "",
        "pkg/p/__init__.py": "",
        "pkg/q/__init__.py": "",
        "pkg/p/a.py": "import pkg.q.b\n",
        "pkg/q/b.py": "",
        "pkg/p/d.py": "",
        "pkg/q/c.py": "import importlib\nimportlib.import_module('pkg.p.d')\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = findings(import_graph(tmp_path, ["pkg"]), (("one", ("pkg/",)),), ())
    assert set(found) == {("unit circle", "pkg/p/", "pkg/q/")}
    assert "pkg/q/c.py -> pkg/p/d.py" in found[("unit circle", "pkg/p/", "pkg/q/")]


def test_sample_file_on_no_layer_fails(tmp_path: Path) -> None:
    found = _sample(tmp_path, {"pkg/stray.py": ""})
    assert set(found) == {("no layer", "pkg/stray.py")}


def test_sample_known_list_only_shrinks(tmp_path: Path) -> None:
    found = _sample(tmp_path, {"pkg/low/a.py": "import pkg.low.b\n"})
    circle = ("circle", "pkg/low/a.py", "pkg/low/b.py")
    assert against_known(found, {circle: "fixed later"}) == ([], [])
    assert against_known({}, {circle: "fixed later"}) == (
        [],
        ["circle pkg/low/a.py pkg/low/b.py (fixed later)"],
    )


def test_c_rule_sees_a_circle(tmp_path: Path) -> None:
    (tmp_path / "a.c").write_text(
        "/* dhl_b() in a comment */\nint dhl_a(void)\n{\n    return dhl_b();\n}\n"
    )
    (tmp_path / "b.c").write_text(
        "int dhl_a(void);\nint dhl_b(void)\n{\n    return 1;\n}\n"
        'static int dhl_c(void)\n{\n    return dhl_a() + 0 * "dhl_a(";\n}\n'
    )
    assert c_unit_graph(tmp_path) == {"a.c": {"b.c"}, "b.c": {"a.c"}}
    assert circles(c_unit_graph(tmp_path)) == [("a.c", "b.c")]
