/* Logging implementation: one write(2) per line so lines from threads never interleave. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static char log_tag[64] = "rdkv";
static int log_level = -1;
static int log_time = -1; /* RDKV_LOG_TIME=1: each line begins with its UTC time */

void log_set_tag(const char *tag)
{
    snprintf(log_tag, sizeof log_tag, "%s", tag);
}

void log_set_level(enum log_level level)
{
    __atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

enum log_level log_get_level(void)
{
    int l = __atomic_load_n(&log_level, __ATOMIC_RELAXED);
    if (l >= 0) return (enum log_level)l;
    const char *e = getenv("RDKV_LOG");
    l = LOG_WARN;
    if (e) {
        if (!strcasecmp(e, "error")) l = LOG_ERROR;
        else if (!strcasecmp(e, "warn")) l = LOG_WARN;
        else if (!strcasecmp(e, "info")) l = LOG_INFO;
        else if (!strcasecmp(e, "debug")) l = LOG_DEBUG;
    }
    __atomic_store_n(&log_level, l, __ATOMIC_RELAXED);
    return (enum log_level)l;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (level > log_get_level()) return;
    static const char *names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    int n = 0;
    int t = __atomic_load_n(&log_time, __ATOMIC_RELAXED);
    if (t < 0) {
        const char *e = getenv("RDKV_LOG_TIME");
        t = e && !strcmp(e, "1");
        __atomic_store_n(&log_time, t, __ATOMIC_RELAXED);
    }
    if (t) {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000);
    }
    n += snprintf(line + n, sizeof line - (size_t)n, "%s: %s: ", log_tag, names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) m = 0;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

int log_reason(char *err, size_t errcap, int rc, const char *fmt, ...)
{
    if (err && errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return rc;
}
