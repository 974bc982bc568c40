/*
 * fuse_kernel_abi.h — the parts of the kernel's FUSE-over-io_uring interface
 * the transport speaks (include/uapi/linux/fuse.h 7.42): Debian 12's
 * <linux/fuse.h> is 7.38 and has none of them, so they are repeated here,
 * with our own names, and nothing else is.
 */
#ifndef FS_TRANSPORT_FUSE_KERNEL_ABI_H
#define FS_TRANSPORT_FUSE_KERNEL_ABI_H

#include <stdint.h>

#define UR_OVER_IO_URING (1ull << 41) /* INIT flag: the daemon serves the ring */
#define UR_INIT_EXT (1u << 30)        /* INIT: flags2 is valid */
#define UR_MAX_PAGES (1u << 22)       /* INIT: max_pages is valid */
#define UR_CMD_REGISTER 1u
#define UR_CMD_COMMIT_AND_FETCH 2u
#define UR_HEADER_SZ 128    /* in_out: fuse_in_header in, fuse_out_header out */
#define UR_OP_SZ 128        /* op_in: the request's first argument */
#define UR_MIN_PAYLOAD 8192 /* FUSE_MIN_READ_BUFFER */

struct ur_ent_in_out {
    uint64_t flags;
    uint64_t commit_id; /* the request's unique */
    uint32_t payload_sz;
    uint32_t padding;
    uint64_t reserved;
};

/* An entry's header buffer (iov[0] of its REGISTER). */
struct ur_req_header {
    char in_out[UR_HEADER_SZ];
    char op_in[UR_OP_SZ];
    struct ur_ent_in_out ring_ent_in_out;
};

/* In the 80-byte command area of a 128-byte SQE. */
struct ur_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};

/* The layout of fuse_init_out at protocol 7.36+ (flags2 is what 7.38's
 * header already has; the struct is repeated so the offsets are ours). */
struct ur_init_out {
    uint32_t major, minor, max_readahead, flags;
    uint16_t max_background, congestion_threshold;
    uint32_t max_write, time_gran;
    uint16_t max_pages, map_alignment;
    uint32_t flags2;
};

#endif
