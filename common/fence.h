/* A full memory fence (store->load included). It is a locked read-modify-write of a private
 * word rather than atomic_thread_fence, which ThreadSanitizer does not support; on x86 a locked
 * RMW orders every earlier store before every later load, exactly like mfence. */
#ifndef RDKV_FENCE_H
#define RDKV_FENCE_H

#include <stdint.h>

static inline void full_fence(void)
{
    static __thread uint64_t fence_word;
    __atomic_exchange_n(&fence_word, 1, __ATOMIC_SEQ_CST);
}

#endif
