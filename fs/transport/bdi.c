/*
 * bdi.c — a FUSE mount's kernel I/O settings (see bdi.h).
 */
#include "bdi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Undoes mountinfo's escapes (\040 for a space, \011, \012, \134) in place. */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* The "major:minor" of the last mount listed at mountpoint (the one on
 * top) into dev. Returns 0, ENOENT or an errno. */
static int mount_dev(const char *mountpoint, char *dev, size_t n)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (f == NULL)
        return errno;
    char *line = NULL;
    size_t cap = 0;
    int err = ENOENT;
    while (getline(&line, &cap, f) > 0) {
        char mdev[64], mnt[4096];
        /* mount-id parent-id major:minor root mount-point ... */
        if (sscanf(line, "%*s %*s %63s %*s %4095s", mdev, mnt) != 2)
            continue;
        unescape(mnt);
        if (strcmp(mnt, mountpoint) == 0 && strlen(mdev) < n) {
            strcpy(dev, mdev);
            err = 0;
        }
    }
    free(line);
    fclose(f);
    return err;
}

int bdi_set_readahead(const char *mountpoint, unsigned kb)
{
    char dev[64], path[128];
    int err = mount_dev(mountpoint, dev, sizeof dev);
    if (err != 0)
        return err;
    snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", dev);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return errno;
    int w = fprintf(f, "%u\n", kb);
    err = w < 0 ? EIO : 0;
    if (fclose(f) != 0 && err == 0)
        err = errno;
    return err;
}
