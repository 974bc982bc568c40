/*
 * schema.h — how a filesystem is laid out as keys and values in the store.
 * Shared by the daemon, mkfs.lsmfs and fsck.lsmfs; the single source of
 * truth for the on-disk format (documented in ARCHITECTURE.md).
 *
 * Keys start with a one-byte kind prefix. Inode numbers and indexes inside
 * keys are big-endian so that bytewise key order is numeric order: a file's
 * chunks, a directory's entries and an inode's xattrs are contiguous ranges.
 *
 *   'S'                         superblock
 *   'A'                         inode allocator high-water mark
 *   'I' ino                     inode record (+ symlink target; + inline data
 *                               in a record without INODE_F_APART)
 *   'L' ino                     an inline file's bytes (records with INODE_F_APART)
 *   'D' parent name             directory entry, by name (lookup)
 *   'C' parent cookie           directory entry, by cookie (readdir order)
 *   'F' ino index               file data chunk
 *   'X' ino name                extended attribute
 *   'O' ino                     orphan: nlink 0, data still to be reclaimed
 *   'N'                         inode count at a clean unmount (icount.h)
 *
 * Values use little-endian fixed-width integers. Every decoder bounds-checks
 * and returns false on malformed input: data read from disk is untrusted.
 */
#ifndef FS_SCHEMA_H
#define FS_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 2: inode records carry the chunk count (record version 2). 3: inode
 * records are written compact (INODE_REC_VERSION 3). 4: an inline file's
 * bytes are kept apart from its record ('L' ino, INODE_F_APART). An older
 * store is read as is and marked 4 when mounted read-write (super.c), so an
 * lsmfs that cannot read what this one writes refuses it rather than meet
 * it. */
#define SCHEMA_VERSION 4
#define SCHEMA_MAGIC "LSMFS\0fs"
#define SCHEMA_MAGIC_LEN 8
#define SCHEMA_ROOT_INO 1ULL
#define SCHEMA_FIRST_INO 2ULL
#define SCHEMA_NAME_MAX 255
#define SCHEMA_SYMLINK_MAX 4095
#define SCHEMA_XATTR_NAME_MAX 255
#define SCHEMA_XATTR_VALUE_MAX 65536
/* Readdir offsets 0..2 are ".", ".." and the start; entry cookies begin here. */
#define SCHEMA_FIRST_COOKIE 3ULL

/* 4 KiB, a page: appends in whole pages (PostMark's 4 KiB writes, logs)
 * never rewrite a chunk, others rewrite at most 4 KiB at each end (the
 * figures: docs/decisions.md, "Default chunk"). */
#define SCHEMA_DEFAULT_CHUNK (4u * 1024)
#define SCHEMA_DEFAULT_INLINE 4096u
#define SCHEMA_MIN_CHUNK 4096u
#define SCHEMA_MAX_CHUNK (1u << 20)

enum schema_kind {
    K_SUPER = 'S',
    K_ALLOC = 'A',
    K_INODE = 'I',
    K_INLINE = 'L',
    K_DIRENT = 'D',
    K_COOKIE = 'C',
    K_CHUNK = 'F',
    K_XATTR = 'X',
    K_ORPHAN = 'O',
    K_ICOUNT = 'N',
};

/* Every kind lsmfs writes, in key order, with what its keys hold (for the
 * tools). A new kind goes here too: fsck deletes keys of a kind not listed. */
typedef struct schema_kind_info {
    char kind;
    const char *what;
} schema_kind_info;
extern const schema_kind_info schema_kinds[];
extern const size_t schema_nkinds;
/* Whether lsmfs writes keys of this kind. */
bool schema_kind_known(char kind);

/* Longest key: prefix + ino + a 255-byte name. */
#define SCHEMA_KEY_MAX (1 + 8 + 255)

typedef struct schema_key {
    char b[SCHEMA_KEY_MAX];
    size_t len;
} schema_key;

static inline void be64_put(char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (char)(v & 0xff);
        v >>= 8;
    }
}
static inline uint64_t be64_get(const char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | (unsigned char)p[i];
    return v;
}
static inline void le32_put(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++, v >>= 8)
        p[i] = (char)(v & 0xff);
}
static inline void le64_put(char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (char)(v & 0xff);
}
static inline uint32_t le32_get(const char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | (unsigned char)p[i];
    return v;
}
static inline uint64_t le64_get(const char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | (unsigned char)p[i];
    return v;
}

