/* Fuzz target: the cluster config parser and the command-line value parsers. */
#include "common/config.h"
#include "common/parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cluster_config c;
    char err[256];
    if (cluster_config_parse((const char *)data, size, "fuzz", &c, err, sizeof err) == 0) {
        if (c.n == 0 || !c.nodes) abort();
        for (unsigned i = 0; i < c.n; i++)
            if (c.nodes[i].id != i || c.nodes[i].port == 0) abort();
        cluster_config_free(&c);
    }
    char s[64];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = 0;
    uint64_t u;
    int64_t d;
    double x;
    char host[32];
    uint16_t port;
    parse_size(s, &u);
    parse_duration_ns(s, &d);
    parse_double(s, &x);
    parse_hostport(s, host, sizeof host, &port, 1);
    return 0;
}
