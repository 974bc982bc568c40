#!/bin/bash
# scale.sh — how lsmfs's costs grow with the files it holds (issue 30.6),
# beside ext4's in the same run: for each file count N (1–4 KiB files in
# min(1000, N/10) directories) the cold mount time (clean unmount before,
# and after a kill -9), a cold `find`, the daemon's resident memory after
# it, the unmount time and a cold `ls -lR`; then the growth exponent of each
# between successive N (1.0: linear, 0: constant).
#
# Targets: ext4 (a directory on the root fs: no mount, mount time 0),
# "before" (--base=DIR: another build's bin/, e.g. main's) and "after"
# (--bin=DIR, default bin/). Each lsmfs target makes and fills a store of
# its own with its own mkfs.lsmfs and daemon (a store in the format it
# writes; a newer store is not one an older lsmfs mounts). Needs root
# (drop_caches). Every mount is unmounted on exit. See
# tools/bench/README.md.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bindir=$repo/bin
basedir=""
counts="10000,100000"
work=""
keep=0

usage() {
    cat <<USAGE
usage: $0 [--counts=N,N,...] [--bin=DIR] [--base=DIR] [--work=DIR] [--keep]
  --counts   file counts (default 10000,100000)
  --bin      the lsmfs build measured ("after"; default bin/)
  --base     a second build measured beside it ("before"; optional)
  --work     work directory on the root fs (default a new /tmp/scale.XXXX)
USAGE
}
for a in "$@"; do
    case $a in
    --counts=*) counts=${a#*=} ;;
    --bin=*) bindir=$(cd "${a#*=}" && pwd) ;;
    --base=*) basedir=$(cd "${a#*=}" && pwd) ;;
    --work=*) work=${a#*=} ;;
    --keep) keep=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "scale.sh: needs root (drop_caches)" >&2; exit 1; }
[ -n "$work" ] || work=$(mktemp -d /tmp/scale.XXXX)
mkdir -p "$work"
pid=""
mnt=$work/mnt

. "$here/fusedaemon.sh"
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }

cleanup() {
    unmount
    [ "$keep" = 1 ] && log "scale.sh: work directory kept: $work" || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Mounts STORE with BIN's lsmfs; sets pid, and mtime to the seconds until
# the mount appeared.
mount_store() { # BIN STORE
    mkdir -p "$mnt"
    local t0 i
    t0=$(now)
    "$1/lsmfs" "$2" "$mnt" -f >>"$work/daemon.log" 2>&1 &
    pid=$!
    for i in $(seq 1 60000); do
        mounted && { mtime=$(since "$t0"); return 0; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.005
    done
    log "scale.sh: mounting $2 with $1 failed: $(tail -n 3 "$work/daemon.log")"
    exit 1
}

populate() { # DIR N
    python3 - "$1" "$2" <<'PY'
import os, sys, random
root, n = sys.argv[1], int(sys.argv[2])
dirs = max(1, min(1000, n // 10))
rnd = random.Random(n)
blob = os.urandom(4096)
for d in range(dirs):
    os.mkdir(os.path.join(root, "d%04d" % d))
for i in range(n):
    size = rnd.randint(1024, 4096)
    with open(os.path.join(root, "d%04d" % (i % dirs), "f%07d" % i), "wb") as f:
        f.write(blob[:size])
PY
}

cold_find() { # DIR — seconds for a cold find
    drop_caches
    local t0 n
    t0=$(now)
    n=$(find "$1" | wc -l)
    since "$t0"
    echo " $n" >>"$work/find.count"
}

cold_lslr() { # DIR — seconds for a cold ls -lR
    drop_caches
    local t0
    t0=$(now)
    ls -lR "$1" >/dev/null
    since "$t0"
}

# The daemon's own memory: anonymous pages only. VmRSS also counts the table
# pages its mapped reads touched, which are page cache the kernel can drop.
rss_kib() { awk '/^RssAnon/ { print $2 }' "/proc/$pid/status"; }

declare -A R # "metric target N" -> value
record() { R["$1 $2 $3"]=$4; }

IFS=, read -r -a ns <<<"$counts"
for n in "${ns[@]}"; do
    log "scale.sh: N=$n"
    # ext4
    d=$work/ext4-$n
    mkdir -p "$d"
    t0=$(now); populate "$d" "$n"; record create ext4 "$n" "$(since "$t0")"
    record mount ext4 "$n" 0
    record find ext4 "$n" "$(cold_find "$d")"
    record lslr ext4 "$n" "$(cold_lslr "$d")"
    rm -rf "$d"
    # lsmfs: each target fills a store of its own, then mounts it
    targets="after"
    [ -n "$basedir" ] && targets="before after"
    for t in $targets; do
        b=$bindir; [ "$t" = before ] && b=$basedir
        store=$work/store-$t-$n
        "$b/mkfs.lsmfs" "$store" >/dev/null
        mount_store "$b" "$store"
        t0=$(now); populate "$mnt" "$n"; record create "$t" "$n" "$(since "$t0")"
        unmount
        drop_caches
        mount_store "$b" "$store"; record mount "$t" "$n" "$mtime"
        record find "$t" "$n" "$(cold_find "$mnt")"
        record rss "$t" "$n" "$(rss_kib)"
        t0=$(now); unmount; record umount "$t" "$n" "$(since "$t0")"
        # after a kill -9: the count record is stale
        mount_store "$b" "$store"
        touch "$mnt/d0000/killed-$t"
        kill -9 "$pid"; wait "$pid" 2>/dev/null; fusermount3 -uz "$mnt"; pid=""
        drop_caches
        mount_store "$b" "$store"; record crashmount "$t" "$n" "$mtime"
        rm -f "$mnt/d0000/killed-$t"
        unmount
        drop_caches
        mount_store "$b" "$store"
        record lslr "$t" "$n" "$(cold_lslr "$mnt")"
        unmount
        rm -rf "$store"
    done
done

targets="ext4 after"
[ -n "$basedir" ] && targets="ext4 before after"
printf '\n%-26s' "metric"
for n in "${ns[@]}"; do for t in $targets; do printf '%14s' "$t@$n"; done; done
printf '\n'
for m in create mount crashmount find rss umount lslr; do
    printf '%-26s' "$m"
    for n in "${ns[@]}"; do for t in $targets; do printf '%14s' "${R["$m $t $n"]:--}"; done; done
    printf '\n'
done
printf '\ngrowth exponents log(v2/v1)/log(N2/N1), successive N\n'
for m in mount crashmount find rss umount lslr; do
    for t in $targets; do
        line=""
        for ((i = 1; i < ${#ns[@]}; i++)); do
            a=${R["$m $t ${ns[i-1]}"]:-}; b=${R["$m $t ${ns[i]}"]:-}
            e=$(awk -v a="$a" -v b="$b" -v n1="${ns[i-1]}" -v n2="${ns[i]}" \
                'BEGIN { if (a > 0 && b > 0) printf "%.2f", log(b / a) / log(n2 / n1); else print "-" }')
            line="$line $e"
        done
        printf '%-12s %-8s %s\n' "$m" "$t" "$line"
    done
done
