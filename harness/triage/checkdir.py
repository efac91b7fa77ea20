"""A check folder as triage reads it: which one (a run's, chosen by tag,
or given), the window its check.json says it judged, and its failing
states from states.jsonl -- every byte treated as hostile: anything
malformed is a one-line :class:`CrashlabError` naming the file."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.check.multicrash import COMPOSITE, CONTINUED_KEY
from harness.confine import confined, open_regular, read_json_object, read_regular
from harness.errors import CrashlabError
from harness.rundir import (
    CHECK_DIR,
    IDENTITY_NAME,
    META_LIMIT,
    META_NAME,
    RESULT_NAME,
    STATES_NAME,
    RunDir,
)
from harness.states import Options
from harness.states.stateid import parse_id
from harness.triage.minimise import split_id

CHECK_JSON_LIMIT = 1 << 20
# result.json lists the failing states: 3.6 MB for 2,000 (harness/report/load.py's limit)
RESULT_LIMIT = 256 << 20
CONTINUED_LIMIT = 10_000  # crashes a composite check continued (--max-first, per level)


@dataclass(frozen=True)
class Failing:
    """A failing state of states.jsonl: its ID, the log entries it dropped
    and tore, and its cut's first entry."""

    id: str
    dropped: frozenset[int]
    torn: frozenset[int]
    cut_lo: int


@dataclass(frozen=True)
class CheckDir:
    """A check folder of a run: its window (the check's state options)
    and fsck option, and per invariant its failing states in file order.
    A multicrash or recovery-crash check: ``window`` is its continuations'
    (the first crash's is the run's default), ``continued`` the composed
    IDs of the crashes it continued (None: a log strategy's check)."""

    run: RunDir
    path: Path
    window: Options
    fsck: bool
    failing: dict[str, list[Failing]]
    continued: frozenset[str] | None = None


def find_check(path: Path, tag: str | None) -> tuple[RunDir, Path]:
    """The run and check folder ``path`` names: a check folder itself, or
    a run folder with one check (or ``tag``, one of its checks)."""
    if not path.is_dir():
        raise CrashlabError(f"{path}: no such run or check folder")
    if (path / IDENTITY_NAME).exists() and (path / STATES_NAME).exists():
        if tag is not None and tag != path.name:
            raise CrashlabError(f"{path}: is check {path.name!r}, not {tag!r}")
        return _run_of(path), path
    if (path / STATES_NAME).exists() and (path / RESULT_NAME).exists():
        raise CrashlabError(
            f"{path}: no {IDENTITY_NAME}: a multicrash or recovery-crash check of an older "
            "crashlab (check it again), or not a check folder"
        )
    if not (path / META_NAME).exists():
        raise CrashlabError(f"{path}: not a run folder (no {META_NAME}) nor a check folder")
    tags = sorted(p.name for p in (path / CHECK_DIR).glob("*") if (p / STATES_NAME).is_file())
    if tag is not None:
        folder = confined(path / CHECK_DIR, tag, f"{path}: --check")
        if tag not in tags:
            raise CrashlabError(f"{path}: no check {tag!r} (checks: {', '.join(tags) or 'none'})")
        return RunDir(path), folder
    if len(tags) != 1:
        which = f"several checks ({', '.join(tags)}): choose one with --check"
        raise CrashlabError(f"{path}: {which if tags else 'not checked (crashlab check first)'}")
    return RunDir(path), path / CHECK_DIR / tags[0]


def _run_of(folder: Path) -> RunDir:
    """The run a check folder checked: RUN of RUN/check/TAG, else (a check
    written elsewhere with --out) the one its result.json names; either
    way the recording its check.json holds the digest of."""
    run = folder.parent.parent
    if folder.parent.name != CHECK_DIR or not (run / META_NAME).exists():
        where = str(folder / RESULT_NAME)
        try:
            named = read_json_object(folder / RESULT_NAME, RESULT_LIMIT, where).get("run")
        except FileNotFoundError:
            named = None
        if not isinstance(named, str) or not (Path(named) / META_NAME).is_file():
            raise CrashlabError(f"{folder}: names no run (not in RUN/{CHECK_DIR}/, no result.json)")
        run = Path(named)
    ident = read_json_object(folder / IDENTITY_NAME, CHECK_JSON_LIMIT, str(folder / IDENTITY_NAME))
    digest = hashlib.sha256(read_regular(run / META_NAME, META_LIMIT)).hexdigest()
    if ident.get("recording") != digest:
        raise CrashlabError(f"{folder}: a check of another recording than {run}")
    return RunDir(run)


