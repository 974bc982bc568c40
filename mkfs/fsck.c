/*
 * fsck.c — fsck.lsmfs: check (and with -y repair) an unmounted lsmfs store.
 *
 *   fsck.lsmfs [-n|-y] [-v] DIR
 *
 * Exit codes as fsck(8): 0 clean, 1 errors corrected, 4 errors left
 * uncorrected, 8 operational error (cannot open the store, not lsmfs, ...),
 * 16 usage error.
 * The checks themselves are fs/fsck.c.
 */
#include "fsck.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: fsck.lsmfs [-n|-y] [-v] DIR\n"
                 "  -n   check only, change nothing (the default)\n"
                 "  -y   repair every problem found (-a and -p are synonyms)\n"
                 "  -v   verbose\n");
}

int main(int argc, char **argv)
{
    fsck_options o = {.out = stdout};
    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return FSCK_CLEAN;
    }
    int c;
    bool no = false;
    while ((c = getopt(argc, argv, "nyapfvCh")) != -1) {
        switch (c) {
        case 'n':
            no = true;
            break;
        case 'y':
        case 'a':
        case 'p':
            o.repair = true;
            break;
        case 'f':
        case 'C':
            break; /* fsck(8) passes these; we always check fully */
        case 'v':
            o.verbose = true;
            break;
        case 'h':
            usage(stdout);
            return FSCK_CLEAN;
        default:
            usage(stderr);
            return FSCK_USAGE;
        }
    }
    if (optind != argc - 1 || (no && o.repair)) {
        usage(stderr);
        return FSCK_USAGE;
    }
    const char *dir = argv[optind];
    o.progress = isatty(2);
    fsck_result r;
    int rc = fsck_store(dir, &o, &r);
    if (rc == FSCK_OPERATIONAL)
        return rc;
    printf("%s: %zu inodes, %zu entries, %d problem%s%s\n", dir, r.inodes, r.entries, r.problems,
           r.problems == 1 ? "" : "s",
           r.problems == 0 ? ""
           : o.repair      ? " (repaired)"
                           : " (not repaired: run with -y)");
    return rc;
}
