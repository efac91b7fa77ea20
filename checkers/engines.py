"""Database checkers by SUT engine: the one table the sweep dispatches on.

An engine's checker module provides, for a database file recovered by the
file system (with its journal/WAL sidecars beside it):

* ``content_key(files, db_name) -> bytes``: a digest of the files as
  extracted; equal keys recover and examine identically (a cache key);
* ``examine(db_path, *, blockdev) -> facts``: run the engine's own recovery
  and look at the result (independent of the crash point's marks, hence
  cacheable); ``blockdev``: the file is an image of the block device the
  SUT ran on (the raw tier), so the engine must see a block device;
* ``judge(facts, oracle, acked, begun, *, run_facts) -> list[Verdict]``:
  the verdicts; ``run_facts`` is what the run-level stage learnt from the
  whole log (DHL: the write trace's :class:`checkers.dhl_trace.RunFacts`);
* ``IDS``: the invariants ``judge`` gives a verdict on (a state whose file
  system does not recover gets each of them skipped, with that reason).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from harness.errors import CrashlabError

ENGINE_CHECKERS = {
    "sqlite": "checkers.sqlite",
    "dhl": "checkers.dhl",
}


def checker_for(engine: str) -> ModuleType:
    try:
        return importlib.import_module(ENGINE_CHECKERS[engine])
    except KeyError:
        raise CrashlabError(
            f"no checker for engine {engine!r} (known: {', '.join(ENGINE_CHECKERS)})"
        ) from None
