"""Small files, small functions (issue 28, item 6: "no file over 600 lines,
no function over 80 without a reason written above it"), kept by a test.

Every tracked source file (``git ls-files``: ``.py``, ``.c``, ``.h``) is
read, none is imported or compiled:

(a) no file has more than ``MAX_FILE`` lines;
(b) no function has more than ``MAX_FUNCTION`` lines, counted from its
    ``def`` (Python, ``ast``; nested functions and methods each on their
    own) or from the first line of its head (C) to its last line, unless
    the comment just above it (above its decorators in Python) holds a
    line ``# long: why`` or ``/* long: why */``.

A C function is found by the one C style (``.clang-format``: a function's
brace on its own line): a line ``{`` at column 0 opens a body, the next
line ``}`` at column 0 closes it, and the head starts at the last line
above the brace that starts at column 0.

``KNOWN`` lists what exceeds the limits today in files that are being cut
down elsewhere, each with why it is still there; the test fails on
anything not in it and on an entry that no longer occurs, so the list only
shrinks.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from test_docs import tracked_files

ROOT = Path(__file__).resolve().parent.parent
MAX_FILE = 600
MAX_FUNCTION = 80
SUFFIXES = (".py", ".c", ".h")

# (kind, path[, function]): why it is still over the limit.
KNOWN: dict[tuple[str, ...], str] = {}

_REASON = re.compile(r"^\s*(?:#|//|/?\*+)\s*long:\s*\S")


# --- reading the sources ------------------------------------------------------


def _comment_above(lines: list[str], first: int, c: bool) -> list[str]:
    """The comment lines just above line index ``first`` (none when a code
    or blank line is next above it)."""
    above: list[str] = []
    i = first - 1
    if c and i >= 0 and lines[i].rstrip().endswith("*/"):
        while i >= 0:
            above.append(lines[i])
            if "/*" in lines[i]:
                return above
            i -= 1
        return above
    marker = "//" if c else "#"
    while i >= 0 and lines[i].lstrip().startswith(marker):
        above.append(lines[i])
        i -= 1
    return above


def python_functions(text: str) -> list[tuple[str, int, int, bool]]:
    """Each function of a Python source: (name, first line, length, whether
    a ``long:`` reason is written above it)."""
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            reason = any(_REASON.match(x) for x in _comment_above(lines, top - 1, c=False))
            found.append((node.name, node.lineno, length, reason))
    return found


_C_NAME = re.compile(r"(\w+)\s*\(")


def c_functions(text: str) -> list[tuple[str, int, int, bool]]:
    """Each function of a C source (the one C style: a body from a ``{``
    line to a ``}`` line, both at column 0): (name, first line of its head,
    length, whether a ``long:`` reason is written above it)."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.rstrip() != "{":
            continue
        head = i - 1
        while head > 0 and (not lines[head] or lines[head][0] in " \t"):
            head -= 1
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "}":
            end += 1
        m = _C_NAME.search(" ".join(lines[head:i]))
        reason = any(_REASON.match(x) for x in _comment_above(lines, head, c=True))
        found.append((m.group(1) if m else "?", head + 1, end - head + 1, reason))
    return found


def findings(root: Path, files: Iterable[str]) -> dict[tuple[str, ...], str]:
    """What exceeds the limits among ``files`` (paths under ``root``): key
    (kind, path[, function]) -> a line saying by how much."""
    found: dict[tuple[str, ...], str] = {}
    for rel in files:
        path = root / rel
        if not rel.endswith(SUFFIXES) or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        n = len(text.splitlines())
        if n > MAX_FILE:
            found[("file", rel)] = f"{rel}: {n} lines (at most {MAX_FILE})"
        funcs = python_functions(text) if rel.endswith(".py") else c_functions(text)
        for name, line, length, reason in funcs:
            if length > MAX_FUNCTION and not reason:
                found[("function", rel, name)] = (
                    f"{rel}:{line} {name}: {length} lines (at most {MAX_FUNCTION}, or a"
                    " `long:` reason in the comment just above it)"
                )
    return found


def against_known(
    found: Mapping[tuple[str, ...], str], known: Mapping[tuple[str, ...], str]
) -> tuple[list[str], list[str]]:
    """What is found and not known, and what is known and no longer found."""
    new = [text for key, text in sorted(found.items()) if key not in known]
    gone = [f"{' '.join(key)} ({why})" for key, why in known.items() if key not in found]
    return new, gone


# --- the tests -----------------------------------------------------------------


def test_no_file_or_function_over_the_limits() -> None:
    files = tracked_files()
    assert sum(f.endswith(".c") for f in files) > 10, "no C file read: the rule reads nothing"
    new, gone = against_known(findings(ROOT, files), KNOWN)
    assert not new, "over the size limits:\n" + "\n".join(new)
    assert not gone, "KNOWN entries that no longer occur (strike them from KNOWN):\n" + "\n".join(
        gone
    )


# --- the checks can fail: a few files in tmp_path --------------------------------


def _body(n: int, indent: str = "    ") -> str:
    return "".join(f"{indent}x = {k}\n" for k in range(n))


def _write(tmp_path: Path, files: Mapping[str, str]) -> dict[tuple[str, ...], str]:
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    return findings(tmp_path, sorted(files))


def test_sample_long_file_fails(tmp_path: Path) -> None:
    found = _write(
        tmp_path, {"ok.py": "x = 1\n" * 600, "big.h": "/* x */\n" * 601, "notes.txt": "x\n" * 900}
    )
    assert set(found) == {("file", "big.h")}
    assert found[("file", "big.h")] == "big.h: 601 lines (at most 600)"


def test_sample_long_python_function_needs_a_reason(tmp_path: Path) -> None:
    bare = "def ok():\n" + _body(79) + "\n\ndef f():\n" + _body(80)
    reasoned = "# a docstring-like comment\n# long: one case per option\n@dec\ndef g():\n" + _body(
        80
    )
    nested = "class C:\n    def m(self):\n        def inner():\n" + _body(80, " " * 12)
    found = _write(
        tmp_path,
        {"a.py": bare, "b.py": reasoned, "c.py": nested, "d.py": "# long:\ndef h():\n" + _body(80)},
    )
    assert set(found) == {
        ("function", "a.py", "f"),
        ("function", "c.py", "m"),
        ("function", "c.py", "inner"),
        ("function", "d.py", "h"),
    }
    assert found[("function", "a.py", "f")].startswith("a.py:83 f: 81 lines")


def test_sample_long_c_function_needs_a_reason(tmp_path: Path) -> None:
    def fn(head: str, n: int) -> str:
        return head + "\n{\n" + _body(n - 3 - head.count("\n")) + "}\n"

    text = (
        "struct s {\n"
        + _body(90)
        + "};\n\n"
        + fn("static int ok(void)", 80)
        + "\n"
        + fn("static int f(int a,\n             int b)", 81)
        + "\n"
        + "/* long: a flat table of cases */\n"
        + fn("int g(void)", 90)
        + "\n"
        + "/*\n** a comment\n** long: one case per option\n*/\n"
        + fn("int h(void)", 90)
        + "\n/* no reason here */\n"
        + fn("int k(void)", 90)
    )
    found = _write(tmp_path, {"a.c": text})
    assert set(found) == {("function", "a.c", "f"), ("function", "a.c", "k")}
    assert found[("function", "a.c", "f")].startswith("a.c:175 f: 81 lines")


def test_sample_known_list_only_shrinks(tmp_path: Path) -> None:
    found = _write(tmp_path, {"big.py": "x = 1\n" * 601})
    key = ("file", "big.py")
    assert against_known(found, {key: "cut later"}) == ([], [])
    assert against_known({}, {key: "cut later"}) == ([], ["file big.py (cut later)"])
