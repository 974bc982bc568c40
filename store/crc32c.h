/*
 * crc32c.h — CRC32C (Castagnoli), with the SSE4.2 instruction where the CPU
 * has it and a table otherwise, plus the masking LevelDB uses for CRCs that
 * are stored next to the data they cover.
 */
#ifndef LSM_CRC32C_H
#define LSM_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC32C of data, continuing from crc (0 to start). */
uint32_t crc32c_extend(uint32_t crc, const void *data, size_t n);
/* The table-driven path whatever the CPU (for tests of both paths). */
uint32_t crc32c_extend_portable(uint32_t crc, const void *data, size_t n);

static inline uint32_t crc32c(const void *data, size_t n)
{
    return crc32c_extend(0, data, n);
}

/* A CRC of a string that contains CRCs is weak; store masked CRCs. */
static inline uint32_t crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
static inline uint32_t crc32c_unmask(uint32_t masked)
{
    uint32_t rot = masked - 0xa282ead8u;
    return (rot >> 17) | (rot << 15);
}

#endif
