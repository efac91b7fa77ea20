"""Set-up installs everything the project uses, on a machine as it comes new.

`harness/setup/setup.sh` installs the Debian packages of
`harness/setup/apt-packages.txt` with ``--no-install-recommends``, so what
arrives is those packages and their Depends/Pre-Depends, on top of Debian's
essential and required packages.  A tool or library that this machine has
only through a Recommends, or by hand, is missing on a fresh machine: the
ASan build once linked clang's runtime archive, which only a Recommends
brings.

This test finds what the project really uses, not what someone listed:
* every file the compiler and linker open while the build's own compile
  and link commands (from ``make -n -B build``) run again, with ``-H`` and
  ``-Wl,--trace`` (headers, static runtimes, shared libraries);
* every shared library the built binaries load (``ldd``);
* every program the code executes: the first word of each command list in
  the Python sources, and the commands of the shell scripts and Makefiles;
and asserts that the Debian package owning each of them is reachable from
the listed packages through Depends alone.
"""

from __future__ import annotations

import ast
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "harness" / "setup" / "apt-packages.txt"
SYSTEM_DIRS = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/etc/")
PY_DIRS = ("harness", "workloads", "checkers", "dhl")
# First words of list literals that name no program: SUT and mode names.
# words that start a list or tuple but run nothing: DHL's traditional-commit
# mode (not iproute2's tc); a j-lang op and a model entry's kind
# (workloads/jlang/: `write`, `file`), not util-linux's write or file(1)
NOT_PROGRAMS = {"tc", "write", "file"}
SCRIPTS = ("images/build-image.sh", "harness/fuse/ctest.sh", "harness/setup/setup.sh")

# slow: it rebuilds the whole C tree under -H/--trace (minutes), so not in
# the unit tier of `make check`; `make test` runs it
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("dpkg-query") is None, reason="not a Debian system: set-up uses apt-get"
    ),
]


def listed_packages() -> list[str]:
    """The package names of apt-packages.txt, as setup.sh reads them."""
    return [w for line in LIST.read_text().splitlines() for w in line.split("#")[0].split()]


# --- the Debian side: installed packages, their Depends, who owns a file ----


def _installed() -> dict[str, dict[str, str]]:
    """Installed packages: name -> fields Depends, Pre-Depends, Provides,
    Essential, Priority."""
    fmt = (
        "${Package}\t${db:Status-Abbrev}\t${Essential}\t${Priority}\t"
        "${Depends}\t${Pre-Depends}\t${Provides}\n"
    )
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", fmt], capture_output=True, text=True, check=True
    ).stdout
    pkgs: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        name, status, essential, priority, dep, predep, provides = line.split("\t")
        if status.startswith("ii"):
            pkgs[name] = {
                "essential": essential,
                "priority": priority,
                "depends": ", ".join(x for x in (dep, predep) if x),
                "provides": provides,
            }
    return pkgs


def _names(field: str) -> list[list[str]]:
    """A Depends field as groups of alternatives, names only."""
    groups = []
    for group in field.split(","):
        alts = [re.split(r"[\s(:]", a.strip())[0] for a in group.split("|") if a.strip()]
        if alts:
            groups.append(alts)
    return groups


def depends_closure(roots: Iterable[str], pkgs: dict[str, dict[str, str]]) -> set[str]:
    """Every installed package reachable from ``roots`` through Depends and
    Pre-Depends (of a group of alternatives, those that are installed, or
    that provide the virtual name)."""
    providers: dict[str, set[str]] = {}
    for name, f in pkgs.items():
        for alts in _names(f["provides"]):
            providers.setdefault(alts[0], set()).add(name)
    seen: set[str] = set()
    todo = [r for r in roots if r in pkgs]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for alts in _names(pkgs[p]["depends"]):
            for a in alts:
                todo.extend({a} & pkgs.keys() | providers.get(a, set()))
    return seen


def fresh_machine_closure() -> set[str]:
    """What a fresh machine has after set-up, as far as this machine can
    tell: the listed packages, Debian's essential and required packages,
    and all their Depends."""
    pkgs = _installed()
    base = [n for n, f in pkgs.items() if f["essential"] == "yes" or f["priority"] == "required"]
    missing = [p for p in listed_packages() if p not in pkgs]
    assert not missing, f"listed but not installed (run make setup): {missing}"
    return depends_closure([*listed_packages(), *base], pkgs)


