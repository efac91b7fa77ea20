"""Faults beyond power loss: the one grammar, its parser and printer.

A power cut is every crash state's fault; a run may add others.  Each fault
is injected by the stage that can cause it:

* **device** faults, by the recording device itself (the fuse daemon is the
  device, ``harness/fuse/logfuse.c``): requests fail as a disk fails them;
* **state** faults, by the crash-state enumeration, on top of any crash state
  (what the disk persisted is not what it was told to persist);
* **process** faults, by the workload runner: the application dies, the
  machine does not.

The grammar (``crashlab record --fault``; several faults: repeat the option
or join them with ``+``)::

    FAULT  = KIND [ ":" OP ] { "," KEY [ "=" VALUE ] }

    eio:flush | eio:write | eio:read                          device
        after=MARK   armed when the workload writes MARK (default: from the
                     start of the recording); a workload arms a fault at run
                     time simply by writing the mark
        nth=N        the Nth matching request after arming fails (default 1)
        range=A-B    only requests touching device bytes [A, B) match
                     (write and read; sizes take K, M, G suffixes)
        sticky       that request and every later matching one fail
                     (default: only that one)
    enospc                                                    device
        left=BYTES   the file system is filled before the workload starts
                     until BYTES remain free (required)
    lost-flush                                                state
        nth=N        the Nth FLUSH of the window is acknowledged without
                     persisting anything (default: each FLUSH in turn)
    misdirect                                                 state
        seed=N       a persisted write lands at another block (default 0)
        file=F       the file it aims at: db (the database, default) or
                     wal (its write-ahead log, SQLite's FILE-wal)
    corrupt                                                   state
        seed=N       bits of a persisted sector flip (default 0)
        bits=N       how many bits, 1..4096 (default 1)
        file=F       as for misdirect
    process-crash                                             process
        at=MARK      the workload is killed (SIGKILL) right after writing
                     MARK; no power is lost (required)

The canonical spelling (:func:`format_fault`) lists the keys in the table's
order and leaves defaults out, so equal faults print alike in meta.json,
state IDs and reports.

A fault spec is parsed once, where it enters (a ``--fault`` option, a
matrix file, meta.json, the built-in matrix's literals: the edges
``tests/test_fault_edges.py`` lists); from there it travels as a
:class:`Fault` and is printed (``str(fault)``, :func:`fault_specs`) only
where it leaves: meta.json, result.json, folder names, reports.

What the enumeration does with the state kinds (which states a lost flush
adds, which write is misdirected where, which bits flip) is
``harness/states/README.md``, State faults; a state's ID then names the
fault exactly (``harness/states/stateid.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from harness.errors import CrashlabError
from harness.marks import check_label

DEVICE, STATE, PROCESS = "device", "state", "process"
# the mark the device logs where it failed a request: "fault:eio-write;
# sector=S;sectors=N", "fault:eio-flush" (harness/fuse/faultrules.h)
FAULT_MARK_PREFIX = "fault:"
# the file an enospc fault fills the file system with (in its root); it is
# the harness's, not the workload's, so recovery does not extract it
FILL_NAME = ".crashlab-fill"
Value = int | str | bool | tuple[int, int]
SEP = "+"

# kind -> (where it is injected, its operations (empty: none), its keys in
# canonical order, the keys it requires)
KINDS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "eio": (DEVICE, ("flush", "write", "read"), ("after", "nth", "range", "sticky"), ()),
    "enospc": (DEVICE, (), ("left",), ("left",)),
    "lost-flush": (STATE, (), ("nth",), ()),
    "misdirect": (STATE, (), ("seed", "file"), ()),
    "corrupt": (STATE, (), ("seed", "bits", "file"), ()),
    "process-crash": (PROCESS, (), ("at",), ("at",)),
}
FLAGS = ("sticky",)  # keys without a value
# defaults per kind (a key without one: None, or False for a flag)
DEFAULTS: dict[str, dict[str, Value]] = {
    "eio": {"nth": 1},
    "misdirect": {"seed": 0, "file": "db"},
    "corrupt": {"seed": 0, "bits": 1, "file": "db"},
}
MARK_KEYS = ("after", "at")
SIZE_KEYS = ("left",)
COUNT_KEYS = ("nth", "bits")  # integers >= 1
SEED_KEYS = ("seed",)  # integers >= 0
# keys whose value is one of a few words; the file a misdirect or corrupt
# fault aims at (its name beside the database's: harness/filetrace.py)
CHOICES: dict[str, tuple[str, ...]] = {"file": ("db", "wal")}
FILE_SUFFIX = {"db": "", "wal": "-wal"}
MAX_BITS = 4096  # corrupt: the bits of a 512-byte sector

MAX_VALUE = (1 << 64) - 1  # any number or byte count: what a u64 holds
# ASCII only: str.isdigit() and re.IGNORECASE would take other digits
# ("²", "٣") and the Kelvin sign for K
_SIZE = re.compile(r"(0|[1-9][0-9]{0,19})([KMGkmg]?)", re.ASCII)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_NUMBER = re.compile(r"[0-9]{1,20}", re.ASCII)


@dataclass(frozen=True)
class Fault:
    """One parsed fault: its kind, operation ("" when the kind has none) and
    the keys given (defaults not filled in: use :meth:`get`)."""

    kind: str
    op: str = ""
    params: tuple[tuple[str, Value], ...] = ()

    @property
    def where(self) -> str:
        """ "device", "state" or "process": the stage that injects it."""
        return KINDS[self.kind][0]

    def get(self, key: str) -> Value | None:
        """The key's value, its default, or None (a flag: False)."""
        for k, v in self.params:
            if k == key:
                return v
        return False if key in FLAGS else DEFAULTS.get(self.kind, {}).get(key)

    @property
    def aim(self) -> str:
        """The file a misdirect or corrupt fault aims at ("db" or "wal";
        "db" for every other kind)."""
        v = self.get("file")
        return v if isinstance(v, str) else "db"

    def get_int(self, key: str) -> int | None:
        """An integer key's value or default (None: neither); TypeError for
        a key whose values are not integers (a caller's mistake)."""
        v = self.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise TypeError(f"{self.kind} key {key!r} is not an integer: {v!r}")
        return v

    def get_range(self, key: str) -> tuple[int, int] | None:
        """A range key's ``(lo, hi)`` or None; TypeError for another key."""
        v = self.get(key)
        if v is not None and not isinstance(v, tuple):
            raise TypeError(f"{self.kind} key {key!r} is not a range: {v!r}")
        return v

    def __str__(self) -> str:
        return format_fault(self)


