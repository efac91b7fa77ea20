"""crashlab checker for update.sh: after a crash, `config` holds one whole
version (never a mix, never empty), and no older one than the last
acknowledged update.  Exit 0 holds, 1 violated (stdout says why)."""

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


try:
    data = open("config", "rb").read()
except FileNotFoundError:
    print(f"config is gone (version {acked} was acknowledged)")
    sys.exit(1)
n = whole_version(data)
if n is None:
    print(f"config is not one whole version: {len(data)} bytes, starting {data[:24]!r}")
    sys.exit(1)
if n < acked:
    print(f"config holds version {n}, but version {acked} was acknowledged")
    sys.exit(1)
print(f"config holds version {n} (acknowledged: {acked})")
