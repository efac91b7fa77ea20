"""Database engines as the checking side knows them: the one table the
harness dispatches on (a SUT names its engine; :func:`engine_of` gives the
object).  Nothing outside this table branches on an engine's name.

An engine's checker module provides, for a database file recovered by the
file system (with its journal/WAL sidecars beside it):

* ``content_key(files, db_name) -> bytes``: a digest of the files as
  extracted; equal keys recover and examine identically (a cache key);
* optionally ``content_key_of(read, db_name) -> bytes``: the same key of
  files not written yet (``read(name)``: their bytes in pieces, or None);
  with it the ext4 fast path writes the files only for uncached facts
  (``harness/fs/README.md``);
* ``examine(db_path, *, blockdev, vfs) -> facts``: run the engine's own
  recovery and look at the result (independent of the crash point's marks,
  hence cacheable); ``blockdev``: the file is an image of the block device
  the SUT ran on (the raw tier), so the engine must see a block device;
  ``vfs``: the SUT opens its database through this VFS shim (``Sut.vfs``;
  "" none);
* ``refused(why) -> facts``: the facts of a database not opened because a
  file of it (or a folder on its way) is a symbolic link of the recovered
  tree (harness/fs/README.md): DB-OPEN fails saying ``why``;
* ``judge(facts, oracle, acked, begun, *, run_facts) -> list[Verdict]``:
  the verdicts; ``run_facts`` is what the run-level stage learnt from the
  whole log (DHL: the write trace's :class:`checkers.dhl_trace.RunFacts`);
* ``IDS``: the invariants ``judge`` gives a verdict on (a state whose file
  system does not recover gets each of them skipped, with that reason).
"""

from __future__ import annotations

import importlib
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from harness.errors import CrashlabError

if TYPE_CHECKING:
    from workloads.suts import Sut


@dataclass(frozen=True)
class Engine:
    name: str
    module: str  # the checker module (the protocol above)
    # The engine's own invariants (checkers/INVARIANTS.md), promised by each
    # of its SUTs that has recovery, on top of the SUT's database promises.
    own_invariants: tuple[str, ...] = ()
    # Judged over the whole recorded run too (harness/check/runlevel.py):
    # the write trace (DHL-T2, CC-NEXT, CC-MONO) and REC-CRASHSAFE.
    run_level: bool = False
    # The program (and arguments) that opens a database file for a person.
    shell: tuple[str, ...] = ()
    # The database keeps files beside it (journal, WAL) that its recovery
    # reads: `crashlab repro` describes them.
    sidecar_files: bool = False

    @property
    def checker(self) -> ModuleType:
        return importlib.import_module(self.module)

    def shell_command(self, db: Path) -> list[str]:
        """``crashlab repro --shell``: open ``db`` with the engine's own
        tool (its recovery runs on it); a tool not on PATH is crashlab's own,
        beside this Python."""
        prog = self.shell[0]
        if shutil.which(prog) is None:
            prog = str(Path(sys.executable).with_name(prog))
        return [prog, *self.shell[1:], str(db)]


ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine("sqlite", "checkers.sqlite", shell=("sqlite3",), sidecar_files=True),
    # DHL's design promises these for every mode with recovery
    # (dhl/DESIGN.md: Theorems 1-2, counting commit, idempotent and
    # crash-safe recovery).  NOLOG has no recovery and promises none.
    Engine("dhl", "checkers.dhl",
           own_invariants=("DHL-T1", "DHL-T2", "DHL-READ", "DHL-INV", "CC-COUNT", "CC-ROLLBACK",
                           "CC-NEXT", "CC-MONO", "REC-IDEMPOTENT", "REC-CRASHSAFE"),
           run_level=True, shell=("dhl", "dump")),
    # xLog: SQLite behind an emulated NVRAM; its recovery (the NVRAM's
    # replay) runs before SQLite's checks (checkers/xlog.py)
    Engine("xlog", "checkers.xlog", shell=("sqlite3",), sidecar_files=True),
)}


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise CrashlabError(
            f"no checker for engine {name!r} (known: {', '.join(ENGINES)})"
        ) from None


def engine_of(sut: Sut) -> Engine:
    """The engine object of a SUT."""
    return get_engine(sut.engine)
