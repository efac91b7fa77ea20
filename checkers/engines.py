"""Database engines as the checking side knows them: the one table the
harness dispatches on (a SUT names its engine; :func:`engine_of` gives the
object, whose ``checker`` implements :class:`checkers.protocol.EngineChecker`).
Nothing outside this table branches on an engine's name, and the harness
imports no engine's module: it asks this table for the engine's checker."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from checkers.protocol import AnyEngineChecker
from harness.errors import CrashlabError

if TYPE_CHECKING:
    from workloads.suts import Sut


@dataclass(frozen=True)
class Engine:
    name: str
    # the engine's checker object (EngineChecker), imported when first asked
    load: Callable[[], AnyEngineChecker]
    # The engine's own invariants (checkers/INVARIANTS.md), promised by each
    # of its SUTs that has recovery, on top of the SUT's database promises.
    own_invariants: tuple[str, ...] = ()
    # The program (and arguments) that opens a database file for a person.
    shell: tuple[str, ...] = ()
    # The database keeps files beside it (journal, WAL) that its recovery
    # reads: `crashlab repro` describes them.
    sidecar_files: bool = False

    @property
    def checker(self) -> AnyEngineChecker:
        return self.load()

    def shell_command(self, db: Path) -> list[str]:
        """``crashlab repro --shell``: open ``db`` with the engine's own
        tool (its recovery runs on it); a tool not on PATH is crashlab's own,
        beside this Python."""
        prog = self.shell[0]
        if shutil.which(prog) is None:
            prog = str(Path(sys.executable).with_name(prog))
        return [prog, *self.shell[1:], str(db)]


def _sqlite() -> AnyEngineChecker:
    from checkers.sqlite import CHECKER

    return cast(AnyEngineChecker, CHECKER)  # its facts opaque to the harness (above)


def _dhl() -> AnyEngineChecker:
    from checkers.dhl import CHECKER

    return cast(AnyEngineChecker, CHECKER)


def _xlog() -> AnyEngineChecker:
    from checkers.xlog import CHECKER

    return cast(AnyEngineChecker, CHECKER)


def _jlang() -> AnyEngineChecker:
    from checkers.fssemantics import CHECKER

    return cast(AnyEngineChecker, CHECKER)


ENGINES: dict[str, Engine] = {
    e.name: e
    for e in (
        Engine("sqlite", _sqlite, shell=("sqlite3",), sidecar_files=True),
        # DHL's design promises these for every mode with recovery
        # (dhl/DESIGN.md: Theorems 1-2, counting commit, idempotent and
        # crash-safe recovery).  NOLOG has no recovery and promises none.
        Engine(
            "dhl",
            _dhl,
            own_invariants=(
                "DHL-T1",
                "DHL-T2",
                "DHL-READ",
                "DHL-INV",
                "CC-COUNT",
                "CC-ROLLBACK",
                "CC-NEXT",
                "CC-MONO",
                "REC-IDEMPOTENT",
                "REC-CRASHSAFE",
                "REC-MINIMAL",
            ),
            shell=("dhl", "dump"),
        ),
        # xLog: SQLite behind an emulated NVRAM; its recovery (the NVRAM's
        # replay) runs before SQLite's checks (checkers/xlog.py)
        Engine("xlog", _xlog, shell=("sqlite3",), sidecar_files=True),
        # a j-lang workload (workloads/jlang/): the "database" is its folder,
        # judged against the FS-* rules of the file system it ran on
        Engine("jlang", _jlang, shell=("ls", "-laR")),
    )
}


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
