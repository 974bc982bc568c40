#!/bin/sh
# A throwaway Ceph cluster for the RADOS tests: one mon, one OSD (BlueStore on
# a sparse file under DIR), one mgr (no Python modules: it only gathers the
# statistics pool quotas and `ceph df` need), one pool "lsmfs" of size 1,
# 127.0.0.1 only.
#
#   tests/ceph/cluster.sh start DIR   brings it up; prints its start-up time and
#                                     leaves DIR/ceph.conf (client.admin's key in
#                                     DIR/keyring) and DIR/pids
#   tests/ceph/cluster.sh stop DIR    stops its daemons by pid, removes DIR
#   tests/ceph/cluster.sh kill-osd DIR / start-osd DIR   (kill -9, restart)
#
# Clients: client.admin and client.lsmfs2 (a second host), keys in DIR/keyring;
# each client process has an admin socket of its own ($name.$pid.asok): clients
# sharing one path unlink and ping each other's sockets.
# start fails (exit 1, one line on stderr, nothing left behind) when the cluster
# cannot come up in time. CEPH_PORT picks the mon's port; by default each
# cluster takes a block of 256 ports below the ephemeral range that no other
# cluster of this machine holds (a lock file per block, kept open by the
# daemons) and nothing listens on, so concurrent test runs never collide.
set -u
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|kill-osd|start-osd DIR" >&2; exit 2; }

say() { echo "cluster: $*" >&2; }

stop() {
    [ -f "$dir/pids" ] || { rm -rf "$dir"; return 0; }
    for p in $(cat "$dir/pids"); do kill "$p" 2>/dev/null; done
    i=0
    while [ $i -lt 50 ]; do
        alive=""
        for p in $(cat "$dir/pids"); do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
        [ -z "$alive" ] && break
        sleep 0.1; i=$((i + 1))
    done
    for p in $(cat "$dir/pids"); do kill -9 "$p" 2>/dev/null; done
    rm -rf "$dir"
}

start_osd() {
    ceph-osd -f -c "$dir/ceph.conf" -i 0 >"$dir/osd.0.out" 2>&1 &
    echo $! >"$dir/osd.pid"
    echo $! >>"$dir/pids"
}

kill_osd() {
    p=$(cat "$dir/osd.pid")
    kill -9 "$p" 2>/dev/null
    while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
}

# Runs its arguments; on failure removes everything and exits 1 naming the step.
step() {
    what=$1; shift
    if ! "$@" >>"$dir/setup.log" 2>&1; then
        say "could not start: $what failed (log: $(tail -n 3 "$dir/setup.log" | tr '\n' ' '))"
        [ -n "${CLUSTER_KEEP:-}" ] || stop
        exit 1
    fi
}

# Waits (up to 30 s) until the mgr is active.
wait_mgr() {
    i=0
    while [ $i -lt 120 ]; do
        timeout 10 ceph $c mgr stat 2>/dev/null | grep -q '"available": true' && return 0
        sleep 0.25; i=$((i + 1))
    done
    return 1
}

PORT_FIRST=20000
PORT_BLOCKS=49 # 256-port blocks up to 32544, below the ephemeral ports

# Sets port to the first port of a free block, holding its lock on fd 9
# (inherited by the daemons: held while the cluster runs). False if none.
pick_port() {
    b0=$(($$ % PORT_BLOCKS))
    i=0
    while [ $i -lt $PORT_BLOCKS ]; do
        b=$(((b0 + i) % PORT_BLOCKS))
        i=$((i + 1))
        exec 9>>"/tmp/lsmfs-ceph-ports.$b.lock" || continue
        if flock -n 9; then
            port=$((PORT_FIRST + b * 256))
            ss -Htln "sport >= :$port and sport <= :$((port + 255))" | grep -q . || return 0
        fi
        exec 9>&-
    done
    return 1
}

