#!/bin/bash
# bigfile.sh — big files and big directories (issue 30.6) on lsmfs beside
# ext4 in the same run, with fio (Debian's, installed if missing):
#   seqwrite  one SIZE file written in 1 MiB blocks, end_fsync=1 (MiB/s)
#   seqread   the same file read back, page cache dropped first (MiB/s)
#   randread  4 KiB random reads of a RSIZE file, 1 and 4 jobs sharing it,
#             time_based (IOPS), page cache dropped first
#   dircreate N empty files created in one directory: the rate of each
#             tenth of N and the last tenth's rate over the first's
#
# Targets: ext4 (a directory on the root fs), "before" (--base=DIR: another
# build's bin/, e.g. main's) and "after" (--bin=DIR, default bin/), each on a
# fresh store on the root fs; with --rounds=N the targets take turns N times
# and the medians are printed, then the ratios to ext4. Needs root
# (drop_caches, fio's install). Every mount is unmounted on exit. See
# tools/bench/README.md.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bindir=$repo/bin
basedir=""
work=""
keep=0
size=8G
rsize=2G
rtime=30
files=1000000
rounds=1
workloads="seqwrite,seqread,randread,dircreate"

usage() {
    cat <<USAGE
usage: $0 [--size=SIZE] [--rsize=SIZE] [--runtime=S] [--files=N] [--rounds=N]
          [--workloads=LIST] [--bin=DIR] [--base=DIR] [--work=DIR] [--keep]
  --size       sequential file size (default 8G)
  --rsize      random-read file size (default 2G)
  --runtime    seconds per random-read run (default 30)
  --files      files created in one directory (default 1000000)
  --rounds     rounds, targets interleaved; medians printed (default 1)
  --workloads  seqwrite,seqread,randread,dircreate (default all; seqread needs seqwrite)
  --bin        the lsmfs build measured ("after"; default bin/)
  --base       a second build measured beside it ("before"; optional)
  --work       work directory on the root fs (default a new /tmp/bigfile.XXXX)
USAGE
}
for a in "$@"; do
    case $a in
    --size=*) size=${a#*=} ;;
    --rsize=*) rsize=${a#*=} ;;
    --runtime=*) rtime=${a#*=} ;;
    --files=*) files=${a#*=} ;;
    --rounds=*) rounds=${a#*=} ;;
    --workloads=*) workloads=${a#*=} ;;
    --bin=*) bindir=$(cd "${a#*=}" && pwd) ;;
    --base=*) basedir=$(cd "${a#*=}" && pwd) ;;
    --work=*) work=${a#*=} ;;
    --keep) keep=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "bigfile.sh: needs root (drop_caches)" >&2; exit 1; }
if ! command -v fio >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q fio >/dev/null ||
        { echo "bigfile.sh: cannot install fio" >&2; exit 1; }
fi
[ -n "$work" ] || work=$(mktemp -d /tmp/bigfile.XXXX)
mkdir -p "$work"
work=$(cd "$work" && pwd)
pid=""
mnt=$work/mnt

. "$here/fusedaemon.sh"
want() { [[ ",$workloads," == *",$1,"* ]]; }

cleanup() {
    unmount
    [ "$keep" = 1 ] && log "bigfile.sh: work directory kept: $work" || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Mounts a fresh store made by BIN's mkfs.lsmfs; sets pid.
mount_fresh() { # BIN
    local store=$work/store i
    unmount
    rm -rf "$store"
    "$1/mkfs.lsmfs" "$store" >/dev/null || { log "bigfile.sh: mkfs.lsmfs failed"; exit 1; }
    mkdir -p "$mnt"
    "$1/lsmfs" "$store" "$mnt" -f >>"$work/daemon.log" 2>&1 &
    pid=$!
    for i in $(seq 1 1000); do
        mounted && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.01
    done
    log "bigfile.sh: mounting with $1 failed: $(tail -n 3 "$work/daemon.log")"
    exit 1
}

# Sets d to the directory target t works in (mounting its fresh store).
setup() { # TARGET
    case $1 in
    ext4) unmount; rm -rf "$work/ext4"; mkdir -p "$work/ext4"; d=$work/ext4 ;;
    before) mount_fresh "$basedir"; d=$mnt ;;
    after) mount_fresh "$bindir"; d=$mnt ;;
    esac
}

