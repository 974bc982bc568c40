/*
 * super.c — the superblock: read and checked, marked current (super.h).
 */
#include "super.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

bool super_batch_mkfs(lsm_batch *b, const schema_super *sb, uint32_t uid, uint32_t gid)
{
    char sv[SCHEMA_SUPER_LEN], av[SCHEMA_ALLOC_LEN], iv[INODE_HDR_MAX];
    super_encode(sb, sv);
    alloc_encode(SCHEMA_FIRST_INO, av);
    ts t = {.sec = sb->ctime_sec, .nsec = sb->ctime_nsec};
    inode_rec root = {.mode = S_IFDIR | 0755,
                      .uid = uid,
                      .gid = gid,
                      .nlink = 2,
                      .generation = 1,
                      .atime = t,
                      .mtime = t,
                      .ctime = t,
                      .parent = SCHEMA_ROOT_INO,
                      .next_cookie = SCHEMA_FIRST_COOKIE};
    size_t ilen = inode_encode_hdr(&root, iv);
    schema_key ks, ka, ki;
    key_super(&ks);
    key_alloc(&ka);
    key_inode(&ki, SCHEMA_ROOT_INO);
    return lsm_batch_put(b, ks.b, ks.len, sv, sizeof sv) &&
           lsm_batch_put(b, ka.b, ka.len, av, sizeof av) &&
           lsm_batch_put(b, ki.b, ki.len, iv, ilen);
}

int super_read(lsm_db *db, const char *dir, schema_super *sb, char *err, size_t errlen)
{
    lsm_read_options ro;
    lsm_read_options_init(&ro);
    schema_key k;
    key_super(&k);
    char *v = NULL;
    size_t vlen = 0;
    lsm_status *s = lsm_get(db, &ro, k.b, k.len, &v, &vlen);
    if (s != NULL) {
        int notfound = lsm_status_code(s) == LSM_NOT_FOUND;
        int e = notfound ? EINVAL : lsm_status_errno(s); /* ENOMEM: no verdict on the store */
        if (notfound)
            snprintf(err, errlen, "%s: not an lsmfs filesystem (store has no superblock)", dir);
        else
            snprintf(err, errlen, "%s: reading the superblock: %s", dir, lsm_status_message(s));
        lsm_status_free(s);
        return e;
    }
    enum super_check c = super_decode(v, vlen, sb);
    free(v);
    switch (c) {
    case SUPER_OK:
        return 0;
    case SUPER_NOT_LSMFS:
        snprintf(err, errlen, "%s: not an lsmfs filesystem (bad superblock magic)", dir);
        return EINVAL;
    case SUPER_NEWER:
        snprintf(err, errlen,
                 "%s: lsmfs format version %u is newer than this lsmfs supports (%u): upgrade "
                 "lsmfs",
                 dir, sb->version, SCHEMA_VERSION);
        return EPROTONOSUPPORT;
    case SUPER_BAD:
        break;
    }
    snprintf(err, errlen, "%s: damaged superblock", dir);
    return EIO;
}

bool super_batch_upgrade(lsm_batch *b, schema_super *sb)
{
    if (sb->version >= SCHEMA_VERSION)
        return true;
    schema_super up = *sb;
    up.version = SCHEMA_VERSION;
    char v[SCHEMA_SUPER_LEN];
    super_encode(&up, v);
    schema_key k;
    key_super(&k);
    if (!lsm_batch_put(b, k.b, k.len, v, sizeof v))
        return false;
    *sb = up;
    return true;
}

int super_upgrade(lsm_db *db, schema_super *sb, char *err, size_t errlen)
{
    if (sb->version >= SCHEMA_VERSION)
        return 0;
    schema_super up = *sb;
    lsm_batch *b = lsm_batch_new();
    if (b == NULL || !super_batch_upgrade(b, &up)) {
        lsm_batch_free(b);
        snprintf(err, errlen, "writing the superblock of format %u: out of memory", SCHEMA_VERSION);
        return ENOMEM;
    }
    lsm_write_options wo = {.sync = true};
    lsm_status *s = lsm_write(db, &wo, b);
    lsm_batch_free(b);
    if (s != NULL) {
        snprintf(err, errlen, "writing the superblock of format %u: %s", SCHEMA_VERSION,
                 lsm_status_message(s));
        int e = lsm_status_errno(s);
        lsm_status_free(s);
        return e != 0 ? e : EIO;
    }
    *sb = up;
    return 0;
}
