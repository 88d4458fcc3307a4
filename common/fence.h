/* A full memory fence (store->load included): C11's seq_cst thread fence, mfence on x86. The
 * soft NIC needs it between a WRITE's or an atomic's store and the next request's loads, as a
 * real NIC gets it from PCIe ordering (docs/fabric.md); the locks need it where Peterson-style
 * handshakes store a flag and then load the other side's. ThreadSanitizer does not model
 * fences (its build silences GCC's -Wtsan about them); it sees these orders through the
 * atomics around them. */
#ifndef RDKV_FENCE_H
#define RDKV_FENCE_H

#include <stdatomic.h>

static inline void full_fence(void) { atomic_thread_fence(memory_order_seq_cst); }

#endif
