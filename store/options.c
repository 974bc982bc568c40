/* options.c — the defaults of lsm_options and lsm_read_options (lsm.h). */
#include "lsm.h"

#include <string.h>

void lsm_options_init(lsm_options *o)
{
    memset(o, 0, sizeof(*o));
    o->write_buffer_size = 8u << 20;
    o->max_memtable_bytes = 64u << 20;
    o->block_size = 4096;
    o->block_cache_size = 32u << 20;
    o->bloom_bits_per_key = 10;
    o->compression = true;
    o->target_file_size = 4u << 20;
    o->level1_bytes = 10u << 20;
    o->max_open_files = 1000;
    o->mapped_reads = true;
    o->direct_table_writes = true;
    o->group_commit_delay_us = 40;
    o->deferred_max_age_ms = 5000;
    o->full_disk_retry_us = 100000;
    o->table_partition = NULL;
    o->table_segment = NULL;
    o->table_segment_bytes = 1u << 20;
    o->env = NULL;
}

void lsm_read_options_init(lsm_read_options *o)
{
    o->snapshot = NULL;
    o->verify_checksums = false;
    o->fill_cache = true;
}
