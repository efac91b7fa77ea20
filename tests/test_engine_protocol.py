"""The engine protocol (issue 28, item 4): every engine's checker object
implements :class:`checkers.protocol.EngineChecker`, its optional
capabilities are there as None rather than missing, and the harness reaches
an engine's checker only through the engine table (``checkers/engines.py``),
never by importing an engine's module."""

from __future__ import annotations

from test_layers import PACKAGES, ROOT, import_graph

from checkers.engines import ENGINES
from checkers.protocol import EngineChecker

# The modules of the engines' checkers: the table's own (CHECKER of each)
# and what only they use (DHL's examination, verdicts, facts, trace, format
# reader, native twin, and REC-CRASHSAFE).  Shared ones (verdict, content,
# invariants, protocol, engines) are not among them.
ENGINE_MODULES = {
    "checkers.sqlite",
    "checkers.xlog",
    "checkers.dhl",
    "checkers.dhl_examine",
    "checkers.dhl_judge",
    "checkers.dhl_facts",
    "checkers.dhl_trace",
    "checkers.dhl_format",
    "checkers.dhl_native",
    "checkers.recovery",
}
OPTIONAL = ("content_key_of", "examine_image", "run_checks")


def test_every_engine_checker_implements_the_protocol() -> None:
    for name, engine in ENGINES.items():
        checker = engine.checker
        assert isinstance(checker, EngineChecker), name
        assert checker.IDS, name
        # a database engine's verdicts start with whether it opens; the
        # file-system oracle (jlang) judges files, not a database
        assert ("DB-OPEN" in checker.IDS) != all(i.startswith("FS-") for i in checker.IDS), name
        for attr in OPTIONAL:  # present on every engine, None where it has none
            assert attr in dir(checker), (name, attr)
    assert ENGINES["dhl"].checker.run_checks is not None
    assert ENGINES["sqlite"].checker.run_checks is None
    assert ENGINES["xlog"].checker.content_key_of is None  # its NVRAM is written beside the files


def test_the_harness_imports_no_engine_module() -> None:
    """harness/ asks the engine table; only checkers/ imports an engine's
    checker module (the table lazily, the engines each other's parts)."""
    graph = import_graph(ROOT, PACKAGES)
    found = sorted(
        (src, dst)
        for src, dsts in graph.items()
        for dst in dsts
        if src.startswith("harness/")
        and dst.removesuffix(".py").replace("/", ".") in ENGINE_MODULES
    )
    assert found == []
