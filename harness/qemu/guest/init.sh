#!/bin/sh
# The guest's /init (harness/qemu/initramfs.py puts it there).  Contract:
# the job archive appended to the initramfs holds /job/params (shell
# assignments: JOB, the role script /lib/crashlab/$JOB.sh; MODULES, the
# modules to insmod, in order) and whatever that role reads.  The role
# leaves its answers in /out; /out and the files named in $OUTPUTS are
# written as one tar archive to the exchange disk $EXCHANGE (the last
# disk), and the guest powers off.  A failure writes /out/error (one line)
# and powers off too.  (With acpi=off, "power off" is a reset: qemu exits.)
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /out /tmp

finish() {
    cd /
    set --
    for f in $OUTPUTS; do [ -e "$f" ] && set -- "$@" "$f"; done
    tar -cf "$EXCHANGE" out "$@" 2>/dev/null || echo "crashlab-guest: cannot write $EXCHANGE"
    sync
    reboot -f  # qemu runs with -no-reboot: a reset ends it
}

fail() {
    echo "$*" > /out/error
    echo "crashlab-guest: error: $*"
    finish
}

. /job/params
echo "crashlab-guest: $(uname -r), job $JOB"
for m in $MODULES; do
    insmod "/lib/modules/$m.ko" || fail "insmod $m failed"
done
[ -b "$EXCHANGE" ] || fail "no exchange disk $EXCHANGE (virtio_blk not loaded?)"
. "/lib/crashlab/$JOB.sh"
finish
