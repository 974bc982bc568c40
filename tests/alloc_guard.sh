#!/bin/bash
# alloc_guard.sh OBJECT... — fails if an object of store/ or fs/ calls
# the C library's allocating functions itself: every allocation of the store
# and the daemon goes through store/lsm_malloc.h, the seam test_oom_sweep,
# test_oom_manage and test_fs_oom fail allocation N through (an allocation
# outside it is one no test can fail). Checks the objects' undefined symbols
# (nm -u), so a call added anywhere is caught at make test.
#
# Not seen here: allocations inside other libraries' calls: the C library's
# (fopen, opendir, setmntent, fopencookie's FILE) and librados's (its
# connection, ops and completions: env_rados*.c): their failure is that
# call's error, which the caller handles as any other.
set -u

# The C library's functions that return memory the caller frees (and the
# names a fortified or optimised build calls them by: __getdelim, *_chk).
# Not realpath: with a PATH_MAX buffer it allocates nothing, and fs/ gives it
# one (lsmfs.c, store_open.c); with NULL it would.
BANNED='malloc|calloc|realloc|reallocarray|strdup|strndup|asprintf|vasprintf|open_memstream|open_wmemstream|getline|getdelim|aligned_alloc|posix_memalign|memalign|valloc|pvalloc|canonicalize_file_name|get_current_dir_name|scandir|scandirat|wcsdup|tempnam'

# Sources that may call them, each with why (matched against the object's
# path, build directory aside):
#   store/lsm_malloc.c  the seam itself: the one caller of the C library's
#                    allocator, once the test's hook let the allocation go.
#   fs/main.c        the command line and the daemon's start, before any request
#                    is served: a failure there is the start's one-line error;
#                    not in libfs, so no sweep could reach it anyway.
#   fs/transport/    also nowork-fs's, which links no store (Makefile): its
#                    allocations are made once at start (threads, rings, the
#                    readahead lookup), a failure a start error.
allowed() {
    case "$1" in
    */store/lsm_malloc.o | */fs/main.o | */fs/transport/*.o) return 0 ;;
    esac
    return 1
}

if [ $# -eq 0 ]; then
    echo "alloc_guard: no objects given" >&2
    exit 2
fi
bad=0
uses_seam=0
for o in "$@"; do
    syms=$(nm -u "$o") || {
        echo "alloc_guard: nm $o failed" >&2
        exit 2
    }
    grep -qE '^ +U lsm_(malloc|calloc|realloc|strdup|aligned_alloc)$' <<<"$syms" && uses_seam=1
    allowed "$o" && continue
    for s in $(awk -v re="^(__)?($BANNED)(_chk)?$" '$2 ~ re {print $2}' <<<"$syms"); do
        echo "alloc_guard: $o calls $s: allocate through lsm_malloc.h (or list its source in tests/alloc_guard.sh with why)"
        bad=1
    done
done
# A check that sees no caller of the seam is not reading the objects.
if [ $uses_seam -eq 0 ]; then
    echo "alloc_guard: no object calls lsm_malloc.h's functions: is nm reading them?" >&2
    exit 2
fi
if [ $bad -ne 0 ]; then
    exit 1
fi
echo "alloc_guard: $# objects of store/ and fs/ allocate only through lsm_malloc.h (but those listed in tests/alloc_guard.sh)"
