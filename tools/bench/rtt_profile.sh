#!/bin/bash
# rtt_profile.sh — where one FUSE round trip's time goes: traces bench_rtt's
# stat loop on a mounted FUSE filesystem (sched switches and wake-ups, the
# fuse request tracepoints, system calls) and prints, per request, the
# medians of each step and the counts of system calls, context switches and
# wake-ups (issue 18's profile of one round trip on each transport).
#
#   tools/bench/rtt_profile.sh DIR DAEMON_PID [N]    (root; perf, python3)
#
# DIR: a directory on the mount; DAEMON_PID: its daemon; N stats (3000).
# Steps: caller = statx entry to the request's send (VFS, fuse); to daemon =
# send until a daemon thread returns from the system call that hands it the
# request (read of /dev/fuse, io_uring_enter); handler = from there until
# the daemon's next system call (libfuse + the filesystem's handler); commit
# = that call until the kernel ends the request; wake caller = end until
# the caller runs; return = until statx returns. Tracing adds about 1 µs an
# event: the steps are relative, compare transports in one run.
set -eu -o pipefail
dir=$1 dpid=$2 n=${3:-3000}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/rtt_profile.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -D_GNU_SOURCE -pthread -o "$tmp/bench_rtt" "$here/../bench_rtt.c"
daemon_tids=$(ls "/proc/$dpid/task" | tr '\n' ',')
# System calls of the daemon's threads and of bench_rtt only.
filter="comm == \"bench_rtt\""
for t in ${daemon_tids//,/ }; do filter="$filter || common_pid == $t"; done
perf record -q -o "$tmp/perf.data" -a -e sched:sched_switch -e sched:sched_wakeup \
    -e fuse:fuse_request_send -e fuse:fuse_request_end \
    -e raw_syscalls:sys_enter --filter "$filter" -e raw_syscalls:sys_exit --filter "$filter" \
    -- "$tmp/bench_rtt" "$dir" -n "$n" >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
grep RESULT "$tmp/out"
perf script -i "$tmp/perf.data" --ns -F comm,tid,cpu,time,event,trace 2>/dev/null |
    python3 "$here/rtt_profile.py" "$daemon_tids"