void key_super(schema_key *k);
void key_alloc(schema_key *k);
void key_icount(schema_key *k);
void key_inode(schema_key *k, uint64_t ino);
void key_orphan(schema_key *k, uint64_t ino);
void key_inline(schema_key *k, uint64_t ino);
/* REQUIRES: nlen <= SCHEMA_NAME_MAX */
void key_dirent(schema_key *k, uint64_t parent, const char *name, size_t nlen);
void key_cookie(schema_key *k, uint64_t parent, uint64_t cookie);
void key_chunk(schema_key *k, uint64_t ino, uint64_t index);
void key_xattr(schema_key *k, uint64_t ino, const char *name, size_t nlen);
/* The prefix shared by every key of `kind` under `ino` (1 + 8 bytes): the
 * start of a range scan. `end` gets the first key after the range. */
void key_range(schema_key *start, schema_key *end, char kind, uint64_t ino);

/* Parsers for scans: check the kind and length, extract the parts. Name
 * pointers point into the key. */
bool key_parse_ino(const char *k, size_t klen, char kind, uint64_t *ino);
bool key_parse_dirent(const char *k, size_t klen, uint64_t *parent, const char **name,
                      size_t *nlen);
bool key_parse_cookie(const char *k, size_t klen, uint64_t *parent, uint64_t *cookie);
bool key_parse_chunk(const char *k, size_t klen, uint64_t *ino, uint64_t *index);
bool key_parse_xattr(const char *k, size_t klen, uint64_t *ino, const char **name, size_t *nlen);

/* The store's table partition of a key (lsm_options.table_partition): 1 for
 * file chunks, 2 for inline files' bytes, 0 for everything else, so their
 * tables hold no inode records (which every data write rewrites): bytes
 * written in inode order make tables that overlap no other (moved down,
 * not rewritten), and the records stay dense. */
uint32_t schema_table_partition(const void *key, size_t n);

/* The store's table segment of a key (lsm_options.table_segment): a file
 * chunk's inode number, 0 for every other key, so a big file's chunks get
 * tables of their own even when several files are written at once, and a
 * deleted file's tables can be dropped whole (fs/orphan.c). */
uint64_t schema_table_segment(const void *key, size_t n);

/* ------------------------------------------------------------ superblock */

typedef struct schema_super {
    uint32_t version;
    uint32_t chunk_size;
    uint32_t inline_limit;
    int64_t ctime_sec;
    uint32_t ctime_nsec;
    /* The root reserve (reserve.h), appended later: a superblock without
     * it (SCHEMA_SUPER_V1_LEN bytes) reserves nothing, and older lsmfs
     * versions read past it. */
    uint32_t reserve_pct; /* 0..SCHEMA_MAX_RESERVE_PCT of the disk */
    uint32_t resuid, resgid;
} schema_super;

#define SCHEMA_SUPER_V1_LEN (SCHEMA_MAGIC_LEN + 4 + 4 + 4 + 8 + 4)
#define SCHEMA_SUPER_LEN (SCHEMA_SUPER_V1_LEN + 4 + 4 + 4)
#define SCHEMA_MAX_RESERVE_PCT 50u
#define SCHEMA_DEFAULT_RESERVE_PCT 5u /* as mkfs.ext4 */

void super_encode(const schema_super *s, char out[SCHEMA_SUPER_LEN]);
/* Result of decoding a superblock value. */
enum super_check { SUPER_OK, SUPER_NOT_LSMFS, SUPER_NEWER, SUPER_BAD };
enum super_check super_decode(const char *v, size_t len, schema_super *s);
/* Are these mkfs parameters acceptable? (errmsg set when not) */
bool super_params_valid(uint32_t chunk_size, uint32_t inline_limit, const char **errmsg);

/* ------------------------------------------------------------ allocator */

#define SCHEMA_ALLOC_LEN 8
void alloc_encode(uint64_t next, char out[SCHEMA_ALLOC_LEN]);
bool alloc_decode(const char *v, size_t len, uint64_t *next);

/* ---------------------------------------------------------- inode count */

/* u64 live inode records, u64 the store's sequence number of this record
 * (it holds only while the store's last sequence is still that one). */
#define SCHEMA_ICOUNT_LEN 16
void icount_encode(uint64_t count, uint64_t seq, char out[SCHEMA_ICOUNT_LEN]);
bool icount_decode(const char *v, size_t len, uint64_t *count, uint64_t *seq);

/* ---------------------------------------------------------------- inode */

/* Inode flags. */
#define INODE_F_INLINE 0x1u /* a regular file's data is inline (not chunks) */
#define INODE_F_XATTR 0x2u  /* the inode may have xattr keys */
#define INODE_F_APART 0x4u  /* an INLINE file's bytes are under 'L' ino */

