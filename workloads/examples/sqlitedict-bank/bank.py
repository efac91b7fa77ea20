"""A bank on sqlitedict (sqlitedict on PyPI: a dict over SQLite): five
accounts of 100 and `seq`, then seeded random transfers, each the source,
the destination and `seq` set and then one commit().  Marked for crashlab:
`txn-begin:K;from=A;to=B;amount=N` before it, `txn-ack:K` once commit()
returned.

    bank.py [--transfers N]

Its documentation says commit() "Persist[s] all data to disk" (sqlitedict
2.1.0: commit(blocking=True), the default, waits for SQLite's COMMIT, "and
that the data has actually persisted to disk"), but every connection it
opens runs `PRAGMA synchronous=OFF` (sqlitedict.py, SqliteMultithread.run):
SQLite then never syncs, so an acknowledged commit may be lost and the
database left torn after a power loss.  crashlab finds it (the matrix)."""

import argparse
import os
import random

from sqlitedict import SqliteDict

ACCOUNTS = ["alice", "bob", "carol", "dave", "erin"]


def mark(label: str) -> None:
    with open(os.environ["CRASHLAB_MARK"], "a") as f:
        f.write(label + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transfers", type=int, default=4)
    args = ap.parse_args()
    db = SqliteDict("bank.sqlite")
    for a in ACCOUNTS:
        db[a] = 100
    db["seq"] = 0
    db.commit()
    mark("setup-done")
    rng = random.Random(7)
    for k in range(1, args.transfers + 1):
        src, dst = rng.sample(ACCOUNTS, 2)
        amount = rng.randint(1, 40)
        mark(f"txn-begin:{k};from={src};to={dst};amount={amount}")
        db[src] -= amount
        db[dst] += amount
        db["seq"] = k
        db.commit()
        mark(f"txn-ack:{k}")
    db.close()


if __name__ == "__main__":
    main()
