#!/bin/bash
# space.sh — how soon a deleted file's space comes back (issue 29, item 1).
#
#   sudo tools/bench/space.sh [--sizes="128 1024"] [--base=DIR] BINDIR [BINDIR...]
#
# For each size (MiB) and each lsmfs build (a directory holding lsmfs and
# mkfs.lsmfs): a fresh store under --base (default /tmp), a file of that
# size written and fsynced, then removed; prints the seconds until the store
# directory (every file in it, `du -sb`) has shrunk by 90% of the file, and
# the same for ext4 (a loop ext4 image under --base, `df`), and how long a
# plain `rm` of such a file takes on --base's own filesystem. Incompressible
# data. Everything mounted is unmounted, also on error or Ctrl-C.
set -euo pipefail

SIZES="128 1024"
BASE=/tmp
TIMEOUT_S=300
BINS=()
for a in "$@"; do
    case "$a" in
    --sizes=*) SIZES="${a#--sizes=}" ;;
    --base=*) BASE="${a#--base=}" ;;
    --timeout=*) TIMEOUT_S="${a#--timeout=}" ;;
    -*) echo "space.sh: unknown option $a" >&2; exit 2 ;;
    *) BINS+=("$(cd "$a" && pwd)") ;;
    esac
done
[ ${#BINS[@]} -gt 0 ] || { echo "usage: space.sh [--sizes=...] [--base=DIR] BINDIR..." >&2; exit 2; }

. "$(dirname "$0")/workdir.sh"
bench_workdir "$BASE" space-bench

now() { date +%s.%N; }

# Polls `$1` (a command printing bytes) until it is <= $2; prints the seconds.
wait_below() {
    local t0 t
    t0=$(now)
    while :; do
        [ "$($1)" -le "$2" ] && break
        t=$(echo "$(now) - $t0" | bc)
        if [ "$(echo "$t > $TIMEOUT_S" | bc)" = 1 ]; then echo ">$TIMEOUT_S"; return; fi
        sleep 0.1
    done
    printf '%.1f\n' "$(echo "$(now) - $t0" | bc)"
}

store_bytes() { du -sb "$WORK/store" 2>/dev/null | cut -f1; }
ext4_used() { df -B1 --output=used "$MNT" | tail -1 | tr -d ' '; }

write_file() { # path MiB
    head -c "$(($2 << 20))" /dev/urandom | dd of="$1" bs=1M conv=fsync status=none iflag=fullblock
}

run_lsmfs() { # bindir MiB
    rm -rf "$WORK/store"
    "$1/mkfs.lsmfs" "$WORK/store" >/dev/null
    "$1/lsmfs" "$WORK/store" "$MNT"
    write_file "$MNT/big" "$2"
    sleep 2
    local before target
    before=$(store_bytes)
    target=$((before - ($2 << 20) * 9 / 10))
    rm "$MNT/big"
    wait_below store_bytes "$target"
    fusermount3 -u "$MNT"
    local pid
    for _ in $(seq 100); do pid=$(pgrep -f "lsmfs $WORK/store" || true); [ -z "$pid" ] && break; sleep 0.1; done
}

run_ext4() { # MiB
    truncate -s "$(($1 * 2 + 256))M" "$WORK/ext4.img"
    mkfs.ext4 -q -F "$WORK/ext4.img"
    mount -o loop "$WORK/ext4.img" "$MNT"
    write_file "$MNT/big" "$1"
    sync
    local before target
    before=$(ext4_used)
    target=$((before - ($1 << 20) * 9 / 10))
    rm "$MNT/big"
    wait_below ext4_used "$target"
    umount "$MNT"
    rm -f "$WORK/ext4.img"
}

# The same file removed from the filesystem the stores live on (--base):
# what freeing that many bytes costs there (with `-o discard`, most of it).
run_base() { # MiB
    write_file "$WORK/base-big" "$1"
    sync
    local t0
    t0=$(now)
    rm "$WORK/base-big"
    printf '%.1f\n' "$(echo "$(now) - $t0" | bc)"
}

printf '%-10s' "MiB"
for b in "${BINS[@]}"; do printf ' %-28s' "$b"; done
printf ' %-12s %s\n' "rm on base" "ext4(loop)"
for mib in $SIZES; do
    printf '%-10s' "$mib"
    for b in "${BINS[@]}"; do printf ' %-28s' "$(run_lsmfs "$b" "$mib")s"; done
    printf ' %-12s' "$(run_base "$mib")s"
    printf ' %s\n' "$(run_ext4 "$mib")s"
done
