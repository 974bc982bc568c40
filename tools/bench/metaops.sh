#!/bin/bash
# metaops.sh — the FUSE requests each kind of metadata operation costs, in
# a directory the previous operation touched (the steady state of a create
# or unlink loop), one row per operation, by opcode.
#
#   tools/bench/metaops.sh [-n N] MOUNTPOINT [OP...]
#
# For each OP (default: all of them, each alone and as OP+stat, which also
# stats the touched inode and its parent directory(ies) after each
# operation) it prepares a fresh directory under MOUNTPOINT, then counts,
# with fuseops.sh, the requests of N (default 200) operations there, and
# prints the requests per operation. Works on any FUSE mount. Needs root
# (fuseops.sh's tracepoints) and a C compiler.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
n=200
if [ "${1:-}" = -n ]; then
    n=$2
    shift 2
fi
if [ $# -lt 1 ]; then
    echo "usage: $0 [-n N] MOUNTPOINT [OP...]" >&2
    exit 2
fi
mnt=$1
shift
ops=("$@")
if [ ${#ops[@]} -eq 0 ]; then
    for o in create mkdir symlink link unlink rmdir rename rename-xdir rename-dir-xdir \
        chmod truncate write; do
        ops+=("$o" "$o+stat")
    done
fi

work=$(mktemp -d /tmp/metaops-XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
drv=$work/bench_metaops
cc -O2 -Wall -Wextra -Werror -o "$drv" "$here/../bench_metaops.c" || exit 1
base=$(mktemp -d "$mnt/metaops-XXXXXX") || exit 1

printf "%-20s %7s  %s\n" op req/op "by opcode (per op)"
rc=0
for op in "${ops[@]}"; do
    dir=$base/${op//+/_}
    mkdir "$dir" && "$drv" "$dir" "$op" "$n" prepare || { rc=1; continue; }
    sync
    out=$("$here/fuseops.sh" -n "$n" "$mnt" "$drv" "$dir" "$op" "$n" run) || { rc=1; continue; }
    echo "$out" | awk -v op="$op" '
        $1 == "TOTAL" { total = $3; next }
        $1 ~ /^FUSE_/ { o = $1; sub(/^FUSE_/, "", o); by = by sprintf(" %s=%s", o, $3) }
        END { printf "%-20s %7s %s\n", op, total, by }'
done
rm -rf "$base"
exit $rc
