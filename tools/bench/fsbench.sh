#!/bin/bash
# fsbench.sh — the filesystem benchmarks of issue 6, side by side on every
# target in one run, with a table of ratios at the end.
#
# Targets (--targets, default all that can be set up):
#   ext4       a directory on the root filesystem (the one /tmp is on)
#   lsmfs      lsmfs with its store on the root filesystem
#   nowork     nowork-fs, the no-work FUSE ceiling (in memory)
#   nwperm     nowork-fs with -o default_permissions, the kernel's permission
#              checks lsmfs mounts with (after a change in a directory, the
#              next check there asks for its attributes: a GETATTR)
#   durable    nowork-fs in durable mode (-o log=), its log on the root fs:
#              the ceiling for a FUSE filesystem whose fsync is real
#   loopext4   a journaled ext4 made with mkfs.ext4 on a loop device
#   looplsmfs  lsmfs with its store on that loop ext4
#   base       lsmfs as target lsmfs, but the binaries of --base=DIR (say a
#              build of main): before/after in the same run
#   loopdurable  nowork-fs in durable mode with its log on that loop ext4
#   nwuring    nowork-fs over FUSE's io_uring queues (-o uring=on): that
#              transport's ceiling (needs the fuse module's enable_uring=Y)
#   lsuring    lsmfs over the io_uring queues (-o uring=on)
#   looplsuring  lsuring with its store on the loop ext4
#   dir        any directory given with --dir=PATH (e.g. a filesystem mounted by hand)
# Workloads (--workloads, default all):
#   rtt maildir smallfile space seq tar postmark
#
# Needs root (mounts, loop device, drop_caches). Everything it mounts is
# unmounted on exit, also on error or Ctrl-C. See tools/bench/README.md.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

# ------------------------------------------------------------------ options
mode=quick
targets="ext4,lsmfs,nowork,durable,loopext4,looplsmfs,loopdurable"
workloads="rtt,maildir,smallfile,space,seq,tar,postmark"
bindir=${LSMFS_BIN:-$repo/bin}
work=""
custom_dir=""
basedir=""
keep=0
drop=1
repeat=1
loop_size=""
writers=""; md_msgs=""; sf_dirs=""; sf_files=""; sf_size=""; sf_threads=""
space_files=""; seq_size=""; tar_src=""; tar_file=""; pm_files=""; pm_txns=""; rtt_stats=""

usage() {
    cat <<EOF
usage: $0 [options]
  --quick | --full         sizes: quick (default, < 2 min) or the issue's full sizes
  --targets=LIST           ext4,lsmfs,nowork,durable,loopext4,looplsmfs,loopdurable,
                           nwperm,nwuring,lsuring,looplsuring,dir (default all but the io_uring
                           ones and dir)
  --dir=PATH               the directory of target "dir" (added to the targets if given)
  --workloads=LIST         rtt,maildir,smallfile,space,seq,tar,postmark (default all)
  --rtt-stats=N            stats per thread of the round-trip workload (threads: --sf-threads)
  --bin=DIR                where lsmfs, mkfs.lsmfs, nowork-fs are (default \$LSMFS_BIN or bin/)
  --base=DIR               target "base": lsmfs and mkfs.lsmfs of DIR (added to the targets)
  --work=DIR               work directory on the root fs (default a new /tmp/fsbench.XXXX)
  --keep                   keep the work directory (never the mounts)
  --no-drop                do not drop the page cache between runs
  --repeat=N               run every workload N times per target; the table shows medians
  --loop-size=SIZE         loop ext4 image size (default 4G, more for big --seq-size)
  --writers=LIST           maildir writer counts (default 1,8)
  --maildir-msgs=N         messages per writer
  --sf-dirs=D --sf-files=F --sf-size=S --sf-threads=LIST   small files (F per dir)
  --space-files=N          files of --sf-size in the space tree
  --seq-size=SIZE          sequential file size (full: 1G)
  --tar-src=DIR            tree to pack for tar (quick: /usr/include/linux, full: /usr/include)
  --tar-file=FILE          use this tarball instead (e.g. a Debian .orig.tar.xz)
  --pm-files=N --pm-txns=N PostMark file pool and transactions
EOF
}

