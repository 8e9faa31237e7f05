// SPDX-License-Identifier: MIT
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/util.h"

static int verbosity;

void gs_set_verbosity(int level)
{
	verbosity = level;
}

int gs_verbosity(void)
{
	return verbosity;
}

static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	char line[2048];

	vsnprintf(line, sizeof(line), fmt, ap);
	fprintf(stderr, "gpuscope: %s%s\n", prefix, line);
}

/* The four kinds of message: a prefix, and the least verbosity at which each is said. */
#define GS_MESSAGE(name, prefix, least)  \
	void name(const char *fmt, ...)  \
	{                                \
		va_list ap;              \
                                         \
		if (verbosity < (least)) \
			return;          \
		va_start(ap, fmt);       \
		vmsg(prefix, fmt, ap);   \
		va_end(ap);              \
	}

GS_MESSAGE(gs_err, "", INT_MIN)
GS_MESSAGE(gs_warn, "warning: ", INT_MIN)
GS_MESSAGE(gs_info, "", 0)
GS_MESSAGE(gs_debug, "debug: ", 1)

int gs_io_full(int fd, void *p, size_t n, bool out)
{
	char *c = p;

	while (n) {
		ssize_t k = out ? write(fd, c, n) : read(fd, c, n);

		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

void gs_raise_fd_limit(unsigned long want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (!want || want > rl.rlim_max)
		want = rl.rlim_max;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = want;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static __u64 clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

__u64 gs_now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

__u64 gs_realtime_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

void gs_check_room(unsigned int n, unsigned int max, const char *what)
{
	if (n < max)
		return;
	gs_err("internal: more than %u %s", max, what);
	abort();
}

char *fmt_bytes(char *buf, size_t n, double bytes)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	unsigned int u = 0;

	while (bytes >= 1024 && u + 1 < ARRAY_SIZE(units)) {
		bytes /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%.0f B", bytes);
	else
		snprintf(buf, n, "%.*f %s", bytes < 10 ? 2 : bytes < 100 ? 1 : 0, bytes, units[u]);
	return buf;
}

/* A value in the first unit whose bound it is under (the last: any), scaled by it. */
struct unit {
	double below, scale;
	const char *fmt;
};

static char *scaled(char *buf, size_t n, double v, const struct unit *u)
{
	while (u->below && v >= u->below)
		u++;
	snprintf(buf, n, u->fmt, v / u->scale);
	return buf;
}

static const struct unit durations[] = { { 1e3, 1, "%.0f ns" },
					 { 1e6, 1e3, "%.1f us" },
					 { 1e9, 1e6, "%.1f ms" },
					 { 0, 1e9, "%.2f s" } },
			 counts[] = { { 1e4, 1, "%.0f" },
				      { 1e6, 1e3, "%.1fk" },
				      { 1e9, 1e6, "%.1fM" },
				      { 0, 1e9, "%.1fG" } },
			 rates[] = { { 1e6, 1e3, "%.1f KB/s" },
				     { 1e9, 1e6, "%.1f MB/s" },
				     { 0, 1e9, "%.1f GB/s" } };

char *fmt_dur(char *buf, size_t n, double ns)
{
	return scaled(buf, n, ns, durations);
}

char *fmt_count(char *buf, size_t n, double v)
{
	return scaled(buf, n, v, counts);
}

char *fmt_rate(char *buf, size_t n, double bps)
{
	return scaled(buf, n, bps, rates);
}

char *fmt_rate_over(char *buf, size_t n, __u64 bytes, __u64 ns)
{
	if (ns)
		return fmt_rate(buf, n, (double)bytes * 1e9 / (double)ns);
	snprintf(buf, n, "-");
	return buf;
}

int parse_size(const char *s, __u64 *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (*end)
		return -EINVAL;
	if (shift && v > (~0ULL >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int parse_u32(const char *s, __u32 *out)
{
	unsigned long v;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > 0xffffffffUL)
		return -EINVAL;
	*out = (__u32)v;
	return 0;
}

int parse_seconds(const char *s, double *out)
{
	double v;
	char *end;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v > 0) || v > 1e9)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Room for `extra` more bytes: false (and oom set) if there is none. */
static bool sb_grow(struct strbuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1, cap = sb->cap ? sb->cap : 256;
	char *p;

	if (sb->oom)
		return false;
	if (need <= sb->cap)
		return true;
	while (cap < need)
		cap *= 2;
	p = gs_realloc(sb->buf, cap);
	if (!p) {
#ifndef GS_IN_TARGET
		gs_out_of_memory(cap);
#endif
		sb->oom = true;
		return false;
	}
	sb->buf = p;
	sb->cap = cap;
	return true;
}

void sb_vprintf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list ap2;
	int n;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0 || !sb_grow(sb, (size_t)n))
		return;
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
}

void sb_printf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sb_vprintf(sb, fmt, ap);
	va_end(ap);
}

void sb_putn(struct strbuf *sb, const char *s, size_t n)
{
	if (!sb_grow(sb, n))
		return;
	memcpy(sb->buf + sb->len, s, n);
	sb->len += n;
	sb->buf[sb->len] = 0;
}

void sb_putc(struct strbuf *sb, char c)
{
	sb_putn(sb, &c, 1);
}

void sb_puts(struct strbuf *sb, const char *s)
{
	sb_putn(sb, s, strlen(s));
}

void sb_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = 0;
}

void sb_free(struct strbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = sb->cap = 0;
	sb->oom = false;
}

char *gs_strlcpy(char *dst, const char *src, size_t n)
{
	size_t i = 0;

	if (!n)
		return dst;
	for (; i + 1 < n && src[i]; i++)
		dst[i] = src[i];
	dst[i] = 0;
	return dst;
}

const char *safe_text(const char *s, char *buf, size_t n)
{
	size_t i;

	for (i = 0; s && s[i] && i + 1 < n; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	buf[i] = 0;
	return buf;
}

int u64_cmp(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

__u64 gs_str_hash(__u64 h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return (h ^ 0xff) * 0x100000001b3ULL;
}

char *gs_read_all(int fd, size_t size)
{
	char *b = malloc(size + 1);
	size_t n = 0;

	while (b && n < size) {
		ssize_t r = read(fd, b + n, size - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	if (b && n < size) {
		free(b);
		return NULL;
	}
	if (b)
		b[n] = 0;
	return b;
}
