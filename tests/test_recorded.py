"""The session's shared recordings (conftest ``recorded``): a test that
writes into a shared run fails, and only that test; the next one that asks
for the run gets a fresh recording."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

INNER = """
TINY = "insert:txns=2,ops=1,tables=1,seed=1"


def test_reads(recorded):
    assert (recorded("sqlite-off", TINY).path / "writes.log").exists()


def test_writes_into_it(recorded):
    (recorded("sqlite-off", TINY).path / "check").mkdir()


def test_copies_and_writes_into_the_copy(recorded, tmp_path):
    (recorded.copy(tmp_path / "mine", "sqlite-off", TINY).path / "check").mkdir()


def test_reads_again(recorded):
    assert not (recorded("sqlite-off", TINY).path / "check").exists()
"""


@pytest.mark.needs_fuse
def test_a_test_that_writes_into_a_shared_run_fails(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=4, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_writes_into_it*",
            "*a test wrote into the shared recording */001-sqlite-off-ext4-fuse (sqlite-off,*",
        ]
    )
