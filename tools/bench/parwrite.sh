#!/bin/bash
# parwrite.sh — files written at once (issue 29: table segments): for each
# lsmfs build, a fresh store under --base (default /tmp), --writers files of
# --mib MiB each written at the same time (dd bs=1M, fsync at the end); prints
# the seconds, MiB/s, and the store's writer stalls, level-0 tables and load,
# flushes and compaction bytes written (its metrics xattr) at the end.
#
#   sudo tools/bench/parwrite.sh [--writers=4] [--mib=256] [--rounds=2] [--base=DIR] BINDIR...
#
# Builds alternate within each round. Everything mounted is unmounted, also
# on error or Ctrl-C.
set -euo pipefail

WRITERS=4
MIB=256
ROUNDS=2
BASE=/tmp
BINS=()
for a in "$@"; do
    case "$a" in
    --writers=*) WRITERS="${a#--writers=}" ;;
    --mib=*) MIB="${a#--mib=}" ;;
    --rounds=*) ROUNDS="${a#--rounds=}" ;;
    --base=*) BASE="${a#--base=}" ;;
    -*) echo "parwrite.sh: unknown option $a" >&2; exit 2 ;;
    *) BINS+=("$(cd "$a" && pwd)") ;;
    esac
done
[ ${#BINS[@]} -gt 0 ] || { echo "usage: parwrite.sh [--writers=N] [--mib=N] BINDIR..." >&2; exit 2; }

. "$(dirname "$0")/workdir.sh"
bench_workdir "$BASE" parwrite

head -c "$((MIB << 20))" /dev/urandom >"$WORK/src"

run() { # bindir
    rm -rf "$WORK/store"
    "$1/mkfs.lsmfs" "$WORK/store" >/dev/null
    "$1/lsmfs" "$WORK/store" "$MNT" 2>/dev/null
    local t0 t1 m i
    t0=$(date +%s.%N)
    for i in $(seq "$WRITERS"); do dd if="$WORK/src" of="$MNT/f$i" bs=1M conv=fsync status=none & done
    wait
    t1=$(date +%s.%N)
    m=$(getfattr --only-values -n user.lsmfs.metrics "$MNT" 2>/dev/null)
    get() { echo "$m" | awk -v k="$1" '$1 == k {print $2}'; }
    printf '%-28s %6.2f s %6.0f MiB/s  stalls %6.2f s  L0 tables %3s load %2s  flushes %4s  compaction MiB %6.0f\n' \
        "$1" "$(echo "$t1 - $t0" | bc)" "$(echo "$WRITERS * $MIB / ($t1 - $t0)" | bc -l)" \
        "$(echo "$(get store_stall_us) / 1000000" | bc -l)" "$(get store_tables_level_0)" \
        "$(get store_level0_load)" "$(get store_flushes)" \
        "$(echo "$(get store_compaction_bytes_written) / 1048576" | bc -l)"
    fusermount3 -u "$MNT"
    for _ in $(seq 100); do pgrep -f "lsmfs $WORK/store" >/dev/null || break; sleep 0.1; done
}

for _ in $(seq "$ROUNDS"); do
    for b in "${BINS[@]}"; do run "$b"; done
done
