/* Test clusters inside one process: n nodes, each a full fabric (its own service thread, arena and
 * listening socket on an ephemeral 127.0.0.1 port), talking only through the transport. */
#ifndef RDKV_TESTENV_H
#define RDKV_TESTENV_H

#include "rdma/fabric.h"

#include <stdbool.h>
#include <stddef.h>

#define TENV_MAX 8

struct tenv {
    unsigned n;
    struct cluster_config cc;
    struct fabric *f[TENV_MAX];
};

/* Transport used by tenv_start: from RDKV_TEST_TRANSPORT or --transport (default soft). */
extern enum fab_transport tenv_transport;
/* --quick: the smaller configuration (the verbs guest runs every suite so). */
extern bool tenv_quick;
/* --bindir DIR: where kvserver and the other programs are (tests that start processes). */
extern const char *tenv_bindir;

/* Whether the run is slow for reasons of its own: the emulated verbs guest, where one round trip
 * can take milliseconds, or a sanitizer build (5-15x slower, and run by CI beside other tests).
 * Scenarios whose own holds must not outlive a lease take a longer one there. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TENV_SANITIZED true
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define TENV_SANITIZED true
#endif
#endif
#ifndef TENV_SANITIZED
#define TENV_SANITIZED false
#endif
static inline bool tenv_slow(void) { return tenv_transport == FAB_VERBS || TENV_SANITIZED; }

/* Parses and removes the options every test binary takes (--transport T, --quick, --bindir D).
 * Returns new argc. */
int tenv_args(int argc, char **argv);

struct test_case;
/* The main of a test binary: ignores SIGPIPE, takes the common options, prints "<what> on the
 * <transport> transport", runs the cases named on the command line (all by default). */
int tenv_main(int argc, char **argv, const char *what, const struct test_case *cases, size_t n);

/* Makes a fresh directory $TMPDIR/<prefix>-XXXXXX (TMPDIR unset: /tmp; the verbs guest's /tmp
 * is read-only) into buf. 0, or -1 with errno set. */
int tenv_mkdtemp(char *buf, size_t cap, const char *prefix);
/* This process's test credentials (rdma/auth.h), made once in a temporary folder that is removed
 * at exit: the node secret file and the client secret file beside it. RDKV_SECRET_FILE is set to
 * the client file, so rdkv_connect finds it. NULL when they could not be made (said on stderr). */
const char *tenv_secret_file(void);
const char *tenv_client_secret_file(void);

/* tweak (may be NULL) adjusts each node's options before it opens. */
int tenv_start(struct tenv *e, unsigned n, uint64_t arena_size,
               void (*tweak)(struct fab_opts *o, unsigned node));
void tenv_stop(struct tenv *e);
/* Closes one node (as if its process died: its sockets close). */
void tenv_kill(struct tenv *e, unsigned node);

#endif
