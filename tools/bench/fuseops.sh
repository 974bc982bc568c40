#!/bin/bash
# fuseops.sh — the FUSE requests one command costs on one mount, per opcode,
# with their mean latency (request sent -> reply received, in the kernel).
#
#   sudo tools/bench/fuseops.sh [-n DIVISOR] MOUNTPOINT COMMAND [ARG...]
#
# Counts every request the kernel sends to MOUNTPOINT's FUSE connection while
# COMMAND runs (other mounts' traffic is filtered out), divided by DIVISOR
# (e.g. the number of files the command handled) for a per-operation figure.
# Works for any FUSE filesystem (lsmfs, nowork-fs, ...), so the request
# patterns can be compared side by side. FORGETs are not counted (the kernel
# queues them outside the traced path). Uses the kernel's fuse tracepoints in
# a private tracefs instance, which it removes afterwards; needs root.
set -u -o pipefail

div=1
if [ "${1:-}" = -n ]; then
    div=$2
    shift 2
fi
if [ $# -lt 2 ]; then
    echo "usage: $0 [-n DIVISOR] MOUNTPOINT COMMAND [ARG...]" >&2
    exit 2
fi
mnt=$1
shift
conn=$(mountpoint -d "$mnt" 2>/dev/null | cut -d: -f2) ||
    { echo "fuseops: $mnt is not a mount point" >&2; exit 1; }

tracefs=/sys/kernel/tracing
mounted_tracefs=0
if [ ! -d $tracefs/events ]; then
    mount -t tracefs nodev $tracefs || { echo "fuseops: cannot mount tracefs" >&2; exit 1; }
    mounted_tracefs=1
fi
[ -d $tracefs/events/fuse ] || { echo "fuseops: the kernel has no fuse tracepoints" >&2; exit 1; }
inst=$tracefs/instances/fuseops.$$
mkdir "$inst" || exit 1
cleanup() {
    echo 0 >"$inst/tracing_on" 2>/dev/null
    rmdir "$inst" 2>/dev/null
    [ $mounted_tracefs = 1 ] && umount $tracefs 2>/dev/null
}
trap cleanup EXIT
echo 16384 >"$inst/buffer_size_kb"
for e in fuse_request_send fuse_request_end; do
    echo "connection == $conn" >"$inst/events/fuse/$e/filter"
    echo 1 >"$inst/events/fuse/$e/enable"
done
echo 1 >"$inst/tracing_on"
"$@"
rc=$?
echo 0 >"$inst/tracing_on"
grep -q "LOST EVENTS" "$inst/trace" && echo "fuseops: trace buffer overflowed; counts are low" >&2
awk -v d="$div" '
function stamp(line,   t, a, n) { t = line; sub(/: fuse_request_.*/, "", t); n = split(t, a, " "); return a[n] }
/fuse_request_send/ {
    for (i = 1; i <= NF; i++) { if ($i == "req") u = $(i + 1); if ($i ~ /^\(FUSE_/) op = $i }
    gsub(/[()]/, "", op); sent[u] = stamp($0); opof[u] = op; cnt[op]++
}
/fuse_request_end/ {
    for (i = 1; i <= NF; i++) if ($i == "req") u = $(i + 1)
    if (u in sent) { lat[opof[u]] += stamp($0) - sent[u]; nl[opof[u]]++; delete sent[u] }
}
END {
    printf "%-20s %9s %10s %12s\n", "request", "count", "per op", "mean us"
    for (op in cnt) {
        printf "%-20s %9d %10.2f %12.1f\n", op, cnt[op], cnt[op] / d, nl[op] ? lat[op] / nl[op] * 1e6 : 0 | "sort"
        total += cnt[op]
    }
    close("sort")
    printf "%-20s %9d %10.2f\n", "TOTAL", total, total / d
}' "$inst/trace"
exit $rc
