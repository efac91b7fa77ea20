#!/usr/bin/env bash
# Build one base image deterministically: build-image.sh FS OUT
#   FS = ext4 | xfs | btrfs | f2fs | raw.  OUT gets the image; OUT.sha256 its digest.
# Fixed UUID (but btrfs, below), hash seed and clock; no lazy initialisation and no discard,
# so nothing but the workload's own writes reaches a recorded log later.
# ext4 and xfs come out byte-identical on every build; btrfs-progs 6.2 draws
# random device and chunk-tree UUIDs, so a btrfs image is identified by the
# digest recorded when it was built (runs name that digest).
# raw is no file system: 1 MiB of zeros (sparse) for SUTs that use the
# recorded block device itself (DHL's raw tier).  1 MiB = 256 4-KiB pages:
# room for ~4,000 100-byte rows after splits, several times what a crash
# sweep's workloads write (the nightly ones use < 30 pages).  Small on
# purpose: the checkers and DHL recovery read every page of every crash
# state's image, and 8 MiB made checking ~5x slower (measured).  A workload
# that outgrows it fails at the commit that writes past the device's end.
set -euo pipefail
fs=${1:?usage: build-image.sh ext4|xfs|btrfs|f2fs|raw OUT}
out=${2:?usage: build-image.sh ext4|xfs|btrfs|f2fs|raw OUT}
uuid=5eed0000-c0de-4a11-8c4a-000000000001
clock='2023-11-14 22:13:20'
tmp="$out.partial"
rm -f "$tmp"
case "$fs" in
ext4)
    truncate -s 64M "$tmp"
    E2FSPROGS_FAKE_TIME=1700000000 mkfs.ext4 -q -F -b 4096 -U "$uuid" -L crashlab \
        -E lazy_itable_init=0,lazy_journal_init=0,nodiscard,hash_seed="$uuid" "$tmp"
    ;;
xfs)
    # mkfs.xfs refuses < 300 MB unless it believes it runs under fstests.
    truncate -s 64M "$tmp"
    faketime -f "$clock" env QA_CHECK_FS=1 TEST_DIR=/nonexistent TEST_DEV=/nonexistent \
        mkfs.xfs -q -f -K -m uuid="$uuid" -L crashlab "$tmp"
    ;;
btrfs)
    # btrfs' minimum device size is ~109 MiB.  No fixed UUID: mkfs.btrfs -U
    # refuses a UUID that any block device on the machine holds, and copies
    # of the base image are on loop devices whenever a btrfs run is being
    # recorded or recovered (a rebuild then failed: "non-unique UUID").
    # The image is identified by its recorded digest anyway (above).
    truncate -s 128M "$tmp"
    faketime -f "$clock" mkfs.btrfs -q -f -K -L crashlab "$tmp" >/dev/null
    ;;
f2fs)
    # F2FS is recorded and recovered in a qemu guest (this host has no F2FS);
    # mkfs.f2fs runs here. -t 0: no discard; -r: checkpoint seed 0. Byte-
    # identical on every build under the fixed clock.
    truncate -s 64M "$tmp"
    faketime -f "$clock" mkfs.f2fs -q -f -t 0 -r -U "$uuid" -l crashlab "$tmp" >/dev/null
    ;;
raw)
    truncate -s 1M "$tmp"
    ;;
*)
    echo "build-image.sh: unknown file system '$fs' (ext4, xfs, btrfs, f2fs, raw)" >&2
    exit 2
    ;;
esac
sha256sum "$tmp" | cut -d' ' -f1 > "$out.sha256.partial"
mv "$tmp" "$out"
mv "$out.sha256.partial" "$out.sha256"
