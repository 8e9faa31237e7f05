/* SPDX-License-Identifier: MIT */
/*
 * The end-of-trace report: what the model knows and what its analyses found, merged across
 * processes, sorted and ready to render. Plain values: sinks (text, JSON) only format what
 * is here, and never see the model.
 */
#ifndef GS_ANALYSIS_REPORT_H
#define GS_ANALYSIS_REPORT_H

#include <stddef.h>
#include "analysis/results.h"

struct model;
struct findings;
struct memsites;

struct rep_kernel {
	char *mangled; /* NULL: never named (attached after the name was looked up) */
	char *display; /* demangled, or "unknown kernel 0x..." */
	__u32 pid;     /* unnamed kernels: their process; named: the first process */
	__u64 handle;  /* unnamed kernels: their handle */
	__u32 nprocs;
	__u64 launches, captured, graph_runs, errors, call_ns;
	__u32 flags;
	struct kshape shapes[KSTAT_SHAPES];
	__u64 other_shapes;
	struct kapi_count apis[KSTAT_APIS];
	struct gpu_stat *gpu; /* NULL: no GPU time for it */
};

struct rep_outstanding {
	__u16 api;
	__u8 kind; /* enum mem_kind */
	__u64 size, count;
};

struct rep_alloc {
	__u32 pid, tid;
	__u16 api;
	__u8 kind;
	__u64 addr, size, ts;
};

struct rep_proc {
	struct model_proc s;	      /* (its strings: below) */
	__u64 outstanding[MEM_KINDS]; /* what it had not freed at the end */
	bool has_os;		      /* OS records of it came */
	struct os_result os;
	char *cmdline, *cgroup; /* NULL: not recorded */
	char *exe;
};

/* Memory analyses (report_memory.c). */
#define REP_SITES    32
#define REP_EXAMPLES 3
#define SITE_LABEL   240
#define SITE_STACK   1024 /* the whole stack, up to 16 frames */

struct rep_site {
	__u32 pid, id;
	__u16 api;
	__u8 kind;
	bool exited; /* its process: outstanding bytes are what it never freed */
	char label[SITE_LABEL];
	char stack[SITE_STACK]; /* labels of sites often differ only deeper down */
	__u64 live_bytes, live_count, peak_bytes, allocs, alloc_bytes, frees, failed;
	struct leak_test leak;
	__u64 suspected_since; /* relative to the start; 0 never */
	/* Suspected earlier, not at the end (it stopped growing): the test as of the last
	 * time it was suspected, times relative to the start. */
	bool grew;
	struct leak_test earlier;
	__u64 suspected_last;
	struct {
		__u64 addr, size, ts; /* ts relative to the start */
	} examples[REP_EXAMPLES];     /* its oldest live allocations */
	unsigned int nexamples;
};

struct rep_oom {
	struct oom_finding o; /* ts relative to the start */
	char site[SITE_LABEL];
	char top[OOM_TOP][SITE_LABEL];
};

struct rep_frag {
	__u32 pid;
	int device; /* -1: not known */
	unsigned int samples;
	struct frag_sample worst, last; /* ts relative to the start */
};

struct rep_sync {
	__u16 api;
	struct sync_stat s;
};

struct rep_error {
	__u16 api;
	__s32 result;
	__u64 count, first_ts; /* first_ts relative to the start */
	__u32 pid, tid;
};

#define REP_LARGEST 10
#define REP_PYLINES 20

/* Where a step's time went (analysis/steps.h): the parts sum to its duration. */
enum step_part {
	STEP_COMPUTE, /* the GPU ran kernels (GPU timing) */
	STEP_NCCL,    /* it ran NCCL kernels, or the thread was in NCCL calls */
	STEP_COPIES,  /* it ran copies, or the thread was in copy calls */
	STEP_SYNC,    /* the thread waited for the GPU */
	STEP_DATA,    /* the thread was blocked outside CUDA calls: the next batch, I/O */
	STEP_HOST,    /* the rest: the thread ran (with GPU timing, the GPU idle) */
	STEP_PARTS,
};

/* A step of a loop (analysis/steps.h); times from the session's start. */
struct rep_step {
	__u64 start, dur;
	__u64 launches;
	__u64 gpu_ns;  /* its kernels' GPU time (union), 0 without GPU timing */
	__u64 sync_ns; /* its thread's waits for the GPU */
	__u64 part[STEP_PARTS];
	bool slow;
	__s32 finding; /* slow: the finding (r->findings) that overlaps it most, -1 none */
};

