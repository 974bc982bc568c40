#!/bin/sh
# Check the build dependencies; on Debian as root, install what is missing.
# Silent and quick when everything is present.
#   tools/deps.sh        what building and mounting need (make, make mount)
#   tools/deps.sh test   that and what the tests need (make test)
#   tools/deps.sh test tsan  and Ceph's symbols for TSan's suppressions (make test SAN=thread)
set -u
tests=0
tsan=0
[ "${1:-}" = test ] && tests=1
[ "${2:-}" = tsan ] && tsan=1
missing=""
pkg-config --version >/dev/null 2>&1 || missing="$missing pkg-config"
if command -v pkg-config >/dev/null 2>&1; then
    pkg-config --exists fuse3 || missing="$missing libfuse3-dev"
    pkg-config --exists liblz4 || missing="$missing liblz4-dev"
    # FUSE over io_uring (fs/transport/uring.c): libfuse 3.14 has no support for it.
    pkg-config --exists liburing || missing="$missing liburing-dev"
else
    missing="$missing libfuse3-dev liblz4-dev liburing-dev"
fi
command -v fusermount3 >/dev/null 2>&1 || missing="$missing fuse3"
# The store on Ceph RADOS (store/env_rados.c) links librados.
[ -f /usr/include/rados/librados.h ] || missing="$missing librados-dev"
if [ $tests = 1 ]; then
    pkg-config --exists cmocka 2>/dev/null || missing="$missing libcmocka-dev"
    # The integration tests' ACL and xattr round trips (test_acl).
    command -v setfacl >/dev/null 2>&1 || missing="$missing acl"
    command -v getfattr >/dev/null 2>&1 || missing="$missing attr"
    command -v rsync >/dev/null 2>&1 || missing="$missing rsync"
    # test_fs_ops reads its own call graph with objdump.
    command -v objdump >/dev/null 2>&1 || missing="$missing binutils"
    # The RADOS tests' throwaway cluster (tests/ceph/cluster.sh).
    command -v ceph-mon >/dev/null 2>&1 || missing="$missing ceph-mon"
    command -v ceph-osd >/dev/null 2>&1 || missing="$missing ceph-osd"
    # Its mgr: the pool statistics a quota needs (test_rados_quota).
    command -v ceph-mgr >/dev/null 2>&1 || missing="$missing ceph-mgr"
    # libceph-common's symbols (107 MB, TSan runs only): tests/tsan_ceph.supp names Ceph's frames.
    if [ $tsan = 1 ] && command -v dpkg >/dev/null 2>&1 && ! dpkg -s librados2-dbg >/dev/null 2>&1; then
        missing="$missing librados2-dbg"
    fi
fi
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing$missing with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -q && apt-get install -y -q $missing; } >/tmp/lsmfs-deps.log 2>&1 || {
        echo "deps: apt-get failed, see /tmp/lsmfs-deps.log" >&2
        exit 1
    }
    exit 0
fi
echo "deps: missing packages:$missing" >&2
echo "deps: install them (as root: apt-get install$missing) and run make again" >&2
exit 1
