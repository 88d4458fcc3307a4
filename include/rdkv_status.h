/* rdkv status codes, shared by every layer and by the public API.
 * 0 is success; every failure is a negative RDKV_E* value with a fixed meaning and a message
 * from rdkv_strerror(). The numbers are part of the ABI: never renumber, only append. */
#ifndef RDKV_STATUS_H
#define RDKV_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rdkv_status {
    RDKV_OK = 0,
    RDKV_EINVAL = -1,         /* invalid argument */
    RDKV_ENOMEM = -2,         /* out of memory */
    RDKV_ENOTFOUND = -3,      /* no such key, region, node or handler target */
    RDKV_ETIMEDOUT = -4,      /* the operation did not complete before its deadline */
    RDKV_EUNAVAILABLE = -5,   /* the peer is unreachable or dead */
    RDKV_EACCESS = -6,        /* remote access error: out of bounds or misaligned */
    RDKV_EFLUSHED = -7,       /* flushed: an earlier operation on the same endpoint failed */
    RDKV_EPROTO = -8,         /* malformed or unexpected message from the network */
    RDKV_ETOOBIG = -9,        /* a key, value, message or operation exceeds its limit */
    RDKV_EBUSY = -10,         /* a bounded resource is exhausted right now; retry later */
    RDKV_ENOHANDLER = -11,    /* no RPC handler is registered for that message type */
    RDKV_EIO = -12,           /* an operating-system I/O call failed */
    RDKV_ENOTSUP = -13,       /* not supported by this build, transport or device */
    RDKV_ESHUTDOWN = -14,     /* the node or fabric is shutting down */
    RDKV_ENOSPC = -15,        /* the arena or a table is full */
    RDKV_EABORTED = -16,      /* transaction aborted (conflict or lock timeout); retryable */
    RDKV_EUNKNOWN = -17,      /* commit result unknown: it may or may not have taken effect */
    RDKV_ECONFIG = -18,       /* bad configuration */
    RDKV_EEXIST = -19,        /* already exists */
    RDKV_ESESSION = -20,      /* the session is unknown to its node (expired or restarted) */
    RDKV_EPERM = -21,         /* not permitted: no valid credential, or not allowed to this
                                 connection's role (docs/security.md) */
    RDKV_ENOHOST = -22,       /* a host name does not resolve (no such host) */
} rdkv_status;

#define RDKV_STATUS_MIN (-22)

/* A static, human-readable message for any status value (unknown values included). */
const char *rdkv_strerror(int status);
/* The constant's name ("RDKV_EABORTED"), or "RDKV_E?" for unknown values. */
const char *rdkv_status_name(int status);

#ifdef __cplusplus
}
#endif
#endif
