/* The row heap: a jemalloc arena whose extent hooks carve every extent (jemalloc's own metadata
 * included) out of one caller-given range of memory, so that nothing it hands out ever lies
 * outside that range. Allocation failure is a NULL, never a crash. Thread-safe. docs/storage.md */
#ifndef RDKV_STORAGE_HEAP_H
#define RDKV_STORAGE_HEAP_H

#include <stddef.h>
#include <stdint.h>

/* The least memory a heap can run on: jemalloc's first metadata block is 2 MiB, aligned to
 * 2 MiB, and the range itself is only page aligned. */
#define HEAP_MIN_BYTES (6ull << 20)

struct heap;

/* Creates a jemalloc arena over [base, base + size) (base page aligned, size a multiple of the
 * page). 0, or RDKV_ENOMEM / RDKV_ENOSPC with a reason in err. */
int heap_open(void *base, uint64_t size, struct heap **out, char *err, size_t errcap);
/* Destroys the arena (every allocation in it is gone) and frees the heap. */
void heap_close(struct heap *h);

/* n > 0 bytes aligned to align (a power of two; 0: jemalloc's default), or NULL when the range
 * is exhausted. */
void *heap_alloc(struct heap *h, size_t n, size_t align);
void heap_free(struct heap *h, void *p);

/* Bytes jemalloc has taken from the range (extents handed out and not destroyed). */
uint64_t heap_used(struct heap *h);

#endif
