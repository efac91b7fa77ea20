"""The project's documents stand alone: nothing in the repository sends the
reader outside it, every repository path a tracked text file names exists,
and the invariant references name every ID."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from support import ROOT

from checkers.invariants import INVARIANTS

# Files whose text is read for repository paths: documents, code (its
# comments and docstrings name files too), build and set-up scripts.
TEXT_SUFFIXES = (".md", ".py", ".c", ".h", ".toml", ".mk", ".sh", ".txt", ".j2", ".yml", ".yaml")
# A slash-joined word, optionally ``::name`` (a pytest node).  Next to a
# brace, angle bracket, star, dollar or another path character it is part
# of a template, a glob, a variable or a URL, not a path of its own.
_PATH = re.compile(r"(?<![\w./$~:{}<>*\[@-])((?:[\w.-]+/)+[\w.-]*(?:::\w+)?)(?![\w/{}<>*\[$-])")
# Words that stand for a name the reader chooses (RUN/meta.json, NAME.patch).
PLACEHOLDERS = {
    "NAME",
    "RUN",
    "SWEEP",
    "DIR",
    "OUT",
    "FILE",
    "IMG",
    "STATE",
    "SHARD",
    "PATH",
    "CMD",
    "R",
    "W",
}
# Sample texts in this file name missing paths on purpose.
NOT_SCANNED = {"tests/test_docs.py"}


def tracked_files() -> list[str]:
    return subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()


def named_paths(text: str, folder: Path, root: Path = ROOT) -> list[tuple[int, str, Path]]:
    """The repository paths ``text`` (a file in ``folder``) names, as (line,
    spelling, resolved path).  A path counts when its first component is an
    entry of ``root`` or, for a path relative to the file, a folder beside
    it; a component that is a placeholder word makes it no path."""
    found = []
    for m in _PATH.finditer(text.replace("$PWD/", "")):
        spelling = m.group(1).rstrip(".,:;")
        parts = spelling.partition("::")[0].split("/")
        if parts[0] in (".", "..") or any(p.split(".")[0] in PLACEHOLDERS for p in parts):
            continue
        if (root / parts[0]).exists():
            base = root
        elif (folder / parts[0]).is_dir():
            base = folder
        else:
            continue
        found.append((text.count("\n", 0, m.start()) + 1, spelling, base.joinpath(*parts)))
    return found


def _ignored(paths: list[str], root: Path) -> set[str]:
    """Those of ``paths`` (relative to ``root``) git ignores: build outputs,
    results, images; a path inside an ignored folder that is not there yet
    counts as ignored too."""
    asked = [q for p in paths for q in (p, p + "/x")]
    out = subprocess.run(
        ["git", "check-ignore", "--stdin", "-n", "-v"],
        cwd=root,
        text=True,
        input="\n".join(asked) + "\n",
        capture_output=True,
    ).stdout
    hits = {line.partition("\t")[2] for line in out.splitlines() if not line.startswith("::")}
    return {p for p in paths if p in hits or p + "/x" in hits}


def missing_paths(text: str, folder: Path, root: Path = ROOT) -> list[str]:
    """``line: spelling`` of each path ``text`` names that does not exist
    (nor is ignored by git), or whose ``::name`` is no ``def``/``class`` of
    the file."""
    bad, absent = [], []
    for line, spelling, path in named_paths(text, folder, root):
        node = spelling.partition("::")[2]
        if not path.exists():
            absent.append((line, spelling, path))
        elif node and not (
            path.is_file()
            and re.search(rf"^\s*(?:def|class) {node}\b", path.read_text(errors="replace"), re.M)
        ):
            bad.append(f"{line}: {spelling}")
    rel = [str(path.relative_to(root)) for _, _, path in absent if path.is_relative_to(root)]
    ignored = _ignored(rel, root) if rel else set()
    bad += [
        f"{line}: {spelling}"
        for line, spelling, path in absent
        if not path.is_relative_to(root) or str(path.relative_to(root)) not in ignored
    ]
    return sorted(bad, key=lambda s: (int(s.partition(":")[0]), s))


def test_no_file_points_outside_the_repository() -> None:
    outside = re.compile(r"\.\./shared|shared/design|shared/seeds|seeds/")
    bad = [
        f
        for f in tracked_files()
        if f != "tests/test_docs.py"
        and (ROOT / f).is_file()
        and outside.search((ROOT / f).read_text(errors="replace"))
    ]
    assert bad == []


def test_every_path_a_tracked_text_file_names_exists() -> None:
    bad = []
    for f in tracked_files():
        path = ROOT / f
        if (
            f in NOT_SCANNED
            or not path.is_file()
            or not (f.endswith(TEXT_SUFFIXES) or path.name == "Makefile")
        ):
            continue
        bad += [f"{f}:{m}" for m in missing_paths(path.read_text(errors="replace"), path.parent)]
    assert bad == []


def test_the_path_finder_finds_what_is_missing_and_nothing_else() -> None:
    sample = "\n".join(
        [
            "kept: `harness/faults.py`, harness/fs/, (checkers/README.md).",  # 1: exist
            "relative: `ext4/inproc.py` beside harness/fs",  # 2: exists
            "gone: `harness/nope.py`; and tests/test_docs.py::test_nope",  # 3: both missing
            "relative, gone: ext4/nope.py",  # 4: missing
            "test node: tests/test_docs.py::test_invariants_md_explains_every_id",
            "placeholders: results/<sweep>/, RUN/check/x.json, tests/mutants/NAME.patch",
            "globs and templates: checkers/*.py, {here}/x.toml, check/*/result.json",
            "outside: /usr/lib/x.so, https://example.org/harness/nope.py, ~/.cache/crashlab/x",
            "ignored: images/ext4.img, workloads/build/nothing-here, results/x/summary.json",
            "not ours: ext/misc/cksumvfs.c, sys/stat.h",
        ]
    )
    missing = missing_paths(sample, ROOT / "harness" / "fs")
    assert missing == ["3: harness/nope.py", "3: tests/test_docs.py::test_nope", "4: ext4/nope.py"]


def test_invariants_md_explains_every_id() -> None:
    text = (ROOT / "checkers" / "INVARIANTS.md").read_text()
    listed = set(re.findall(r"^\| ([A-Z][A-Z0-9]*-[A-Z0-9-]+) \|", text, re.M))
    assert listed == set(INVARIANTS)


def described_ids(text: str) -> set[str]:
    """Invariant IDs a README describes: those named in the first cell of a
    table row that has more cells (``| DB-ATOMIC, DB-DURABLE | ... |``) or
    in a heading."""
    ids = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) > 1 and any(cells[1:]):
            ids |= set(re.findall(r"\b[A-Z][A-Z0-9]*-[A-Z0-9-]*[A-Z0-9]\b", cells[0]))
        elif line.startswith("#"):
            ids |= set(re.findall(r"\b[A-Z][A-Z0-9]*-[A-Z0-9-]*[A-Z0-9]\b", line))
    return ids


def test_checkers_readme_describes_every_id() -> None:
    assert described_ids(
        "| DB-OPEN, CC-MONO (per image) | x |\n| ERR-NOACK | |\n"
        "## Recovery (REC-AGREE)\nERR-ATOMIC in prose"
    ) == {"DB-OPEN", "CC-MONO", "REC-AGREE"}
    text = (ROOT / "checkers" / "README.md").read_text()
    assert sorted(set(INVARIANTS) - described_ids(text)) == []