typedef struct ts {
    int64_t sec;
    uint32_t nsec;
} ts;

/* The fixed part of an inode record. The payload after it is a symlink's
 * target, or the inline data of an INLINE regular file without
 * INODE_F_APART (stores before format 4); other inodes have none. */
typedef struct inode_rec {
    uint32_t mode;
    uint32_t uid;
    uint32_t gid;
    uint32_t flags;
    uint32_t nlink;
    uint64_t size; /* bytes for files/symlinks; entry count for directories */
    uint64_t rdev;
    uint64_t generation;
    ts atime, mtime, ctime;
    uint64_t parent;      /* directories: the directory naming this one */
    uint64_t next_cookie; /* directories: the cookie the next entry gets */
    /* Chunked regular files: the chunk keys stored (st_blocks), kept in the
     * batch that adds or deletes them; INODE_CHUNKS_UNKNOWN in a record of
     * version 1, until the file is emptied or un-inlined. 0 otherwise. */
    uint64_t chunks;
} inode_rec;

#define INODE_CHUNKS_UNKNOWN UINT64_MAX

/* Record versions (the first byte; fs/schema_inode.c). 1 and 2: fixed
 * little-endian fields (mode, uid, gid, flags, nlink as u32; size, rdev,
 * generation as u64; atime, mtime, ctime as s64 seconds + u32 nsec;
 * parent, next_cookie as u64; 2 adds chunks as u64), read as they are.
 * 3, the one written: compact (layout in schema_inode.c), 25-40 bytes for
 * a typical file instead of 105; any update rewrites an older record so. */
#define INODE_REC_VERSION 3
#define INODE_HDR_V1_LEN (1 + 5 * 4 + 3 * 8 + 3 * 12 + 2 * 8)
#define INODE_HDR_V2_LEN (INODE_HDR_V1_LEN + 8)
/* The longest compact header: version and time flags, 5 varint32s, 6
 * varint64s, 3 zigzag varint64 seconds, 3 u32 nsec. */
#define INODE_HDR_MAX (2 + 5 * 5 + 6 * 10 + 3 * 10 + 3 * 4)

/* Where an INLINE regular file's bytes are (the one rule; bytes past their
 * end up to `size` read as zeros):
 *   - with INODE_F_APART (every record format 4 writes): the value of key
 *     'L' ino, which exists exactly when the size is not 0 (missing: damage;
 *     never longer than the size nor the inline limit). The record has no
 *     payload, so loading attributes (a listing's) reads no file data.
 *   - without it (records of stores before format 4): the record's payload.
 *     The record's next update moves them apart (inode_rec_place).
 * A symlink's target stays the record's payload: short, and read with its
 * record by readlink only. */
bool inode_bytes_apart(const inode_rec *r);
/* The most inline bytes a file of record r may keep, wherever they are:
 * its size, at most the store's inline limit. */
size_t inode_inline_max(const inode_rec *r, uint32_t inline_limit);
/* Does ino have an 'L' key? (inode_bytes_apart and a size not 0) */
bool inode_has_inline_key(const inode_rec *r);
/* Sets INODE_F_APART on r as a record written now carries it: on an INLINE
 * regular file, off on every other inode. Whoever writes a record calls it
 * on the copy it then caches, so the cached record equals the stored. */
void inode_rec_place(inode_rec *r);

/* Writes r's header (version 3) to out; returns its length. */
size_t inode_encode_hdr(const inode_rec *r, char out[INODE_HDR_MAX]);
/* Parses a record value of any version; payload and plen get the bytes
 * after the header. False for a short, malformed or unknown record. */
bool inode_decode(const char *v, size_t len, inode_rec *r, const char **payload, size_t *plen);

/* --------------------------------------------------------------- dirent */

/* Value of a 'D' key: the entry's inode, its type and its cookie. */
typedef struct dirent_val {
    uint64_t ino;
    uint8_t type; /* mode >> 12 */
    uint64_t cookie;
} dirent_val;

#define DIRENT_VAL_LEN 17
void dirent_encode(const dirent_val *d, char out[DIRENT_VAL_LEN]);
bool dirent_decode(const char *v, size_t len, dirent_val *d);

/* Value of a 'C' key: inode, type, then the name (so readdir is one scan). */
#define COOKIE_VAL_HDR 9
/* out must hold COOKIE_VAL_HDR + nlen bytes; returns the length. */
size_t cookie_encode(uint64_t ino, uint8_t type, const char *name, size_t nlen, char *out);
bool cookie_decode(const char *v, size_t len, uint64_t *ino, uint8_t *type, const char **name,
                   size_t *nlen);

#endif
