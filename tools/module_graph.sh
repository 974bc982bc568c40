#!/bin/bash
# tools/module_graph.sh DIR [OBJDIR]: which module of DIR calls which.
# A module is a .c file (with its .h), named by its path under DIR. An edge "a -> b" says a.o uses a
# symbol that b.o defines (nm over OBJDIR, default build/DIR: run `make`
# first); "includes" edges come from quoted #include lines. Then every
# cycle of the call graph: each strongly connected component of more than
# one module (a module calling back into one that calls it).
set -eu
dir=${1:?usage: tools/module_graph.sh DIR [OBJDIR]}
objdir=${2:-build/$dir}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for o in $(find "$objdir" -name '*.o' | sort); do
    m=${o#"$objdir"/}
    m=${m%.o}
    [ -e "$dir/$m.c" ] || continue
    nm -g --defined-only "$o" | awk -v m="$m" 'NF == 3 {print $3, m}' >> "$tmp/defs"
    nm -u "$o" | awk -v m="$m" '{print $NF, m}' >> "$tmp/uses"
done
[ -s "$tmp/defs" ] || { echo "module_graph: no objects in $objdir (run make)" >&2; exit 1; }
sort -u "$tmp/defs" -o "$tmp/defs"
sort -u "$tmp/uses" -o "$tmp/uses"
join "$tmp/uses" "$tmp/defs" | awk '$2 != $3 {print $2, "->", $3}' | sort -u > "$tmp/calls"
echo "# calls ($(wc -l < "$tmp/calls") edges)"
cat "$tmp/calls"
python3 - "$tmp/calls" <<'PY'
import sys, collections
g = collections.defaultdict(set)
for line in open(sys.argv[1]):
    a, _, b = line.split()
    g[a].add(b); g[b]
idx, low, on, st, out, n = {}, {}, set(), [], [], [0]
def scc(v):
    idx[v] = low[v] = n[0]; n[0] += 1; st.append(v); on.add(v)
    for w in sorted(g[v]):
        if w not in idx:
            scc(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        c = []
        while True:
            w = st.pop(); on.discard(w); c.append(w)
            if w == v: break
        if len(c) > 1: out.append(sorted(c))
sys.setrecursionlimit(10000)
for v in sorted(g):
    if v not in idx: scc(v)
print("# cycles: %d" % len(out))
for c in out:
    print("cycle (%d modules): %s" % (len(c), " ".join(c)))
PY
