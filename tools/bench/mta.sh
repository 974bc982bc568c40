#!/bin/bash
# mta.sh — a real mail server on each filesystem, side by side (issue 30):
# Debian's postfix with its queue directory and virtual(8) Maildirs on the
# target, loaded with smtp-source over 127.0.0.1, then dovecot reading every
# message back over IMAP (tools/bench/mta_imap.py, which checks each one).
#
#   sudo tools/bench/mta.sh [--messages=N] [--rounds=R] [--targets=LIST]
#                           [--bin=DIR] [--base-bin=DIR] [--keep]
#
# Targets (--targets, default ext4,loopext4,lsmfs,looplsmfs, plus base if
# --base-bin is given):
#   ext4       a directory on the root filesystem
#   loopext4   a journaled ext4 on a loop device (its image on the root fs)
#   lsmfs      lsmfs (--bin, default $LSMFS_BIN or bin/), store on the root fs
#   looplsmfs  the same, store on the loop ext4
#   base       lsmfs from --base-bin (e.g. main's build), store on the root fs
#   nowork     nowork-fs (--bin's) in its durable mode, its log on the root fs:
#              FUSE's own cost, the ceiling of any FUSE filesystem here
# Rounds are interleaved (round 1 on every target, then round 2, ...); the
# table shows medians and ratios. Per round and target it prints delivered/s
# (smtp-source's start to the last message in its Maildir, queue empty),
# IMAP msgs/s (first pass after dropping the page cache, then a second),
# CPU per message (cgroup cpuacct: postfix and dovecot with their children,
# the lsmfs daemon, smtp-source), and for lsmfs the FUSE requests per
# delivered message by opcode (the daemon's counters, `lsmctl stats`).
#
# Needs root. Installs postfix and dovecot-imapd if missing (noninteractive;
# Debian's policy-rc.d keeps their system daemons off, and none is enabled),
# and adds the system user mtabench (the Maildirs' owner) if missing.
# Its own postfix and dovecot use configuration in the work directory, listen
# on 127.0.0.1 only, and are stopped by pid; every mount is undone on exit.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

msgs=2000
rounds=1
msglen=4096
sessions=20
boxes=10
bindir=${LSMFS_BIN:-$repo/bin}
basebin=""
targets=""
keep=0
work=""

usage() {
    cat <<EOF
usage: $0 [options]
  --messages=N     messages per round and target (default $msgs; the issue: 20000)
  --rounds=R       interleaved rounds (default $rounds; the issue: 3)
  --targets=LIST   ext4,loopext4,lsmfs,looplsmfs,base,nowork (default all but base, nowork;
                   base too when --base-bin is given)
  --bin=DIR        lsmfs binaries of targets lsmfs/looplsmfs (default \$LSMFS_BIN or bin/)
  --base-bin=DIR   lsmfs binaries of target base (e.g. main's)
  --length=BYTES   message length for smtp-source -l (default $msglen)
  --sessions=S     parallel SMTP sessions (default $sessions), spread over $boxes mailboxes
  --work=DIR       work directory (default a new /var/tmp/mta.XXXX: on the root fs)
  --keep           keep the work directory (never the mounts or servers)
EOF
}

for a in "$@"; do
    case $a in
    --messages=*) msgs=${a#*=} ;;
    --rounds=*) rounds=${a#*=} ;;
    --targets=*) targets=${a#*=} ;;
    --bin=*) bindir=$(cd "${a#*=}" && pwd) ;;
    --base-bin=*) basebin=$(cd "${a#*=}" && pwd) ;;
    --length=*) msglen=${a#*=} ;;
    --sessions=*) sessions=${a#*=} ;;
    --work=*) work=${a#*=} ;;
    --keep) keep=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "mta: unknown option $a" >&2; usage >&2; exit 2 ;;
    esac
