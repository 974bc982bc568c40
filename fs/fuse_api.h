/*
 * fuse_api.h — the one place that picks the libfuse API level, so every fs/
 * file sees the same declarations (libfuse 3.14 low-level API).
 */
#ifndef FS_FUSE_API_H
#define FS_FUSE_API_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#endif
