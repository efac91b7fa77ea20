# Sourced by /init: the recording job.  Stacks dm-log-writes (device "lw")
# on /dev/vda (the working image) and /dev/vdb (the preallocated log disk),
# mounts $FS on it (not for FS=raw), runs /job/command there with the mark
# channel CRASHLAB_MARK_DM=lw, unmounts and removes the device (the kernel
# then appends its dm-log-writes-end mark).  /out/status: the command's exit
# status; /out/stdout, /out/stderr: its output.  With BLKTRACE=1 the block
# tracepoints of lw are recorded during the command into /out/trace.
export DM_DISABLE_UDEV=1

# blktrace of the recorded device while the command runs: the binary trace
# (one file per CPU) goes back in /out/blktrace/; the host runs blkparse.
trace_start() {
    mount -t debugfs debugfs /sys/kernel/debug || fail "mount debugfs failed"
    mkdir -p /out/blktrace
    blktrace -d /dev/mapper/lw -D /out/blktrace -o lw > /tmp/blktrace.log 2>&1 &
    TRACE_PID=$!
    for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        [ -e /sys/kernel/debug/block/dm-0/trace0 ] && break
        sleep 0.1
    done
    [ -e /sys/kernel/debug/block/dm-0/trace0 ] ||
        fail "blktrace did not start: $(tail -n 1 /tmp/blktrace.log)"
}
trace_stop() {
    kill -INT "$TRACE_PID"
    wait "$TRACE_PID" || fail "blktrace failed: $(tail -n 1 /tmp/blktrace.log)"
}

table="0 $(blockdev --getsz /dev/vda) log-writes /dev/vda /dev/vdb"
dmsetup create lw --table "$table" || fail "dmsetup create lw ($table) failed"
if [ "$FS" = raw ]; then
    mkdir -p /raw-cwd && cd /raw-cwd
    export CRASHLAB_DEV=/dev/mapper/lw
else
    mkdir -p /mnt
    mount -t "$FS" ${MOUNT_OPTIONS:+-o "$MOUNT_OPTIONS"} /dev/mapper/lw /mnt ||
        fail "mount -t $FS /dev/mapper/lw failed: $(dmesg | tail -n 1 | cut -c 16-)"
    cd /mnt
    export CRASHLAB_MNT=/mnt
fi
export CRASHLAB_MARK_DM=lw HOME=/ TZ=UTC
. /job/env
[ "$BLKTRACE" = 1 ] && trace_start
echo "crashlab-guest: running the command on $FS"
sh /job/command > /out/stdout 2> /out/stderr
echo $? > /out/status
[ "$BLKTRACE" = 1 ] && trace_stop
cd /
if [ "$FS" != raw ]; then
    for i in 1 2 3 4 5 6 7 8 9 10; do umount /mnt && break; sleep 0.2; done
    grep -q ' /mnt ' /proc/mounts && fail "umount /mnt failed"
fi
dmsetup remove lw || fail "dmsetup remove lw failed"
echo "crashlab-guest: recorded; command exit status $(cat /out/status)"