/* A Python line's launches (analysis/pylines.h). */
struct rep_pyline {
	char where[GS_SYM_MAX]; /* "QUALNAME (FILE:LINE)" */
	__u64 launches;		/* with a stack taken there */
	__u64 timed, gpu_ns;	/* of those, timed on the GPU, and their time */
};

/* Python exceptions (analysis/pyexc.h): raised at a site, and the findings. */
#define REP_PYEXC 20
struct rep_pyexc {
	__u32 pid;
	char type[GS_PYEXC_TYPE];
	char site[GS_SYM_MAX];	  /* "QUALNAME (FILE:LINE)", "" none */
	char text[GS_PYEXC_TEXT]; /* the first raise's */
	__u64 count;
};

struct rep_pyexc_finding {
	__u32 pid, tid;
	__u64 ts; /* the first, from the session's start */
	__u64 count;
	bool uncaught, cuda;
	char type[GS_PYEXC_TYPE];
	char text[GS_PYEXC_TEXT];
	char stack[1024]; /* Python frames, innermost first, " < " between */
};

struct report {
	/* session */
	__u32 mode; /* enum gs_session_mode, 0 if the recording has no start record */
	char cmd[GS_CMD_MAX];
	__s32 target_pid;
	__s32 exit_status; /* -1: none */
	__u32 flags;	   /* enum gs_session_flags */
	bool follow, complete_recording;
	__u64 start_ts, duration_ns, start_realtime_ns;
	__u64 events;
	/* host facts, as recorded */
	bool has_host;
	struct gs_ev_host host;
	struct gs_ev_gpu_info *gpus_info; /* by index */
	size_t ngpus_info;
	struct {
		__u32 dev;
		char name[32];
	} * blockdevs;
	size_t nblockdevs;

	struct gs_ev_attach *libs;
	size_t nlibs;
	struct rep_proc *procs;
	size_t nprocs;

	/* kernels */
	struct rep_kernel *kernels;
	size_t nkernels;
	__u64 launches, launch_errors, graph_launches, graphs, kernel_runs_in_graphs;
	__u64 results_unread;	     /* launches whose result the kernel plane did not read */
	__u64 cond_graph_launches;   /* of graphs with a conditional node: bodies not counted */
	__u64 graph_nodes_lost;	     /* kernel nodes past a process's limit: runs not counted */
	__u64 graph_launches_unseen; /* of graphs made before tracing began: runs not counted */
	__u64 unknown_kernels, unknown_launches, nameless;
	__u64 driver_names; /* kernel handles whose lookups were not seen, named from the driver */
	struct kapi_count *launch_apis;
	size_t nlaunch_apis;

	/* memory */
	__u64 peak[MEM_KINDS], in_use_end[MEM_KINDS];
	__u64 allocs, frees, failed_allocs, untracked_frees, reserved;
	struct kapi_count *alloc_apis; /* successful allocations per function */
	__u64 *alloc_api_bytes;
	size_t nalloc_apis;
	struct rep_outstanding *outstanding;
	size_t noutstanding;
	__u64 outstanding_count[MEM_KINDS], outstanding_bytes[MEM_KINDS];
	struct rep_alloc largest[REP_LARGEST];
	size_t nlargest;
	/* memory analyses */
	/* suspected leaks first (fastest growing), then those that grew for a while,
	 * then by bytes */
	struct rep_site *sites;
	size_t nsites;
	/* Steps of the process with the most (analysis/steps.h): none found if nsteps 0 */
	__u32 steps_pid;
	char steps_anchor_name[256];
	char steps_func[128]; /* --step=FUNC, "" none */
	bool steps_func_seen; /* a launch stack held it */
	struct rep_step *steps;
	size_t nsteps;
	__u64 step_median_ns, step_p90_ns, step_max_ns, steps_slow;
	bool steps_gpu_timed;
	/* Python exceptions: the sites most raised at (REP_PYEXC), findings */
	struct rep_pyexc *pyexc;
	size_t npyexc;
	__u64 pyexc_raised, pyexc_sites, pyexc_uncounted;
	struct rep_pyexc_finding *pyexc_findings;
	size_t npyexc_findings;
	/* Python lines (the most REP_PYLINES), and how many there were, launches counted */
	struct rep_pyline *pylines;
	size_t npylines;
	__u64 pylines_total, pyline_launches, pyline_timed, pyline_gpu_ns;
	__u64 sites_total, leaks, grew;
	struct rep_oom *ooms;
	size_t nooms;
	__u64 ooms_total;
	struct rep_frag *frags;
	size_t nfrags;
	/* device code (report_devcode.c): modules read in-process, oldest first */
	struct dev_module *devmods; /* copies; why owned */
	size_t ndevmods;
	__u64 devmods_total, devkernels, devkernels_ptx, devkernels_mixed;
	__u64 probe_records, probe_bytes; /* written by device-side probes into GPU rings */
	/* per launched kernel (same order as kernels): the modules it was loaded from, with
	 * PTX for it and without (both 0: none was read) */
	__u32 *kernel_ptx, *kernel_sass;
	__u16 *kernel_sass_arch, *kernel_sass_arch_low;
	bool stacks; /* sites are stacks (else the API alone) */

