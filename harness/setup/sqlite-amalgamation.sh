#!/usr/bin/env bash
# Fetch the pinned SQLite amalgamation (sqlite3.c, sqlite3.h) that the MAW
# runner (workloads/build/crashlab-runner-maw) is compiled from, with
# SQLITE_ENABLE_BATCH_ATOMIC_WRITE, into the cache (never into the repo).
#
# Why: Debian's libsqlite3 is built without SQLITE_ENABLE_BATCH_ATOMIC_WRITE
# and no Debian package ships the amalgamation.  The PyPI sdist of
# sqlean.py vendors SQLite's official amalgamation in sqlite/; pip (the
# ordinary client) downloads it, its sha256 is checked, and the two files are
# taken out of it.  sqlean appends four lines after the amalgamation's last
# line ("End of sqlite3.c": an #include of its extension set-up), which are
# cut off, so the file is SQLite's own; each file's sha256 is checked too.
#
# Usage: sqlite-amalgamation.sh [DEST]  (default: the folder below; prints it)
# Idempotent: a complete folder with the right digests is left alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

VERSION=3.50.4
PACKAGE=sqlean.py==3.50.4.5
SDIST=sqlean_py-3.50.4.5.tar.gz
SDIST_SHA256=9764b565e7ab430ab6e9e43cb2816199c2b39926dffc93c212a52f0019278459
C_SHA256=e3f5d6901e7492af4a1fc8c4d745cae84c264942524c3fbfc02b82a5ca8818c8
H_SHA256=abd1514e0351f79393d1be882830afdb40a8099e8257f311f0bfdf8486f11bea

cache=${CRASHLAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crashlab}
dest=${1:-$cache/sqlite-amalgamation/$VERSION}

# ok DIR: both files there with the pinned digests
ok() {
    [ -f "$1/sqlite3.c" ] && [ -f "$1/sqlite3.h" ] &&
        echo "$C_SHA256  $1/sqlite3.c" | sha256sum --quiet -c - 2>/dev/null &&
        echo "$H_SHA256  $1/sqlite3.h" | sha256sum --quiet -c - 2>/dev/null
}

if ok "$dest"; then
    echo "$dest"
    exit 0
fi
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$(dirname "$dest")/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pip=(python3 -m pip)
[ -x "$root/.venv/bin/python" ] && pip=("$root/.venv/bin/python" -m pip)
"${pip[@]}" download -q --no-deps --no-binary sqlean.py "$PACKAGE" -d "$tmp/dl" >&2
echo "$SDIST_SHA256  $tmp/dl/$SDIST" | sha256sum --quiet -c - || {
    echo "setup: $SDIST: sha256 mismatch (expected $SDIST_SHA256)" >&2
    exit 1
}
mkdir "$tmp/out"
tar -xzf "$tmp/dl/$SDIST" -C "$tmp" "${SDIST%.tar.gz}/sqlite/sqlite3.c" "${SDIST%.tar.gz}/sqlite/sqlite3.h"
# everything up to and including the amalgamation's own last line
sed '/^\/\*\{26\} End of sqlite3\.c \*/q' "$tmp/${SDIST%.tar.gz}/sqlite/sqlite3.c" >"$tmp/out/sqlite3.c"
cp "$tmp/${SDIST%.tar.gz}/sqlite/sqlite3.h" "$tmp/out/sqlite3.h"
if ! ok "$tmp/out"; then
    echo "setup: the SQLite $VERSION amalgamation from $SDIST does not have the pinned sha256" >&2
    exit 1
fi
rm -rf "$dest"
mv "$tmp/out" "$dest"
echo "$dest"
