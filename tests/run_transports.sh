#!/bin/bash
# Runs the integration test programs once per FUSE transport lsmfs can use
# and says plainly which ran: over /dev/fuse always (LSMFS_TEST_URING=off),
# and over io_uring (LSMFS_TEST_URING=on) when the kernel offers it, that is
# when the fuse module's enable_uring parameter is Y. When it is N (the
# default, and on CI machines) the io_uring pass is skipped with a line
# saying so; test_uring then checks the fallback. Exits non-zero if a pass
# failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
param=/sys/module/fuse/parameters/enable_uring
offered=0
if [ "$(head -c1 $param 2>/dev/null)" = Y ] &&
    [ "$(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo 0)" = 0 ]; then
    offered=1
fi
echo "=== integration tests over /dev/fuse (LSMFS_TEST_URING=off)"
LSMFS_TEST_URING=off "$here/run.sh" "$@"
rc=$?
if [ $offered = 1 ]; then
    echo "=== integration tests over io_uring (LSMFS_TEST_URING=on; $param is Y)"
    LSMFS_TEST_URING=on "$here/run.sh" "$@" || rc=1
    echo "=== transports tested: /dev/fuse and io_uring"
else
    echo "=== integration tests over io_uring: SKIPPED: the kernel does not offer FUSE over"
    echo "    io_uring ($param is $(cat $param 2>/dev/null || echo absent)); as root,"
    echo "    echo Y > $param runs them too. test_uring checked the fallback instead."
    echo "=== transports tested: /dev/fuse only"
fi
exit $rc
