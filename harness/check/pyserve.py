"""The process of a ``py:`` checker (``--checker NAME=py:TARGET``, the
pytest plugin's checkers): loads ``fn(files, state)`` once and serves the
persistent checker protocol (harness/check/persist.py) with it.

    python -m harness.check.pyserve module:function
    python -m harness.check.pyserve path/to/file.py:function

Each request runs ``fn(Path(files), state)`` in the state's folder (its
cwd): it holds when it returns None or True, is violated when it returns
a string (the explanation) or False, or raises AssertionError; any other
exception is a checker error.  What ``fn`` prints goes to stderr: stdout
carries the protocol alone.  Standard library only (it runs in the
user's interpreter, beside the user's imports)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

Checker = Callable[[Path, dict[str, Any]], object]


def load(target: str) -> Checker:
    """The function ``target`` names: ``module:qualname`` (imported from
    the cwd and sys.path) or ``file.py:qualname`` (imported by its file,
    its folder on sys.path)."""
    where, sep, qual = target.rpartition(":")
    if not sep or not where or not qual:
        raise SystemExit(
            f"crashlab: py checker {target!r}: give MODULE:FUNCTION or FILE.py:FUNCTION"
        )
    if where.endswith(".py"):
        path = Path(where).resolve()
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location("crashlab_checker_module", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"crashlab: py checker {target!r}: cannot load {path}")
        obj: Any = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = obj
        spec.loader.exec_module(obj)
    else:
        sys.path.insert(0, os.getcwd())
        obj = importlib.import_module(where)
    for part in qual.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise SystemExit(f"crashlab: py checker {target!r} is not a function")
    return obj


def judge(fn: Checker, files: Path, state: dict[str, Any]) -> dict[str, str]:
    """The reply for one state (see the module's comment)."""
    try:
        out = fn(files, state)
    except AssertionError as e:
        return {"verdict": "fail", "explanation": str(e) or "assertion failed"}
    except Exception as e:  # noqa: BLE001  (the checker's failure, not ours)
        tb = traceback.format_exc(limit=-3)
        print(tb, file=sys.stderr, flush=True)
        return {"verdict": "error", "explanation": f"the checker raised {type(e).__name__}: {e}"}
    if out is None or out is True:
        return {"verdict": "pass", "explanation": ""}
    if out is False:
        return {"verdict": "fail", "explanation": "the checker returned False"}
    if isinstance(out, str):
        return {"verdict": "fail", "explanation": out}
    return {
        "verdict": "error",
        "explanation": f"the checker returned {out!r} "
        "(None/True: holds, a string or False: violated)",
    }


def serve(target: str) -> None:
    """Answer requests on stdin until it closes."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the function's prints go to stderr
    sys.stdout = sys.stderr
    try:
        fn = load(target)
    except Exception as e:  # noqa: BLE001  (an import's error: one line, not a traceback)
        why = f"{type(e).__name__}: {e}"
        raise SystemExit(f"crashlab: py checker {target!r} does not load: {why}") from None
    start = os.getcwd()
    for line in sys.stdin.buffer:
        req = json.loads(line)
        files = Path(req["files"])
        try:
            os.chdir(files if files.is_dir() else start)
            reply = judge(fn, files, req["state"])
        finally:
            os.chdir(start)
        proto.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    serve(sys.argv[1])
