"""crashlab checker for bank.py: the recovered Data.fs opens with ZODB (an
incomplete last transaction is cut off), holds the balances after exactly
its `seq` transfers (replayed from the txn-begin marks' payloads), and
`seq` is no older than the state's `acked` (the last transfer acknowledged
before the crash).

`check(files, state)` is what crashlab.toml names (`py:check.py:check`:
loaded once per worker, ZODB imported once); run as a script it is the
per-state command form (exit 0 holds, 1 violated, stdout says why)."""

import json
import os
import sys
from pathlib import Path
from typing import Any

import ZODB
import ZODB.FileStorage

ACCOUNTS = ["alice", "bob", "carol", "dave", "erin"]


def check(files: Path, state: dict[str, Any]) -> str | None:
    """None: the state holds; else why it is violated."""
    marks = state["marks"]["before"] + state["marks"]["maybe"]
    transfers = {
        int(m["name"].split(":")[1]): m["payload"]
        for m in marks
        if m["name"].startswith("txn-begin:")
    }
    acked = state["acked"]
    set_up = any(m["name"] == "setup-done" for m in state["marks"]["before"])
    try:
        db = ZODB.DB(ZODB.FileStorage.FileStorage(str(files / "Data.fs")))
        try:
            root = db.open().root()
            got = {a: int(root[a]) for a in ACCOUNTS}
            seq = int(root["seq"])
        finally:
            db.close()
    except Exception as e:  # whatever ZODB raises on a damaged file
        if not set_up:  # nothing was promised before the set-up's end
            return None
        return f"the database does not open or read: {type(e).__name__}: {e}"
    want = dict.fromkeys(ACCOUNTS, 100)
    for k in range(1, seq + 1):
        if k not in transfers:
            return f"seq is {seq} but transfer {k} was never begun"
        t = transfers[k]
        want[t["from"]] -= int(t["amount"])
        want[t["to"]] += int(t["amount"])
    if got != want:
        return f"after {seq} transfers the balances are {got}, expected {want}"
    if seq < acked:
        return f"the database holds {seq} transfers, but transfer {acked} was acknowledged"
    return None


if __name__ == "__main__":
    with open(os.environ["CRASHLAB_STATE_JSON"]) as f:
        why = check(Path.cwd(), json.load(f))
    print(why or "balances consistent")
    sys.exit(1 if why else 0)
