#!/bin/sh
# make mount: create the default store if absent, then mount it.
set -eu
bin=$1 store=$2 mnt=$3
if grep -qs " $(realpath -m "$mnt") " /proc/mounts; then
    if ls "$mnt" >/dev/null 2>&1; then
        echo "$mnt is already mounted (make umount to unmount it)"
        exit 0
    fi
    # its daemon died: the mount answers nothing until it is unmounted
    echo "$mnt is a dead lsmfs mount: fusermount3 -u $mnt"
    fusermount3 -u "$mnt"
fi
if [ ! -e "$store/CURRENT" ] && [ ! -e "$store/LOCK" ]; then
    "$bin/mkfs.lsmfs" "$store"
fi
mkdir -p "$mnt"
"$bin/lsmfs" "$store" "$mnt"
echo "lsmfs: $store mounted at $mnt (make umount to unmount)"
