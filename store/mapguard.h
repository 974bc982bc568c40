/*
 * mapguard.h — a copy out of a read-only file mapping that turns the SIGBUS
 * of a disk read error or a file cut short into a failed call.
 *
 * The rule: mapped bytes are only ever read by mapguard_copy. A thread arms
 * its own guard (a sigsetjmp buffer and the source range, thread-local) for
 * the memcpy alone; the process-wide SIGBUS handler, installed by
 * mapguard_install before a file is mapped, jumps back out of a guarded copy when the faulting
 * address lies in its source range, and hands every other SIGBUS to the
 * handler installed before it (the default one kills the process, as ever).
 * Nothing else may read mapped memory: outside the copy a SIGBUS would not
 * be caught.
 */
#ifndef LSM_MAPGUARD_H
#define LSM_MAPGUARD_H

#include <stdbool.h>
#include <stddef.h>

/* Installs the SIGBUS handler, unless it is in place: the first call, and
 * any call after another handler replaced it. Call it before mapping a
 * file. Returns 0, or the errno of the sigaction that failed (nothing may
 * then be read through a mapping). */
int mapguard_install(void);

/* memcpy(dst, src, n) where src lies in a mapping; false (dst partly
 * written) if reading src raised SIGBUS. REQUIRES: mapguard_install()
 * succeeded. */
bool mapguard_copy(void *dst, const void *src, size_t n);

#endif