for arg in "$@"; do
    case $arg in
    --quick) mode=quick ;;
    --full) mode=full ;;
    --targets=*) targets=${arg#*=} ;;
    --workloads=*) workloads=${arg#*=} ;;
    --bin=*) bindir=${arg#*=} ;;
    --base=*) basedir=${arg#*=} ;;
    --work=*) work=${arg#*=} ;;
    --dir=*) custom_dir=${arg#*=} ;;
    --keep) keep=1 ;;
    --no-drop) drop=0 ;;
    --repeat=*) repeat=${arg#*=} ;;
    --loop-size=*) loop_size=${arg#*=} ;;
    --writers=*) writers=${arg#*=} ;;
    --maildir-msgs=*) md_msgs=${arg#*=} ;;
    --sf-dirs=*) sf_dirs=${arg#*=} ;;
    --sf-files=*) sf_files=${arg#*=} ;;
    --sf-size=*) sf_size=${arg#*=} ;;
    --sf-threads=*) sf_threads=${arg#*=} ;;
    --space-files=*) space_files=${arg#*=} ;;
    --seq-size=*) seq_size=${arg#*=} ;;
    --tar-src=*) tar_src=${arg#*=} ;;
    --tar-file=*) tar_file=${arg#*=} ;;
    --pm-files=*) pm_files=${arg#*=} ;;
    --pm-txns=*) pm_txns=${arg#*=} ;;
    --rtt-stats=*) rtt_stats=${arg#*=} ;;
    -h | --help) usage; exit 0 ;;
    *) echo "fsbench: unknown option $arg" >&2; usage >&2; exit 2 ;;
    esac
done

if [ "$mode" = full ]; then
    : "${writers:=1,8}" "${md_msgs:=1000}" "${sf_dirs:=10}" "${sf_files:=2000}" "${sf_size:=1024}"
    : "${sf_threads:=1,2}" "${space_files:=20000}" "${seq_size:=1G}" "${tar_src:=/usr/include}"
    : "${pm_files:=5000}" "${pm_txns:=20000}" "${rtt_stats:=50000}"
else
    : "${writers:=1,8}" "${md_msgs:=150}" "${sf_dirs:=10}" "${sf_files:=200}" "${sf_size:=1024}"
    : "${sf_threads:=1,2}" "${space_files:=2000}" "${seq_size:=64M}" "${tar_src:=/usr/include/linux}"
    : "${pm_files:=500}" "${pm_txns:=2000}" "${rtt_stats:=5000}"
fi

has() { case ",$1," in *",$2,"*) return 0 ;; *) return 1 ;; esac; }
all_targets="ext4 lsmfs base nowork nwperm durable loopext4 looplsmfs loopdurable nwuring lsuring looplsuring dir"
if [ -n "$custom_dir" ]; then
    [ -d "$custom_dir" ] || { echo "fsbench: --dir=$custom_dir is not a directory" >&2; exit 2; }
    custom_dir=$(cd "$custom_dir" && pwd)
    has "$targets" dir || targets="$targets,dir"
fi
if [ -n "$basedir" ]; then
    basedir=$(cd "$basedir" && pwd) || exit 2
    has "$targets" base || targets="$targets,base"
fi
log() { printf '%s\n' "$*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.6f", b - a }'; }
to_bytes() { numfmt --from=iec "$1"; }

if [ "$(id -u)" != 0 ]; then
    log "fsbench: must run as root (mounts, loop device, drop_caches)"
    exit 1
fi

# ---------------------------------------------------------------- work dir
if [ -z "$work" ]; then
    work=$(mktemp -d /tmp/fsbench.XXXXXX)
else
    mkdir -p "$work"
fi
work=$(cd "$work" && pwd)
mkdir -p "$work/mnt" "$work/bin" "$work/logs"

