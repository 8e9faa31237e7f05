/* SPDX-License-Identifier: MIT */
/* The memory analyses' state (see memsites.h): memsites.c, memsites_report.c. */
#ifndef GS_ANALYSIS_MEMSITES_INT_H
#define GS_ANALYSIS_MEMSITES_INT_H

#include "analysis/memsites.h"
#include "core/hmap.h"

#define SITE_FRAMES 16 /* frames named in a label */

struct mem_site {
	__u32 pid, id;			 /* id: 1, 2, ... in the order sites were first seen */
	__u16 api;			 /* of its first allocation */
	__u8 kind;			 /* enum mem_kind of its first allocation */
	const struct stack_entry *stack; /* the model's, while its process lives; NULL: none */
	char **names;			 /* retired: its frames' names, for labels */
	unsigned int nnames;
	__u64 live_bytes, live_count, peak_bytes;
	__u64 allocs, alloc_bytes, frees, failed;
	__u64 first_ts, last_ts;
	unsigned int nsamples;
	struct {
		__u64 ts, bytes;
	} samples[SITE_SAMPLES];
	/* The trend test as of its latest evaluation (every 8th tick, and the checks), and
	 * when it first said so. */
	bool suspected;
	__u64 suspected_since;	       /* 0 never */
	__u64 suspected_last;	       /* the latest evaluation that suspected it */
	struct leak_test at_suspicion; /* that evaluation's test */
};

struct mem_frag {
	unsigned int n;
	struct frag_sample s[SITE_SAMPLES];
};

struct ms_proc {
	__u32 pid;
	struct mem_site **sites;
	size_t nsites, sites_cap;
	__u64 sample_next, sample_every;
	unsigned int nticks;
	struct mem_frag *frag[MEM_DEVS + 1]; /* per device slot */
	__u64 ooms[OOM_CAUSES];		     /* out-of-memory failures by enum oom_cause */
	__u64 leak_sites;		     /* sites suspected now */
	bool retired;
};

/* A live allocation's site, and its entry in the history. */
struct ms_live {
	struct mem_site *site;
	__u32 hist;
};

#define NO_HIST 0xffffffffu

struct memsites {
	struct model *m;
	bool keep_history;
	struct hmap procs;	/* pid -> struct ms_proc */
	struct hmap sites;	/* (pid, key) -> struct mem_site */
	struct hmap live;	/* (pid, address) -> struct ms_live: ranges */
	struct hmap vmm;	/* (pid, handle) -> struct mem_site: physical memory */
	struct hmap last_stack; /* (tid, pid) -> struct last_stack: a thread's latest stack */
	__u32 next_site;
	struct mem_hist *hist;
	size_t nhist, hist_cap;
	bool hist_truncated;
	struct rep_oom ooms[MAX_OOMS]; /* the first ones, named */
	size_t nooms;
	__u64 ooms_total;
	struct rep_oom last_oom;
	__u64 leak_sites;  /* suspected at the latest check */
	__u64 leaks_total; /* sites ever found suspected */
	struct memsites_leak recent[RECENT_LEAKS];
	/* Retired processes: their best sites as the report shows them (sorted), counts,
	 * and their fragmentation. */
	struct rep_site retired[REP_SITES];
	size_t nretired;
	__u64 retired_sites, retired_leaks, retired_grew;
	bool retired_stacks;
	struct rep_frag *retired_frags;
	size_t nretired_frags;
};

/* memsites_core.c: what keeps no state */
#define MIN_WINDOW 8 /* samples for a trend test */

/* A process's address space on one device: its live ranges, the holes between them. */
struct space {
	int slot;
	bool any;
	__u64 prev_end, first, live, holes, largest, ranges, stranded, largest_stranded;
};
void memsites__space(const struct memsites *ms, __u32 pid, int slot, struct space *sp);
/* A process's fragmentation on a slot now. */
void memsites__frag_now(const struct memsites *ms, __u32 pid, int slot, __u64 ts,
			struct frag_sample *out);
/* The samples of the later half of what was seen of a site, and its bytes now (ts may be
 * NULL): how many. */
unsigned int memsites__window(const struct mem_site *s, __u64 now, __u64 *ts, __u64 *xs);
/* Whether bytes rise in each third of a window. */
bool memsites__in_thirds(const __u64 *xs, unsigned int n);
/* The trend test of one site, as of `now` (nothing changes). */
void memsites__trend(const struct mem_site *s, __u64 now, struct leak_test *t);
/* A site's frames as text: "f < g < h" (at most `frames`), or its API without a stack. */
void memsites__label(const struct memsites *ms, const struct mem_site *s, unsigned int frames,
		     char *buf, size_t n);
/* Its frames' names kept: its stack goes with its process. */
void memsites__keep_names(struct memsites *ms, struct mem_site *s);

/* memsites_report.c */
/* A site as the report shows it (its examples not yet looked for); t0, now: as there. */
void memsites__rep_site(const struct memsites *ms, const struct mem_site *s, bool exited,
			__u64 end_ts, __u64 now, struct rep_site *o);
/* The report's order: suspected leaks first (fastest growing), then those that grew for a
 * while, then by bytes. */
int memsites__site_order(const void *a, const void *b);
/* A retired process's sites and fragmentation, kept as the report needs them. */
void memsites__retire_report(struct memsites *ms, struct ms_proc *p);

#endif
