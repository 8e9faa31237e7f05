/* SPDX-License-Identifier: MIT */
#ifndef GS_CORE_UTIL_H
#define GS_CORE_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define GS_MIN(a, b)  ((a) < (b) ? (a) : (b))
#define GS_CMP(a, b)  ((a) < (b) ? -1 : (a) > (b)) /* for qsort: -1, 0 or 1 */
#define GS_MAX(a, b)  ((a) > (b) ? (a) : (b))
#define GS_STR_(x)    #x
#define GS_STR(x)     GS_STR_(x)

/* Exit codes of every command (DESIGN.md). */
enum {
	GS_EXIT_OK = 0,
	GS_EXIT_USAGE = 1,
	GS_EXIT_RUNTIME = 2
};

/* Messages on stderr, prefixed "gpuscope: ". */
void gs_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gs_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gs_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gs_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gs_set_verbosity(int level);
int gs_verbosity(void);

#ifndef GS_IN_TARGET
/* gpuscope's own allocation, which never returns NULL: out of memory is a clean exit 2.
 * Not in the in-process library (GS_IN_TARGET), where nothing may end the program: there,
 * core/alloc.h. */
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
void gs_out_of_memory(size_t n) __attribute__((noreturn));
#endif

/* Raise the soft limit of open files to `want` (0: to the hard limit), as far as the hard
 * limit goes. */
/* n bytes written to fd (out) or read from it, in as many calls as it takes: 0, or -1 (an
 * error, or the end of the file first). */
int gs_io_full(int fd, void *p, size_t n, bool out);
void gs_raise_fd_limit(unsigned long want);
/* One of gpuscope's own fixed tables is full (n entries of max): a bug in gpuscope, not
 * in what it reads; says so and aborts. */
void gs_check_room(unsigned int n, unsigned int max, const char *what);

__u64 gs_now_ns(void);	    /* CLOCK_MONOTONIC, the event clock */
__u64 gs_realtime_ns(void); /* CLOCK_REALTIME */

/* Human formats; each returns buf. */
char *fmt_bytes(char *buf, size_t n, double bytes); /* "1.50 GiB" */
/* A recorded string for a terminal: control characters shown as '?', cut to n - 1 bytes. */
const char *safe_text(const char *s, char *buf, size_t n);
/* qsort's comparison of __u64 values, ascending. */
int u64_cmp(const void *a, const void *b);
/* FNV-1a of a string, from h (0xcbf29ce484222325 to start); a string ends with a 0xff mixed
 * in, so that strings hashed one after another do not run together. */
__u64 gs_str_hash(__u64 h, const char *s);
char *fmt_dur(char *buf, size_t n, double ns);		 /* "12.3 ms" */
char *fmt_count(char *buf, size_t n, double v);		 /* "12.3k" */
char *fmt_rate(char *buf, size_t n, double bytes_per_s); /* "12.3 GB/s" */
/* Bytes over a time as a rate; "-" without time. */
char *fmt_rate_over(char *buf, size_t n, __u64 bytes, __u64 ns);

/* Parse a non-negative integer with an optional K/M/G (binary) suffix. */
int parse_size(const char *s, __u64 *out);
int parse_u32(const char *s, __u32 *out);
int parse_seconds(const char *s, double *out);

/* Growable string. Out of memory: gpuscope exits (see xmalloc); in the in-process library
 * the string keeps what it had and `oom` is set, for its user to check once at the end. */
struct strbuf {
	char *buf;
	size_t len, cap;
	bool oom;
};
void sb_printf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(struct strbuf *sb, const char *fmt, va_list ap);
void sb_putc(struct strbuf *sb, char c);
void sb_puts(struct strbuf *sb, const char *s);
void sb_putn(struct strbuf *sb, const char *s, size_t n);
void sb_reset(struct strbuf *sb);
void sb_free(struct strbuf *sb);

/* Copy at most n-1 bytes and NUL-terminate; returns dst. */
char *gs_strlcpy(char *dst, const char *src, size_t n);

/* size bytes of fd, NUL-terminated: malloc'ed, or NULL if they could not all be read. */
char *gs_read_all(int fd, size_t size);

#endif
