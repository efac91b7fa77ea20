#!/usr/bin/env bash
# Idempotent set-up: installs the missing Debian packages, creates .venv/ and
# installs crashlab (editable) with its pinned Python dependencies.
# Re-running it on a set-up machine does nothing but check.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

pkgs=$(sed -e 's/#.*//' harness/setup/apt-packages.txt | xargs)
missing=()
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: missing Debian packages (${missing[*]}) and not root: install them and re-run" >&2
        exit 1
    fi
    echo "setup: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The qemu backend's guest kernel: Debian's pinned package (qemu-kernel.txt),
# downloaded and unpacked into the cache, never installed (harness/qemu/kernel.py).
kernel_fetch() { .venv/bin/python -m harness.qemu.kernel fetch >/dev/null; }

stamp=.venv/.crashlab-setup
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: creating .venv and installing Python packages"
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/python -m pip install -q -e '.[dev]'
    echo "$want" > "$stamp"
fi
# The crashlab command starts its interpreter with SIGINT and SIGTERM blocked
# (env --block-signal): one during Python's start-up and imports waits for the
# handlers that crashlab's main() installs, instead of a traceback (harness/cli).
launcher="#!/usr/bin/env -S --block-signal=INT,TERM $root/.venv/bin/python"
if [ "$(head -n 1 .venv/bin/crashlab)" != "$launcher" ]; then
    sed -i "1c\\$launcher" .venv/bin/crashlab
fi
if ! kernel_fetch 2>/dev/null; then
    # package lists may be missing or stale on a machine set up earlier
    [ "$(id -u)" -eq 0 ] && apt-get update -qq
    kernel_fetch
fi
# SQLite's amalgamation for the MAW runner (pinned PyPI sdist, sha256-checked,
# into the cache: harness/setup/sqlite-amalgamation.sh)
harness/setup/sqlite-amalgamation.sh >/dev/null
