#!/bin/bash
# backup.sh — what a backup of a big mail spool on lsmfs costs, each way side
# by side in one run (issue 19): `lsmctl snapshot`, `tar -cf`, `rsync -a`,
# and, after ~1% of the files changed, an incremental `rsync -a` against an
# incremental `lsmctl backup` (full first). A writer keeps delivering mail
# (maildir: write, fsync, rename) into the tree all the while.
#
# The spool: --files=N (default 1,000,000) files of 1-16 KiB of text in
# directories of 1000 (tools/bench/backup_spool.py). The store, the tarball
# and the copies are on the root filesystem, or with --loop=SIZE on a
# journaled ext4 made on a loop device. Needs root (mounts, drop_caches).
# Everything it mounts is unmounted on exit, also on error or Ctrl-C.
# Prints a markdown table: operation, seconds, bytes, ratios against tar.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

files=1000000
bindir=${LSMFS_BIN:-$repo/bin}
work=""
keep=0
drop=1
loop_size=""
rate=100
change_pct=1
jobs=2
mount_opts=""
bk_full="backup {mnt} {dest}"
bk_incr="backup {mnt} {dest}"

usage() {
    cat <<EOF
usage: $0 [options]
  --files=N           files in the spool (default 1000000), 1000 per directory
  --loop=SIZE         put the work directory on a journaled ext4 on a loop device of
                      SIZE (e.g. 60G); default: the root filesystem
  --work=DIR          work directory (default a new /tmp/backupbench.XXXXXX)
  --bin=DIR           where lsmfs, mkfs.lsmfs, lsmctl are (default \$LSMFS_BIN or bin/)
  --rate=N            the writer's deliveries per second during the measurements (100)
  --change=PCT        percent of the files rewritten before the incremental rows (1)
  --jobs=N            processes building the spool (2)
  -o OPTS             extra lsmfs mount options (e.g. writeback)
  --backup-full=ARGS  lsmctl arguments of the full backup (default "$bk_full")
  --backup-incr=ARGS  and of the incremental one (default "$bk_incr");
                      {mnt} is the mount, {dest} the backup directory
  --keep              keep the work directory (never the mounts)
  --no-drop           do not drop the page cache before each operation
EOF
}

while [ $# -gt 0 ]; do
    case $1 in
    --files=*) files=${1#*=} ;;
    --loop=*) loop_size=${1#*=} ;;
    --work=*) work=${1#*=} ;;
    --bin=*) bindir=${1#*=} ;;
    --rate=*) rate=${1#*=} ;;
    --change=*) change_pct=${1#*=} ;;
    --jobs=*) jobs=${1#*=} ;;
    -o) mount_opts=$2; shift ;;
    --backup-full=*) bk_full=${1#*=} ;;
    --backup-incr=*) bk_incr=${1#*=} ;;
    --keep) keep=1 ;;
    --no-drop) drop=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "backup.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

log() { printf '%s\n' "$*" >&2; }
die() { log "backup.sh: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
[ "$(id -u)" = 0 ] || die "must run as root (mounts, drop_caches)"
for p in lsmfs mkfs.lsmfs lsmctl; do
    [ -x "$bindir/$p" ] || die "$bindir/$p not built (make)"
done
command -v rsync >/dev/null || die "rsync not installed"

# ------------------------------------------------------- mounts and cleanup
[ -n "$work" ] || work=$(mktemp -d /tmp/backupbench.XXXXXX)
mkdir -p "$work" && work=$(cd "$work" && pwd)
base=$work           # where the store, tarball and copies go
lsmfs_pid=""
loop_mnt=""
writer_pid=""
mnt=$work/mnt

stop_writer() {
    [ -n "$writer_pid" ] || return 0
    touch "$work/stop"
    wait "$writer_pid" 2>/dev/null
    writer_pid=""
}

cleanup() {
    local i
    stop_writer
    if [ -n "$lsmfs_pid" ]; then
        fusermount3 -u "$mnt" 2>/dev/null || { sleep 1; fusermount3 -u "$mnt" 2>/dev/null; }
        for i in $(seq 1 300); do kill -0 "$lsmfs_pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$lsmfs_pid" 2>/dev/null && kill "$lsmfs_pid"
        grep -qs " $mnt fuse" /proc/mounts && fusermount3 -uz "$mnt"
        wait "$lsmfs_pid" 2>/dev/null
    fi
    if [ -n "$loop_mnt" ]; then
        umount "$loop_mnt" 2>/dev/null || umount -l "$loop_mnt"
    fi
    if [ "$keep" = 1 ]; then log "backup.sh: work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$loop_size" ]; then
    truncate -s "$loop_size" "$work/loop.img" &&
        mkfs.ext4 -q -F "$work/loop.img" >"$work/mkfs.ext4.log" 2>&1 &&
        mkdir -p "$work/loop" && mount -o loop "$work/loop.img" "$work/loop" ||
        die "loop ext4 setup failed"
    loop_mnt=$work/loop
    base=$work/loop
    where="a journaled ext4 on a loop device ($loop_size, image on $(findmnt -no SOURCE -T "$work"))"
else
    where="the root filesystem ($(findmnt -no SOURCE,FSTYPE -T "$work" | tr -s ' '))"
fi
mkdir -p "$mnt" "$base/store"
"$bindir/mkfs.lsmfs" "$base/store" >"$work/mkfs.log" 2>&1 || die "mkfs.lsmfs failed"
"$bindir/lsmfs" "$base/store" "$mnt" -f ${mount_opts:+-o "$mount_opts"} >"$work/lsmfs.log" 2>&1 &
lsmfs_pid=$!
for i in $(seq 1 100); do grep -qs " $mnt fuse" /proc/mounts && break; sleep 0.1; done
grep -qs " $mnt fuse" /proc/mounts || { cat "$work/lsmfs.log" >&2; die "lsmfs did not mount"; }

drop_caches() {
    sync
    [ "$drop" = 1 ] && { echo 3 >/proc/sys/vm/drop_caches || log "backup.sh: cannot drop caches"; }
}
bytes_of() { du -sb "$1" | cut -f1; } # apparent bytes of a tree
alone_bytes() { find "$1" -type f -links 1 -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }

# ------------------------------------------------------------------- rows
rows=()     # "operation|seconds|bytes|note"
tar_s=""; tar_b=""
row() { rows+=("$1|$2|$3|${4:-}"); log "backup.sh: $1: $2 s, $3 bytes ${4:-}"; }
# Runs CMD..., accepting exit codes in OKCODES (space-separated); prints seconds.
timed() {
    local ok=$1 t rc
    shift
    t=$(now)
    "$@" >>"$work/ops.log" 2>&1
    rc=$?
    case " $ok " in *" $rc "*) ;; *) die "$* failed (exit $rc; see $work/ops.log)" ;; esac
    since "$t"
}

