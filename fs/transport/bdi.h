/*
 * bdi.h — a FUSE mount's kernel I/O settings (its backing_dev_info in
 * /sys/class/bdi). The kernel caps a FUSE mount's readahead at 128 KiB
 * (the default it offers at INIT), so a sequential read arrives as 128 KiB
 * READs, one or two at a time; with a larger window the reads come as
 * 1 MiB READs, several in flight, which two workers serve side by side
 * (docs/decisions.md, "Readahead window").
 */
#ifndef FS_BDI_H
#define FS_BDI_H

/* Sets the readahead of the FUSE mount at `mountpoint` (an absolute path)
 * to kb KiB. Call it once the kernel has taken the INIT reply: INIT sets
 * the window anew. Finds the mount in /proc/self/mountinfo (a stat of the
 * mount point would be a request to the daemon itself). Needs root to
 * write sysfs. Returns 0 or an errno (ENOENT: no such mount). */
int bdi_set_readahead(const char *mountpoint, unsigned kb);

#endif
