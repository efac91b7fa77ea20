"""The file-system SUTs of j-lang workloads, ``fs-ext4``, ``fs-xfs``,
``fs-btrfs``, ``fs-f2fs``: the system under test is the file system, the
workload a j-lang program (workloads/jlang/), the engine ``jlang`` (its
checker: checkers/fssemantics.py).  Each promises the FS-* invariants its
rules cover (workloads/jlang/rules.py), quoted with their sources.

FS-LINK and FS-XATTR are judged and reported but not promised yet: they
need an extraction of the recovered file system that keeps hard links and
extended attributes (a hard link is extracted as a copy today); where the
extraction does not, the checker skips them saying so (the runner's
control, checkers/fssemantics.py).  ``NEEDS_FAITHFUL_TREE`` lists them:
empty it once the extraction keeps both.

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
NEEDS_FAITHFUL_TREE = ("FS-LINK", "FS-XATTR")
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
    if inv in NEEDS_FAITHFUL_TREE:
        text += " (judged, not held: the extraction does not yet keep links and attributes)"
    return Guarantee(inv, inv not in NEEDS_FAITHFUL_TREE, text, source)


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
