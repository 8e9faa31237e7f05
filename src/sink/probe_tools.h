/* SPDX-License-Identifier: MIT */
/* `gpuscope probe`'s results: what the snapshots hold, and the tools' views of it
 * (probe_maps.c, probe_views.c). */
#ifndef GS_SINK_PROBE_TOOLS_H
#define GS_SINK_PROBE_TOOLS_H

#include <stdbool.h>
#include <stdio.h>

#include "ptx/bundle.h"

struct probe_results {
	const struct bundle *b;
	struct snapshot *s; /* one per process */
	size_t n;
	bool verbose;
	const char *events; /* the recording of the run: what the rings held (GS_EV_PROBE_OUT) */
	size_t max_records; /* shown per ring (0: all) */
};

/* What was instrumented, what ran the original and why, every launch of the program
 * accounted for (every tool's output opens so). */
void render_summary(const struct probe_results *r, FILE *out);
/* A user's object: each map's contents. */
void render_maps(const struct probe_results *r, FILE *out);
/* The same for scripts (probe --json): every map's entries holding something, each
 * per-thread key with its threads' values, each ring's records. */
void render_maps_json(const struct probe_results *r, FILE *out);
void render_kernelretsnoop(const struct probe_results *r, FILE *out);
void render_threadhist(const struct probe_results *r, FILE *out);
void render_launchlate(const struct probe_results *r, FILE *out);
void render_memtrace(const struct probe_results *r, FILE *out);
void render_smmap(const struct probe_results *r, FILE *out);

#endif