def read_check(run: RunDir, folder: Path) -> CheckDir:
    """The check in ``folder``: its check.json's window and fsck option,
    its states.jsonl's failing states."""
    where = str(folder / IDENTITY_NAME)
    doc = read_json_object(folder / IDENTITY_NAME, CHECK_JSON_LIMIT, where)
    opts = doc.get("options")
    if not isinstance(opts, dict):
        raise CrashlabError(f"{where}: no options object")
    start, end = opts.get("window_start"), opts.get("window_end")
    if not all(v is None or isinstance(v, str) for v in (start, end)):
        raise CrashlabError(f"{where}: a window mark that is not a string")
    fsck = opts.get("fsck", True)
    if not isinstance(fsck, bool):
        raise CrashlabError(f"{where}: fsck is not true or false")
    return CheckDir(
        run,
        folder,
        Options(window_start=start, window_end=end),
        fsck,
        _failing(folder / STATES_NAME),
        _continued(doc, opts, where),
    )


def _continued(doc: dict[str, Any], opts: dict[str, Any], where: str) -> frozenset[str] | None:
    """The crashes a composite check continued (its check.json's list of
    composed IDs, each checked: a state ID or composed ones, of the
    check's kind), None for a log strategy's check."""
    comp = opts.get("composite")
    if comp is None:
        return None
    kind = comp.get("kind") if isinstance(comp, dict) else None
    if kind not in COMPOSITE:
        raise CrashlabError(f"{where}: composite is not a multicrash or recovery-crash one")
    ids = doc.get(CONTINUED_KEY)
    if not isinstance(ids, list) or len(ids) > CONTINUED_LIMIT:
        raise CrashlabError(f"{where}: {CONTINUED_KEY} is not a list of state IDs")
    for x in ids:
        parts, kinds = _split(x, where)
        if any(k != kind for k in kinds):
            raise CrashlabError(f"{where}: {CONTINUED_KEY}: {x!r} is not a {kind} ID")
        for part in parts:
            try:
                parse_id(part)
            except CrashlabError:
                raise CrashlabError(f"{where}: {CONTINUED_KEY}: {x!r} is no state ID") from None
    return frozenset(ids)


def _split(x: object, where: str) -> tuple[list[str], list[str]]:
    if not isinstance(x, str) or not x or len(x) > 4096:
        raise CrashlabError(f"{where}: {CONTINUED_KEY} is not a list of state IDs")
    return split_id(x)


def _failing(path: Path) -> dict[str, list[Failing]]:
    """Per invariant, the states of states.jsonl that fail it."""
    out: dict[str, list[Failing]] = {}
    fd = open_regular(path, str(path))
    with open(fd, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.endswith(b"\n"):
                break  # a check still writing, or killed: its torn last line
            rec = _record(line, f"{path}:{n}")
            for inv, status in rec["v"].items():
                if status == "fail":
                    out.setdefault(inv, []).append(_failing_state(rec, f"{path}:{n}"))
    return out


def _record(line: bytes, where: str) -> dict[str, Any]:
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError) as e:
        raise CrashlabError(f"{where}: corrupt JSON ({str(e)[:80]})") from None
    if not (
        isinstance(rec, dict)
        and isinstance(rec.get("id"), str)
        and isinstance(rec.get("v"), dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in rec["v"].items())
    ):
        raise CrashlabError(f"{where}: not a state record (id and verdicts)")
    return rec


def _failing_state(rec: dict[str, Any], where: str) -> Failing:
    ints = {}
    for key in ("dropped", "torn", "cut"):
        v = rec.get(key, [])
        if not isinstance(v, list) or not all(type(x) is int and x >= 0 for x in v):
            raise CrashlabError(f"{where}: {key} is not a list of log entries")
        ints[key] = v
    cut = ints["cut"]
    return Failing(
        rec["id"], frozenset(ints["dropped"]), frozenset(ints["torn"]), cut[0] if cut else 0
    )