start() {
    t0=$(date +%s.%N)
    command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null &&
        command -v ceph-mgr >/dev/null ||
        { say "could not start: ceph-mon/ceph-osd/ceph-mgr not installed (tools/deps.sh)"; exit 1; }
    mkdir -p "$dir" || exit 1
    dir=$(cd "$dir" && pwd)
    : >"$dir/pids"
    if [ -n "${CEPH_PORT:-}" ]; then
        port=$CEPH_PORT
    elif ! pick_port; then
        say "could not start: no free block of 256 ports in $PORT_FIRST-32767"
        rm -rf "$dir"
        exit 1
    fi
    fsid=$(cat /proc/sys/kernel/random/uuid)
    cat >"$dir/ceph.conf" <<CONF
[global]
fsid = $fsid
mon_host = v2:127.0.0.1:$port
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_msgr1 = false
ms_bind_port_min = $((port + 1))
ms_bind_port_max = $((port + 200))
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
keyring = $dir/keyring
run_dir = $dir
admin_socket = $dir/\$name.asok
log_file = $dir/\$name.log
mon_cluster_log_file = $dir/cluster.log
pid_file =
crash_dir = $dir/crash
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pg_autoscale_mode = off
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
osd_crush_chooseleaf_type = 0
mgr_stats_period = 1
[mgr]
mgr_data = $dir/mgr.\$id
keyring = $dir/mgr.\$id/keyring
mgr_module_path = $dir/mgr-modules
[mon]
mon_data = $dir/mon.\$id
mon_initial_members = a
[osd]
osd_data = $dir/osd.\$id
keyring = $dir/osd.\$id/keyring
osd_objectstore = bluestore
bluestore_block_path = $dir/osd.\$id.block
bluestore_block_size = 4294967296
bluestore_block_create = true
bluestore_cache_size = 67108864
osd_memory_target = 536870912
osd_op_num_shards = 1
osd_op_num_threads_per_shard = 2
osd_crush_update_on_start = true
[client]
admin_socket = $dir/\$name.\$pid.asok
CONF
    c="-c $dir/ceph.conf"
    step "keyring" ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *'
    step "admin key" ceph-authtool "$dir/keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *'
    # A second client: a second host's daemon in the takeover tests.
    step "second key" ceph-authtool "$dir/keyring" --gen-key -n client.lsmfs2 \
        --cap mon 'allow *' --cap osd 'allow *'
    step "monmap" monmaptool --create --addv a "v2:127.0.0.1:$port" --fsid "$fsid" "$dir/monmap"
    step "mon mkfs" ceph-mon $c --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring"
    ceph-mon -f $c -i a >"$dir/mon.a.out" 2>&1 &
    echo $! >>"$dir/pids"
    uuid=$(cat /proc/sys/kernel/random/uuid)
    mkdir -p "$dir/osd.0" "$dir/crash"
    step "osd create" timeout 30 ceph $c --connect-timeout 20 osd create "$uuid" 0
    step "osd mkfs" ceph-osd $c --no-mon-config -i 0 --mkfs --mkkey --osd-uuid "$uuid"
    step "osd key" timeout 20 ceph $c auth add osd.0 osd 'allow *' mon 'allow profile osd' \
        -i "$dir/osd.0/keyring"
    start_osd
    # The mgr with an empty module directory: up in ~2 s (its Python modules
    # took ~25 s and 300 MB); its C++ part feeds the mon the pool statistics.
    mkdir -p "$dir/mgr.x" "$dir/mgr-modules"
    step "mgr key" timeout 20 ceph $c auth get-or-create mgr.x mon 'allow profile mgr' \
        osd 'allow *' -o "$dir/mgr.x/keyring"
    ceph-mgr -f $c -i x >"$dir/mgr.x.out" 2>&1 &
    echo $! >>"$dir/pids"
    step "pool" timeout 20 ceph $c osd pool create lsmfs 8 8 replicated --size 1
    step "pool up" timeout 40 rados $c -p lsmfs put probe /dev/null
    step "probe" rados $c -p lsmfs rm probe
    step "mgr up" wait_mgr
    t1=$(date +%s.%N)
    say "up in $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s at 127.0.0.1:$port ($dir)"
}

case $cmd in
start) start ;;
stop) stop ;;
kill-osd) kill_osd ;;
start-osd) start_osd ;;
*) echo "usage: $0 start|stop|kill-osd|start-osd DIR" >&2; exit 2 ;;
esac