done
log() { echo "$*" >&2; }
die() { log "mta: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (mounts, servers, cgroups)"
[[ $msgs =~ ^[0-9]+$ ]] && [ "$msgs" -ge "$boxes" ] || die "--messages must be at least $boxes"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive number"
[[ $sessions =~ ^[1-9][0-9]*$ ]] || die "--sessions must be a positive number"
if [ -z "$targets" ]; then
    targets=ext4,loopext4,lsmfs,looplsmfs
    [ -n "$basebin" ] && targets=$targets,base
fi
IFS=, read -r -a tlist <<<"$targets"
for t in "${tlist[@]}"; do
    case $t in
    ext4 | loopext4 | lsmfs | looplsmfs) ;;
    nowork) [ -x "$bindir/nowork-fs" ] || die "no $bindir/nowork-fs (make first)" ;;
    base) [ -n "$basebin" ] || die "target base needs --base-bin=DIR" ;;
    *) die "unknown target $t" ;;
    esac
done
for t in "${tlist[@]}"; do
    case $t in lsmfs | looplsmfs) [ -x "$bindir/lsmfs" ] || die "no $bindir/lsmfs (make first)" ;; esac
done

# ------------------------------------------------------------ packages
if ! command -v smtp-source >/dev/null || ! command -v dovecot >/dev/null; then
    log "mta: installing postfix and dovecot-imapd"
    echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q postfix dovecot-imapd ||
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postfix dovecot-imapd; }; } \
        >/tmp/mta-apt.$$.log 2>&1 || die "cannot install postfix and dovecot-imapd (/tmp/mta-apt.$$.log)"
    rm -f /tmp/mta-apt.$$.log
fi
command -v python3 >/dev/null || die "python3 is needed (the IMAP reader)"
vuser=mtabench # owns the Maildirs (virtual(8) refuses root)
id "$vuser" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$vuser" ||
    die "cannot create user $vuser"
vuid=$(id -u "$vuser")
vgid=$(id -g "$vuser")

# ------------------------------------------------------------ clean-up
[ -n "$work" ] || work=$(mktemp -d /var/tmp/mta.XXXXXX) || exit 1
mkdir -p "$work" && chmod 755 "$work"
cgroot=/sys/fs/cgroup/cpuacct/mta.$$
mounts=()   # "fuse:MNT:PID" or "dir:MNT", unmounted in reverse on exit
servers=()  # "postfix:CONF" or "dovecot:PIDFILE"
loopdev=""

