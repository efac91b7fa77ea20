"""crashlab checker for app.sh's ledger: every record its index
ledger.idx counts is in the ledger, whole.  Exit 0 holds, 1 violated."""

import sys

RECORD = 6000
try:
    count = int(open("ledger.idx").read() or "0")
    data = open("ledger", "rb").read()
except (FileNotFoundError, ValueError) as e:
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
