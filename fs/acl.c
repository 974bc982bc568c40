/*
 * acl.c — POSIX ACL bytes: validation, mode equivalence, chmod, inheritance.
 */
#include "acl.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#define ACL_VERSION 2u

enum {
    TAG_USER_OBJ = 0x01,
    TAG_USER = 0x02,
    TAG_GROUP_OBJ = 0x04,
    TAG_GROUP = 0x08,
    TAG_MASK = 0x10,
    TAG_OTHER = 0x20,
};

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static unsigned char *entry(const void *buf, size_t i)
{
    return (unsigned char *)buf + ACL_HEADER_SIZE + i * ACL_ENTRY_SIZE;
}

static size_t count(size_t len)
{
    return (len - ACL_HEADER_SIZE) / ACL_ENTRY_SIZE;
}

static uint16_t tag_of(const void *buf, size_t i)
{
    return le16(entry(buf, i));
}

static unsigned perm_of(const void *buf, size_t i)
{
    return le16(entry(buf, i) + 2);
}

static void set_perm(void *buf, size_t i, unsigned perm)
{
    unsigned char *p = entry(buf, i) + 2;
    p[0] = (unsigned char)(perm & 0xff);
    p[1] = (unsigned char)(perm >> 8);
}

bool acl_is_access(const char *name)
{
    return strcmp(name, ACL_NAME_ACCESS) == 0;
}

bool acl_is_default(const char *name)
{
    return strcmp(name, ACL_NAME_DEFAULT) == 0;
}

/* The state machine of the kernel's posix_acl_valid: `state` is the tag
 * class expected next; 0 once the other entry closed the ACL. */
int acl_valid(const void *buf, size_t len)
{
    if (len < ACL_HEADER_SIZE + ACL_ENTRY_SIZE || (len - ACL_HEADER_SIZE) % ACL_ENTRY_SIZE != 0 ||
        le32(buf) != ACL_VERSION)
        return EINVAL;
    unsigned state = TAG_USER_OBJ;
    bool needs_mask = false, have_prev = false;
    uint32_t prev_id = 0;
    for (size_t i = 0; i < count(len); i++) {
        uint16_t tag = tag_of(buf, i);
        uint32_t id = le32(entry(buf, i) + 4);
        if (perm_of(buf, i) & ~7u)
            return EINVAL;
        switch (tag) {
        case TAG_USER_OBJ:
        case TAG_GROUP_OBJ:
            if (state != (tag == TAG_USER_OBJ ? TAG_USER_OBJ : TAG_USER))
                return EINVAL;
            state = tag == TAG_USER_OBJ ? TAG_USER : TAG_GROUP;
            have_prev = false;
            break;
        case TAG_USER:
        case TAG_GROUP:
            if (state != tag || (have_prev && id <= prev_id))
                return EINVAL; /* out of place, unsorted or a duplicate */
            needs_mask = true;
            have_prev = true;
            prev_id = id;
            break;
        case TAG_MASK:
            if (state != TAG_GROUP)
                return EINVAL;
            state = TAG_OTHER;
            break;
        case TAG_OTHER:
            if (state != TAG_OTHER && (state != TAG_GROUP || needs_mask))
                return EINVAL;
            state = 0;
            break;
        default:
            return EINVAL;
        }
    }
    return state == 0 ? 0 : EINVAL;
}

/* The entry whose perms are the group class's: the mask if there is one,
 * else the owning group's. REQUIRES: acl_valid (both exist as needed). */
static size_t group_class(const void *buf, size_t len)
{
    size_t group = 0;
    for (size_t i = 0; i < count(len); i++) {
        if (tag_of(buf, i) == TAG_MASK)
            return i;
        if (tag_of(buf, i) == TAG_GROUP_OBJ)
            group = i;
    }
    return group;
}

mode_t acl_mode(const void *buf, size_t len, mode_t mode, bool *equiv)
{
    mode_t perms = (mode_t)perm_of(buf, group_class(buf, len)) << 3;
    *equiv = true;
    for (size_t i = 0; i < count(len); i++) {
        mode_t p = perm_of(buf, i);
        switch (tag_of(buf, i)) {
        case TAG_USER_OBJ:
            perms |= p << 6;
            break;
        case TAG_OTHER:
            perms |= p;
            break;
        case TAG_GROUP_OBJ:
            break;
        default: /* named entries and the mask: more than a mode says */
            *equiv = false;
        }
    }
    return (mode & ~(mode_t)0777) | perms;
}

void acl_chmod(void *buf, size_t len, mode_t mode)
{
    for (size_t i = 0; i < count(len); i++) {
        if (tag_of(buf, i) == TAG_USER_OBJ)
            set_perm(buf, i, (mode >> 6) & 7);
        else if (tag_of(buf, i) == TAG_OTHER)
            set_perm(buf, i, mode & 7);
    }
    set_perm(buf, group_class(buf, len), (mode >> 3) & 7);
}

bool acl_inherit(void *buf, size_t len, mode_t *mode)
{
    mode_t m = *mode;
    bool store = false;
    for (size_t i = 0; i < count(len); i++) {
        unsigned p = perm_of(buf, i);
        switch (tag_of(buf, i)) {
        case TAG_USER_OBJ:
            set_perm(buf, i, p & (m >> 6));
            m &= (mode_t)(p << 6) | ~(mode_t)S_IRWXU;
            break;
        case TAG_OTHER:
            set_perm(buf, i, p & m);
            m &= (mode_t)p | ~(mode_t)S_IRWXO;
            break;
        case TAG_GROUP_OBJ:
            break;
        default: /* named entries and the mask */
            store = true;
        }
    }
    size_t g = group_class(buf, len);
    unsigned p = perm_of(buf, g);
    set_perm(buf, g, p & (m >> 3));
    m &= (mode_t)(p << 3) | ~(mode_t)S_IRWXG;
    *mode = m;
    return store;
}