def parse_size(text: str, what: str) -> int:
    """``4096``, ``64K``, ``2M``, ``1G`` → bytes; CrashlabError otherwise."""
    m = _SIZE.fullmatch(text)
    n = int(m[1]) * _UNITS[m[2].upper()] if m is not None else None
    if n is None or n > MAX_VALUE:
        raise CrashlabError(f"bad {what} {text!r}: a byte count like 4096, 64K, 2M or 1G")
    return n


def _parse_value(key: str, text: str, whole: str) -> Value:
    """One key's value, checked; CrashlabError names the fault."""
    try:
        if key in MARK_KEYS:
            check_label(text)
            if "," in text or SEP in text:
                raise CrashlabError(f"mark {text!r} may not contain ',' or '{SEP}'")
            return text
        if key in SIZE_KEYS:
            return parse_size(text, key)
        if key in CHOICES:
            if text not in CHOICES[key]:
                raise CrashlabError(f"{key} must be one of {', '.join(CHOICES[key])}, not {text!r}")
            return text
        if key == "range":
            a, dash, b = text.partition("-")
            if not dash:
                raise CrashlabError(f"range {text!r} must be A-B")
            lo, hi = parse_size(a, "range start"), parse_size(b, "range end")
            if hi <= lo:
                raise CrashlabError(f"range {text!r} is empty")
            return (lo, hi)
        if not _NUMBER.fullmatch(text) or int(text) > MAX_VALUE:
            raise CrashlabError(f"{key} must be an integer (at most 2^64-1), not {text!r}")
        n = int(text)
        if key in COUNT_KEYS and n < 1:
            raise CrashlabError(f"{key} must be at least 1")
        if key == "bits" and n > MAX_BITS:
            raise CrashlabError(f"bits must be at most {MAX_BITS} (the bits of a sector)")
        return n
    except CrashlabError as e:
        raise CrashlabError(f"bad fault {whole!r}: {e}") from None


