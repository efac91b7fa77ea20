"""Record the golden corpus (tests/data/corpus/) again.

    .venv/bin/python tests/tools/record_corpus.py [--only NAME ...]
    .venv/bin/python tests/test_golden_counts.py --update   # then: new goldens

Each run of ``tests/golden_corpus.py``'s CORPUS is recorded as its matrix
cell is in a sweep (the fuse backend: root, /dev/fuse, loop devices), then
stored as ``meta.json`` and ``writes.log.xz``; the old folder is replaced
only once the new one is whole.  A recording is not byte-identical to the
last one (the file system's timestamps, the marks' positions), so the
golden numbers move too: regenerate them and say why in the commit.
Exit 2 on a bad argument or a failed recording, with one line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(TESTS.parent), str(TESTS)]

from golden_corpus import CORPUS, corpus_run, pack  # noqa: E402

from harness.env import temporary_folder  # noqa: E402
from harness.errors import CrashlabError  # noqa: E402
from harness.sweep.sweep import record_cell  # noqa: E402


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, metavar="NAME", help="these runs only")
    args = ap.parse_args(argv)
    try:
        runs = [corpus_run(n) for n in args.only] if args.only else list(CORPUS)
    except KeyError as e:
        print(f"crashlab: error: {e.args[0]}", file=sys.stderr)
        return 2
    with temporary_folder("crashlab-corpus-") as work:
        for run in runs:
            try:
                recorded = record_cell(run.cell, work / run.name, "fuse", False)
            except CrashlabError as e:
                print(f"crashlab: error: {run.name}: {e}", file=sys.stderr)
                return 2
            pack(recorded, run)
            size = sum(p.stat().st_size for p in run.folder.iterdir())
            print(f"{run.name}: {size / 1024:.0f} KiB in {run.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
