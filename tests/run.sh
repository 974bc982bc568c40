#!/bin/bash
# Run test programs one by one, each under a timeout, and print a summary.
# Exits non-zero if any program failed, timed out or crashed.
set -u
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
# Test directories carry this run's tag (tests/integration/mount.c), so a
# concurrent run elsewhere on the machine is not counted as our leftover.
export LSMFS_TEST_RUN=$$
test_mounts() { awk -v tag="lsmfs-test-$$-" '$3 ~ /^fuse/ && index($2, tag) {print $2}' /proc/mounts | sort; }
mounts_before=$(test_mounts)
passed=0
failed=0
failed_names=""
for t in "$@"; do
    name=$(basename "$t")
    echo "=== $name"
    start=$(date +%s.%N)
    timeout -k 10 "$TEST_TIMEOUT" "$t"
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        printf '=== %s: ok (%.1fs)\n' "$name" "$secs"
    else
        failed=$((failed + 1))
        failed_names="$failed_names $name"
        [ $rc -eq 124 ] && why="timed out after ${TEST_TIMEOUT}s" || why="exit $rc"
        printf '=== %s: FAILED (%s, %.1fs)\n' "$name" "$why" "$secs"
    fi
done
# Integration tests must never leave a mount behind (mounts that were there
# before this run belong to someone else).
leftover=$(comm -13 <(echo "$mounts_before") <(test_mounts) | grep . || true)
if [ -n "$leftover" ]; then
    echo "=== leftover test mounts in /proc/mounts:"
    echo "$leftover"
    failed=$((failed + 1))
    failed_names="$failed_names (leftover-mounts)"
fi
echo
[ -n "$failed_names" ] && echo "failed programs:$failed_names"
echo "programs: $passed passed, $failed failed"
[ $failed -eq 0 ]
