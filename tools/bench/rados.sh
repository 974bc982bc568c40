#!/bin/bash
# lsmfs on Ceph RADOS against lsmfs on the local disk and ext4, side by side
# in one run, on a throwaway cluster (tests/ceph/cluster.sh: one mon, one
# BlueStore OSD on a sparse file, pool size 1, 127.0.0.1):
#   - the RADOS round trip: `rados bench` 4 KiB writes, one at a time (the floor)
#   - store only: lsmbench fillsync, 1 and 8 threads, RADOS vs local
#   - maildir delivery (tools/bench_maildir.c), 1 and 8 writers into one
#     mailbox, and 8 writers into 8 mailboxes: lsmfs on RADOS, lsmfs on the
#     local disk, ext4 (the directory under WORK); deliveries/s, p50, WAL
#     syncs per delivery
#   - takeover: kill -9 of the writer's daemon to the second client's first
#     write served (lease 3 s)
#
#   tools/bench/rados.sh [WORK]     (as root; default WORK /tmp/lsmfs-rados-bench)
#   BEFORE=BINDIR tools/bench/rados.sh   adds "before" rows for 8 threads and
#     8 writers (one and 8 mailboxes) with BINDIR's lsmbench, lsmfs and mkfs.lsmfs (an older build),
#     in the same run
# Prints one table and ratios; everything it started is stopped by pid, its
# mounts undone, WORK removed, also on error or Ctrl-C. MSGS=N messages per writer.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/lsmfs-rados-bench}
msgs=${MSGS:-200}
bin=$repo/bin
mounts=()
pids=()
cleanup() {
    for m in "${mounts[@]}"; do fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null; done
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    "$repo/tests/ceph/cluster.sh" stop "$work/ceph"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$work" && mkdir -p "$work/bin" || exit 1
cc -std=c11 -O2 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -pthread -o "$work/bin/bench_maildir" \
    "$repo/tools/bench_maildir.c" || exit 1
"$repo/tests/ceph/cluster.sh" start "$work/ceph" || exit 1
export CEPH_CONF=$work/ceph/ceph.conf
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }

# The floor: one synchronous 4 KiB RADOS write at a time.
rb=$(cd "$work" && rados -p lsmfs bench 5 write -b 4096 -O 4096 -t 1 2>/dev/null)
rtt_ms=$(awk '/^Average Latency/ {printf "%.2f", $3 * 1000}' <<<"$rb")
(cd "$work" && rados -p lsmfs cleanup >/dev/null 2>&1)

declare -A R
before=${BEFORE:-}
fillsync() { # BINDIR THREADS TAG
    local t=$2 where db out
    for where in rados local; do
        db=$work/lsmbench-$t$3; [ $where = rados ] && db=rados:lsmfs/lsmbench-$t$3
        out=$("$1/lsmbench" --db="$db" --threads=$t --num=$((2400 / t)) --benchmarks=fillsync 2>&1)
        R[fillsync-$t$3-$where]=$(awk '/^fillsync/ {print $(NF-1)}' <<<"$out")
        R[wps-$t$3-$where]=$(sed -n 's/.*writes=\([0-9]*\) groups=[0-9]* syncs=\([0-9]*\).*/\1 \2/p' \
            <<<"$out" | awk '{printf "%.2f", $2 ? $1 / $2 : 0}')
    done
}
for t in 1 8; do
    fillsync "$bin" $t ""
    [ -n "$before" ] && [ $t = 8 ] && fillsync "$before" $t -before
done

