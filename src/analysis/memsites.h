/* SPDX-License-Identifier: MIT */
/*
 * Memory analyses, observing the model (analysis/model.h): allocation sites, leak suspicion,
 * out-of-memory context, fragmentation over time, and the history the memory map is drawn
 * from.
 *
 * A site is where allocations come from: the call's stack when one was taken (every
 * allocation's, unless stacks are off), else the API alone. Each site's outstanding bytes
 * are sampled over time (at most SITE_SAMPLES samples: when full, every other one goes and
 * sampling slows by half); a site whose bytes keep growing over the later half of what was
 * seen of it, by a Mann-Kendall trend test, is a suspected leak.
 *
 * Fragmentation of a process's live device ranges on one device, over time: holes are the
 * free ranges between its live allocations, within their span. The driver backs device
 * memory with pages of MEM_PAGE bytes, placed anywhere: a free range of whole pages is
 * memory any request can use (or address space never backed), never fragmentation. What
 * is stranded is the free part of pages that also hold live allocations (small
 * allocations share pages): usable by requests that fit in one such piece, by no larger
 * one. The score is the stranded share of those pages.
 *
 * A retired process's sites are judged as of its end and kept as the report will show
 * them (the best REP_SITES of them, and counts); its samples go.
 */
#ifndef GS_ANALYSIS_MEMSITES_H
#define GS_ANALYSIS_MEMSITES_H

#include "analysis/model.h"
#include "analysis/report.h"

#define SITE_SAMPLES 128
#define MAX_OOMS     32
#define MEM_HIST_MAX (4u << 20) /* allocations the memory map's history keeps */

struct memsites;

/* Observe m. keep_history: the memory map's. */
struct memsites *memsites__attach(struct model *m, bool keep_history);
void memsites__free(struct memsites *ms);
/* Run the trend test on every site (as of `now`, or its process's end): how many are
 * suspected. */
__u64 memsites__leaks_check(struct memsites *ms, __u64 now);

/* The report's part: sites, OOM findings, fragmentation (times relative to t0). */
void memsites__report(const struct memsites *ms, struct report *r, __u64 t0, __u64 now);

/* The status line's: sites suspected now, OOM findings, the latest one's cause. */
void memsites__status(const struct memsites *ms, __u64 *leak_sites, __u64 *ooms,
		      unsigned int *last_cause);

/* A process's, for the agent's metrics: false if it has no site. */
struct memsites_proc {
	__u64 leak_sites, leak_bytes;
	__u64 ooms[OOM_CAUSES]; /* by enum oom_cause */
	bool have_frag[MEM_DEVS + 1];
	double frag_now[MEM_DEVS + 1]; /* fragmentation of its live ranges now, per slot */
};
bool memsites__proc(const struct memsites *ms, __u32 pid, struct memsites_proc *out);

/* For timelines, pulled after each record: OOM findings so far and the latest, named; leaks
 * found so far and the nth (kept: the latest RECENT_LEAKS); a process's sampling ticks and
 * its latest fragmentation sample per device slot. */
#define RECENT_LEAKS 64
struct memsites_leak {
	__u32 pid;
	__u64 since; /* when it was first suspected */
	struct leak_test t;
	char label[SITE_LABEL];
	__u64 live_bytes;
};
__u64 memsites__ooms_total(const struct memsites *ms);
void memsites__last_oom(const struct memsites *ms, struct rep_oom *out);
__u64 memsites__leaks_total(const struct memsites *ms);
const struct memsites_leak *memsites__leak(const struct memsites *ms, __u64 n);
unsigned int memsites__ticks(const struct memsites *ms, __u32 pid);
bool memsites__frag_last(const struct memsites *ms, __u32 pid, int slot, struct frag_sample *out);

/* For the memory map: every allocation (kept with keep_history), a site's label, and a
 * process's fragmentation samples on a device slot. */
const struct mem_hist *memsites__history(const struct memsites *ms, size_t *n, bool *truncated);
void memsites__site_label(const struct memsites *ms, __u32 pid, __u32 site, unsigned int frames,
			  char *buf, size_t n);
const struct frag_sample *memsites__frag(const struct memsites *ms, __u32 pid, int slot,
					 unsigned int *n);
/* Fragmentation 0..1 of a sample: stranded / (stranded + live) (0 with nothing live). */
double frag_score(const struct frag_sample *s);

#endif
