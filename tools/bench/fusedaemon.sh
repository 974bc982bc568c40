# fusedaemon.sh — sourced by the benchmarks that run one lsmfs daemon at a
# time in the foreground (scale.sh, bigfile.sh): they set $mnt (the mount
# point) and $pid (the daemon's, "" when none); unmount stops it, waiting for
# the store to close, and leaves nothing mounted.
log() { printf '%s\n' "$*" >&2; }
now() { date +%s.%N; }
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
mounted() { grep -qs " $mnt fuse" /proc/mounts; }

unmount() {
    [ -n "$pid" ] || return 0
    mounted && { fusermount3 -u "$mnt" 2>/dev/null || { sleep 0.5; fusermount3 -u "$mnt"; }; }
    local i
    for i in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { log "${0##*/}: daemon $pid still running; terminating"; kill "$pid"; }
    wait "$pid" 2>/dev/null
    mounted && fusermount3 -uz "$mnt"
    pid=""
}
