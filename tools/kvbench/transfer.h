/* The transfer workload: N accounts with a balance each; an operation moves a random amount
 * between two random accounts in one serializable transaction, and the check after the run
 * says whether the total is still N x the initial balance. The same draw and the same check
 * run on rdkv (wl_transfer, a workload of workload.h) and on the peers (peer.h). */
#ifndef RDKV_KVBENCH_TRANSFER_H
#define RDKV_KVBENCH_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#define XFER_INITIAL 1000   /* every account's balance after the load */
#define XFER_MAX_AMOUNT 100 /* an amount is 1..this, at most the source's balance */
#define XFER_KEY_MAX 24
#define XFER_CFG_LEN 24

/* The config bytes for the runner. */
int xfer_cfg_pack(uint64_t accounts, uint32_t nodes, uint8_t out[XFER_CFG_LEN]);
/* Account i's key ("acct" and 10 digits); its length. */
int xfer_key(uint64_t i, char *buf, size_t cap);
/* The next transfer: two different accounts and an amount (the caller moves at most the
 * source's balance). */
void xfer_draw(uint64_t *rng, uint64_t accounts, uint64_t *from, uint64_t *to, int64_t *amount);
/* The check's report line for a total over accounts; 0 when it holds, 1 when not. */
int xfer_report(uint64_t accounts, uint64_t found, int64_t total, char *out, size_t cap);

#endif
