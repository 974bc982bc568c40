#!/bin/bash
# Runs the RADOS test programs (test_rados_*) against a throwaway cluster:
# starts it (tests/ceph/cluster.sh) under a temp dir, runs them with
# tests/run.sh with LSM_CEPH_CONF set, and always stops it and removes its
# files. A cluster that cannot start fails the run: RADOS tests never skip.
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
"$here/../run.sh" "$@"