mount_lsmfs() { # BINDIR STORE MNT [OPTS]
    mkdir -p "$3"
    "$1/lsmfs" "$2" "$3" ${4:+-o "$4"} || return 1
    mounts+=("$3")
}
maildir() { # BINDIR TAG SPEC... (SPEC: W writers into one mailbox, or WbB into B; TAG "": ext4 too)
    local b=$1 tag=$2 w t x r boxes out
    shift 2
    mkdir -p "$work/ext4" "$work/local-store$tag"
    "$b/mkfs.lsmfs" -q "$work/local-store$tag" &&
        mount_lsmfs "$b" "$work/local-store$tag" "$work/local$tag" || exit 1
    "$b/mkfs.lsmfs" -q rados:lsmfs/maildir$tag &&
        mount_lsmfs "$b" rados:lsmfs/maildir$tag "$work/rados$tag" || exit 1
    for w in "$@"; do
        for t in rados local ext4; do
            [ -n "$tag" ] && [ $t = ext4 ] && continue
            x=(); [ $t != ext4 ] && x=(-x "$work/$t$tag")
            boxes=1; [[ $w == *b* ]] && boxes=${w#*b}
            out=$("$work/bin/bench_maildir" "$work/$t$tag/maildir-w$w" -w ${w%b*} -b $boxes -n "$msgs" "${x[@]}")
            r=$(grep '^RESULT' <<<"$out")
            R[fdir-$w$tag-$t]=$(sed -n 's/.* fsync-new \([0-9]*\).*/\1/p' <<<"$out" | awk '{printf "%.2f", $1 / 1000}')
            R[md-$w$tag-$t]=$(field "$r" deliveries_per_s)
            R[p50-$w$tag-$t]=$(field "$r" p50_ms)
            R[spd-$w$tag-$t]=$(field "$r" syncs_per_delivery)
        done
    done
    for m in "$work/local$tag" "$work/rados$tag"; do fusermount3 -u "$m"; done
    mounts=()
    sleep 1
}
[ -n "$before" ] && maildir "$before" -before 8 8b8
maildir "$bin" "" 1 8 8b8

# Takeover: the writer is killed (-9); a second client mounts once the lease
# lapses; time to the first write it serves.
"$bin/mkfs.lsmfs" -q rados:lsmfs/takeover
mkdir -p "$work/a" "$work/b"
"$bin/lsmfs" rados:lsmfs/takeover "$work/a" -f -o lease_ms=3000 &
apid=$!
pids+=($apid)
mounts+=("$work/a")
for _ in $(seq 100); do grep -qs " $work/a " /proc/mounts && break; sleep 0.1; done
echo x | dd of="$work/a/f" conv=fsync status=none
t0=$(date +%s.%N)
kill -9 $apid; wait $apid 2>/dev/null
fusermount3 -uz "$work/a"
until "$bin/lsmfs" rados:lsmfs/takeover "$work/b" -o lease_ms=3000,ceph_id=lsmfs2 2>/dev/null; do
    sleep 0.1
done
mounts+=("$work/b")
echo y | dd of="$work/b/g" conv=fsync status=none
takeover=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
fusermount3 -u "$work/b"

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'; }
printf '\n%-36s %10s %10s %10s %12s %12s\n' metric rados local ext4 rados/local rados/ext4
row() { printf '%-36s %10s %10s %10s %12s %12s\n' "$1" "$2" "$3" "$4" "$(ratio "$2" "$3")" "$(ratio "$2" "$4")"; }
row "RADOS 4K write round trip ms" "$rtt_ms" - - 
tags=(""); [ -n "$before" ] && tags=(-before "")
for t in 1 8; do
    for g in "${tags[@]}"; do
        [ $t = 1 ] && [ -n "$g" ] && continue
        row "lsmbench fillsync $t thr ops/s$g" "${R[fillsync-$t$g-rados]}" "${R[fillsync-$t$g-local]}" -
        row "  writes per WAL sync$g" "${R[wps-$t$g-rados]}" "${R[wps-$t$g-local]}" -
    done
done
for w in 1 8 8b8; do
    for g in "${tags[@]}"; do
        [ $w = 1 ] && [ -n "$g" ] && continue
        e=-; [ -z "$g" ] && e=${R[md-$w-ext4]}
        what="$w writer(s)"; [[ $w == *b* ]] && what="${w%b*} writers, ${w#*b} boxes"
        row "maildir $what deliveries/s$g" "${R[md-$w$g-rados]}" "${R[md-$w$g-local]}" "$e"
        e=-; [ -z "$g" ] && e=${R[p50-$w-ext4]}
        row "  p50 ms (lower=better)$g" "${R[p50-$w$g-rados]}" "${R[p50-$w$g-local]}" "$e"
        row "  WAL syncs per delivery$g" "${R[spd-$w$g-rados]}" "${R[spd-$w$g-local]}" -
        e=-; [ -z "$g" ] && e=${R[fdir-$w-ext4]}
        row "  fsync of new/ mean ms$g" "${R[fdir-$w$g-rados]}" "${R[fdir-$w$g-local]}" "$e"
    done
done
row "takeover s (lease 3 s)" "$takeover" - -
