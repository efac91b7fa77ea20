"""A bank on ZODB (ZODB on PyPI, its FileStorage): five accounts of 100 and
`seq` in the root object, then seeded random transfers, each one
transaction.commit().  Marked for crashlab: `txn-begin:K;from=A;to=B;amount=N`
before it, `txn-ack:K` once commit() returned.

    bank.py [--transfers N]

Crash-safe by its documentation (ZODB's transactions are ACID): FileStorage
appends each transaction to Data.fs and fsyncs it before commit() returns
(ZODB 6.4, FileStorage._finish_finish); an incomplete transaction at the
end of the file is cut off when the storage opens again."""

import argparse
import os
import random

import transaction
import ZODB
import ZODB.FileStorage

ACCOUNTS = ["alice", "bob", "carol", "dave", "erin"]


def mark(label: str) -> None:
    with open(os.environ["CRASHLAB_MARK"], "a") as f:
        f.write(label + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transfers", type=int, default=4)
    args = ap.parse_args()
    db = ZODB.DB(ZODB.FileStorage.FileStorage("Data.fs"))
    conn = db.open()
    root = conn.root()
    for a in ACCOUNTS:
        root[a] = 100
    root["seq"] = 0
    transaction.commit()
    mark("setup-done")
    rng = random.Random(7)
    for k in range(1, args.transfers + 1):
        src, dst = rng.sample(ACCOUNTS, 2)
        amount = rng.randint(1, 40)
        mark(f"txn-begin:{k};from={src};to={dst};amount={amount}")
        root[src] -= amount
        root[dst] += amount
        root["seq"] = k
        transaction.commit()
        mark(f"txn-ack:{k}")
    conn.close()
    db.close()


if __name__ == "__main__":
    main()
