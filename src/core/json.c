// SPDX-License-Identifier: MIT
#include <math.h>
#include <string.h>

#include "core/json.h"

void json_init(struct json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if invalid. */
static int utf8_len(const unsigned char *s)
{
	int n;
	unsigned int cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void json_write_string(FILE *f, const char *str)
{
	static const char *const escapes[128] = {
		['"'] = "\\\"", ['\\'] = "\\\\", ['\n'] = "\\n", ['\r'] = "\\r", ['\t'] = "\\t"
	};
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', f);
	while (*s) {
		int n = utf8_len(s);

		if (n == 0) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		if (n > 1) {
			fwrite(s, 1, (size_t)n, f);
			s += n;
			continue;
		}
		if (*s < sizeof(escapes) / sizeof(escapes[0]) && escapes[*s])
			fputs(escapes[*s], f);
		else if (*s < 0x20 || *s == 0x7f)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
		s++;
	}
	fputc('"', f);
}

static void indent(struct json *j)
{
	fputc('\n', j->f);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

static void prefix(struct json *j, const char *key)
{
	if (j->depth > 0) {
		if (j->need_comma[j->depth])
			fputc(',', j->f);
		j->need_comma[j->depth] = true;
		indent(j);
	}
	if (key) {
		json_write_string(j->f, key);
		fputs(": ", j->f);
	}
}

static void open_(struct json *j, const char *key, char c)
{
	prefix(j, key);
	fputc(c, j->f);
	if (j->depth + 1 < JSON_MAX_DEPTH)
		j->depth++;
	j->need_comma[j->depth] = false;
}

static void close_(struct json *j, char c)
{
	bool had = j->need_comma[j->depth];

	if (j->depth > 0)
		j->depth--;
	if (had)
		indent(j);
	fputc(c, j->f);
}

void json_obj_begin(struct json *j, const char *key)
{
	open_(j, key, '{');
}

void json_obj_end(struct json *j)
{
	close_(j, '}');
}

void json_arr_begin(struct json *j, const char *key)
{
	open_(j, key, '[');
}

void json_arr_end(struct json *j)
{
	close_(j, ']');
}

void json_str(struct json *j, const char *key, const char *v)
{
	prefix(j, key);
	if (v)
		json_write_string(j->f, v);
	else
		fputs("null", j->f);
}

void json_u64s(struct json *j, const void *base, const struct jfield *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		json_u64(j, f[i].key, *(const __u64 *)((const char *)base + f[i].off));
}

void json_u64(struct json *j, const char *key, __u64 v)
{
	prefix(j, key);
	fprintf(j->f, "%llu", (unsigned long long)v);
}

void json_i64(struct json *j, const char *key, __s64 v)
{
	prefix(j, key);
	fprintf(j->f, "%lld", (long long)v);
}

void json_f64(struct json *j, const char *key, double v)
{
	prefix(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.6g", v);
	else
		fputs("null", j->f);
}

void json_bool(struct json *j, const char *key, bool v)
{
	prefix(j, key);
	fputs(v ? "true" : "false", j->f);
}

void json_hex(struct json *j, const char *key, __u64 v)
{
	prefix(j, key);
	fprintf(j->f, "\"0x%llx\"", (unsigned long long)v);
}

void json_finish(struct json *j)
{
	fputc('\n', j->f);
}

void json_rows(struct json *j, const char *key, const void *rows, size_t n, size_t size,
	       void (*row)(struct json *j, const void *r))
{
	json_arr_begin(j, key);
	for (size_t i = 0; i < n; i++) {
		json_obj_begin(j, NULL);
		row(j, (const char *)rows + i * size);
		json_obj_end(j);
	}
	json_arr_end(j);
}
