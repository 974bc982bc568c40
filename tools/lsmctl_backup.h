/*
 * lsmctl_backup.h — `lsmctl backup`: incremental backups of a mounted
 * lsmfs (through a snapshot its daemon takes) or of a store not in use,
 * and what is done with them (lsm_backup & co., store/lsm.h).
 *
 *   lsmctl backup MNT|STORE DIR      take one
 *   lsmctl backup list DIR           the backups in DIR
 *   lsmctl backup verify DIR [ID]    read every byte against its checksum
 *   lsmctl backup purge DIR --keep N keep the newest N
 *   lsmctl backup restore DIR ID DEST
 *
 * Exit status (for cron): LSMCTL_OK, LSMCTL_FAILED, LSMCTL_USAGE, and
 * LSMCTL_DAMAGED when verify (or restore) found a damaged backup.
 */
#ifndef LSMCTL_BACKUP_H
#define LSMCTL_BACKUP_H

enum { LSMCTL_OK = 0, LSMCTL_FAILED = 1, LSMCTL_USAGE = 2, LSMCTL_DAMAGED = 3 };

/* argv holds the words after "backup"; returns the exit status. */
int lsmctl_backup(int argc, char **argv);

#endif
