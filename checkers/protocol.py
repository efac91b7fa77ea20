"""The protocol an engine's checker object implements
(:class:`EngineChecker`), what the harness asks of an engine's checker:
the engine table (``checkers/engines.py``) gives the object, each engine's
checker module (``checkers/sqlite.py``, ``dhl.py``, ``xlog.py``) defines
it.  Its own module, below both, so that neither imports the other.

An engine's capabilities beyond the required ones are attributes and
methods that are None (or return None) where the engine has none: the
harness asks them, it never probes for a name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from checkers.verdict import Verdict
    from harness.filetrace import FileTrace
    from harness.materialize.durable import Loadable
    from workloads.oracle import Oracle

F = TypeVar("F")  # an engine's facts of one crash state (SQLite: DbFacts; DHL: DhlFacts)
R = TypeVar("R")  # an engine's facts of a whole run (DHL: dhl_facts.RunFacts; None: none)
F_co = TypeVar("F_co", covariant=True)
R_co = TypeVar("R_co", covariant=True)

# ``read(name)``: a file's bytes in pieces, or None when there is no such file
FilePieces = Callable[[str], "Iterable[bytes | memoryview] | None"]


class KeyOfPieces(Protocol):
    """``content_key_of(read, db_name)``: :meth:`EngineChecker.content_key`
    of files not written yet (the ext4 in-process extraction gives them
    from the image's mapping)."""

    def __call__(self, read: FilePieces, db_name: str, /) -> bytes: ...


class ImageExaminer(Protocol[F_co]):
    """``examine_image(image, db_path, *, blockdev)``: :meth:`EngineChecker.examine`
    of a database file written nowhere: ``image(buffer)`` loads its bytes
    into the engine's buffer, ``db_path`` only names it in messages."""

    def __call__(
        self, image: Callable[[Loadable], object], db_path: Path, *, blockdev: bool = False
    ) -> F_co: ...


class NativeExaminer(Protocol[F_co]):
    """An engine's facts of raw-tier crash states taken natively (one C call
    per state or per chunk of states) from a worker's durable image: the
    facts come serialised, equal bytes being equal facts."""

    def examine(
        self, size: int, used: int, writes: Sequence[tuple[int, bytes]], label: Path
    ) -> bytes | None:
        """The serialised facts of the durable image (``size`` bytes, zero
        past ``used``) with ``writes`` on top, the database named ``label``
        in messages; None: the engine's Python path must take the state."""
        ...

    def examine_chunk(
        self,
        size: int,
        used: int,
        log: Path,
        spans: Sequence[Sequence[tuple[int, int | None, int]]],
        label: Path,
    ) -> list[bytes | None]:
        """:meth:`examine` of several states, each given as spans of the log
        file ``log`` (device offset, log offset or None for zeros, length)."""
        ...

    def facts(self, blob: bytes) -> F_co:
        """The facts serialised in ``blob``."""
        ...

    def close(self) -> None: ...


class RunChecks(Protocol[R_co]):
    """An engine's checks of a whole recorded run (harness/check/runlevel.py)."""

    def judge_run(self, history: FileTrace | str) -> tuple[list[Verdict], R_co | None]:
        """The run's verdicts from its database file's history (or the
        reason the harness could not prepare one), and the run's facts for
        the per-state judge (None: none)."""
        ...

    def recovery_checks(self, db: Path, work: Path, *, blockdev: bool) -> list[Verdict]:
        """The checks of the engine's own recovery of the database file
        ``db``, REC-CRASHSAFE first: the recovery crashed at many points and
        recovered again (``work``: a scratch folder; ``actual`` of a pass is
        the number of recovery crash states, 0: recovery wrote nothing),
        then what its writes may change (REC-MINIMAL)."""
        ...


@runtime_checkable
class EngineChecker(Protocol[F, R]):
    """What the harness asks of an engine's checker, for a database file
    recovered by the file system (with its journal/WAL sidecars beside it)."""

    @property
    def IDS(self) -> tuple[str, ...]:
        """The invariants :meth:`judge` gives a verdict on (a state whose
        file system does not recover gets each of them skipped, with that
        reason)."""
        ...

    @property
    def content_key_of(self) -> KeyOfPieces | None:
        """:meth:`content_key` of files not written yet (None: the engine
        has none): with it the ext4 fast path writes the files only for
        uncached facts (harness/fs/README.md)."""
        ...

    @property
    def examine_image(self) -> ImageExaminer[F] | None:
        """:meth:`examine` of a block device's image loaded in memory, no
        file in between (None: none): the raw tier's fast path
        (harness/check/rawpath.py)."""
        ...

    @property
    def run_checks(self) -> RunChecks[R] | None:
        """The engine's checks of a whole run (None: it has none)."""
        ...

    def content_key(self, files: Path, db_name: str) -> bytes:
        """A digest of the files as extracted; equal keys recover and
        examine identically (a cache key)."""
        ...

    def examine(self, db: Path, *, blockdev: bool = False, vfs: str = "") -> F:
        """Run the engine's own recovery on ``db`` and look at the result
        (independent of the crash point's marks, hence cacheable).
        ``blockdev``: the file is an image of the block device the SUT ran
        on (the raw tier); ``vfs``: the SUT opens its database through this
        VFS shim (``Sut.vfs``; "" none)."""
        ...

    def refused(self, why: str) -> F:
        """The facts of a database not opened because a file of it (or a
        folder on its way) is a symbolic link of the recovered tree
        (harness/fs/README.md): DB-OPEN fails saying ``why``."""
        ...

    def judge(
        self, facts: F, oracle: Oracle, acked: int, begun: int, *, run_facts: R | None = None
    ) -> list[Verdict]:
        """The verdicts of ``facts`` against the oracle's ``acked..begun``
        window; ``run_facts``: what :attr:`run_checks` learnt from the run."""
        ...

    def native_examiner(self, durable: Path) -> NativeExaminer[F] | None:
        """The native twin of :attr:`examine_image` over a worker's durable
        image file ``durable``, or None (none, or not built)."""
        ...


# What the harness holds of an engine: it passes a state's facts only from
# the engine's examine to its judge, and the run's facts only from its run
# checks to its judge; it never makes or reads either, so it sees both as
# opaque (each engine types its own).
AnyEngineChecker = EngineChecker[object, object]
RunFacts = object  # an engine's run facts, as the harness passes them on
