"""The file-system SUTs of j-lang workloads, ``fs-ext4``, ``fs-xfs``,
``fs-btrfs``, ``fs-f2fs``: the system under test is the file system, the
workload a j-lang program (workloads/jlang/), the engine ``jlang`` (its
checker: checkers/fssemantics.py).  Each promises the FS-* invariants its
rules cover (workloads/jlang/rules.py), quoted with their sources.

An invariant of ``NOT_HELD`` is judged and reported but not promised, for
the reason given: FS-LINK and FS-XATTR on a file system until a whole
seq-1 run there has judged them on the extraction that keeps hard links
and extended attributes (done on ext4: docs/findings.md; where an
extraction does not keep them, the checker skips them saying so: the
runner's control, checkers/fssemantics.py); FS-REPLACE on ext4 because
this kernel does not keep it (docs/findings.md, "ext4's replace by
rename").

Known deviations (``DEVIATIONS``): a workload on which a file system does
not keep a fact its rules promise, by a documented design of it
(docs/findings.md, "CrashMonkey's seq-1 on crashlab"): the cell of that
workload must keep showing it and is not held to it (:func:`deviation`).
"""

from __future__ import annotations

from workloads.guarantee import Guarantee
from workloads.jlang.rules import ANY, FS_INVARIANTS, rules_of
from workloads.sut import Sut

RUNNER = "crashlab-jlang"
# (fs, invariant) -> why it is judged but not promised there
_UNPROVEN = "not yet judged by a whole seq-1 run on the extraction that keeps links and attributes"
NOT_HELD: dict[tuple[str, str], str] = {
    **{(fs, inv): _UNPROVEN for fs in ANY if fs != "ext4" for inv in ("FS-LINK", "FS-XATTR")},
    ("ext4", "FS-REPLACE"): (
        "auto_da_alloc's flush of the new file is not waited for: when its I/O ends after the "
        "rename's journal commit began, the file's unwritten extents are converted in a later "
        "commit, and a crash between the two reads the replaced name as zeros"
    ),
}
# (fs, workload) -> (the invariants it breaks there, why)
DEVIATIONS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {}


def deviation(fs: str, workload: str) -> tuple[str, ...]:
    """The invariants ``workload`` is known to break on ``fs`` (none: ())."""
    return DEVIATIONS.get((fs, workload), ((), ""))[0]


def _guarantee(fs: str, inv: str) -> Guarantee:
    rules = rules_of(fs, inv)
    if not rules:
        return Guarantee(inv, False, f"no rule of crashlab's promises it on {fs}", "rules.py")
    text = "; ".join(r.text for r in rules)
    source = "; ".join(r.source for r in rules)
    why = NOT_HELD.get((fs, inv))
    if why:
        text += f" (judged, not held: {why})"
    return Guarantee(inv, why is None, text, source)


def fs_suts() -> tuple[Sut, ...]:
    """One SUT per file system the rules know."""
    return tuple(
        Sut(
            name=f"fs-{fs}",
            engine="jlang",
            description=f"{fs} under j-lang workloads, held to its FS-* rules",
            runner_options=(),
            guarantees=tuple(_guarantee(fs, inv) for inv in FS_INVARIANTS),
            needs_fs=fs,
            runner=RUNNER,
        )
        for fs in ANY
    )
