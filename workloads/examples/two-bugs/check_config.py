"""crashlab checker for app.sh's config: one whole version, not older than
the last acknowledged update.  Exit 0 holds, 1 violated (stdout says why)."""

import json
import os
import sys

acked = json.load(open(os.environ["CRASHLAB_STATE_JSON"]))["acked"]
try:
    data = open("config", "rb").read()
except FileNotFoundError:
    print(f"config is gone (version {acked} was acknowledged)")
    sys.exit(1)
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