# Runs fio with the common arguments; prints its JSON.
run_fio() { # NAME ARGS...
    local name=$1
    shift
    fio --name="$name" --ioengine=psync --direct=0 --output-format=json "$@" 2>>"$work/fio.err"
}
bw_mib() { python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("%.1f" % (j[sys.argv[1]]["bw_bytes"] / 1048576))' "$1"; }
iops_sum() { python3 -c 'import json,sys; print("%.0f" % sum(j["read"]["iops"] for j in json.load(sys.stdin)["jobs"]))'; }

declare -A R # "metric target round" -> value
record() { R["$1 $2 $3"]=$4; }

wl_seq() { # DIR TARGET ROUND
    local f=$1/seqfile v
    if want seqwrite || want seqread; then
        v=$(run_fio seqwrite --filename="$f" --rw=write --bs=1M --size="$size" --end_fsync=1 | bw_mib write)
        record "seqwrite MiB/s" "$2" "$3" "$v"
    fi
    if want seqread; then
        drop_caches
        v=$(run_fio seqread --filename="$f" --rw=read --bs=1M --size="$size" | bw_mib read)
        record "seqread cold MiB/s" "$2" "$3" "$v"
    fi
    rm -f "$f"
}

wl_rand() { # DIR TARGET ROUND
    local f=$1/randfile j v
    run_fio lay --filename="$f" --rw=write --bs=1M --size="$rsize" --end_fsync=1 >/dev/null
    for j in 1 4; do
        drop_caches
        v=$(run_fio randread --filename="$f" --rw=randread --bs=4k --size="$rsize" \
            --numjobs=$j --time_based --runtime="$rtime" --randrepeat=0 | iops_sum)
        record "randread 4k j$j IOPS" "$2" "$3" "$v"
    done
    rm -f "$f"
}

# N files created in one directory by one process; the rate of each tenth.
wl_dir() { # DIR TARGET ROUND
    local out
    out=$(python3 - "$1/big" "$files" <<'PY'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
os.mkdir(d)
step = max(1, n // 10)
t = time.monotonic()
for i in range(n):
    os.close(os.open("%s/f%09d" % (d, i), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
    if (i + 1) % step == 0:
        u = time.monotonic()
        print("%.0f" % (step / (u - t)))
        t = u
PY
)
    local k=1 v first="" last=""
    for v in $out; do
        record "create/s, tenth $k" "$2" "$3" "$v"
        [ -z "$first" ] && first=$v
        last=$v
        k=$((k + 1))
    done
    record "create last/first tenth" "$2" "$3" "$(awk -v a="$first" -v b="$last" 'BEGIN { printf "%.2f", b / a }')"
    rm -rf "$1/big"
}

targets="ext4 after"
[ -n "$basedir" ] && targets="ext4 before after"
for ((r = 1; r <= rounds; r++)); do
    for t in $targets; do
        log "bigfile.sh: round $r, $t"
        if want seqwrite || want seqread; then setup "$t"; wl_seq "$d" "$t" "$r"; fi
        if want randread; then setup "$t"; wl_rand "$d" "$t" "$r"; fi
        if want dircreate; then setup "$t"; wl_dir "$d" "$t" "$r"; fi
    done
done
unmount

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
metrics=()
want seqwrite || want seqread && metrics+=("seqwrite MiB/s")
want seqread && metrics+=("seqread cold MiB/s")
want randread && metrics+=("randread 4k j1 IOPS" "randread 4k j4 IOPS")
if want dircreate; then
    for k in $(seq 1 10); do metrics+=("create/s, tenth $k"); done
    metrics+=("create last/first tenth")
fi
printf '\n| metric |'
for t in $targets; do printf ' %s |' "$t"; done
for t in $targets; do [ "$t" = ext4 ] || printf ' %s/ext4 |' "$t"; done
printf '\n|---|'
for t in $targets; do printf -- '---:|'; done
for t in $targets; do [ "$t" = ext4 ] || printf -- '---:|'; done
printf '\n'
for m in "${metrics[@]}"; do
    declare -A med=()
    printf '| %s |' "$m"
    for t in $targets; do
        vals=""
        for ((r = 1; r <= rounds; r++)); do vals="$vals ${R["$m $t $r"]:-}"; done
        med[$t]=$(echo "$vals" | median)
        printf ' %s |' "${med[$t]:--}"
    done
    for t in $targets; do
        [ "$t" = ext4 ] && continue
        printf ' %s |' "$(awk -v a="${med[ext4]:-}" -v b="${med[$t]:-}" \
            'BEGIN { if (a > 0 && b > 0) printf "%.2f×", b / a; else print "-" }')"
    done
    printf '\n'
    unset med
done
