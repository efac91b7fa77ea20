"""j-lang workload specs: what ``--workload`` names for a j-lang run.

    jlang:SUITE/N       the N-th workload (from 1) of crashlab's suite SUITE
                        (workloads/jlang/suite.py: seq1)
    jlang:file=PATH     the j-lang file PATH (read when the run is recorded)

meta.json keeps the spec and the program's canonical text (``jlang``): the
oracle is rebuilt from that text alone (a file may change or be gone).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.errors import CrashlabError
from workloads.jlang.lang import MAX_TEXT, Program, canonical, parse
from workloads.jlang.suite import suite_program

PREFIX = "jlang:"
DB_FOLDER = "jlang"  # the program's root folder, at the file system's root


@dataclass(frozen=True)
class JlangSpec:
    text: str  # the spec as given (canonical: it is its own)
    program: Program

    @property
    def txns(self) -> int:
        """Persistence points (checkpoints): the transactions of its marks."""
        return self.program.checkpoints

    @property
    def source(self) -> str:
        return canonical(self.program)

    def __str__(self) -> str:
        return self.text


def is_jlang(text: str) -> bool:
    return text.startswith(PREFIX)


def parse_jlang_spec(text: str) -> JlangSpec:
    """The spec's program; CrashlabError says what is wrong."""
    body = text[len(PREFIX) :]
    if body.startswith("file="):
        path = Path(body[len("file=") :])
        try:
            raw = path.read_bytes()[: MAX_TEXT + 1]
        except OSError as e:
            raise CrashlabError(f"workload {text!r}: cannot read {path}: {e.strerror}") from None
        return JlangSpec(text, parse(raw.decode("utf-8", "replace")))
    suite, sep, num = body.partition("/")
    if not sep or not num.isdigit() or len(num) > 6:
        raise CrashlabError(
            f"bad j-lang workload {text!r} (jlang:SUITE/N, e.g. jlang:seq1/3, or jlang:file=PATH)"
        )
    return JlangSpec(f"{PREFIX}{suite}/{int(num)}", suite_program(suite, int(num)))
