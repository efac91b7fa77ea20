"""crashlab checker for bank.py: the recovered bank.sqlite opens with
sqlitedict (SQLite rolls back a hot journal first), holds the balances
after exactly its `seq` transfers (replayed from the txn-begin marks'
payloads), and `seq` is no older than the state's `acked` (the last
transfer acknowledged before the crash).  Exit 0 holds, 1 violated (stdout
says why)."""

import json
import os
import sqlite3
import sys

from sqlitedict import SqliteDict

ACCOUNTS = ["alice", "bob", "carol", "dave", "erin"]

state = json.load(open(os.environ["CRASHLAB_STATE_JSON"]))
marks = state["marks"]["before"] + state["marks"]["maybe"]
transfers = {
    int(m["name"].split(":")[1]): m["payload"] for m in marks if m["name"].startswith("txn-begin:")
}
acked = state["acked"]
set_up = any(m["name"] == "setup-done" for m in state["marks"]["before"])


def fail(why: str) -> None:
    print(why)
    sys.exit(1)


try:
    with SqliteDict("bank.sqlite") as db:  # read and write: it may roll back a hot journal
        got = {a: int(db[a]) for a in ACCOUNTS}
        seq = int(db["seq"])
except (sqlite3.Error, RuntimeError, KeyError, ValueError) as e:
    if not set_up:  # nothing was promised before the set-up's end
        print("not set up yet")
        sys.exit(0)
    fail(f"the database does not open or read: {type(e).__name__}: {e}")
want = dict.fromkeys(ACCOUNTS, 100)
for k in range(1, seq + 1):
    if k not in transfers:
        fail(f"seq is {seq} but transfer {k} was never begun")
    t = transfers[k]
    want[t["from"]] -= int(t["amount"])
    want[t["to"]] += int(t["amount"])
if got != want:
    fail(f"after {seq} transfers the balances are {got}, expected {want}")
if seq < acked:
    fail(f"the database holds {seq} transfers, but transfer {acked} was acknowledged")
print(f"{seq} transfers, balances consistent (acknowledged: {acked})")
