"""A failing state of a recorded run, shrunk to a smallest one that still
fails the same invariant, judged by the check's own path.

    m = minimise(Path("runs/cell"), "e17.k0-3,5-9", "DB-DURABLE")
    m.minimal, m.lost  # "e17.k0-3,5", (LostWrite(entry=412, ...),)

Candidates are judged one at a time by one :class:`StateChecker` per run
(materialise, file-system recovery, the SUT's recovery, the checkers), as
``crashlab repro`` judges a state; a composite ID's crashes each in the run
that holds it.  Several searches go out together on worker processes
(:mod:`harness.triage.parallel`), each worker with minimisers of its own.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.invariants import INVARIANTS
from harness.check.multicrash import RECOVERY_PART, compose, resolve
from harness.check.repro import ReproOptions, state_checker
from harness.check.window import default_window
from harness.check.worker import StateChecker
from harness.env import temporary_folder
from harness.errors import CrashlabError
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.states import Options, State, iter_epochs, resolve_window, state_from_id
from harness.states.model import write_units
from harness.states.stateid import UNIT, format_id, format_ranges, iter_bits, parse_id
from harness.triage.search import (
    EpochSpace,
    Keys,
    NotFailing,
    dropped,
    kind_of,
    shrink_composite,
)


@dataclass(frozen=True)
class LostWrite:
    """A write of the minimal state's epoch that did not (wholly) persist
    although a later one did: ``entry`` its log entry, ``sector`` and
    ``length`` where it goes on the device (512-byte sectors, bytes),
    ``missing`` the bitmask of its 512-byte units lost (every unit for a
    dropped write, some for a torn one), ``overtaken_by`` the log entry of
    the first write issued after it that persisted (None: none did, a torn
    last write), ``flush`` the entry of a FLUSH issued after it whose later
    writes persisted (a lost flush; None: none lies between)."""

    entry: int
    sector: int
    length: int
    missing: int
    overtaken_by: int | None
    flush: int | None

    @property
    def torn(self) -> bool:
        """Part of it persisted."""
        return self.missing != (1 << (self.length // UNIT)) - 1

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "sector": self.sector,
            "length": self.length,
            "missing": format_ranges(self.missing),
            "overtaken_by": self.overtaken_by,
            "flush": self.flush,
        }


@dataclass(frozen=True)
class Minimised:
    """A failing state and a smallest state of its run and kind that fails
    the same invariant (README.md: what "smallest" means), with the count
    of candidate states judged to find it (the original included) and
    what the minimal state lost, in log order."""

    original: str
    minimal: str
    invariant: str
    kind: str  # prefix | reorder | torn | torn-reorder (of the last crash)
    judged: int
    lost: tuple[LostWrite, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "original": self.original,
            "minimal": self.minimal,
            "invariant": self.invariant,
            "kind": self.kind,
            "judged": self.judged,
            "lost": [w.to_json() for w in self.lost],
        }


def lost_writes(state: State) -> tuple[LostWrite, ...]:
    """The writes ``state`` lost while a later write of its epoch persisted:
    the dropped ones and the torn ones, in log order."""
    key, ep = state.key, state.epoch
    members = key.kept | key.torn_mask
    torn = dict(key.torn)
    out = []
    for w in iter_bits(dropped(key) | key.torn_mask):
        entry = ep.writes[w]
        full = (1 << write_units(entry, ep.sectorsize)) - 1
        later = members >> (w + 1)
        flushes = [
            f
            for f, part in zip(ep.lost_flushes, ep.parts, strict=True)
            if part > w and members >> part
        ]
        out.append(
            LostWrite(
                entry.index,
                entry.sector * ep.sectorsize // UNIT,
                entry.nr_sectors * ep.sectorsize,
                full & ~torn.get(w, 0),
                ep.writes[w + (later & -later).bit_length()].index if later else None,
                flushes[0] if flushes else None,
            )
        )
    return tuple(out)


def split_id(state_id: str) -> tuple[list[str], list[str]]:
    """A (possibly composed) ID as its plain parts and the kind of each
    continuation between them (multicrash.py: ``a/b``, ``a/recovery/b``)."""
    tokens = state_id.split("/")
    parts, kinds = [tokens[0]], []
    i = 1
    while i < len(tokens):
        recovery = tokens[i] == RECOVERY_PART and i + 1 < len(tokens)
        kinds.append("recovery-crash" if recovery else "multicrash")
        i += recovery
        parts.append(tokens[i])
        i += 1
    return parts, kinds


def join_id(keys: Keys, kinds: list[str]) -> str:
    """The composed ID of ``keys`` (the inverse of :func:`split_id`)."""
    out = format_id(keys[0])
    for kind, key in zip(kinds, keys[1:], strict=True):
        out = compose(kind, out, format_id(key))
    return out


class Runs:
    """The runs a composite state's crashes lie in, each opened once: its
    :class:`EpochSpace` (within the check's window, completed by
    :func:`default_window`: ``states`` for the first run, ``then`` for a
    continuation) and, lazily, its :class:`StateChecker`.  ``continued``:
    the composed IDs of the crashes whose continuation the check checked
    (None: any recorded one)."""

    def __init__(
        self,
        run: RunDir,
        kinds: list[str],
        work: Path,
        options: ReproOptions,
        states: Options,
        then: Options = Options(),
        continued: frozenset[str] | None = None,
    ) -> None:
        self.run, self.kinds, self.work, self.options = run, kinds, work, options
        self.states, self.then, self.continued = states, then, continued
        self.spaces: dict[Path, EpochSpace] = {}
        self.checkers: dict[Path, StateChecker] = {}
        self.faulted = False

    def run_of(self, prefix: Keys) -> RunDir | None:
        """The continuation after the crashes ``prefix`` (None: not recorded)."""
        if not prefix:
            return self.run
        done = self.continued
        if done is not None and join_id(prefix, self.kinds[: len(prefix) - 1]) not in done:
            return None
        probe = join_id(prefix + (parse_id("e0.p0"),), self.kinds[: len(prefix)])
        try:
            return resolve(self.run, probe)[0]
        except CrashlabError:
            return None

    def space_of(self, prefix: Keys) -> EpochSpace | None:
        rd = self.run_of(prefix)
        if rd is None:
            return None
        if rd.path not in self.spaces:
            opts = default_window(rd, self.then if prefix else self.states)
            with LogReader(rd.log) as reader:
                window = resolve_window(reader, opts)
                self.spaces[rd.path] = EpochSpace(list(iter_epochs(reader, rd.log_order)), window)
        return self.spaces[rd.path]

    def verdicts_fail(self, keys: Keys, invariant: str) -> bool:
        """Whether the last crash of ``keys`` fails ``invariant``."""
        rd = self.run_of(keys[:-1])
        space = self.space_of(keys[:-1])
        assert rd is not None and space is not None
        if rd.path not in self.checkers:
            folder = self.work / f"run{len(self.checkers)}"
            folder.mkdir()
            self.checkers[rd.path] = state_checker(rd, folder, self.options, faulted=self.faulted)
        state = State(keys[-1], space.epoch(keys[-1]))
        verdicts = self.checkers[rd.path].check(state)
        return any(v.invariant == invariant and v.status == "fail" for v in verdicts)

    def close(self) -> None:
        """Close every checker opened."""
        for checker in self.checkers.values():
            checker.close()


def judges(options: ReproOptions, invariant: str) -> bool:
    """Whether a check with ``options`` judges ``invariant``: a built-in
    one, or one of the user checkers given."""
    return invariant in INVARIANTS or any(c.invariant == invariant for c in options.checkers)


class Minimiser:
    """Minimises failing states of one run on one invariant, one after the
    other, with one memo: a candidate judged for one state is not judged
    again for the next, and a state whose search reaches a state already
    shrunk stops there (many failing states shrink to the same witness).
    ``states``: the check's state options (its window; None: the run's
    default window, from its ``setup-done`` mark); ``whole_log`` as
    :func:`minimise`; ``work``: the folder its scratch folder goes in
    (None: the temporary folders' own).  Of a composite check: ``then``
    its continuations' state options (their window) and ``continued``
    the crashes it continued (None: any recorded continuation).  A context manager: it closes its
    checkers."""

    def __init__(
        self,
        run: Path,
        invariant: str,
        options: ReproOptions = ReproOptions(),
        *,
        states: Options | None = None,
        whole_log: bool = True,
        work: Path | None = None,
        then: Options | None = None,
        continued: frozenset[str] | None = None,
    ) -> None:
        if not judges(options, invariant):
            raise CrashlabError(f"unknown invariant {invariant!r} (a user checker's: --checker)")
        if not run.is_dir():
            raise CrashlabError(f"{run}: no such run directory")
        self.run, self.invariant, self.options = run, invariant, options
        self.states = states or Options()
        self.then, self.continued = then or Options(), continued
        self.whole_log = whole_log
        self.memo: dict[tuple[tuple[str, ...], Keys], bool] = {}
        self.known: dict[tuple[tuple[str, ...], Keys], Keys] = {}
        self._stack = ExitStack()
        self.work = self._stack.enter_context(temporary_folder("crashlab-triage-", work))
        self._runs: dict[tuple[str, ...], Runs] = {}

    def __enter__(self) -> Minimiser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the checkers and remove the scratch folder."""
        for runs in self._runs.values():
            runs.close()
        self._stack.close()

    def _runs_for(self, kinds: list[str], faulted: bool) -> Runs:
        """The :class:`Runs` of a composition (its continuation kinds)."""
        tag = (*kinds, "faulted" if faulted else "")
        if tag not in self._runs:
            folder = self.work / f"c{len(self._runs)}"
            folder.mkdir()
            runs = Runs(
                RunDir(self.run),
                kinds,
                folder,
                self.options,
                self.states,
                self.then,
                self.continued,
            )
            runs.faulted = faulted
            self._runs[tag] = runs
        return self._runs[tag]

    def minimise(self, state_id: str) -> Minimised:
        """:func:`minimise` of ``state_id``, sharing this minimiser's memo."""
        rd, plain = resolve(RunDir(self.run), state_id)
        with LogReader(rd.log) as reader:
            state_from_id(reader, plain, rd.log_order)  # a one-line error for an impossible ID
        parts, kinds = split_id(state_id)
        keys = tuple(parse_id(p) for p in parts)
        runs = self._runs_for(kinds, any(k.faulted for k in keys))
        tag = tuple(kinds)
        memo = {ks: v for (t, ks), v in self.memo.items() if t == tag}
        known = {ks: v for (t, ks), v in self.known.items() if t == tag}
        before = len(memo)
        try:
            minimal, _ = shrink_composite(
                keys,
                lambda ks: runs.verdicts_fail(ks, self.invariant),
                runs.space_of,
                whole_log=self.whole_log,
                memo=memo,
                known=known,
            )
        except NotFailing:
            raise NotFailing(
                f"state {state_id} of {self.run} does not fail {self.invariant}"
            ) from None
        self.memo.update({(tag, ks): v for ks, v in memo.items()})
        self.known.update({(tag, ks): v for ks, v in known.items()})
        space = runs.space_of(minimal[:-1])
        assert space is not None
        last = State(minimal[-1], space.epoch(minimal[-1]))
        return Minimised(
            state_id,
            join_id(minimal, kinds),
            self.invariant,
            kind_of(minimal[-1]),
            len(memo) - before,
            lost_writes(last),
        )


def minimise(
    run: Path,
    state_id: str,
    invariant: str,
    options: ReproOptions = ReproOptions(),
    *,
    whole_log: bool = True,
    states: Options | None = None,
) -> Minimised:
    """A smallest state of ``run`` (of ``state_id``'s kind or a simpler
    one, the crash model allowing it) that fails ``invariant`` as
    ``state_id`` does; ``whole_log``: its crash point searched from the
    log's start (False: in ``state_id``'s epoch only, so that a failure
    of the same invariant in an earlier epoch does not absorb it); never
    outside the check's window (``states``: the check's state options;
    None: the run's default, from its ``setup-done`` mark on), whose
    states the check does not judge.
    A one-line :class:`CrashlabError` for an unknown run or invariant, an
    ID the run cannot produce, or a state that does not fail ``invariant``."""
    with Minimiser(run, invariant, options, states=states, whole_log=whole_log) as m:
        return m.minimise(state_id)