stop_servers() {
    local s pid
    for s in "${servers[@]}"; do
        case $s in
        postfix:*)
            pid=$(cat "${s#postfix:}.pid" 2>/dev/null)
            postfix -c "${s#postfix:}" stop >/dev/null 2>&1
            [ -n "$pid" ] && wait_gone "$pid"
            ;;
        dovecot:*)
            pid=$(cat "${s#dovecot:}" 2>/dev/null)
            [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait_gone "$pid"
            ;;
        esac
    done
    servers=()
}
wait_gone() { # PID: waits up to 10 s, then SIGKILL
    local i
    for i in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$1" 2>/dev/null
}
unmount_all() {
    local i e mnt pid
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        e=${mounts[$i]}
        case $e in
        fuse:*) IFS=: read -r _ mnt pid <<<"$e"
            fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
            wait_gone "$pid" ;;
        dir:*) umount "${e#dir:}" 2>/dev/null || umount -l "${e#dir:}" ;;
        esac
    done
    mounts=()
}
cleanup() {
    stop_servers
    unmount_all
    [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
    for g in "$cgroot"/*/; do [ -d "$g" ] && rmdir "$g" 2>/dev/null; done
    rmdir "$cgroot" 2>/dev/null
    if [ "$keep" = 1 ]; then log "mta: work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$cgroot" || die "no cgroup v1 cpuacct hierarchy at /sys/fs/cgroup/cpuacct"
# Runs CMD... in cgroup GROUP (created fresh, CPU counted in cpuacct.usage).
in_cgroup() { # GROUP CMD...
    local g=$cgroot/$1
    shift
    (echo "$BASHPID" >"$g/cgroup.procs" && exec "$@")
}
cg_usage_ns() { cat "$cgroot/$1/cpuacct.usage"; }
cg_user_ticks() { awk '$1 == "user" { print $2 }' "$cgroot/$1/cpuacct.stat"; }
cg_sys_ticks() { awk '$1 == "system" { print $2 }' "$cgroot/$1/cpuacct.stat"; }
fresh_cgroups() {
    local g
    for g in servers fs client; do
        [ -d "$cgroot/$g" ] && rmdir "$cgroot/$g"
        mkdir "$cgroot/$g" || die "cannot make cgroup $cgroot/$g (a process left in it?)"
    done
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# ------------------------------------------------------------ targets
setup_loop() {
    [ -n "$loopdev" ] && return 0
    truncate -s 8G "$work/loop.img" && mkfs.ext4 -q -F "$work/loop.img" >/dev/null 2>&1 ||
        die "cannot make the loop ext4 image"
    loopdev=$(losetup --find --show "$work/loop.img") || die "no loop device"
    mkdir -p "$work/loop"
    mount "$loopdev" "$work/loop" || die "cannot mount $loopdev"
    mounts+=("dir:$work/loop")
}

# Waits for daemon $fuse_pid's FUSE mount on MNT and records it for the
# unmount; dies with the tail of its LOG if it never comes.
wait_mounted() { # MNT LOG
    local mnt=$1 i
    for i in $(seq 100); do
        grep -qs " $mnt fuse" /proc/mounts && { mounts+=("fuse:$mnt:$fuse_pid"); return 0; }
        kill -0 "$fuse_pid" 2>/dev/null || break
        sleep 0.1
    done
    die "mounting $mnt failed: $(tail -3 "$2")"
}

# Mounts lsmfs (binaries in BIN) with a fresh store at STORE on MNT, its
# daemon in cgroup fs. Sets fuse_pid.
mount_lsmfs() { # BIN STORE MNT
    local bin=$1 store=$2 mnt=$3
    rm -rf "$store"
    "$bin/mkfs.lsmfs" "$store" >"$work/mkfs.log" 2>&1 || die "mkfs.lsmfs failed: $(tail -2 "$work/mkfs.log")"
    mkdir -p "$mnt"
    # shellcheck disable=SC2086
    in_cgroup fs "$bin/lsmfs" "$store" "$mnt" -f -o allow_other ${LSMFS_MOUNT_OPTS:-} \
        >"$work/lsmfs.log" 2>&1 &
    fuse_pid=$!
    wait_mounted "$mnt" "$work/lsmfs.log"
}

# Mounts nowork-fs (binaries in BIN) on MNT in its durable mode (every change
# logged at LOG and fsync a shared fdatasync of it), its daemon in cgroup fs.
# Sets fuse_pid.
mount_nowork() { # BIN LOG MNT
    local bin=$1 logf=$2 mnt=$3
    rm -f "$logf"
    mkdir -p "$mnt"
    # shellcheck disable=SC2086
    in_cgroup fs "$bin/nowork-fs" "$mnt" -f -o allow_other,default_permissions \
        -o "log=$logf" ${NOWORK_MOUNT_OPTS:-} >"$work/nowork.log" 2>&1 &
    fuse_pid=$!
    wait_mounted "$mnt" "$work/nowork.log"
}

# Makes target t's directory for this run; sets tdir, fuse_pid, lsmctl.
prepare_target() { # TARGET
    fuse_pid=""
    lsmctl=""
    case $1 in
    ext4) tdir=$work/ext4; rm -rf "$tdir"; mkdir -p "$tdir" ;;
    loopext4) setup_loop; tdir=$work/loop/ext4; rm -rf "$tdir"; mkdir -p "$tdir" ;;
    lsmfs) tdir=$work/mnt; mount_lsmfs "$bindir" "$work/store" "$tdir"; lsmctl=$bindir/lsmctl ;;
    looplsmfs) setup_loop; tdir=$work/mnt; mount_lsmfs "$bindir" "$work/loop/store" "$tdir"
        lsmctl=$bindir/lsmctl ;;
    base) tdir=$work/mnt; mount_lsmfs "$basebin" "$work/store" "$tdir"; lsmctl=$basebin/lsmctl ;;
    nowork) tdir=$work/mnt; mount_nowork "$bindir" "$work/nowork.fslog" "$tdir" ;;
    esac
    chmod 755 "$tdir"
}
release_target() {
    stop_servers
    unmount_all_fuse
    rm -rf "$work/store" "$work/ext4" "$work/loop/ext4" "$work/loop/store" "$work/nowork.fslog"
}
unmount_all_fuse() {
    local i e keepm=()
    for e in "${mounts[@]}"; do
        case $e in
        fuse:*) IFS=: read -r _ mnt pid <<<"$e"
            fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
            wait_gone "$pid" ;;
        *) keepm+=("$e") ;;
        esac
    done
    mounts=("${keepm[@]}")
}

# ------------------------------------------------------------ servers
# postfix: queue in T/spool, Maildirs T/mail/uN/ (virtual(8)), SMTP on
# 127.0.0.1:PORT, no DNS, no local delivery, nothing else listening.
start_postfix() { # T PORT
    local t=$1 port=$2 conf=$work/postfix
    rm -rf "$conf" && mkdir -p "$conf" "$t/spool" "$t/mail" "$work/pfdata"
    chown "$vuid:$vgid" "$t/mail"
    : >"$conf/vmailbox"
    for ((i = 0; i < boxes; i++)); do echo "u$i@bench.test u$i/" >>"$conf/vmailbox"; done
    cat >"$conf/main.cf" <<EOF
compatibility_level = 3.6
queue_directory = $t/spool
data_directory = $work/pfdata
mail_owner = postfix
setgid_group = postdrop
myhostname = mta.bench.test
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
disable_dns_lookups = yes
smtp_dns_support_level = disabled
smtpd_peername_lookup = no
virtual_mailbox_domains = bench.test
virtual_mailbox_base = $t/mail
virtual_mailbox_maps = texthash:$conf/vmailbox
virtual_uid_maps = static:$vuid
virtual_gid_maps = static:$vgid
virtual_destination_concurrency_limit = $sessions
default_process_limit = 100
maillog_file = $work/postfix.log
biff = no
alias_maps =
alias_database =
local_recipient_maps =
EOF
    cat >"$conf/master.cf" <<EOF
127.0.0.1:$port inet n - n - - smtpd
pickup    unix n - n 60 1 pickup
cleanup   unix n - n - 0 cleanup
qmgr      unix n - n 300 1 qmgr
rewrite   unix - - n - - trivial-rewrite
bounce    unix - - n - 0 bounce
defer     unix - - n - 0 bounce
trace     unix - - n - 0 bounce
verify    unix - - n - 1 verify
flush     unix n - n 1000? 0 flush
proxymap  unix - - n - - proxymap
smtp      unix - - n - - smtp
relay     unix - - n - - smtp
showq     unix n - n - - showq
error     unix - - n - - error
retry     unix - - n - - error
discard   unix - - n - - discard
local     unix - n n - - local
virtual   unix - n n - - virtual
lmtp      unix - - n - - lmtp
anvil     unix - - n - 1 anvil
scache    unix - - n - 1 scache
postlog   unix-dgram n - n - 1 postlogd
EOF
    postfix -c "$conf" set-permissions >/dev/null 2>&1
    in_cgroup servers postfix -c "$conf" start >"$work/postfix-start.log" 2>&1 ||
        die "postfix did not start: $(tail -3 "$work/postfix-start.log")"
    servers+=("postfix:$conf")
    cp "$t/spool/pid/master.pid" "$conf.pid" 2>/dev/null
    wait_port "$port" || die "postfix is not listening on 127.0.0.1:$port ($work/postfix.log)"
}

# dovecot: IMAP on 127.0.0.1:PORT, any user uN with password "bench",
# mail in T/mail/uN (the Maildirs postfix delivered into).
start_dovecot() { # T PORT
    local t=$1 port=$2 d=$work/dovecot
    rm -rf "$d" && mkdir -p "$d/run" "$d/state"
    cat >"$d/dovecot.conf" <<EOF
base_dir = $d/run
state_dir = $d/state
log_path = $work/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
mail_location = maildir:$t/mail/%u
mail_uid = $vuid
mail_gid = $vgid
first_valid_uid = $vuid
passdb {
  driver = static
  args = password=bench
}
userdb {
  driver = static
  args = uid=$vuid gid=$vgid home=$t/mail/%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = $port
  }
  inet_listener imaps {
    port = 0
  }
}
service anvil {
  chroot =
}
service imap-login {
  chroot =
}
EOF
    in_cgroup servers dovecot -c "$d/dovecot.conf" >"$work/dovecot-start.log" 2>&1 ||
        die "dovecot did not start: $(tail -3 "$work/dovecot-start.log")"
    servers+=("dovecot:$d/run/master.pid")
    wait_port "$port" || die "dovecot is not listening on 127.0.0.1:$port ($work/dovecot.log)"
}

wait_port() { # PORT
    local i
    for i in $(seq 100); do
        python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),1)" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# ------------------------------------------------------------ one run
# Delivered messages: files in every uN/new and uN/cur.
delivered() { # T
    find "$1/mail" -path '*/new/*' -type f 2>/dev/null | wc -l
}
queue_empty() { # T
    [ -z "$(find "$1/spool/incoming" "$1/spool/active" "$1/spool/deferred" "$1/spool/maildrop" \
        -type f 2>/dev/null | head -1)" ]
}
now() { date +%s.%N; }

# The daemon's request counters (lsmctl stats MNT): "name count" lines.
requests() { # MNT
    "$lsmctl" stats "$1" 2>/dev/null |
        awk '/^fs requests:/ { on = 1; next } on && /^  / { print $1, $2; next } on { on = 0 }'
}
# The daemon's CPU by thread name (threads alive at both snapshots count):
# "name user_ticks sys_ticks" lines, from /proc/PID/task/*/stat.
thread_ticks() { # PID (of lsmfs, or of the subshell in_cgroup started it from)
    local t pid=$1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = lsmfs ] || pid=$(pgrep -P "$pid" -x lsmfs | head -1)
    for t in /proc/"$pid"/task/*; do
        # Fields after "(comm) ": state is 1, utime 12, stime 13.
        awk -v c="$(cat "$t/comm" 2>/dev/null)" '{ sub(/^.*\) /, ""); print c, $12, $13 }' \
            "$t/stat" 2>/dev/null
    done | awk '{ u[$1] += $2; s[$1] += $3 } END { for (k in u) print k, u[k], s[k] }'
}
# Per-message CPU of each thread name between two thread_ticks() snapshots,
# largest first: "name=ms(user+sys)".
thread_diff() { # BEFORE AFTER N
    local hz
    hz=$(getconf CLK_TCK)
    awk -v n="$3" -v hz="$hz" 'FNR == NR { u[$1] = $2; s[$1] = $3; next }
        { du = ($2 - u[$1]) * 1000 / hz / n; ds = ($3 - s[$1]) * 1000 / hz / n
          if (du + ds > 0) printf "%.3f %s=%.3f(%.3f+%.3f)\n", du + ds, $1, du + ds, du, ds }' \
        "$1" "$2" | sort -rn | cut -d' ' -f2 | tr '\n' ' '
}
# Per-message difference of two requests() snapshots, largest first.
request_diff() { # BEFORE AFTER N
    awk -v n="$3" 'FNR == NR { b[$1] = $2; next } { d = $2 - b[$1]; if (d > 0) { t += d;
        printf "%s=%.2f\n", toupper($1), d / n } } END { printf "TOTAL=%.2f\n", t / n }' \
        "$1" "$2" | sort -t= -k2 -rn | tr '\n' ' '
}

run_one() { # TARGET ROUND
    local t=$1 r=$2 sport iport per start end i k
    fresh_cgroups
    prepare_target "$t"
    sport=$(free_port)
    iport=$(free_port)
    start_postfix "$tdir" "$sport"
    [ -n "$lsmctl" ] && requests "$tdir" >"$work/rq0"
    [ -n "$fuse_pid" ] && thread_ticks "$fuse_pid" >"$work/th0"
    local c0s c0f c0c
    c0s=$(cg_usage_ns servers); c0f=$(cg_usage_ns fs); c0c=$(cg_usage_ns client)
    local u0 s0 u1 s1
    u0=$(cg_user_ticks fs); s0=$(cg_sys_ticks fs)
    # Sessions spread over the mailboxes; every message is counted.
    per=$((msgs / sessions)); local extra=$((msgs % sessions))
    start=$(now)
    local pids=()
    for ((i = 0; i < sessions; i++)); do
        k=$per; [ "$i" -lt "$extra" ] && k=$((k + 1))
        [ "$k" -gt 0 ] || continue
        in_cgroup client smtp-source -s 1 -m "$k" -l "$msglen" -f "bench@bench.test" \
            -t "u$((i % boxes))@bench.test" "127.0.0.1:$sport" >>"$work/smtp-source.log" 2>&1 &
        pids+=($!)
    done
    local fail=0
    for p in "${pids[@]}"; do wait "$p" || fail=1; done
    [ $fail = 0 ] || die "smtp-source failed ($t): $(tail -3 "$work/smtp-source.log")"
    local got=0 last=-1 still=0
    while :; do
        got=$(delivered "$tdir")
        [ "$got" -ge "$msgs" ] && queue_empty "$tdir" && break
        if [ "$got" = "$last" ]; then still=$((still + 1)); else still=0; fi
        [ "$still" -gt 600 ] && die "delivery stalled at $got of $msgs on $t ($work/postfix.log)"
        last=$got
        sleep 0.1
    done
    end=$(now)
    [ "$got" = "$msgs" ] || die "$got messages delivered on $t, $msgs sent"
    local c1s c1f c1c
    c1s=$(cg_usage_ns servers); c1f=$(cg_usage_ns fs); c1c=$(cg_usage_ns client)
    u1=$(cg_user_ticks fs); s1=$(cg_sys_ticks fs)
    [ -n "$lsmctl" ] && requests "$tdir" >"$work/rq1"
    [ -n "$fuse_pid" ] && thread_ticks "$fuse_pid" >"$work/th1"
    stop_servers # postfix's processes leave; dovecot reads alone
    start_dovecot "$tdir" "$iport"
    sync
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
    local d0s d0f imap
    d0s=$(cg_usage_ns servers); d0f=$(cg_usage_ns fs)
    imap=$(python3 "$here/mta_imap.py" --port "$iport" --boxes "$boxes" --messages "$msgs" \
        --length "$msglen" --passes 2) || die "IMAP read-back failed on $t: $imap"
    local d1s d1f
    d1s=$(cg_usage_ns servers); d1f=$(cg_usage_ns fs)
    [ -n "$lsmctl" ] && requests "$tdir" >"$work/rq2"
    local rate cpu fscpu icpu p1 p2
    rate=$(awk -v n="$msgs" -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", n / (b - a) }')
    cpu=$(awk -v n="$msgs" -v s=$((c1s - c0s)) -v f=$((c1f - c0f)) -v c=$((c1c - c0c)) \
        'BEGIN { printf "%.3f", (s + f + c) / n / 1e6 }')
    fscpu=$(awk -v n="$msgs" -v f=$((c1f - c0f)) 'BEGIN { printf "%.3f", f / n / 1e6 }')
    icpu=$(awk -v n="$msgs" -v s=$((d1s - d0s)) -v f=$((d1f - d0f)) \
        'BEGIN { printf "%.3f", (s + f) / n / 2 / 1e6 }')
    read -r p1 p2 <<<"$imap"
    # The daemon's share of its CPU spent in the kernel (system time).
    local sysshare
    sysshare=$(awk -v u=$((u1 - u0)) -v s=$((s1 - s0)) 'BEGIN { printf "%.2f", (u + s > 0 ? s / (u + s) : 0) }')
    echo "$t $r delivered/s=$rate cpu_ms/msg=$cpu daemon_cpu_ms/msg=$fscpu daemon_sys_share=$sysshare imap1/s=$p1 imap2/s=$p2 imap_cpu_ms/msg=$icpu" \
        >>"$work/results"
    log "round $r $t: delivered $rate/s, CPU $cpu ms/msg (lsmfs daemon $fscpu, $sysshare of it in the kernel), IMAP $p1 / $p2 msgs/s, IMAP CPU $icpu ms/msg"
    if [ -n "$lsmctl" ]; then
        log "  requests per delivered message: $(request_diff "$work/rq0" "$work/rq1" "$msgs")"
        log "  requests per IMAP message (2 passes): $(request_diff "$work/rq1" "$work/rq2" $((2 * msgs)))"
        log "  daemon CPU per delivered message by thread, ms (user+sys): $(thread_diff "$work/th0" "$work/th1" "$msgs")"
        echo "$t $r $(thread_diff "$work/th0" "$work/th1" "$msgs")" >>"$work/threads"
        echo "$t $r $(request_diff "$work/rq0" "$work/rq1" "$msgs")" >>"$work/requests"
    fi
    release_target
}

log "mta: $msgs messages of $msglen bytes, $sessions sessions, $boxes mailboxes, $rounds round(s)," \
    "targets ${tlist[*]}; load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
    for t in "${tlist[@]}"; do run_one "$t" "$r"; done
done

# ------------------------------------------------------------ table
echo
echo "mta: medians of $rounds round(s), $msgs messages; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/results" "${tlist[@]}" <<'EOF'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    for kv in f[2:]:
        k, v = kv.split("=")
        rows.setdefault(k, {}).setdefault(f[0], []).append(float(v))
targets = sys.argv[2:]
med = {k: {t: statistics.median(v[t]) for t in v} for k, v in rows.items()}
pairs = [(a, b) for a, b in [("lsmfs", "ext4"), ("looplsmfs", "loopext4"), ("base", "ext4"),
                             ("lsmfs", "base"), ("nowork", "ext4"), ("lsmfs", "nowork")] if a in targets and b in targets]
def num(v):
    return "%.0f" % v if v >= 100 else "%.3g" % v
print("%-20s" % "metric" + "".join("%11s" % t for t in targets) +
      "".join("%20s" % (a + "/" + b) for a, b in pairs))
for k in ["delivered/s", "cpu_ms/msg", "daemon_cpu_ms/msg", "daemon_sys_share", "imap1/s", "imap2/s", "imap_cpu_ms/msg"]:
    m = med.get(k, {})
    line = "%-20s" % k + "".join("%11s" % (num(m[t]) if t in m else "-") for t in targets)
    for a, b in pairs:
        line += "%20s" % ("%.2f" % (m[a] / m[b]) if m.get(b) else "-")
    print(line)
EOF
if [ -f "$work/requests" ]; then
    echo
    echo "FUSE requests per delivered message (each round):"
    cat "$work/requests"
fi
if [ -f "$work/threads" ]; then
    echo
    echo "lsmfs daemon CPU per delivered message by thread, ms (user+sys), each round:"
    cat "$work/threads"
fi
