"""The project's documents stand alone: nothing in the repository sends the
reader outside it, and the invariant reference names every ID."""

from __future__ import annotations

import re
import subprocess

from support import ROOT

from checkers.invariants import INVARIANTS


def test_no_file_points_outside_the_repository() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    outside = re.compile(r"\.\./shared|shared/design|shared/seeds|seeds/")
    bad = [f for f in files if f != "tests/test_docs.py" and (ROOT / f).is_file()
           and outside.search((ROOT / f).read_text(errors="replace"))]
    assert bad == []


def test_invariants_md_explains_every_id() -> None:
    text = (ROOT / "checkers" / "INVARIANTS.md").read_text()
    listed = set(re.findall(r"^\| ([A-Z][A-Z0-9]*-[A-Z0-9-]+) \|", text, re.M))
    assert listed == set(INVARIANTS)
