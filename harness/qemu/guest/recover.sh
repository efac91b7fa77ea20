# Sourced by /init: the recovery job, a long-lived guest answering requests
# on its second serial port (/dev/ttyS1, one line each way).  /dev/vda is
# the slot: the host writes a crash image into it before each request;
# /dev/vdb receives the answer's files.  Requests:
#   recover  drop every cached block, mount $FS from the slot (the kernel's
#            own recovery runs: F2FS's roll-forward), write every file as a
#            tar archive onto /dev/vdb, unmount; reply "ok", or "fail WHY"
#   quit     power off (reset)
# The guest says "ready" once it can take requests.
stty -F /dev/ttyS1 raw -echo || fail "stty /dev/ttyS1 failed"
exec 3<>/dev/ttyS1
mkdir -p /mnt
echo "crashlab-guest: recovery guest for $FS ready"
echo ready >&3
while read -r req <&3; do
    case "$req" in
    recover)
        # BLKFLSBUF drops the slot's cached blocks: the host rewrote it
        blockdev --flushbufs /dev/vda
        if mount -t "$FS" /dev/vda /mnt 2>/tmp/err; then
            (cd /mnt && tar -cf /dev/vdb .) 2>/tmp/err
            rc=$?
            umount /mnt || rc=2
            blockdev --flushbufs /dev/vdb  # the archive reaches the host's file
            if [ $rc = 0 ]; then
                echo ok >&3
            else
                echo "fail reading files: $(tr '\n' ' ' < /tmp/err)" >&3
            fi
        else
            echo "fail mount: $(tr '\n' ' ' < /tmp/err)" >&3
        fi
        ;;
    quit)
        break
        ;;
    *)
        echo "fail unknown request: $req" >&3
        ;;
    esac
done
