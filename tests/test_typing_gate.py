"""The type checker checks everything it is pointed at.

``make check`` and ``make test`` run mypy over harness/, checkers/ and
workloads/ with the ``[tool.mypy]`` settings of pyproject.toml.  A module
in an ``ignore_errors`` override would not be checked at all: none may be.
"""

from __future__ import annotations

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
