"""crashlab checker for update.sh: after a crash, `config` holds one whole
version (never a mix, never empty), and no older one than the last
acknowledged update; before setup-done (while config is first written)
it may also be missing, empty or a part of version 0.  Exit 0 holds, 1
violated (stdout says why)."""

import json
import os
import sys

state = json.load(open(os.environ["CRASHLAB_STATE_JSON"]))
# the last update acknowledged before the crash (the state contract's
# `acked`, checkers/state-contract.schema.json): update K writes version K
acked = state["acked"]


def whole_version(data: bytes) -> int | None:
    """The version number if ``data`` is exactly one complete version."""
    try:
        head, body, tail = data.decode().split("\n", 2)
        n = int(head.removeprefix("value="))
    except ValueError:
        return None
    want = str(n % 10) * 6000
    return n if body == want and tail == f"end={n}\n" else None


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
n = whole_version(data)
if n is None:
    print(f"config is not one whole version: {len(data)} bytes, starting {data[:24]!r}")
    sys.exit(1)
if n < acked:
    print(f"config holds version {n}, but version {acked} was acknowledged")
    sys.exit(1)
print(f"config holds version {n} (acknowledged: {acked})")