# Mounts we made, unmounted in reverse order on exit: "fuse:MNT:PID" or "loop:MNT".
mounts=()
declare -A dir_of pid_of store_of # target -> benchmark dir / daemon pid / store dir
declare -A note                    # target -> why it is missing

umount_fuse() { # MNT PID
    local mnt=$1 pid=$2 i
    if grep -qs " $mnt fuse" /proc/mounts; then
        fusermount3 -u "$mnt" 2>/dev/null || sleep 0.5
        grep -qs " $mnt fuse" /proc/mounts && fusermount3 -u "$mnt" 2>/dev/null
    fi
    # The daemon closes its store after the unmount; wait for that.
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "fsbench: daemon $pid did not exit after unmount; terminating it"
        kill "$pid" 2>/dev/null
        sleep 0.5
    fi
    grep -qs " $mnt fuse" /proc/mounts && fusermount3 -uz "$mnt" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 0
}

forget_mount() { # ENTRY
    local i
    for i in "${!mounts[@]}"; do
        [ "${mounts[$i]}" = "$1" ] && unset 'mounts[i]'
    done
    mounts=("${mounts[@]}")
}

cleanup() {
    local i entry
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        entry=${mounts[$i]}
        case $entry in
        fuse:*) IFS=: read -r _ mnt pid <<<"$entry"; umount_fuse "$mnt" "$pid" ;;
        loop:*) umount "${entry#loop:}" 2>/dev/null || umount -l "${entry#loop:}" ;;
        esac
    done
    mounts=()
    [ -n "${dir_of[dir]:-}" ] && rm -rf "${dir_of[dir]}"
    if [ "$keep" = 1 ]; then
        log "fsbench: work directory kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts a FUSE daemon in the foreground (-f) in the background and waits
# for its mount. Prints the daemon's pid. Usage: mount_fuse MNT LOG CMD...
mount_fuse() {
    local mnt=$1 logf=$2 i pid
    shift 2
    mkdir -p "$mnt"
    "$@" >"$logf" 2>&1 &
    pid=$!
    for i in $(seq 1 100); do
        if grep -qs " $mnt fuse" /proc/mounts; then
            echo "$pid" # the caller records the mount (this runs in a subshell)
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    log "fsbench: mounting $mnt failed: $* (log: $(tail -n 3 "$logf" | tr '\n' ' '))"
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 1
}

unmount_fuse_entry() { # MNT PID
    umount_fuse "$1" "$2"
    forget_mount "fuse:$1:$2"
}

# Mounts a fresh lsmfs store at MNT. Prints the daemon pid.
mount_lsmfs() { # STORE MNT LOG
    rm -rf "$1"
    local b=${lsmbin:-$bindir} # the caller's target's binaries (bin_of)
    if ! "$b/mkfs.lsmfs" "$1" >"$3.mkfs" 2>&1; then
        log "fsbench: mkfs.lsmfs $1 failed: $(tail -n 3 "$3.mkfs" | tr '\n' ' ')"
        return 1
    fi
    # shellcheck disable=SC2086
    mount_fuse "$2" "$3" "$b/lsmfs" "$1" "$2" -f ${LSMFS_MOUNT_OPTS:-} "${@:4}"
}
# The lsmfs binaries of target t.
bin_of() { if [ "$1" = base ]; then echo "$basedir"; else echo "$bindir"; fi; }
# The lsmfs mount arguments of target t (lsuring: over the io_uring queues).
lsmfs_args() { case $1 in lsuring | looplsuring) echo "-o uring=on" ;; esac; return 0; }

drop_caches() {
    sync
    if [ "$drop" = 1 ]; then
        echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || log "fsbench: cannot drop caches"
    fi
}

# ------------------------------------------------------------ build tools
cflags="-std=c11 -O2 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -D_GNU_SOURCE"
cflags="$cflags -D_FILE_OFFSET_BITS=64 -pthread"
for prog in maildir smallfile seqio rtt; do
    # shellcheck disable=SC2086
    if ! cc $cflags -o "$work/bin/bench_$prog" "$repo/tools/bench_$prog.c"; then
        log "fsbench: cannot build tools/bench_$prog.c"
        exit 1
    fi
