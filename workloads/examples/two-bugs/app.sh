#!/bin/sh
# A small application with two independent crash bugs on two files, for
# triage to tell apart (issue 25: two injected bugs, two groups):
#   config  an atomic update by rename, without the directory's fsync:
#           the rename of an acknowledged update may be lost (bug 1);
#   ledger  an append-only data file with its commit index ledger.idx,
#           the index made durable before the data it counts: an index
#           ahead of its data (bug 2, write-ahead order inverted).
# Each round is one transaction, marked for crashlab; check_config.py and
# check_ledger.py judge one file each.
set -e
record() {  # ledger record $1: 6000 bytes (a one-digit $1), more than a 4 KiB block
    printf 'rec=%s\n' "$1"
    head -c 5993 /dev/zero | tr '\0' "$(($1 % 10))"
    printf '\n'
}
version() {  # config's content for version $1
    printf 'value=%s\n' "$1"
    head -c 6000 /dev/zero | tr '\0' "$(($1 % 10))"
    printf '\nend=%s\n' "$1"
}
version 0 > config
: > ledger
echo 0 > ledger.idx
sync config ledger ledger.idx
sync .
echo setup-done >> "$CRASHLAB_MARK"
for i in 1 2 3 4 5; do
    echo "txn-begin:$i" >> "$CRASHLAB_MARK"
    record "$i" >> ledger
    echo "$i" > ledger.idx
    sync ledger.idx   # bug 2: the index first; the data it counts after
    sync ledger
    version "$i" > config.tmp
    sync config.tmp
    mv config.tmp config  # bug 1: no `sync .` after the rename
    echo "txn-ack:$i;value=$i" >> "$CRASHLAB_MARK"
done
