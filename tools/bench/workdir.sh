# workdir.sh — sourced by the benchmark scripts: bench_workdir BASE NAME makes
# WORK (a new directory under BASE) with a mount point MNT in it; on exit,
# also on error or Ctrl-C, whatever is mounted on MNT is unmounted and WORK
# removed.
bench_workdir() {
    WORK=$(mktemp -d "$1/$2-XXXXXX")
    MNT=$WORK/mnt
    mkdir -p "$MNT"
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
}

bench_cleanup() {
    if grep -q " $MNT " /proc/mounts; then fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT"; fi
    rm -rf "$WORK"
}
