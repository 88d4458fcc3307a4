/* Messages for rdkv status codes. */
#include "rdkv_status.h"

const char *rdkv_strerror(int status)
{
    switch (status) {
    case RDKV_OK: return "ok";
    case RDKV_EINVAL: return "invalid argument";
    case RDKV_ENOMEM: return "out of memory";
    case RDKV_ENOTFOUND: return "not found";
    case RDKV_ETIMEDOUT: return "timed out";
    case RDKV_EUNAVAILABLE: return "peer unavailable";
    case RDKV_EACCESS: return "remote access error (out of bounds or misaligned)";
    case RDKV_EFLUSHED: return "flushed after an earlier error on the endpoint";
    case RDKV_EPROTO: return "protocol error";
    case RDKV_ETOOBIG: return "too big";
    case RDKV_EBUSY: return "resource busy";
    case RDKV_ENOHANDLER: return "no handler for the message type";
    case RDKV_EIO: return "I/O error";
    case RDKV_ENOTSUP: return "not supported";
    case RDKV_ESHUTDOWN: return "shutting down";
    case RDKV_ENOSPC: return "no space left";
    case RDKV_EABORTED: return "transaction aborted";
    case RDKV_EUNKNOWN: return "commit result unknown";
    case RDKV_ECONFIG: return "bad configuration";
    case RDKV_EEXIST: return "already exists";
    }
    return "unknown status";
}
