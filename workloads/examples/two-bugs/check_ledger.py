"""crashlab checker for app.sh's ledger: every record its index
ledger.idx counts is in the ledger, whole; before setup-done (while the
two files are first written) either may also be missing.  Exit 0 holds,
1 violated."""

import json
import os
import sys

RECORD = 6000
state = json.load(open(os.environ["CRASHLAB_STATE_JSON"]))
set_up = any(m["name"] == "setup-done" for m in state["marks"]["before"])
try:
    count = int(open("ledger.idx").read() or "0")
    data = open("ledger", "rb").read()
except FileNotFoundError as e:
    if not set_up:  # the creation window: nothing promised yet
        print(f"ledger not created yet: {e}")
        sys.exit(0)
    print(f"ledger or its index unreadable: {e}")
    sys.exit(1)
except ValueError as e:
    print(f"ledger or its index unreadable: {e}")
    sys.exit(1)
whole = 0
while whole < count and len(data) >= (whole + 1) * RECORD:
    rec = data[whole * RECORD : (whole + 1) * RECORD].decode(errors="replace")
    if not rec.startswith(f"rec={whole + 1}\n"):
        break
    whole += 1
if whole < count:
    print(f"ledger.idx counts {count} records, the ledger holds {whole} whole ({len(data)} bytes)")
    sys.exit(1)
print(f"ledger.idx counts {count} records, all in the ledger")
