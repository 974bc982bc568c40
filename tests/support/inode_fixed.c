/* inode_fixed.c — see inode_fixed.h. */
#include "inode_fixed.h"

static char *put_ts(char *p, ts t)
{
    le64_put(p, (uint64_t)t.sec);
    le32_put(p + 8, t.nsec);
    return p + 12;
}

size_t inode_encode_fixed(const inode_rec *r, int version, char out[INODE_HDR_V2_LEN])
{
    char *p = out;
    *p++ = (char)version;
    le32_put(p, r->mode);
    le32_put(p + 4, r->uid);
    le32_put(p + 8, r->gid);
    le32_put(p + 12, r->flags);
    le32_put(p + 16, r->nlink);
    p += 20;
    le64_put(p, r->size);
    le64_put(p + 8, r->rdev);
    le64_put(p + 16, r->generation);
    p += 24;
    p = put_ts(p, r->atime);
    p = put_ts(p, r->mtime);
    p = put_ts(p, r->ctime);
    le64_put(p, r->parent);
    le64_put(p + 8, r->next_cookie);
    if (version == 1)
        return INODE_HDR_V1_LEN;
    le64_put(p + 16, r->chunks);
    return INODE_HDR_V2_LEN;
}
