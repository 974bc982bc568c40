/*
 * siphash.h — SipHash-1-3 (Aumasson and Bernstein's keyed PRF, one
 * compression round and three finalization rounds, as CPython, Rust's
 * HashMap and the Linux kernel's hsiphash use for hash tables): without
 * the 128-bit key nobody can choose inputs that collide, so a table keyed
 * with a secret random key has random-input probe lengths whatever names
 * an attacker picks.
 */
#ifndef FS_SIPHASH_H
#define FS_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct siphash_key {
    uint64_t k0, k1;
} siphash_key;

/* SipHash-1-3 of the n bytes at p under key k. */
uint64_t siphash13(const siphash_key *k, const void *p, size_t n);

/* A key from getrandom(2) (the kernel's CSPRNG); 0, or an errno when the
 * kernel gives no random bytes (then *k is left as it was). */
int siphash_random_key(siphash_key *k);

#endif
