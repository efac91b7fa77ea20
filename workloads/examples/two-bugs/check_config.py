"""crashlab checker for app.sh's config: one whole version, not older than
the last acknowledged update; before setup-done (while config is first
written) it may also be missing, empty or a part of version 0.  Exit 0
holds, 1 violated (stdout says why)."""

import json
import os
import sys

state = json.load(open(os.environ["CRASHLAB_STATE_JSON"]))
acked = state["acked"]  # 0 in the creation window: nothing acknowledged
set_up = any(m["name"] == "setup-done" for m in state["marks"]["before"])
try:
    data = open("config", "rb").read()
except FileNotFoundError:
    if not set_up:  # the creation window: nothing promised yet
        print("config not created yet")
        sys.exit(0)
    print(f"config is gone (version {acked} was acknowledged)")
    sys.exit(1)
first = b"value=0\n" + b"0" * 6000 + b"\nend=0\n"  # version 0, written before setup-done
if not set_up and first.startswith(data):  # empty, or version 0 in part: not synced yet
    print(f"config being created: {len(data)} of {len(first)} bytes")
    sys.exit(0)
try:
    head, body, tail = data.decode().split("\n", 2)
    n = int(head.removeprefix("value="))
    whole = body == str(n % 10) * 6000 and tail == f"end={n}\n"
except ValueError:
    whole = False
if not whole:
    print(f"config is not one whole version: {len(data)} bytes")
    sys.exit(1)
if n < acked:
    print(f"config holds version {n}, but version {acked} was acknowledged")
    sys.exit(1)
print(f"config holds version {n} (acknowledged: {acked})")
