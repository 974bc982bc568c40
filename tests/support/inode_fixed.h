/*
 * inode_fixed.h — the inode record header as lsmfs wrote it before the
 * compact form (versions 1 and 2: fixed fields, schema.h), so tests can
 * build the records of older stores.
 */
#ifndef TESTS_INODE_FIXED_H
#define TESTS_INODE_FIXED_H

#include "schema.h"

/* Writes r's header in version 1 (no chunk count) or 2; returns its
 * length (INODE_HDR_V1_LEN or INODE_HDR_V2_LEN). */
size_t inode_encode_fixed(const inode_rec *r, int version, char out[INODE_HDR_V2_LEN]);

#endif
