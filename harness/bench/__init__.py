"""Benchmarks (``make bench`` / ``crashlab bench``): each module of this
package measures one area and prints its figures; comparisons are ratios
measured in the same run, because this machine is shared and noisy.

A benchmark module defines ``NAME`` (its ``--only`` name) and
``run() -> None``; list it in ``MODULES`` below, in pipeline order."""

MODULES: list[str] = [
    "record",
    "backends",
    "crossval",
    "states",
    "dhl",
    "suts",
    "walopt",
    "walatomic",
    "shadow",
    "xlog",
    "selective",
    "maw",
    "sweep",
    "scale",
    "large",
    "crashes",
    "triage",
    "usercheck",
]
