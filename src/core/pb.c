// SPDX-License-Identifier: MIT
/* Protobuf writer (see pb.h). */
#include <stdlib.h>
#include <string.h>

#include "core/pb.h"
#include "core/util.h"

enum {
	WT_VARINT = 0,
	WT_I64 = 1,
	WT_LEN = 2
};

static void put(struct pb *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = GS_MAX(b->cap * 2, b->len + n + 256);
		b->buf = xrealloc(b->buf, b->cap);
	}
	memcpy(b->buf + b->len, p, n);
	b->len += n;
}

static void raw_varint(struct pb *b, __u64 v)
{
	unsigned char tmp[10];
	size_t n = 0;

	do {
		tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	put(b, tmp, n);
}

static void key(struct pb *b, unsigned int field, unsigned int wt)
{
	raw_varint(b, (__u64)field << 3 | wt);
}

void pb_reset(struct pb *b)
{
	b->len = 0;
}

void pb_free(struct pb *b)
{
	free(b->buf);
	b->buf = NULL;
	b->len = b->cap = 0;
}

void pb_varint(struct pb *b, unsigned int field, __u64 v)
{
	key(b, field, WT_VARINT);
	raw_varint(b, v);
}

void pb_sint(struct pb *b, unsigned int field, __s64 v)
{
	pb_varint(b, field, (__u64)v);
}

void pb_fixed64(struct pb *b, unsigned int field, __u64 v)
{
	unsigned char le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(v >> (8 * i));
	key(b, field, WT_I64);
	put(b, le, sizeof(le));
}

void pb_double(struct pb *b, unsigned int field, double v)
{
	__u64 bits;

	memcpy(&bits, &v, sizeof(bits));
	pb_fixed64(b, field, bits);
}

void pb_bytes(struct pb *b, unsigned int field, const void *p, size_t n)
{
	key(b, field, WT_LEN);
	raw_varint(b, n);
	put(b, p, n);
}

void pb_string(struct pb *b, unsigned int field, const char *s)
{
	pb_bytes(b, field, s, strlen(s));
}

size_t pb_begin(struct pb *b, unsigned int field)
{
	static const unsigned char pad[4] = { 0x80, 0x80, 0x80, 0x00 };

	key(b, field, WT_LEN);
	put(b, pad, sizeof(pad));
	return b->len;
}

void pb_end(struct pb *b, size_t token)
{
	size_t n = b->len - token;
	unsigned char *p = b->buf + token - 4;

	if (n >= 1u << 28)
		n = (1u << 28) - 1; /* (callers keep messages far smaller) */
	p[0] = (unsigned char)(0x80 | (n & 0x7f));
	p[1] = (unsigned char)(0x80 | ((n >> 7) & 0x7f));
	p[2] = (unsigned char)(0x80 | ((n >> 14) & 0x7f));
	p[3] = (unsigned char)((n >> 21) & 0x7f);
}