def parse_fault(text: str) -> Fault:
    """Parse one fault; CrashlabError (one line) on anything outside the
    grammar of the module comment."""
    head, *items = text.strip().split(",")
    kind, colon, op = head.partition(":")
    if kind not in KINDS:
        raise CrashlabError(
            f"bad fault {text!r}: unknown kind {kind!r} (choose from {', '.join(KINDS)})"
        )
    _, ops, keys, required = KINDS[kind]
    if ops and op not in ops:
        raise CrashlabError(
            f"bad fault {text!r}: {kind} needs an operation: "
            + ", ".join(f"{kind}:{o}" for o in ops)
        )
    if not ops and colon:
        raise CrashlabError(f"bad fault {text!r}: {kind} takes no operation")
    given: dict[str, Value] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if key not in keys:
            raise CrashlabError(
                f"bad fault {text!r}: unknown key {key!r} for {kind} "
                f"(choose from {', '.join(keys)})"
            )
        if key in given:
            raise CrashlabError(f"bad fault {text!r}: {key} given twice")
        if key in FLAGS:
            if eq:
                raise CrashlabError(f"bad fault {text!r}: {key} takes no value")
            given[key] = True
        elif not eq or not value:
            raise CrashlabError(f"bad fault {text!r}: {key} needs a value ({key}=...)")
        else:
            given[key] = _parse_value(key, value, text)
    missing = [k for k in required if k not in given]
    if missing:
        raise CrashlabError(f"bad fault {text!r}: {kind} needs {missing[0]}=...")
    if kind == "eio" and op == "flush" and "range" in given:
        raise CrashlabError(f"bad fault {text!r}: a flush has no byte range")
    defaults = DEFAULTS.get(kind, {})
    params = tuple((k, given[k]) for k in keys if k in given and given[k] != defaults.get(k))
    return Fault(kind, op, params)


def parse_faults(texts: str | Iterable[str]) -> tuple[Fault, ...]:
    """Every fault of one or more ``+``-joined specs, in order; equal faults
    once.  An empty text is no fault."""
    if isinstance(texts, str):
        texts = [texts]
    return unique_faults(
        parse_fault(part) for text in texts for part in text.split(SEP) if part.strip()
    )


def unique_faults(faults: Iterable[Fault]) -> tuple[Fault, ...]:
    """``faults`` in order, equal ones once (faults from two sources merged)."""
    out: list[Fault] = []
    for f in faults:
        if f not in out:
            out.append(f)
    return tuple(out)


def _format_value(value: Value) -> str:
    if isinstance(value, tuple):
        return f"{value[0]}-{value[1]}"
    return str(value)


def format_fault(fault: Fault) -> str:
    """The canonical spelling: ``parse_fault(format_fault(f)) == f``."""
    head = f"{fault.kind}:{fault.op}" if fault.op else fault.kind
    items = [k if v is True else f"{k}={_format_value(v)}" for k, v in fault.params]
    return ",".join([head, *items])


def format_faults(faults: Iterable[Fault]) -> str:
    """The canonical spelling of several faults (``+``-joined; "" for none)."""
    return SEP.join(format_fault(f) for f in faults)


def fault_specs(faults: Iterable[Fault]) -> list[str]:
    """The canonical spellings, one per fault: a JSON list (meta.json,
    result.json, a sweep's records)."""
    return [format_fault(f) for f in faults]


def by_stage(faults: tuple[Fault, ...], where: str) -> tuple[Fault, ...]:
    """The faults injected by one stage (DEVICE, STATE or PROCESS)."""
    return tuple(f for f in faults if f.where == where)
