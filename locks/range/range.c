/* What the range-lock designs share: the registry of designs, space layouts and the client-side
 * designs' view of a space (its header in the owner's arena). */
#include "locks/range/range.h"

#include "common/clock.h"

#include <stdio.h>
#include <string.h>

void range_space_cfg_init(struct range_space_cfg *c)
{
    c->bits = 64;
    c->seg_bits = 8;
    c->tree_depth = 5;
}

static const struct range_algo *const algos[] = {
    &range_combiner_rpc, &range_combiner_rdma, &range_itree, &range_segment, &range_citron,
};

const struct range_algo *range_algo_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
        if (strcmp(algos[i]->name, name) == 0) return algos[i];
    return NULL;
}

const char *range_algo_names(void) { return "combiner-rpc, combiner-rdma, itree, segment, citron"; }

int range_space_open(struct range_handle *h)
{
    if (h->cfg.bits) return 0;
    if (h->space < 1 || h->space > RANGE_MAX_SPACES) return RDKV_EINVAL;
    char name[FAB_REGION_NAME_MAX + 1];
    snprintf(name, sizeof name, "range.%u", (unsigned)h->space);
    rptr base;
    uint64_t size;
    int rc = fab_region_lookup(h->t->c, h->node, name, &base, &size);
    if (rc) return rc;
    struct range_space_hdr hdr;
    rc = fab_read(h->t->c, base, &hdr, sizeof hdr);
    if (rc) return rc;
    if (hdr.magic != RANGE_SPACE_MAGIC || hdr.bits < 1 || hdr.bits > 64 || hdr.seg_bits > 14 ||
        hdr.tree_depth < 1 || hdr.tree_depth > 7)
        return RDKV_EPROTO;
    uint64_t need = 64 + ((uint64_t)1 << hdr.seg_bits) * 64 + hdr.nodes * 64;
    if (size < need) return RDKV_EPROTO;
    h->cfg.seg_bits = hdr.seg_bits;
    h->cfg.tree_depth = hdr.tree_depth;
    h->base = base;
    h->cfg.bits = hdr.bits; /* last: marks the handle as opened */
    return 0;
}

int range_words_check(struct range_handle *h, enum lock_mode mode)
{
    if (mode == LOCK_UPDATE) return RDKV_ENOTSUP;
    if (mode != LOCK_SHARED && mode != LOCK_EXCLUSIVE) return RDKV_EINVAL;
    if (h->mode) return RDKV_EINVAL; /* already held through this handle */
    int rc = range_space_open(h);
    if (rc) return rc;
    if (h->lo > h->hi || (h->cfg.bits < 64 && h->hi >> h->cfg.bits)) return RDKV_EINVAL;
    return 0;
}

int range_words_release(struct range_handle *h)
{
    /* the plain releases in one chain: one round trip for the whole range */
    int ret = lock_dslr_release_all(h->held, h->nheld);
    h->nheld = 0;
    return ret;
}

/* True when some held word's lease has run out (DSLR leases start at each grant). */
static bool lease_gone(const struct range_handle *h)
{
    int64_t now = clock_now_ns();
    for (unsigned i = 0; i < h->nheld; i++) {
        const struct lock_handle *l = &h->held[i];
        if (l->lease_ns && now - l->granted_at >= l->lease_ns) return true;
    }
    return false;
}

int range_words_acquire(struct range_handle *h, const rptr *lines, const uint8_t *modes,
                        unsigned n, int64_t deadline)
{
    if (n > RANGE_MAX_WORDS) return RDKV_EINVAL;
    h->nheld = 0;
    for (unsigned i = 0; i < n; i++) {
        struct lock_handle *l = &h->held[h->nheld];
        lock_handle_init(l, h->t, &lock_dslr, lines[i]);
        int rc = lock_acquire(l, (enum lock_mode)modes[i], deadline);
        if (rc) {
            range_words_release(h); /* their status does not matter: the acquire failed */
            return rc;
        }
        h->nheld++;
    }
    if (lease_gone(h)) {
        range_words_release(h);
        return RDKV_EABORTED;
    }
    return 0;
}