	/* copies, sync, NCCL */
	struct copy_stat copies[GS_COPY_KIND_MAX];
	struct rep_sync *syncs;
	size_t nsyncs;
	struct nccl_stat nccl[NCCL_OPS];
	struct comm_entry *comms;
	size_t ncomms;

	/* errors and losses */
	struct rep_error *errors;
	size_t nerrors;
	__u64 error_calls;
	__u64 drops[GS_EV_MAX], drops_total, lost_calls;
	__u64 unwrapped, rings_lost, gates_forced, time_capped, time_lost;
	__u64 stacks_taken, stacks_skipped; /* stack records; launches' skipped for the rate */

	/* GPU time (the in-process plane's; see analysis/gputime.c) */
	bool inject;	       /* driver calls came from the in-process plane */
	__u32 gpu_time;	       /* 0 off, 1 every launch, N every Nth launch of a kernel */
	bool gpu_chains;       /* every launch, chained (GS_SESSION_GPU_CHAINS) */
	bool gpu_cupti;	       /* every kernel, by CUPTI (GS_SESSION_GPU_CUPTI) */
	bool gpu_cupti_graphs; /* ... graphs' at every run too (GS_SESSION_GPU_CUPTI_GRAPHS) */
	/* --gpu-time=cupti: processes whose kernels CUPTI timed, where it was not found (pairs
	 * instead), that handed it to their own profiler; its records matched to no launch
	 * (or run in graphs) */
	__u64 cupti_on, cupti_missing, cupti_handed, cupti_unmatched;
	__u64 gpu_records, gpu_start_unknown, gpu_start_late, gpu_end_late, gpu_copy_end_late;
	size_t *gpu_order; /* indexes into kernels[] of those with GPU time, most first */
	size_t ngpu_kernels;
	__u64 gpu_kernel_ns;	     /* all kernels' GPU time */
	struct gpu_stat graph_gpu;   /* all graph launches */
	struct stream_stat *streams; /* most busy first */
	size_t nstreams;
	struct dev_busy *devices; /* by ordinal; merged, nothing pending */
	size_t ndevices;

	/* the OS plane */
	bool os_plane;
	__u32 os_min_us;
	struct finding *findings; /* longest first */
	size_t nfindings;
	__u64 findings_total, t0; /* t0: the session's start, for times in findings */
	struct os_result os;
	__u64 os_events;
};

/* The report of a model and its analyses (f, ms: NULL if not attached). */
struct report *report__build(const struct model *m, const struct findings *f,
			     const struct memsites *ms);
void report__free(struct report *r);
const char *devcode_kind_name(unsigned int kind);
/* An OOM cause as a label or JSON value ("exhaustion"), and as a sentence has it. */
const char *oom_cause_key(unsigned int cause);
const char *oom_cause_name(unsigned int cause);
/* The caching allocator a site's label shows the call came through, NULL if none known. */
const char *report__caching_allocator(const char *label);
/* A block device's recorded name, else "major:minor". */
const char *report__dev_name(const struct report *r, __u32 dev, char *buf, size_t n);
/* One line saying what an OOM finding found. */
const char *report__oom_text(const struct rep_oom *o, char *buf, size_t n);

#endif
