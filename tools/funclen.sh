#!/bin/sh
# funclen.sh — the longest functions of each source directory.
#
#   tools/funclen.sh [-n N] [DIR...]   (default: fs store tools mkfs tests, N = 1)
#
# A function is a definition whose body opens with "{" alone in column 0
# and closes with "}" in column 0 (the tree's clang-format style); its
# length is its body's lines, both braces included.
n=1
if [ "${1:-}" = "-n" ]; then
    n=$2
    shift 2
fi
[ $# -gt 0 ] || set -- fs store tools mkfs tests
for dir in "$@"; do
    find "$dir" -name '*.c' | sort | xargs awk '
        FNR == 1 { sig = ""; open = 0 }
        /^[A-Za-z_].*\(/ && open == 0 { sig = $0 }
        /^\{$/ && open == 0 && sig != "" {
            fn = sig; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn); open = FNR; next
        }
        /^\}/ && open > 0 { print FNR - open + 1, FILENAME ":" fn; open = 0; sig = "" }
    ' | sort -rn | head -n "$n" | awk -v d="$dir" '{printf "%-6s %4d  %s\n", d, $1, $2}'
done
