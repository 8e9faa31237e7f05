/* SPDX-License-Identifier: MIT */
/*
 * A protobuf writer, enough for Perfetto traces: varints, fixed64, doubles, strings and
 * nested messages into a growing buffer. A nested message's length is written as a padded
 * four-byte varint and filled in when the message ends (as Perfetto's own protozero does),
 * so nothing is encoded twice. Messages are at most 256 MiB.
 */
#ifndef GS_CORE_PB_H
#define GS_CORE_PB_H

#include <stddef.h>
#include <linux/types.h>

struct pb {
	unsigned char *buf;
	size_t len, cap;
};

void pb_reset(struct pb *b);
void pb_free(struct pb *b);
void pb_varint(struct pb *b, unsigned int field, __u64 v);
void pb_sint(struct pb *b, unsigned int field, __s64 v); /* int64: two's complement varint */
void pb_fixed64(struct pb *b, unsigned int field, __u64 v);
void pb_double(struct pb *b, unsigned int field, double v);
void pb_bytes(struct pb *b, unsigned int field, const void *p, size_t n);
void pb_string(struct pb *b, unsigned int field, const char *s);
/* Open a nested message; returns the token pb_end wants. */
size_t pb_begin(struct pb *b, unsigned int field);
void pb_end(struct pb *b, size_t token);

#endif
