#!/bin/bash
# Makes a store test_old_store mounts, made by mkfs.lsmfs and written by the
# lsmfs daemon of an older lsmfs: tests/data/format2_store.tar.gz (format 2,
# fixed-size inode records: main at 7b1e30c), tests/data/format3_store.tar.gz
# (format 3, compact records holding inline files' bytes: main at b787cbb).
# Usage: make_old_store.sh OLD_BIN_DIR OUT.tar.gz (as root). What it holds
# is what test_old_store.c's table `expect` says.
set -eu
BIN=$1 OUT=$2
T=$(mktemp -d)
trap 'fusermount3 -u "$T/mnt" 2>/dev/null || true; rm -rf "$T"' EXIT
mkdir "$T/mnt"
"$BIN/mkfs.lsmfs" "$T/store" >/dev/null
"$BIN/lsmfs" "$T/store" "$T/mnt" -f & pid=$!
for _ in $(seq 100); do mountpoint -q "$T/mnt" && break; sleep 0.1; done
M=$T/mnt
pattern() { python3 -c "import sys; sys.stdout.buffer.write(bytes((i * 7 + $2) % 251 for i in range($1)))"; }
pattern 1024 1 > "$M/small"
: > "$M/empty"
pattern 10000 2 > "$M/big"
mkdir -m 0750 "$M/dir"
pattern 100 3 > "$M/dir/inner"
ln "$M/dir/inner" "$M/hard"
ln -s small "$M/link"
mkfifo -m 0600 "$M/fifo"
setfattr -n user.k -v value "$M/small"
chown 1234:5678 "$M/small"
chmod 0640 "$M/small"
chmod 04755 "$M/big"
touch -h -d '2020-01-02 03:04:05.123456789 UTC' "$M/small" "$M/empty" "$M/big" "$M/dir/inner" "$M/link" "$M/fifo"
touch -d '2021-06-07 08:09:10 UTC' "$M/dir"
fusermount3 -u "$M"
wait $pid
tar -C "$T" --exclude=RESERVE --exclude=LOCK -czf "$OUT" store
