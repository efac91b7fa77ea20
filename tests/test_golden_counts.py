"""A weakened checker must not go unnoticed: the golden counts of the corpus.

The corpus (tests/data/corpus/, tests/golden_corpus.py) is seven recorded
runs: SQLite WAL+FULL, DHL CC on ext4, WALDIO, two known-unsafe SUTs
(SQLite DELETE+FULL, DHL without a log), a state fault (corrupt) and a
device fault (eio on a flush).  For each, tests/data/golden/<run>.json
holds the states every strategy enumerates and, for the strategies its cell
checks, the states checked and every invariant's verdict counts.  These
tests compare them EXACTLY: a change to the states or the checkers that
moves any number fails here, with every number that moved.

A change that moves them on purpose regenerates them and says why, in a
line of its commit message (reviewers see the JSON difference):

    .venv/bin/python tests/test_golden_counts.py --update [RUN ...]

A new recording of the corpus (tests/tools/record_corpus.py) needs the same.
The checks need no root, loop device or recording (ext4 is recovered by
e2fsprogs on image files, the raw tier in memory): unit tier.  The state
counts come first and are quick, so a weakened enumerator fails in
seconds; ``crashlab mutants`` runs this file against its Python mutants
(tests/mutants/)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

from golden_corpus import CORPUS, CorpusRun, corpus_run, differences, golden, state_counts, unpack  # noqa: E402, I001
from golden_corpus import check_counts  # noqa: E402, I001

from harness.atomic import write_text_atomic  # noqa: E402

UPDATE = ".venv/bin/python tests/test_golden_counts.py --update"


def _want(run: CorpusRun) -> dict:
    return json.loads(run.golden_path.read_text())


def _verdict(run: CorpusRun, part: str, want: dict, got: dict) -> None:
    """Fail, listing every number of ``part`` that moved, unless equal."""
    moved = differences(want, got, part)
    if moved:
        pytest.fail(
            f"{run.name}: {len(moved)} golden count(s) moved: {'; '.join(moved[:8])}"
            f"{' ...' if len(moved) > 8 else ''} (on purpose? `{UPDATE} {run.name}` "
            "and say why in the commit message)",
            pytrace=False,
        )


@pytest.mark.parametrize("run", CORPUS, ids=lambda r: r.name)
def test_state_counts(run: CorpusRun, tmp_path: Path) -> None:
    _verdict(run, "states", _want(run)["states"], state_counts(unpack(run, tmp_path / "run")))


@pytest.mark.parametrize("run", CORPUS, ids=lambda r: r.name)
def test_verdict_counts(run: CorpusRun, tmp_path: Path) -> None:
    # golden()'s checks without its state counts (test_state_counts has them)
    unpacked = unpack(run, tmp_path / run.name)
    got = {s: check_counts(unpacked, run, s, tmp_path / f"check-{s}") for s in run.checks}
    _verdict(run, "checks", _want(run)["checks"], got)


def test_the_corpus_is_small() -> None:
    """Compressed logs and meta.json only: well under 3 MiB in all."""
    total = sum(p.stat().st_size for r in CORPUS for p in r.folder.iterdir())
    assert total < 3 << 20
    assert {p.name for r in CORPUS for p in r.folder.iterdir()} == {"meta.json", "writes.log.xz"}


def test_a_moved_count_is_named() -> None:
    want = {"checks": {"reorder": {"verdicts": {"DB-DURABLE": {"fail": 12, "pass": 3}}}}}
    got = {"checks": {"reorder": {"verdicts": {"DB-DURABLE": {"fail": 0, "pass": 15}}}}}
    assert differences(want, got) == [
        "checks.reorder.verdicts.DB-DURABLE.fail: 12 -> 0",
        "checks.reorder.verdicts.DB-DURABLE.pass: 3 -> 15",
    ]
    assert differences({"a": 1}, {"b": 1}) == ["a: 1 -> (absent)", "b: (absent) -> 1"]


def update(names: list[str]) -> None:
    """Write the golden file of each named corpus run (every run: none named)."""
    runs = [corpus_run(n) for n in names] if names else list(CORPUS)
    for run in runs:
        with tempfile.TemporaryDirectory(prefix="crashlab-golden-") as work:
            got = golden(run, Path(work))
        old = _want(run) if run.golden_path.exists() else {}
        run.golden_path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(run.golden_path, json.dumps(got, indent=1, sort_keys=True) + "\n")
        moved = differences(old, got)
        print(f"{run.name}: {len(moved)} number(s) moved")
        for line in moved:
            print(f"  {line}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="regenerate the golden counts of the corpus")
    ap.add_argument("--update", action="store_true", required=True)
    ap.add_argument("runs", nargs="*", metavar="RUN", help="corpus runs (default: every one)")
    args = ap.parse_args()
    try:
        update(args.runs)
    except KeyError as e:
        print(f"crashlab: error: {e.args[0]}", file=sys.stderr)
        sys.exit(2)
