/* SPDX-License-Identifier: MIT */
/*
 * Log-linear histograms of nanosecond durations, for percentiles: each power of two is cut
 * into 16 equal sub-buckets, so a percentile is known to within 1/32 (3%) of its value,
 * in a fixed 2.8 KiB whatever the number of samples. Values from 0 to 2^44 ns (4.9 hours);
 * larger ones count in the last bucket.
 */
#ifndef GS_CORE_HIST_H
#define GS_CORE_HIST_H

#include <linux/types.h>

#define HIST_SUB     16
#define HIST_OCTAVES 44
#define HIST_BUCKETS (HIST_SUB * (HIST_OCTAVES - 3)) /* values below 16 are exact */

struct hist {
	__u64 count;
	__u32 b[HIST_BUCKETS];
};

void hist__add(struct hist *h, __u64 v);
void hist__merge(struct hist *into, const struct hist *from);
/* The value at quantile q (0..1): the middle of its bucket; 0 for an empty histogram. */
__u64 hist__quantile(const struct hist *h, double q);

#endif
