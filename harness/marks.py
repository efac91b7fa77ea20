"""The mark protocol: the one definition of what a mark label is and says.

A workload writes marks in line with its writes (``harness/record/README.md``
says how, per backend).  A label is one word — 1 to 480 bytes (what fits in
one 512-byte log entry header after its fields), no whitespace, no NUL —
because the kernel's dm-log-writes takes it as a single argument of a
device-mapper message.  Its grammar:

    LABEL    = NAME [ ";" PAYLOAD ]
    NAME     = "setup-done" | "workload-end" | "txn-begin:" K | "txn-ack:" K
             | "txn-error:" K | any other word
    PAYLOAD  = KEY "=" VALUE { ";" KEY "=" VALUE }

``txn-begin:K`` says transaction K (from 1) issued its first write,
``txn-ack:K`` that its commit returned: both give crash states their
meaning (the acknowledged and begun transactions at the cut).  The payload
is the workload's own: ``txn-ack:3;from=alice;to=bob;amount=20`` tells a
checker what was acknowledged.  ``txn-error:K`` says transaction K failed
(an I/O error, a full disk) and was rolled back; crashlab's runner adds
``attempt=N;op=OP;why=WORDS``, and a retry of K begins with
``txn-begin:K;attempt=2`` (checkers/ioerror.py judges them).  Keys and
values are any bytes but ``;``, ``=`` and whitespace (percent-encode them if
you need them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.errors import CrashlabError

MARK_MAX = 480
PAYLOAD_SEP = ";"
TXN_ERROR = "txn-error"


def check_label(label: str) -> bytes:
    """The label's bytes; CrashlabError when it is not one valid word."""
    try:
        raw = label.encode("utf-8")
    except UnicodeEncodeError:  # a command-line byte that is not UTF-8: a surrogate
        raise CrashlabError(f"bad mark label {label!r}: not UTF-8 text") from None
    if not raw or len(raw) > MARK_MAX or any(c.isspace() for c in label) or "\0" in label:
        raise CrashlabError(f"bad mark label {label!r}: 1..{MARK_MAX} bytes, no whitespace")
    return raw


@dataclass(frozen=True)
class Mark:
    """A parsed label: its name and payload (``{}`` without one)."""

    name: str
    payload: dict[str, str] = field(default_factory=dict)

    @property
    def txn(self) -> tuple[str, int] | None:
        """``("begin"|"ack", K)`` for ``txn-begin:K`` / ``txn-ack:K``."""
        kind, sep, num = self.name.partition(":")
        if sep and kind in ("txn-begin", "txn-ack") and num.isdigit():
            return kind[4:], int(num)
        return None


def parse_label(label: str) -> Mark:
    """The name and payload of a label; a payload item without ``=`` is a
    key with an empty value."""
    name, _, rest = label.partition(PAYLOAD_SEP)
    payload: dict[str, str] = {}
    for item in rest.split(PAYLOAD_SEP) if rest else ():
        k, _, v = item.partition("=")
        payload[k] = v
    return Mark(name, payload)


def names_mark(label: str, want: str) -> bool:
    """Whether ``want`` names the mark ``label``: the whole label, or (a
    ``want`` without a payload) its name, so ``txn-ack:1`` names
    ``txn-ack:1;op=sync``."""
    return label == want or (PAYLOAD_SEP not in want and parse_label(label).name == want)


def txn_mark(label: str) -> tuple[str, int] | None:
    """``("begin"|"ack", K)`` for a ``txn-begin:K`` / ``txn-ack:K`` label
    (with or without a payload)."""
    return parse_label(label).txn
