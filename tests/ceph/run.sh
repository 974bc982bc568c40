#!/bin/bash
# Runs RADOS test programs against a throwaway cluster:
#   tests/ceph/run.sh PROG... [-- PROG...]
# starts it (tests/ceph/cluster.sh) under a temp dir, runs the programs before
# "--" (test_rados_*) and then those after it (store suites written for any
# env) with LSM_TEST_ENV=rados, through tests/run.sh with LSM_CEPH_CONF set,
# and always stops the cluster and removes its files. A cluster that cannot
# start fails the run: RADOS tests never skip.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/lsmfs-ceph-XXXXXX)
trap '"$here/cluster.sh" stop "$dir"' EXIT
trap 'exit 130' INT TERM
if ! "$here/cluster.sh" start "$dir"; then
    echo "programs: 0 passed, $# failed (no cluster)"
    exit 1
fi
export LSM_CEPH_CONF=$dir/ceph.conf
export CEPH_CONF=$dir/ceph.conf # what the tools read by default
export LSM_CEPH_CLUSTER_DIR=$dir
export LSM_CEPH_CLUSTER_SH=$here/cluster.sh # kill-osd / start-osd
own=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do own+=("$1"); shift; done
[ $# -gt 0 ] && shift
rc=0
"$here/../run.sh" "${own[@]}" || rc=1
if [ $# -gt 0 ]; then
    echo "=== over RADOS (LSM_TEST_ENV=rados): $*"
    LSM_TEST_ENV=rados "$here/../run.sh" "$@" || rc=1
fi
exit $rc
