// SPDX-License-Identifier: MIT
#include <stdint.h>

#include "core/hist.h"

/* Bucket i < 16 holds the value i. Above, octave o (values in [2^o, 2^(o+1)), o >= 4)
 * holds 16 buckets of width 2^(o-4), starting at index 16 * (o - 3). */
static unsigned int bucket_of(__u64 v)
{
	unsigned int o, idx;

	if (v < HIST_SUB)
		return (unsigned int)v;
	o = 63 - (unsigned int)__builtin_clzll(v);
	idx = HIST_SUB * (o - 3) + (unsigned int)((v >> (o - 4)) & (HIST_SUB - 1));
	return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* The smallest value of bucket i, and its width. */
static __u64 bucket_low(unsigned int i, __u64 *width)
{
	unsigned int o;

	if (i < HIST_SUB) {
		*width = 1;
		return i;
	}
	o = i / HIST_SUB + 3;
	*width = 1ULL << (o - 4);
	return (1ULL << o) + (__u64)(i % HIST_SUB) * *width;
}

void hist__add(struct hist *h, __u64 v)
{
	unsigned int i = bucket_of(v);

	if (h->b[i] != UINT32_MAX)
		h->b[i]++;
	h->count++;
}

void hist__merge(struct hist *into, const struct hist *from)
{
	for (unsigned int i = 0; i < HIST_BUCKETS; i++) {
		__u64 n = (__u64)into->b[i] + from->b[i];

		into->b[i] = n > UINT32_MAX ? UINT32_MAX : (__u32)n;
	}
	into->count += from->count;
}

__u64 hist__quantile(const struct hist *h, double q)
{
	__u64 total = 0, seen = 0, rank, width, low;

	for (unsigned int i = 0; i < HIST_BUCKETS; i++)
		total += h->b[i];
	if (!total)
		return 0;
	if (q < 0)
		q = 0;
	rank = (__u64)(q * (double)(total - 1)); /* 0-based rank of the sample wanted */
	for (unsigned int i = 0; i < HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen > rank) {
			low = bucket_low(i, &width);
			return low + width / 2;
		}
	}
	low = bucket_low(HIST_BUCKETS - 1, &width);
	return low + width / 2;
}