done
if has "$workloads" postmark && ! command -v postmark >/dev/null; then
    log "fsbench: installing postmark"
    { apt-get install -y -q postmark || { apt-get update -q && apt-get install -y -q postmark; }; } \
        >"$work/logs/apt.log" 2>&1 || log "fsbench: postmark not available; skipping it"
fi

# ---------------------------------------------------------------- targets
active=()
loopdev=""

setup_loop() {
    local size=${loop_size:-}
    if [ -z "$size" ]; then
        local need=$((3 * $(to_bytes "$seq_size") + (1 << 30)))
        size=$(( need > (4 << 30) ? need : (4 << 30) ))
    fi
    truncate -s "$size" "$work/loop.img" &&
        mkfs.ext4 -q -F "$work/loop.img" >"$work/logs/mkfs.ext4" 2>&1 &&
        mkdir -p "$work/mnt/loop" &&
        mount -o loop "$work/loop.img" "$work/mnt/loop" || return 1
    mounts+=("loop:$work/mnt/loop")
    loopdev=$(findmnt -n -o SOURCE "$work/mnt/loop")
    return 0
}

setup_targets() {
    local t pid
    for t in $all_targets; do has "$targets" "$t" || continue
        case $t in
        ext4)
            mkdir -p "$work/ext4" && dir_of[$t]=$work/ext4 ;;
        dir)
            if [ -z "$custom_dir" ]; then note[$t]="no --dir given"; continue; fi
            dir_of[$t]=$(mktemp -d "$custom_dir/fsbench.XXXXXX") || { note[$t]="cannot write to $custom_dir"; continue; }
            ;;
        nowork | nwperm | durable | loopdurable | nwuring)
            if [ ! -x "$bindir/nowork-fs" ]; then note[$t]="$bindir/nowork-fs not built"; continue; fi
            local log_opt=()
            if [ "$t" = nwperm ]; then
                log_opt=(-o default_permissions)
            elif [ "$t" = nwuring ]; then
                log_opt=(-o uring=on)
            elif [ "$t" = durable ]; then
                log_opt=(-o "log=$work/$t.log")
            elif [ "$t" = loopdurable ]; then
                if [ -z "$loopdev" ]; then
                    setup_loop || { note[$t]="loop ext4 setup failed"; continue; }
                fi
                log_opt=(-o "log=$work/mnt/loop/$t.log")
            fi
            pid=$(mount_fuse "$work/mnt/$t" "$work/logs/$t.log" \
                "$bindir/nowork-fs" "$work/mnt/$t" -f "${log_opt[@]}") ||
                { note[$t]="mount failed (see $work/logs/$t.log)"; continue; }
            mounts+=("fuse:$work/mnt/$t:$pid")
            dir_of[$t]=$work/mnt/$t pid_of[$t]=$pid ;;
        lsmfs | base | looplsmfs | lsuring | looplsuring)
            local lsmbin; lsmbin=$(bin_of "$t")
            if [ ! -x "$lsmbin/lsmfs" ] || [ ! -x "$lsmbin/mkfs.lsmfs" ]; then
                note[$t]="lsmfs or mkfs.lsmfs not built in $lsmbin"; continue
            fi
            local base=$work
            case $t in looplsmfs | looplsuring) base=$work/mnt/loop ;; esac
            if [ "$base" != "$work" ] && [ -z "$loopdev" ]; then
                setup_loop || { note[$t]="loop ext4 setup failed"; continue; }
            fi
            store_of[$t]=$base/$t-store
            # shellcheck disable=SC2046
            pid=$(mount_lsmfs "${store_of[$t]}" "$work/mnt/$t" "$work/logs/$t.log" $(lsmfs_args "$t")) ||
                { note[$t]="mount failed (see $work/logs/$t.log)"; continue; }
            mounts+=("fuse:$work/mnt/$t:$pid")
            dir_of[$t]=$work/mnt/$t pid_of[$t]=$pid ;;
        loopext4)
            if [ -z "$loopdev" ]; then
                setup_loop || { note[$t]="loop ext4 setup failed"; continue; }
            fi
            mkdir -p "$work/mnt/loop/ext4" && dir_of[$t]=$work/mnt/loop/ext4 ;;
        esac
        active+=("$t")
    done
}

