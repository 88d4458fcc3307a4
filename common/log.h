/* Logging to stderr with a program tag and a level chosen by RDKV_LOG (error, warn, info, debug).
 * Messages are single lines; the default level is warn, so a healthy node prints nothing.
 * RDKV_LOG_TIME=1 begins each line with its UTC time of day, to the millisecond. */
#ifndef RDKV_LOG_H
#define RDKV_LOG_H

#include <stddef.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Sets the tag printed before every line ("kvserver[2]"). Call once at start-up. */
void log_set_tag(const char *tag);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes a one-line reason into err[errcap] (nothing when err is NULL) and returns rc: the
 * `return log_reason(err, errcap, RDKV_E..., "...")` of functions that explain their failures. */
int log_reason(char *err, size_t errcap, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_get_level() >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__);                        \
    } while (0)

#endif
