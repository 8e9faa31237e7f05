/* SPDX-License-Identifier: MIT */
/* A streaming JSON writer: correct escaping (invalid UTF-8 becomes U+FFFD), no allocation. */
#ifndef GS_CORE_JSON_H
#define GS_CORE_JSON_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>

#define JSON_MAX_DEPTH 32

struct json {
	FILE *f;
	int depth;
	bool need_comma[JSON_MAX_DEPTH];
};

void json_init(struct json *j, FILE *f);
/* `key` is NULL inside arrays and for the top-level value. */
void json_obj_begin(struct json *j, const char *key);
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j, const char *key);
void json_arr_end(struct json *j);
void json_str(struct json *j, const char *key, const char *v); /* NULL -> null */
/* Counters of a struct as members: a table of keys and __u64 fields (JU64), written in
 * its order. */
struct jfield {
	const char *key;
	size_t off;
};
#define JU64(type, key, field)                                                           \
	{                                                                                \
		key, offsetof(type, field) +                                             \
			     0 * sizeof(struct {                                         \
				     int u64 : sizeof(((type *)0)->field) == 8 ? 1 : -1; \
			     })                                                          \
	}
#define JSON_U64S(j, base, table) json_u64s(j, base, table, sizeof(table) / sizeof((table)[0]))
void json_u64s(struct json *j, const void *base, const struct jfield *f, size_t n);
void json_u64(struct json *j, const char *key, __u64 v);
void json_i64(struct json *j, const char *key, __s64 v);
void json_f64(struct json *j, const char *key, double v); /* NaN/inf -> null */
void json_bool(struct json *j, const char *key, bool v);
void json_hex(struct json *j, const char *key, __u64 v); /* "0x..." string */
/* key: an array of an object for each of n rows of `size` bytes, each written by row(). */
void json_rows(struct json *j, const char *key, const void *rows, size_t n, size_t size,
	       void (*row)(struct json *j, const void *r));
void json_finish(struct json *j); /* trailing newline */
/* Write s as a JSON string (quotes included). */
void json_write_string(FILE *f, const char *s);

#endif
