"""The type checker checks everything it is pointed at.

``make check`` and ``make test`` run mypy over harness/, checkers/ and
workloads/ with the ``[tool.mypy]`` settings of pyproject.toml.  A module
in an ``ignore_errors`` override would not be checked at all: none may be.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STILL_IGNORED: frozenset[str] = frozenset()


def ignored_modules(pyproject: Path) -> set[str]:
    """The modules of ``pyproject``'s mypy overrides that set ``ignore_errors``."""
    config = tomllib.loads(pyproject.read_text())
    out: set[str] = set()
    for override in config["tool"]["mypy"].get("overrides", []):
        if override.get("ignore_errors"):
            modules = override["module"]
            out.update([modules] if isinstance(modules, str) else modules)
    return out


def test_no_module_goes_back_on_the_ignore_list() -> None:
    added = ignored_modules(ROOT / "pyproject.toml") - STILL_IGNORED
    assert not added, f"modules whose type errors mypy would not report: {sorted(added)}"


def test_the_ignore_list_is_read_from_every_override(tmp_path: Path) -> None:
    toml = tmp_path / "pyproject.toml"
    toml.write_text(
        "[tool.mypy]\n"
        '[[tool.mypy.overrides]]\nmodule = "a.b"\nignore_errors = true\n'
        '[[tool.mypy.overrides]]\nmodule = ["c", "d"]\nignore_errors = true\n'
        '[[tool.mypy.overrides]]\nmodule = "e"\ndisallow_untyped_defs = false\n'
    )
    assert ignored_modules(toml) == {"a.b", "c", "d"}


def test_every_type_ignore_says_why() -> None:
    """Each type-ignore pragma names its error code and says, in a comment
    after it, why the type system cannot say it."""
    pragma = "# type" + ": ignore"  # spelt so that this file holds none
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    bare = [
        f"{name}:{n}"
        for name in files
        for n, line in enumerate((ROOT / name).read_text().splitlines(), 1)
        if pragma in line and not re.search(re.escape(pragma) + r"\[[\w,-]+\]  # \S", line)
    ]
    assert not bare, "a type-ignore pragma without its code and reason:\n" + "\n".join(bare)