def _candidates(f: Path) -> list[str]:
    """The spellings dpkg may know ``f`` by (/usr-merge: /lib/x or /usr/lib/x)."""
    names = {str(f), str(f.resolve())}
    return sorted(names | {c[4:] if c.startswith("/usr/") else "/usr" + c for c in names})


def owners(files: Iterable[Path]) -> dict[Path, str | None]:
    """The package owning each system file (None: owned by none), asked of
    dpkg in one call (one call per file took a quarter of a minute)."""
    spelled = {f: _candidates(f) for f in set(files)}
    every = sorted({c for cands in spelled.values() for c in cands})
    out = subprocess.run(["dpkg-query", "-S", *every], capture_output=True, text=True).stdout
    owner: dict[str, str] = {}
    for line in out.splitlines():
        if not line.startswith("diversion") and ": " in line:
            pkgs, path = line.split(": ", 1)
            owner.setdefault(path.strip(), pkgs.split(":")[0].split(",")[0].strip())
    return {f: next((owner[c] for c in cands if c in owner), None) for f, cands in spelled.items()}


# --- the project side: what the build opens, what the code runs ----------


def build_commands() -> list[list[str]]:
    """The compile and link commands of ``make build``, as make would run
    them now."""
    out = subprocess.run(
        ["make", "-n", "-B", "build"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    cmds = []
    for line in out.replace("\\\n", " ").splitlines():
        words = shlex.split(line)
        if (
            words
            and Path(words[0]).name in ("cc", "gcc")
            or (words and re.fullmatch(r"(gcc|clang)(-\d+)?", Path(words[0]).name))
        ):
            cmds.append(words)
    assert cmds, "make -n -B build printed no compiler command"
    return cmds


def _traced_files(cmd: list[str]) -> set[Path]:
    """Run ``cmd`` (a compiler command with ``-H`` and/or ``-Wl,--trace``)
    and return the files it reports opening."""
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, f"{' '.join(cmd)}: {p.stderr[-2000:]}"
    opened: set[Path] = set()
    for line in (p.stdout + p.stderr).splitlines():
        m = (
            re.match(r"^\.+ (/\S+)$", line)
            or re.match(r"^(/\S+)$", line.strip())
            or re.match(r"^-l\S+ \((/\S+)\)$", line.strip())
        )
        if m:
            opened.add(Path(m.group(1)))
        elif line.strip().startswith("/") and "(" in line:  # archive(member)
            opened.add(Path(line.strip().split("(")[0]))
    return opened


def _preprocess_commands(cmd: list[str], out: Path) -> list[list[str]]:
    """One ``-E -H`` command per C source of ``cmd``, with its flags (the
    ``-O`` level and ``-D``s decide which headers a source includes)."""
    flags = [w for w in cmd[1:] if w.startswith("-") and not w.startswith(("-l", "-Wl,"))]
    flags = [w for w in flags if w not in ("-o", "-c", "-shared")]
    return [[cmd[0], *flags, "-E", "-H", "-o", str(out), w] for w in cmd if w.endswith(".c")]


def files_the_build_opens(tmp: Path) -> set[Path]:
    """Every file the build's compile and link commands open: each C source
    preprocessed (``-E -H``) once per distinct flag set (headers), and each
    link command run again into ``tmp`` with ``-Wl,--trace`` (every file
    the linker opens). The link runs at ``-O0 -g0``: the optimisation level
    changes no file the linker opens (its headers are traced under the real
    flags above), and compiling SQLite and the sanitizer builds at ``-O2``
    made this test take minutes."""
    preprocess: set[tuple[str, ...]] = set()
    opened: set[Path] = set()
    for i, cmd in enumerate(build_commands()):
        preprocess |= {tuple(c) for c in _preprocess_commands(cmd, tmp / "pre.i")}
        if "-c" in cmd:
            continue
        link = [("-O0" if w.startswith("-O") else "-g0" if w == "-g" else w) for w in cmd]
        link[link.index("-o") + 1] = str(tmp / f"out{i}")
        opened |= _traced_files([*link, "-Wl,--trace"])
    for pre in sorted(preprocess):
        opened |= _traced_files(list(pre))
    return opened


def built_binaries() -> list[Path]:
    found = [
        p
        for d in ("dhl/build", "workloads/build", "harness/build")
        for p in (ROOT / d).rglob("*")
        if p.is_file() and (p.stat().st_mode & 0o111 or p.suffix == ".so")
    ]
    assert found, "nothing built: run make build"
    return found


def libraries_loaded(binaries: Iterable[Path]) -> set[Path]:
    libs: set[Path] = set()
    for b in binaries:
        out = subprocess.run(["ldd", str(b)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            m = re.search(r"=> (/\S+)", line) or re.match(r"\s*(/\S+)", line)
            if m:
                libs.add(Path(m.group(1)))
    return libs


def _first_words_py(tree: ast.AST) -> set[str]:
    """The first string of every list or tuple literal: how a command is
    spelled for subprocess here (``["losetup", "-d", dev]``)."""
    words = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                words.add(first.value)
    return words


def _words_sh(text: str) -> set[str]:
    """Words in command position of a shell script or recipe."""
    words = set()
    for line in text.splitlines():
        line = line.split(" #")[0] if not line.lstrip().startswith("#") else ""
        for part in re.split(r"[;|&(]|\$\(|\bthen\b|\bdo\b|\belse\b", line):
            toks = part.split()
            while toks and (
                re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", toks[0])
                or toks[0] in ("env", "exec", "!", "timeout", "faketime")
            ):
                if toks[0] == "faketime":
                    words.add("faketime")
                    toks = toks[3:]  # faketime -f "clock" CMD
                    continue
                toks = toks[1:]
            if toks:
                words.add(toks[0].lstrip("@"))
    return words


def programs_run() -> set[str]:
    words: set[str] = set()
    for d in PY_DIRS:
        for f in (ROOT / d).rglob("*.py"):
            words |= _first_words_py(ast.parse(f.read_text()))
    for s in SCRIPTS:
        words |= _words_sh((ROOT / s).read_text())
    for mk in [ROOT / "Makefile", *ROOT.glob("*/build.mk")]:
        recipes = [ln[1:] for ln in mk.read_text().splitlines() if ln.startswith("\t")]
        words |= _words_sh("\n".join(recipes))
    words -= NOT_PROGRAMS
    return {
        w
        for w in words
        if re.fullmatch(r"[a-z][a-z0-9._+-]*", w)
        and shutil.which(w)
        and shutil.which(w).startswith(SYSTEM_DIRS)
    }  # type: ignore[union-attr]  # filtered to found programs


# --- the tests --------------------------------------------------------------


def _assert_provided(files: dict[str, Path]) -> None:
    closure = fresh_machine_closure()
    own = owners(files.values())
    unowned = {
        what: str(f)
        for what, f in files.items()
        if own[f] is None and str(f).startswith(SYSTEM_DIRS) and not str(f).startswith("/etc/")
    }
    lacking = {
        what: f"{files[what]} ({own[files[what]]})"
        for what in files
        if own[files[what]] is not None and own[files[what]] not in closure
    }
    assert not unowned, f"system files no Debian package owns (installed by hand?): {unowned}"
    assert not lacking, (
        "used by the project but not installed by set-up on a fresh machine (add the package "
        f"to harness/setup/apt-packages.txt): {lacking}"
    )


def test_the_listed_packages_are_real_and_installed() -> None:
    pkgs = _installed()
    assert listed_packages()
    assert [p for p in listed_packages() if p not in pkgs] == []


def test_every_program_the_project_runs_comes_with_set_up() -> None:
    progs = programs_run()
    # The ones the project cannot work without must have been found, or the
    # scan itself is broken.
    for must in (
        "losetup",
        "debugfs",
        "e2fsck",
        "mkfs.ext4",
        "mkfs.xfs",
        "mkfs.btrfs",
        "fusermount3",
        "sqlite3",
        "mount",
        "umount",
        "faketime",
        "cc",
    ):
        assert must in progs, f"the scan did not find {must}"
    _assert_provided({p: Path(shutil.which(p) or p) for p in progs})


def test_every_file_the_build_links_comes_with_set_up(tmp_path: Path) -> None:
    opened = files_the_build_opens(tmp_path)
    system = {str(f): f for f in opened if str(f).startswith(SYSTEM_DIRS)}
    # The sanitizer runtimes and the three libraries must be among them.
    names = " ".join(system)
    for must in ("asan", "ubsan", "sqlite3", "fuse3", "xxhash", "fuse_lowlevel.h"):
        assert must in names, f"the trace did not show {must}"
    _assert_provided(system)


def test_every_library_the_binaries_load_comes_with_set_up() -> None:
    libs = libraries_loaded(built_binaries())
    assert any("libasan" in str(x) for x in libs)
    _assert_provided({str(x): x for x in libs})
