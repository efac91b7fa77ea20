#!/bin/sh
# The classic atomic file update — write a new version to a temporary file,
# fsync it, rename it over the old one, fsync the directory — and its two
# broken variants (ALICE's best-known vulnerability class):
#   update.sh correct | no-file-fsync | no-dir-fsync
# Each update is one transaction, marked for crashlab (the value is the
# txn-ack mark's payload).  A version is bigger than one 4 KiB block, so a
# half-written or empty file shows.
set -e
variant=${1:?usage: update.sh correct|no-file-fsync|no-dir-fsync}
version() {  # the file's content for version $1
    printf 'value=%s\n' "$1"
    head -c 6000 /dev/zero | tr '\0' "$(($1 % 10))"
    printf '\nend=%s\n' "$1"
}
version 0 > config
sync config
sync .
echo setup-done >> "$CRASHLAB_MARK"
for i in 1 2 3 4 5 6; do
    echo "txn-begin:$i" >> "$CRASHLAB_MARK"
    version "$i" > config.tmp
    [ "$variant" = no-file-fsync ] || sync config.tmp
    mv config.tmp config
    [ "$variant" = no-dir-fsync ] || sync .
    echo "txn-ack:$i;value=$i" >> "$CRASHLAB_MARK"
done
