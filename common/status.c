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
    case RDKV_ESESSION: return "session unknown to its node (expired or restarted)";
    case RDKV_EPERM: return "not permitted (no valid credential, or not allowed to this role)";
    case RDKV_ENOHOST: return "host name does not resolve";
    }
    return "unknown status";
}

const char *rdkv_status_name(int status)
{
    switch (status) {
    case RDKV_OK: return "RDKV_OK";
    case RDKV_EINVAL: return "RDKV_EINVAL";
    case RDKV_ENOMEM: return "RDKV_ENOMEM";
    case RDKV_ENOTFOUND: return "RDKV_ENOTFOUND";
    case RDKV_ETIMEDOUT: return "RDKV_ETIMEDOUT";
    case RDKV_EUNAVAILABLE: return "RDKV_EUNAVAILABLE";
    case RDKV_EACCESS: return "RDKV_EACCESS";
    case RDKV_EFLUSHED: return "RDKV_EFLUSHED";
    case RDKV_EPROTO: return "RDKV_EPROTO";
    case RDKV_ETOOBIG: return "RDKV_ETOOBIG";
    case RDKV_EBUSY: return "RDKV_EBUSY";
    case RDKV_ENOHANDLER: return "RDKV_ENOHANDLER";
    case RDKV_EIO: return "RDKV_EIO";
    case RDKV_ENOTSUP: return "RDKV_ENOTSUP";
    case RDKV_ESHUTDOWN: return "RDKV_ESHUTDOWN";
    case RDKV_ENOSPC: return "RDKV_ENOSPC";
    case RDKV_EABORTED: return "RDKV_EABORTED";
    case RDKV_EUNKNOWN: return "RDKV_EUNKNOWN";
    case RDKV_ECONFIG: return "RDKV_ECONFIG";
    case RDKV_EEXIST: return "RDKV_EEXIST";
    case RDKV_ESESSION: return "RDKV_ESESSION";
    case RDKV_EPERM: return "RDKV_EPERM";
    case RDKV_ENOHOST: return "RDKV_ENOHOST";
    }
    return "RDKV_E?";
}
