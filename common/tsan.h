/* ThreadSanitizer annotations. TSan cannot see the happens-before that a message through a
 * socket creates (the kernel and io_uring are invisible to it), so the fabric marks it: every
 * send releases and every receive acquires one sync object. Without TSan these are no-ops. */
#ifndef RDKV_TSAN_H
#define RDKV_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define RDKV_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RDKV_TSAN 1
#endif
#endif

#ifdef RDKV_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
extern char tsan_wire_sync;
extern char tsan_ring_sync;
#define TSAN_WIRE_SEND() __tsan_release(&tsan_wire_sync)
#define TSAN_WIRE_RECV() __tsan_acquire(&tsan_wire_sync)
/* liburing maps rings with raw syscalls TSan does not intercept, so a new ring mapped where an
 * old one was looks like a race with the old ring's owner. Tearing a ring down releases, setting
 * one up acquires. */
#define TSAN_RING_GONE() __tsan_release(&tsan_ring_sync)
#define TSAN_RING_NEW() __tsan_acquire(&tsan_ring_sync)
#else
#define TSAN_WIRE_SEND() ((void)0)
#define TSAN_WIRE_RECV() ((void)0)
#define TSAN_RING_GONE() ((void)0)
#define TSAN_RING_NEW() ((void)0)
#endif

#endif