log "backup.sh: $files files, store on $where"
t=$(now)
spool_bytes=$(python3 "$here/backup_spool.py" build "$mnt/spool" "$files" "$jobs") || die "spool build failed"
row "build the spool ($files files, no fsync)" "$(since "$t")" "$spool_bytes" "(setup, not a backup)"

python3 "$here/backup_spool.py" deliver "$mnt/incoming" "$rate" "$work/stop" >"$work/writer.out" 2>&1 &
writer_pid=$!

drop_caches
s=$(timed 0 "$bindir/lsmctl" snapshot "$mnt" bench1) || exit 1
snapdir=$base/store/snapshots/bench1
row "lsmctl snapshot" "$s" "$(alone_bytes "$snapdir")" \
    "new bytes; it shares $(bytes_of "$snapdir") with the store"

drop_caches
tar_s=$(timed "0 1" tar -cf "$base/spool.tar" -C "$mnt" .) || exit 1
tar_b=$(stat -c %s "$base/spool.tar")
row "tar -cf (same disk)" "$tar_s" "$tar_b"
rm -f "$base/spool.tar"

drop_caches
s=$(timed "0 24" rsync -a "$mnt/" "$base/rsync/") || exit 1
row "rsync -a (full, fresh dir)" "$s" "$(bytes_of "$base/rsync")"

have_backup=0
usage_text=$("$bindir/lsmctl" 2>&1)
case $usage_text in *"lsmctl backup"*) have_backup=1 ;; esac
bk() { # TEMPLATE DEST
    local a=${1//\{mnt\}/$mnt}
    a=${a//\{dest\}/$2}
    # shellcheck disable=SC2086 # the template's words are lsmctl's arguments
    timed 0 "$bindir/lsmctl" $a
}
skip_backup() { row "$1" "SKIPPED: lsmctl backup not built" "" ""; echo "SKIPPED: lsmctl backup not built ($1)"; }
if [ "$have_backup" = 1 ]; then
    drop_caches
    s=$(bk "$bk_full" "$base/backup") || exit 1
    row "lsmctl backup (full)" "$s" "$(bytes_of "$base/backup")"
else
    skip_backup "lsmctl backup (full)"
fi

t=$(now)
read -r ch_files ch_bytes < <(python3 "$here/backup_spool.py" change "$mnt/spool" "$files" "$change_pct")
row "rewrite $change_pct% of the files ($ch_files)" "$(since "$t")" "$ch_bytes" "(setup)"

drop_caches
s=$(timed "0 24" rsync -a --stats "$mnt/" "$base/rsync/") || exit 1
sent=$(awk -F': ' '/^Literal data/ { gsub(/[^0-9]/, "", $2); v = $2 } END { print v + 0 }' "$work/ops.log")
row "rsync -a (incremental)" "$s" "$sent" "literal data sent"

if [ "$have_backup" = 1 ]; then
    before=$(bytes_of "$base/backup")
    drop_caches
    s=$(bk "$bk_incr" "$base/backup") || exit 1
    row "lsmctl backup (incremental)" "$s" "$(($(bytes_of "$base/backup") - before))" "bytes added"
else
    skip_backup "lsmctl backup (incremental)"
fi
stop_writer
delivered=$(cat "$work/writer.out")

# ------------------------------------------------------------------ table
echo
echo "backup.sh --files=$files: store on $where; lsmfs -o '${mount_opts}'; a writer delivered" \
    "$delivered mails (fsync each, up to $rate/s) during the measurements; $(nproc) CPUs"
echo
echo "| operation | seconds | bytes | seconds / tar | bytes / tar | note |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
for r in "${rows[@]}"; do
    IFS='|' read -r op sec byt nt <<<"$r"
    case $sec in
    SKIPPED*) echo "| $op | $sec | | | | |"; continue ;;
    esac
    rs=$(awk -v a="$sec" -v b="$tar_s" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
    rb=$(awk -v a="$byt" -v b="$tar_b" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }')
    echo "| $op | $sec | $byt | $rs | $rb | $nt |"
done
