"""crashlab installed as a team would: a wheel of this tree (setup.py builds
the C parts into it) installed with pip into a fresh virtualenv outside the
repository, and used from a project folder of their own: ``--version``, a
record and a check of a small application with a checker of theirs, and
the pytest plugin on a test file of theirs.  Base images are built on first
use into the cache the test names ($CRASHLAB_CACHE/images).  Packages come
from the index (pip's cache after the first run)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support import ROOT
from test_pytest_plugin import TEAM_TEST

from harness.errors import CrashlabError
from harness.sysops import DEBIAN_PACKAGES, require_programs

# An update that is acknowledged only once it is durable (the directory is
# synced after the rename), or (`broken`) before the directory sync.
APP = """
for i in 1 2 3; do
  echo "txn-begin:$i" >> "$CRASHLAB_MARK"
  printf '%s' "$i" > counter.tmp && sync counter.tmp && mv counter.tmp counter
  [ "$1" = broken ] || sync .
  echo "txn-ack:$i" >> "$CRASHLAB_MARK"
done
"""
CHECK = """
import json, os, sys
state = json.load(open(os.environ["CRASHLAB_STATE_JSON"]))
got = int(open("counter").read()) if os.path.exists("counter") else 0
if got < state["acked"]:
    print(f"counter is {got} but {state['acked']} was acknowledged")
    sys.exit(1)
"""


def _pin(name: str) -> str:
    """The dev extras' pin of ``name`` (pyproject.toml)."""
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return next(p for p in dev["dev"] if p.startswith(f"{name}=="))


class Team:
    """A project folder of a team's own and the virtualenv crashlab is in."""

    def __init__(self, top: Path) -> None:
        self.venv, self.project = top / "venv", top / "project"
        self.project.mkdir()
        # no PYTHONPATH or virtualenv of ours: only what the team's has
        drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER"}
        self.env = {k: v for k, v in os.environ.items() if k not in drop}
        self.env["CRASHLAB_CACHE"] = str(top / "cache")
        self.env["PATH"] = f"{self.venv / 'bin'}:{os.environ['PATH']}"

    def run(self, *cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(cmd),
            capture_output=True,
            text=True,
            cwd=self.project,
            env=env or self.env,
            timeout=600,
        )


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Team:
    top = tmp_path_factory.mktemp("team")
    wheels = top / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(wheels), str(ROOT)],
        check=True,
        cwd=top,
    )
    (wheel,) = wheels.glob("crashlab-*.whl")
    t = Team(top)
    subprocess.run([sys.executable, "-m", "venv", str(t.venv)], check=True)
    p = t.run(str(t.venv / "bin" / "pip"), "install", "-q", str(wheel), _pin("pytest"))
    assert p.returncode == 0, p.stderr
    return t


@pytest.mark.slow
@pytest.mark.needs_fuse
def test_an_installed_wheel_records_and_checks_outside_the_repository(team: Team) -> None:
    crashlab = str(team.venv / "bin" / "crashlab")
    p = team.run(str(team.venv / "bin" / "python"), "-c", "import harness; print(harness.__file__)")
    assert Path(p.stdout.strip()).is_relative_to(team.venv), p.stdout + p.stderr
    p = team.run(crashlab, "--version")
    assert p.returncode == 0 and "version 0.1.0" in p.stdout, p.stdout + p.stderr
    app = team.project / "app.sh"
    app.write_text(APP)
    (team.project / "check.py").write_text(CHECK)
    checker = f"counter={team.venv / 'bin' / 'python'} {team.project / 'check.py'}"
    codes = {}
    for variant in ("safe", "broken"):
        p = team.run(crashlab, "record", "--out", variant, "--", "sh", str(app), variant)
        assert p.returncode == 0, p.stderr
        p = team.run(crashlab, "check", variant, "--checker", checker)
        codes[variant] = p.returncode
        assert "Traceback" not in p.stderr
    assert codes == {"safe": 0, "broken": 1}, p.stdout + p.stderr
    assert "was acknowledged" in p.stdout
    assert (team.project.parent / "cache" / "images" / "ext4.img").is_file()


@pytest.mark.slow
@pytest.mark.needs_fuse
def test_the_installed_pytest_plugin_runs_a_teams_test_file(team: Team) -> None:
    (team.project / "test_team.py").write_text(TEAM_TEST)
    p = team.run(str(team.venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert p.returncode == 1 and "1 failed, 1 passed" in p.stdout, p.stdout + p.stderr
    assert "USER:counter_kept: counter is" in p.stdout


@pytest.mark.slow
@pytest.mark.needs_fuse
def test_missing_debian_tools_are_named_in_one_line(team: Team) -> None:
    # only the virtualenv and the shell on PATH: no e2fsprogs, fuse3, mount
    bare = team.project.parent / "bare"
    bare.mkdir()
    (bare / "sh").symlink_to("/bin/sh")
    env = {**team.env, "PATH": f"{team.venv / 'bin'}:{bare}"}
    crashlab = str(team.venv / "bin" / "crashlab")
    p = team.run(crashlab, "record", "--backend", "fuse", "--out", "r", "--", "true", env=env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stdout + p.stderr
    assert (
        "fuse backend is unavailable: needs the Debian packages fuse3, mount: apt-get" in p.stderr
    )
    assert not (team.project / "r").exists()


@pytest.mark.slow
def test_pip_installs_from_a_git_url(tmp_path: Path) -> None:
    """``pip install git+file://CHECKOUT@HEAD`` (build isolation: pip fetches
    the build-system's setuptools from the index) builds the C parts from
    a clone: the CLI runs, its native library is inside the virtualenv."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True)
    if head.returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout: there is no commit to install by URL")
    t = Team(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", str(t.venv)], check=True)
    url = f"git+file://{ROOT}@{head.stdout.decode().strip()}"
    p = t.run(str(t.venv / "bin" / "pip"), "install", "-q", url)
    assert p.returncode == 0, p.stdout + p.stderr
    p = t.run(str(t.venv / "bin" / "crashlab"), "--version")
    assert p.returncode == 0 and "version 0.1.0" in p.stdout, p.stdout + p.stderr
    (lib,) = t.venv.glob("lib/python*/site-packages/dhl/build/libdhl.so")
    assert lib.stat().st_size > 0


def test_require_programs_names_packages_not_programs() -> None:
    require_programs(["sh"], "x")  # present: nothing said
    with pytest.raises(CrashlabError, match=r"^x needs the Debian packages e2fsprogs, fuse3: "):
        require_programs(["fusermount3", "mkfs.ext4", "debugfs"], "x", path="/nonexistent")
    text = (ROOT / "harness" / "setup" / "apt-packages.txt").read_text()
    listed = {w for line in text.splitlines() for w in line.split("#")[0].split()}
    # every package named is one set-up installs (or Debian's required `mount`)
    assert {p for p in DEBIAN_PACKAGES.values() if p not in listed} == {"mount"}
