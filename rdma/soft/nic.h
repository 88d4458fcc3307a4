/* The soft transport's NIC, the target side of its one-sided operations: soft_nic_exec is the
 * soft backend's exec hook (core.h says what it promises). It runs on the node's service thread,
 * one request at a time, in arrival order. */
#ifndef RDKV_RDMA_SOFT_NIC_H
#define RDKV_RDMA_SOFT_NIC_H

#include "rdma/core.h"

void soft_nic_exec(struct fabric *f, struct io_uring *ring, struct conn *cn, bool *qp_error,
                   int refuse, const struct wire_hdr *h, const uint8_t *body);

#endif
