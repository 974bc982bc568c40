#!/bin/bash
# smallfiles_space.sh — does deleting small files give the space back (issue 29, item 1)?
#
#   tools/bench/smallfiles_space.sh [--files=100000] [--size=2048] [--idle=60] [--base=DIR] BINDIR [BINDIR...]
#
# For each lsmfs build (a directory holding lsmfs and mkfs.lsmfs): a fresh
# store under --base (default /tmp), mounted; --files files of --size bytes
# written into one directory, then all deleted, then nothing for --idle
# seconds. Prints, per build: the store (`du -sb`, every file) and its tables
# (*.ldb) when the files existed, right after the deletes, and after the idle
# wait; and the same store empty (mkfs, mount) — the live data. Everything
# mounted is unmounted, also on error or Ctrl-C.
set -euo pipefail

FILES=100000
SIZE=2048
IDLE=60
BASE=/tmp
BINS=()
for a in "$@"; do
    case "$a" in
    --files=*) FILES="${a#--files=}" ;;
    --size=*) SIZE="${a#--size=}" ;;
    --idle=*) IDLE="${a#--idle=}" ;;
    --base=*) BASE="${a#--base=}" ;;
    -*) echo "smallfiles_space.sh: unknown option $a" >&2; exit 2 ;;
    *) BINS+=("$(cd "$a" && pwd)") ;;
    esac
done
[ ${#BINS[@]} -gt 0 ] || { echo "usage: smallfiles_space.sh [--files=N] [--size=B] [--idle=S] [--base=DIR] BINDIR..." >&2; exit 2; }

WORK=$(mktemp -d "$BASE/smallfiles-space-XXXXXX")
MNT=$WORK/mnt
mkdir -p "$MNT"
cleanup() {
    if grep -q " $MNT " /proc/mounts; then fusermount3 -u "$MNT"; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mb() { echo "scale=1; $1 / 1000000" | bc; }
store_bytes() { du -sb "$WORK/store" | cut -f1; }
table_bytes() { find "$WORK/store" -maxdepth 1 -name '*.ldb' -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }
sizes() { echo "$(mb "$(store_bytes)") MB ($(mb "$(table_bytes)") MB tables)"; }

unmount() {
    fusermount3 -u "$MNT"
    for _ in $(seq 100); do pgrep -f "lsmfs $WORK/store" >/dev/null || break; sleep 0.1; done
}

mount_fresh() { # bindir
    rm -rf "$WORK/store"
    "$1/mkfs.lsmfs" "$WORK/store" >/dev/null
    "$1/lsmfs" "$WORK/store" "$MNT"
}

run() { # bindir
    mount_fresh "$1"
    sleep 2
    echo "  empty (live data):      $(sizes)"
    python3 - "$MNT/d" "$FILES" "$SIZE" <<'PY'
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.mkdir(d)
for i in range(n):
    with open(f"{d}/m{i:08d}", "wb") as f:
        f.write(os.urandom(size))
os.sync()
PY
    echo "  $FILES files:           $(sizes)"
    python3 - "$MNT/d" "$FILES" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.unlink(f"{d}/m{i:08d}")
os.sync()
PY
    echo "  all deleted:            $(sizes)"
    sleep "$IDLE"
    echo "  after ${IDLE} s idle:         $(sizes)"
    unmount
}

for b in "${BINS[@]}"; do
    echo "$b"
    run "$b"
done
