/*
 * lsmfs_version.h — the one version string of lsmfs, and the --help/--version
 * every tool (lsmfs, mkfs.lsmfs, fsck.lsmfs, lsmctl, mount.lsmfs) answers
 * the same way: on standard output, exit 0. (Inline: lsmctl and the tools
 * use it without libfs.)
 */
#ifndef FS_LSMFS_VERSION_H
#define FS_LSMFS_VERSION_H

#include "schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LSMFS_VERSION "0.1"

/* "PROG (lsmfs) 0.1, on-disk format 2" on out. */
static inline void version_print(FILE *out, const char *prog)
{
    fprintf(out, "%s (lsmfs) %s, on-disk format %d\n", prog, LSMFS_VERSION, SCHEMA_VERSION);
}

/* If an argument before "--" is --help or --version: prints the usage (by
 * usage(stdout)) or the version and exits 0. Called first in main, so the
 * two work whatever else the command line holds. */
static inline void version_help_or_exit(int argc, char **argv, const char *prog,
                                        void (*usage)(FILE *))
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(argv[i], "--version") == 0) {
            version_print(stdout, prog);
            exit(0);
        }
    }
}

#endif
