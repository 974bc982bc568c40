#!/bin/sh
# make mount: create the default store if absent, then mount it.
set -eu
bin=$1 store=$2 mnt=$3
if grep -qs " $(realpath -m "$mnt") " /proc/mounts; then
    echo "$mnt is already mounted (make umount to unmount it)"
    exit 0
fi
if [ ! -e "$store/CURRENT" ] && [ ! -e "$store/LOCK" ]; then
    "$bin/mkfs.lsmfs" "$store"
fi
mkdir -p "$mnt"
"$bin/lsmfs" "$store" "$mnt"
echo "lsmfs: $store mounted at $mnt (make umount to unmount)"