# A fresh lsmfs store for target t (lsmfs, looplsmfs) before each workload:
# what one workload leaves behind (a 1 GiB file being reclaimed, tables
# being compacted) would otherwise run in the background of the next one.
# Every other target keeps its directory (ext4 has no such deferred work).
refresh_lsmfs() { # TARGET
    local t=$1 pid mnt=${dir_of[$1]}
    case $t in lsmfs | base | looplsmfs | lsuring | looplsuring) ;; *) return 0 ;; esac
    local lsmbin; lsmbin=$(bin_of "$t")
    unmount_fuse_entry "$mnt" "${pid_of[$t]}"
    # shellcheck disable=SC2046
    pid=$(mount_lsmfs "${store_of[$t]}" "$mnt" "$work/logs/$t.log" $(lsmfs_args "$t")) ||
        { log "fsbench: remounting $t failed"; return 1; }
    mounts+=("fuse:$mnt:$pid")
    pid_of[$t]=$pid
}

# ---------------------------------------------------------------- results
declare -A res      # "metric|target" -> the values of every repetition, space-separated
metrics=()          # in print order
record() { # METRIC TARGET VALUE
    has "$(IFS=,; echo "${metrics[*]:-}")" "$1" || metrics+=("$1")
    res["$1|$2"]="${res["$1|$2"]:-} ${3:-ERR}"
}
# Median of the numeric values among the arguments; ERR if there are none.
median() {
    printf '%s\n' "$@" | awk '$1 ~ /^[0-9.]+$/ { v[n++] = $1 } END {
        if (n == 0) { print "ERR"; exit }
        for (i = 1; i < n; i++) for (j = i; j > 0 && v[j-1] + 0 > v[j] + 0; j--) {
            t = v[j]; v[j] = v[j-1]; v[j-1] = t }
        print (n % 2) ? v[int(n/2)] : (v[n/2-1] + v[n/2]) / 2 }'
}
value() { # METRIC TARGET
    local v=${res["$1|$2"]:-}
    [ -z "$v" ] && return 0
    # shellcheck disable=SC2086
    median $v
}
# Value of KEY=... in a RESULT line.
field() { sed -n "s/.*[ ]$2=\\([^ ]*\\).*/\\1/p" <<<"$1" | head -n 1; }

# Sectors written on the loop device so far (for write amplification).
loop_written() { awk '{ print $7 * 512 }' "/sys/block/$(basename "$loopdev")/stat"; }
daemon_written() { awk '/^write_bytes/ { print $2 }' "/proc/$1/io"; }

# Bytes written to disk on behalf of target t so far, or empty if unknown
# (or meaningless: the durable ceiling's log is a ring, rewritten in place).
written_for() {
    case $1 in
    loopext4 | looplsmfs | looplsuring) loop_written ;;
    lsmfs | base | lsuring) daemon_written "${pid_of[$1]}" ;;
    *) echo "" ;;
    esac
}

# The xattr lsmfs reports its counters in, for syncs per delivery.
stats_path() { case $1 in lsmfs | base | looplsmfs | lsuring | looplsuring) echo "-x ${dir_of[$1]}" ;; dir) echo "-x $custom_dir" ;; *) echo "" ;; esac; }

run_logged() { # NAME CMD... — runs CMD, keeps its output, prints its RESULT line
    local name=$1 out
    shift
    out=$("$@" 2>&1)
    local rc=$?
    printf '%s\n' "$out" >"$work/logs/$name.out"
    if [ $rc -ne 0 ]; then
        log "fsbench: $name failed (exit $rc): $(tail -n 2 <<<"$out" | tr '\n' ' ')"
        return 1
    fi
    grep '^RESULT' <<<"$out"
}

