/* PLACEHOLDER during bring-up: replaced by the real verbs backend. */
#include "rdma/internal.h"

bool verbs_available(void) { return false; }
int verbs_node_open(struct fabric *f, char *err, size_t errcap) { (void)f; (void)err; (void)errcap; return RDKV_ENOTSUP; }
void verbs_node_close(struct fabric *f) { (void)f; }
int verbs_ctx_init(struct fab_ctx *c) { (void)c; return RDKV_ENOTSUP; }
void verbs_ctx_fini(struct fab_ctx *c) { (void)c; }
int verbs_post(struct fab_ctx *c, unsigned slot) { (void)c; (void)slot; return RDKV_ENOTSUP; }
int verbs_poll(struct fab_ctx *c) { (void)c; return 0; }
void verbs_arm(struct fab_ctx *c) { (void)c; }
void verbs_on_channel(struct fab_ctx *c, int res) { (void)c; (void)res; }
void verbs_conn_gone(struct fabric *f, uint64_t id) { (void)f; (void)id; }
void verbs_peer_down(struct fab_ctx *c, uint16_t node) { (void)c; (void)node; }
