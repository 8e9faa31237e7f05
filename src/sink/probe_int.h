/* SPDX-License-Identifier: MIT */
/*
 * What probe_maps.c and probe_views.c share: reading a tool's maps out of the snapshots.
 * Processes and contexts are added up by kernel name (kernel ids are each process's own).
 */
#ifndef GS_SINK_PROBE_INT_H
#define GS_SINK_PROBE_INT_H

#include <stddef.h>

#include "sink/probe_tools.h"

typedef unsigned long long u64;

#define MAX_KERNELS  1024 /* rows of the tools' per-kernel tables (src/probes/probe.bpf.h) */
#define STRIPES	     16	  /* each row kept this many times over, by SM */
#define RET_BUCKETS  40
#define MAX_SMS	     256
#define SMAP_KERNELS 256

/* Per-kernel accumulators, by name. */
struct krow {
	char *name;
	u64 *v;
};
struct ktab {
	struct krow *r;
	size_t n, width;
};

/* Each kernel of a snapshot with its row: kernels sharing the overflow row are named so. */
#define FOR_KERNELS(s, k) for (const struct snap_kernel *k = (s)->k; k < (s)->k + (s)->nk; k++)

int pt_map_index(const struct probe_results *r, const char *name);
/* Whether n bytes are all zero. */
bool pt_zero(const unsigned char *p, size_t n);
/* The i-th 8-byte value of map m in a context (0 where there is none). */
u64 pt_get64(const struct snap_ctx *c, int m, size_t i);
/* A kernel's row in a tool's per-kernel table (the last row is every kernel past it). */
size_t pt_row_of(unsigned int id, size_t rows);
const char *pt_row_name(const struct snap_kernel *k, size_t rows);
/* A kernel's accumulators in t, made on first use. */
u64 *pt_krow(struct ktab *t, const char *name);
void pt_ktab_free(struct ktab *t);
/* The name to show for a kernel: demangled, shortened into buf. */
const char *pt_shown(const char *name, char *buf, size_t n);
/* Add up each kernel's rows (by name) over processes and contexts. */
void pt_each_kernel(const struct probe_results *r, size_t rows, struct ktab *t,
		    void (*add)(u64 *v, const struct snap_ctx *x, size_t row, const int *maps),
		    const int *maps);
/* bcc's log2 histogram, from the first non-empty bucket to the last. */
void pt_print_log2(FILE *out, const u64 *b, int n, const char *unit);

#endif