# CPU seconds the daemon of target t used so far (its threads' time on a
# CPU, /proc/PID/task/*/schedstat, in ns), or empty without a daemon.
daemon_cpu() {
    local pid=${pid_of[$1]:-}
    [ -n "$pid" ] && [ -d "/proc/$pid/task" ] || return 0
    cat /proc/"$pid"/task/*/schedstat 2>/dev/null | awk '{ ns += $1 } END { printf "%.6f", ns / 1e9 }'
}

# ---------------------------------------------------------------- workloads
# One round trip: T threads stat their own file with statx(FORCE_SYNC),
# which always asks a FUSE daemon (a GETATTR each): the transport's latency,
# and the daemon's CPU per request.
wl_rtt() {
    local t=$1 n r c0 c1
    for n in ${sf_threads//,/ }; do
        mkdir -p "${dir_of[$t]}/rtt-t$n"
        c0=$(daemon_cpu "$t")
        r=$(run_logged "rtt-t$n-$t" "$work/bin/bench_rtt" "${dir_of[$t]}/rtt-t$n" -t "$n" -n "$rtt_stats") ||
            { record "rtt t$n stats/s" "$t" ERR; continue; }
        c1=$(daemon_cpu "$t")
        record "rtt t$n stats/s" "$t" "$(field "$r" stats_per_s)"
        record "rtt t$n us/stat (lower=better)" "$t" "$(field "$r" us_per_stat)"
        [ -n "$c0" ] && record "rtt t$n daemon CPU us/request (lower=better)" "$t" \
            "$(awk -v a="$c0" -v b="$c1" -v k="$((n * rtt_stats))" 'BEGIN { printf "%.2f", (b - a) * 1e6 / k }')"
        rm -rf "${dir_of[$t]}/rtt-t$n"
    done
}

wl_maildir() { # TARGET
    local t=$1 w r
    for w in ${writers//,/ }; do
        drop_caches
        # shellcheck disable=SC2046
        r=$(run_logged "maildir-w$w-$t" "$work/bin/bench_maildir" "${dir_of[$t]}/maildir-w$w" \
            -w "$w" -n "$md_msgs" $(stats_path "$t")) || { record "maildir w$w deliveries/s" "$t" ERR; continue; }
        record "maildir w$w deliveries/s" "$t" "$(field "$r" deliveries_per_s)"
        record "maildir w$w p50 ms (lower=better)" "$t" "$(field "$r" p50_ms)"
        record "maildir w$w p99 ms (lower=better)" "$t" "$(field "$r" p99_ms)"
        record "maildir w$w read-back/s" "$t" "$(field "$r" read_per_s)"
        local spd; spd=$(field "$r" syncs_per_delivery)
        [ "$spd" != NA ] && record "maildir w$w syncs/delivery" "$t" "$spd"
        rm -rf "${dir_of[$t]}/maildir-w$w"
    done
}

wl_smallfile() {
    local t=$1 n r p
    for n in ${sf_threads//,/ }; do
        drop_caches
        r=$(run_logged "smallfile-t$n-$t" "$work/bin/bench_smallfile" "${dir_of[$t]}/smallfile-t$n" \
            -d "$sf_dirs" -f "$sf_files" -s "$sf_size" -t "$n") ||
            { record "smallfile t$n create/s" "$t" ERR; continue; }
        for p in create stat read readdir unlink; do
            record "smallfile t$n $p/s" "$t" "$(field "$r" $p)"
        done
        rm -rf "${dir_of[$t]}/smallfile-t$n"
    done
}

# Disk bytes per file of a tree of small files: du of the tree on ext4, du of
# a fresh store after unmount on lsmfs.
wl_space() {
    local t=$1 per=$(( (space_files + 9) / 10 )) bytes files r
    files=$((per * 10))
    drop_caches
    case $t in
    nowork | nwperm | durable | loopdurable | nwuring | lsuring | looplsuring) return 0 ;; # in memory; lsuring: the store of lsmfs
    ext4 | loopext4 | dir)
        r=$(run_logged "space-$t" "$work/bin/bench_smallfile" "${dir_of[$t]}/space" \
            -d 10 -f "$per" -s "$sf_size" -k -p create) || { record "space bytes/file" "$t" ERR; return; }
        sync
        bytes=$(du -sB1 "${dir_of[$t]}/space/sf" | cut -f1)
        rm -rf "${dir_of[$t]}/space" ;;
    lsmfs | base | looplsmfs)
        local base=$work; [ "$t" = looplsmfs ] && base=$work/mnt/loop
        local store=$base/space-store mnt=$work/mnt/space pid lsmbin
        lsmbin=$(bin_of "$t")
        pid=$(mount_lsmfs "$store" "$mnt" "$work/logs/space-$t.log") ||
            { record "space bytes/file" "$t" ERR; return; }
        mounts+=("fuse:$mnt:$pid")
        r=$(run_logged "space-$t" "$work/bin/bench_smallfile" "$mnt/space" \
            -d 10 -f "$per" -s "$sf_size" -k -p create)
        local rc=$?
        unmount_fuse_entry "$mnt" "$pid"
        [ $rc -eq 0 ] || { record "space bytes/file" "$t" ERR; rm -rf "$store"; return; }
        bytes=$(du -sB1 "$store" | cut -f1)
        rm -rf "$store" ;;
    esac
    record "space bytes/file (lower=better)" "$t" "$((bytes / files))"
}

wl_seq() {
    local t=$1 f=${dir_of[$1]}/seqfile r w0 w1 size
    size=$(to_bytes "$seq_size")
    drop_caches
    w0=$(written_for "$t")
    r=$(run_logged "seq-write-$t" "$work/bin/bench_seqio" "$f" -s "$seq_size" -p write) ||
        { record "seq write MiB/s" "$t" ERR; rm -f "$f"; return; }
    record "seq write MiB/s" "$t" "$(field "$r" write_mb_s)"
    drop_caches
    r=$(run_logged "seq-read-$t" "$work/bin/bench_seqio" "$f" -s "$seq_size" -p read) ||
        { record "seq read MiB/s" "$t" ERR; rm -f "$f"; return; }
    record "seq read MiB/s" "$t" "$(field "$r" read_mb_s)"
    w1=$(written_for "$t")
    if [ -n "$w0" ] && [ -n "$w1" ]; then
        record "seq write amplification (lower=better)" "$t" \
            "$(awk -v a="$w0" -v b="$w1" -v s="$size" 'BEGIN { printf "%.2f", (b - a) / s }')"
    fi
    rm -f "$f"
}

tarball=""
tar_entries=0
make_tarball() {
    [ -n "$tarball" ] && return 0
    if [ -n "$tar_file" ]; then
        tarball=$tar_file
    else
        tarball=$work/src.tar
        tar -C "$(dirname "$tar_src")" -cf "$tarball" "$(basename "$tar_src")" || return 1
    fi
    tar_entries=$(tar -tf "$tarball" | wc -l)
}

wl_tar() {
    local t=$1 d=${dir_of[$1]}/tar start secs
    make_tarball || { record "tar unpack files/s" "$t" ERR; return; }
    drop_caches
    mkdir -p "$d"
    start=$(now)
    if ! tar -C "$d" -xf "$tarball" 2>"$work/logs/tar-$t.err"; then
        log "fsbench: tar unpack on $t failed: $(tail -n 2 "$work/logs/tar-$t.err" | tr '\n' ' ')"
        record "tar unpack files/s" "$t" ERR; rm -rf "$d"; return
    fi
    secs=$(elapsed "$start")
    record "tar unpack files/s" "$t" "$(awk -v n="$tar_entries" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')"
    drop_caches
    start=$(now)
    rm -rf "$d" || { record "rm -rf files/s" "$t" ERR; return; }
    secs=$(elapsed "$start")
    record "rm -rf files/s" "$t" "$(awk -v n="$tar_entries" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')"
}

wl_postmark() {
    local t=$1 d=${dir_of[$1]}/postmark cfg=$work/postmark-$1.cfg start secs out ops
    command -v postmark >/dev/null || return 0
    mkdir -p "$d"
    cat >"$cfg" <<EOF
set location $d
set number $pm_files
set transactions $pm_txns
set subdirectories 10
set size 500 10000
set read 4096
set write 4096
set buffering false
run
quit
EOF
    drop_caches
    start=$(now)
    out=$(cd "$work" && postmark "$cfg" 2>&1)
    local rc=$?
    secs=$(elapsed "$start")
    printf '%s\n' "$out" >"$work/logs/postmark-$t.out"
    if [ $rc -ne 0 ]; then
        log "fsbench: postmark on $t failed"; record "postmark ops/s" "$t" ERR; rm -rf "$d"; return
    fi
    # Files created + read + appended + deleted, over our own wall clock
    # (postmark's own clock counts whole seconds).
    ops=$(awk '/^\t[0-9]+ (created|read|appended|deleted) \(/ { n += $1 } END { print n + 0 }' <<<"$out")
    record "postmark ops/s" "$t" "$(awk -v n="$ops" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')"
    record "postmark txns/s" "$t" "$(awk -v n="$pm_txns" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')"
    rm -rf "$d"
}

# ---------------------------------------------------------------- table
ratio() { # A B
    awk -v a="${1:-}" -v b="${2:-}" 'BEGIN {
        if (a == "" || b == "" || a == "ERR" || b == "ERR" || b + 0 == 0) print "-";
        else printf "%.2fx", a / b }'
}

print_table() {
    local cols=() t m
    for t in $all_targets; do has "$targets" "$t" && cols+=("$t"); done
    local pairs=() p
    for p in lsmfs/ext4 lsmfs/base base/ext4 lsmfs/nowork lsmfs/nwperm nwperm/nowork lsmfs/durable looplsmfs/loopext4 looplsmfs/nowork \
        looplsmfs/loopdurable nowork/ext4 durable/ext4 loopdurable/loopext4 nwuring/nowork \
        lsuring/lsmfs lsuring/nwuring lsuring/ext4 looplsuring/looplsmfs looplsuring/loopext4 \
        dir/ext4 dir/nowork; do
        has "$targets" "${p%/*}" && has "$targets" "${p#*/}" && pairs+=("$p")
    done
    echo
    echo "fsbench ($mode, median of $repeat): $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kernel $(uname -r)"
    printf '%-40s' "metric"
    for t in "${cols[@]}"; do printf ' %11s' "$t"; done
    for p in "${pairs[@]:+${pairs[@]}}"; do printf ' %18s' "$p"; done
    echo
    local v
    declare -A val
    for m in "${metrics[@]}"; do
        for t in "${cols[@]}"; do val[$t]=$(value "$m" "$t"); done
        printf '%-40s' "$m"
        for t in "${cols[@]}"; do v=${val[$t]}; printf ' %11s' "${v:--}"; done
        for p in "${pairs[@]:+${pairs[@]}}"; do
            printf ' %18s' "$(ratio "${val[${p%/*}]:-}" "${val[${p#*/}]:-}")"
        done
        echo
    done
    for t in "${cols[@]}"; do
        [ -n "${note[$t]:-}" ] && echo "note: $t: ${note[$t]}"
    done
    echo "logs: $work/logs (kept only with --keep)"
}

# ---------------------------------------------------------------- main
setup_targets
if [ ${#active[@]} -eq 0 ]; then
    log "fsbench: no target could be set up"
    exit 1
fi
log "fsbench: mode=$mode targets=${active[*]} workloads=$workloads work=$work"
for wl in rtt maildir smallfile space seq tar postmark; do
    has "$workloads" "$wl" || continue
    for ((i = 1; i <= repeat; i++)); do
        for t in "${active[@]}"; do
            log "fsbench: $wl on $t ($i/$repeat)"
            refresh_lsmfs "$t" || { record "$wl: remount" "$t" ERR; continue; }
            "wl_$wl" "$t"
        done
    done
done
print_table
