#!/usr/bin/env bash
# Run real recordings through a (sanitizer) build of logfuse: sqlite3
# inserts with marks, a discard and a zero-range on the device, once plain and
# once with a device fault, once with the emulated NVRAM, and check that the daemon exits cleanly (a sanitizer report makes it exit non-zero,
# which fails the recording) and that the log reads back in full.
set -euo pipefail
daemon=$(realpath "${1:?usage: ctest.sh LOGFUSE}")
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ] || [ ! -e /dev/loop-control ]; then
    echo "ctest-logfuse: skipped (needs root, /dev/fuse and loop devices)"; exit 0
fi
out=$(mktemp -d /tmp/crashlab-ctest-logfuse.XXXXXX)
trap 'rm -rf "$out"' EXIT
script='sqlite3 db "create table t(x)" && for i in 1 2 3; do
  sqlite3 db "pragma synchronous=full; insert into t values($i)" && echo txn-ack:$i > $CRASHLAB_MARK
done && dev=$(findmnt -n -o SOURCE --target $CRASHLAB_MNT) && cd / && umount $CRASHLAB_MNT &&
blkdiscard -f -o 1048576 -l 65536 $dev && fallocate -z -o 2097152 -l 65536 $dev &&
mount $dev $CRASHLAB_MNT'
CRASHLAB_LOGFUSE=$daemon .venv/bin/crashlab record --backend fuse --out "$out/run" -- sh -c "$script"
.venv/bin/crashlab log stat "$out/run" | grep -q '^marks *3 '
# a device fault (faultrules.c): the first write after txn-ack:2 fails with EIO
# and the daemon logs a fault mark in its place
CRASHLAB_LOGFUSE=$daemon .venv/bin/crashlab record --backend fuse --out "$out/faulted" \
    --fault eio:write,after=txn-ack:2 -- sh -c "$script; true" 2>/dev/null
grep -q '"fault:eio-write;sector=' "$out/faulted/meta.json"
# the emulated NVRAM (--nvram): the xLog SUT writes it; every write is a FUA
# entry past the disk's sectors (setup header, one record per transaction)
CRASHLAB_LOGFUSE=$daemon .venv/bin/crashlab record --sut xlog --out "$out/nvram" \
    --workload insert:txns=5,ops=2,tables=1,warmup=10,seed=1 2>/dev/null
fua=$(.venv/bin/crashlab log stat "$out/nvram" | awk '$1 == "fua" {print $2}')
[ "$fua" -ge 6 ] || { echo "ctest-logfuse: $fua NVRAM writes, expected 6 or more"; exit 1; }
echo "ctest-logfuse: ok"
