/* SPDX-License-Identifier: MIT */
/*
 * The model's state (see model.h): for the files that make up the model (model*.c) and the
 * report that is built from it (report*.c), nobody else. The files form layers, each using
 * only those below it:
 *
 *   model_proc.c                     processes, errors, interned names (the bottom)
 *   model_kernels.c  model_memory.c  model_os.c  model_devcode.c
 *   model_stacks.c                   stacks (named by kernel names, when retired)
 *   model_transfers.c                copies (their direction from the allocation model)
 *   model_gpu.c                      GPU times (kernels, copies, contexts)
 *   model.c                          records dispatched, observers, retiring, freeing
 */
#ifndef GS_ANALYSIS_MODEL_INT_H
#define GS_ANALYSIS_MODEL_INT_H

#include "analysis/model.h"
#include "core/hmap.h"

#define MAX_OBSERVERS 4

struct range {
	__u64 addr, size;
	__u64 ts;
	__u64 handle; /* MK_MAPPING: the physical handle */
	__u32 tid;
	__u16 api;
	__u8 kind;   /* enum mem_kind */
	__s8 device; /* MK_DEVICE: the device, -1 if not known */
	bool pooled; /* stream-ordered, from a pool */
};

struct vmm_handle {
	__u64 handle, size, ts;
	__s32 device;
	__u32 tid;
	__u32 mapped; /* live mappings of this handle */
	__u16 api;
	bool released;
};

/* Kernels launched into a stream while it was captured: what its graph runs. */
/* The OS plane's records, aggregated (model_os.c), for a process and for the run. */
struct os_stat {
	struct os_result c;   /* the counters (its lists unused: the tables below) */
	struct hmap syscalls; /* nr -> struct sys_stat */
	struct hmap devices;  /* dev -> struct io_stat */
};

struct proc {
	struct model_proc s;	   /* (what model__process copies out) */
	bool retired;		   /* folded: only s and os are left */
	void *ranges;		   /* tsearch tree of struct range */
	struct hmap vmm;	   /* handle -> struct vmm_handle */
	struct hmap resv;	   /* va -> struct range (MK_MAPPING kind unused) */
	struct hmap capturing;	   /* stream -> its graph's kernels so far (model_graphs.c) */
	struct hmap graphs;	   /* graph -> its kernels */
	struct hmap execs;	   /* instantiated graph -> its kernels (a copy) */
	__u64 graph_nodes;	   /* kernel nodes kept in those (model_graphs.c) */
	struct hmap node_graph;	   /* a graph's kernel node -> the graph (boxed handle) */
	struct hmap ctx_dev;	   /* CUcontext -> boxed __s32 device (creation, or GPU records) */
	struct os_stat *os;	   /* NULL until an OS plane record (retired: folded below) */
	struct os_result *os_done; /* retired: its OS aggregates, compact (NULL: none) */
	__u64 outstanding[MEM_KINDS]; /* retired: the bytes it never freed */
};

struct kstat {
	__u32 pid;
	__u64 handle;
	__u64 launches;	  /* successful launch calls (captured ones included) */
	__u64 captured;	  /* of which recorded into a graph rather than run */
	__u64 graph_runs; /* runs through graph launches of a capture containing it */
	__u64 errors;
	__u64 call_ns;	 /* time in the launch calls whose return was seen ... */
	__u64 call_seen; /* ... which were these many (kstat_call_ns) */
	__u32 flags;	 /* GS_LAUNCH_* seen */
	struct kshape shapes[KSTAT_SHAPES];
	__u64 other_shapes;
	struct kapi_count apis[KSTAT_APIS];
	struct gpu_stat *gpu; /* NULL until a GPU record for it */
	char *name;	      /* retired: the name it had (NULL: never named) */
	__u32 nprocs;	      /* retired: processes folded into it */
};

/* Time in a kernel's launch calls: what was seen, scaled to all its launches (the kernel
 * plane sees the returns of a sample of launches only: GS_LAUNCH_NO_RETURN). */
__u64 kstat_call_ns(const struct kstat *k);

struct name_entry {
	char *name; /* mangled, as the driver saw it */
	__u16 api;
	__u8 ns;
};

struct alias_entry {
	__u64 target;
	__u8 ns;
};

#define DEV_RECENT 64

/*
 * A device's busy time: the union of its operations' intervals over every stream and
 * process. Records arrive in (roughly) submission order, not in GPU order: intervals wait
 * in `pending` until no earlier one can still come (a watermark behind the latest call
 * seen), then are merged in start order.
 */
struct dev_stat {
	struct dev_busy b;
	/* Calibration (GS_GPU_CALIBRATION): a gated pair around our calibration kernel less
	 * its span (cal), a gated pair with nothing between (empty); what an event pair adds
	 * to a kernel's time from their medians (b.overhead_ns; model_gpu.c says how). */
	__u64 cal[16], empty[16], gcal[16], gempty[16], ccal[16], cempty[16];
	unsigned int ncal, nempty, ngcal, ngempty, nccal, ncempty;
	__u64 launch;		  /* GS_CAL_LAUNCH, 0 where not known */
	__u64 busy_min;		  /* GS_CAL_BUSY_MIN, the same */
	__u64 cur_start, cur_end; /* the merged interval still open */
	bool have_cur;
	struct {
		__u64 start, end;
	} * pending;
	size_t npending, cap;
	size_t flush_at; /* flush when npending reaches it: twice what the last flush kept */
	/* Its latest operations, whatever their stream: what ran while a kernel waited. */
	struct gpu_op recent[DEV_RECENT];
	unsigned int nrecent; /* written so far (a ring) */
};

/* A stack of a retired process, its frames by name: stacks of like processes are one. */
struct named_stack {
	const char *comm, *kernel; /* interned */
	__u16 api;
	unsigned int nframes;
	__u64 count;
	const char *frames[]; /* interned; NULL: no name */
};

struct model {
	struct gs_ev_session start, end;
	bool have_start, have_end;
	struct hmap procs;   /* pid -> struct proc */
	struct hmap names;   /* (pid << 1 | ns, handle) -> struct name_entry */
	struct hmap aliases; /* (pid, handle) -> struct alias_entry */
	struct hmap kernels; /* (pid, handle) -> struct kstat */
	/* A handle named again with another name (its module unloaded, the handle given to a
	 * new function): what it ran before, under the name it had ((pid, name hash) -> kstat
	 * with name, merged by name). */
	struct hmap renamed_kernels;
	struct hmap graph_execs; /* (pid, exec) -> struct kstat (launches of the graph) */
	/* Kernels of retired processes: named, by name ((hash, 0), probing on the hash);
	 * unnamed, by (handle, pid + 1 << 32). Their graphs: counted, GPU times merged. */
	struct hmap retired_kernels;
	__u64 retired_graphs;
	struct gpu_stat retired_graph_gpu;
	struct copy_stat copies[GS_COPY_KIND_MAX];
	struct sync_stat syncs[GS_API_MAX];
	struct nccl_stat nccl[NCCL_OPS];
	struct hmap comms;  /* (pid, comm) -> struct comm_entry */
	struct hmap errors; /* (api, result) -> struct err_stat */
	struct gs_ev_attach *libs;
	size_t nlibs;
	struct gs_ev_drops drops;
	bool have_drops;
	__u64 events, first_ts, last_ts;
	__u64 launches, graph_launches, launch_errors;
	__u64 results_unread;	     /* launches recorded at entry (GS_LAUNCH_NO_RETURN) */
	__u64 cond_graph_launches;   /* of graphs with a conditional node (model_graphs.c) */
	__u64 graph_nodes_lost;	     /* kernel nodes past a process's limit: runs not counted */
	__u64 graph_launches_unseen; /* of graphs instantiated before tracing: runs unknown */
	__u64 copy_bytes;
	__u64 in_use[MEM_KINDS], peak[MEM_KINDS];
	__u64 nameless;	    /* name records whose string could not be read */
	__u64 driver_names; /* names read from the driver (source/kernel_names.h) */
	__u64 api_calls[GS_API_MAX];
	__u64 alloc_calls[GS_API_MAX], alloc_bytes[GS_API_MAX]; /* successful allocations */
	/* Allocations still live when their process was retired (the report's outstanding
	 * ones), by call and kind, and the largest. */
	struct retired_alloc {
		__u16 api;
		__u8 kind;
		__u64 size, count;
	} * retired_allocs;
	size_t nretired_allocs;
	struct model_alloc retired_largest[10];
	size_t nretired_largest;
	/* GPU timing (in-process plane) */
	struct hmap streams; /* (pid, stream) -> struct stream_stat */
	struct hmap devices; /* (device + 1, 0) -> struct dev_stat */
	__u64 gpu_records, gpu_latest_call;
	__u64 gpu_start_unknown; /* launches with GS_GPU_START_UNKNOWN, or ... */
	__u64 gpu_start_late; /* ... ungated on an idle stream, their call long after the start */
	__u64 gpu_end_late;   /* ... ungated, their end event recorded late (GS_GPU_END_LATE) */
	__u64 gpu_copy_end_late; /* copies and sets with GS_GPU_END_LATE: not in copy figures */
	/* --gpu-time=cupti's status records: processes per enum gs_cupti_state; the driver's
	 * records no launch was matched to (src/inject/gputime_cupti.c) */
	__u64 cupti_states[4];
	__u64 cupti_unmatched;
	/* OS plane */
	struct os_stat os;
	__u64 os_events;
	struct hmap thread_ctx; /* (tid, pid) -> struct ctx_stack: the thread's current context */
	/* stacks */
	struct hmap symbols;	  /* (pid, addr) -> char * (GS_EV_SYMBOL) */
	struct hmap stacks;	  /* (hash, pid) -> struct stack_entry */
	struct hmap named_stacks; /* (hash, 0) -> struct named_stack (retired processes) */
	struct hmap strings;	  /* (hash, 0) -> char *: interned names */
	__u64 stack_records;
	__u64 stacks_skipped; /* launches' stacks not taken for their rate (inject/stacks.c) */
	/* device code the processes loaded (model_devcode.c) */
	struct hmap devmods;	/* (pid, scope) -> struct dev_module */
	struct hmap devkernels; /* (pid, hash of the name) -> struct dev_kernel */
	__u64 devmods_total;
	/* records device-side probes wrote into GPU ring buffers (GS_EV_PROBE_OUT) */
	__u64 probe_records, probe_bytes;
	struct {
		bool have;
		__u64 ts, used, total;
	} nvml_mem[MEM_DEVS]; /* NVML's latest memory reading per GPU index */
	/* host facts (model_proc.c) */
	struct gs_ev_host host;
	bool have_host;
	struct gs_ev_gpu_info *gpu_info[GS_GPUS_MAX];
	struct hmap blockdevs; /* (dev, 0) -> interned name */
	bool keep_history;     /* (the memory map: its analysis keeps it) */
	struct {
		const struct model_observer *o;
		void *ctx;
	} obs[MAX_OBSERVERS];
	unsigned int nobs;
};

/* Call every observer's `fn` that is set. */
#define MODEL_NOTIFY(m, fn, ...)                                                     \
	do {                                                                         \
		for (unsigned int i_ = 0; i_ < (m)->nobs; i_++)                      \
			if ((m)->obs[i_].o->fn)                                      \
				(m)->obs[i_].o->fn((m)->obs[i_].ctx, ##__VA_ARGS__); \
	} while (0)

/* model_proc.c */
struct proc *model__proc(struct model *m, __u32 pid);
struct proc *model__proc_get(const struct model *m, __u32 pid);
void model__note_error(struct model *m, const struct gs_hdr *h, const struct gs_call *c);
/* Host facts: the machine, a GPU, a process's command line, a block device's name. */
void model__facts_add(struct model *m, const struct gs_hdr *ev);
void model__facts_free(struct model *m);
/* An interned copy of a string, valid while the model is. */
const char *model__intern(struct model *m, const char *s);
void model__strings_free(struct model *m);

/* model_kernels.c */
/* Records, each of its type (model.c's table). */
void model__name_add(struct model *m, const struct gs_hdr *ev);
void model__alias_add(struct model *m, const struct gs_hdr *ev);
void model__launch_add(struct model *m, const struct gs_hdr *ev);
void model__api_add(struct model *m, const struct gs_hdr *ev);
struct kstat *model__kstat(struct hmap *h, __u32 pid, __u64 handle);
void model__kernels_retire(struct model *m, struct proc *p);
void model__kernels_forget(struct model *m, __u32 pid);
void model__kernels_free(struct model *m);
/* model_graphs.c: what graphs run. A launch into a capturing stream (whether it is one);
 * each kernel an instantiated graph runs and how many times a launch runs it (whether it
 * has a conditional node, whose bodies are not counted); an API record of graphs; a
 * process's graphs gone. */
bool model__graph_captured(struct proc *p, __u64 stream, __u64 func);
/* A copy or set into a capturing stream: recorded in its graph (true), not run. */
bool model__graph_op_captured(struct proc *p, __u64 stream, unsigned int kind, __u64 bytes);
/* What a launch of the instantiated graph copies and sets, added to copies (and the bytes
 * it copies to *bytes). */
void model__graph_ops(const struct proc *p, __u64 exec, struct copy_stat *copies, __u64 *bytes);
/* Whether exec's instantiation (or its capture) was seen. */
bool model__graph_known(const struct proc *p, __u64 exec);
bool model__graph_each(const struct proc *p, __u64 exec,
		       void (*fn)(void *ctx, __u64 handle, __u64 count), void *ctx);
void model__graph_api(struct proc *p, const struct gs_ev_api *e, const struct gs_api_desc *d,
		      __u64 *lost);
void model__graphs_free(struct proc *p);
/* A kernel's statistics merged into another's (the report's, or a retired name's). */
void model__kstat_merge(struct kstat *into, const struct kstat *k);
void model__gpu_merge(struct gpu_stat *into, const struct gpu_stat *g);

/* model_memory.c */
void model__memory_add(struct model *m, struct proc *p, const struct gs_ev_mem *e);
void model__context_add(struct model *m, const struct gs_ev_api *e);
void model__context_seen(struct model *m, __u32 pid, __u64 ctx, __s32 device);
void model__memory_retire(struct model *m, struct proc *p);
void model__memory_free(struct proc *p);
void model__walk_ranges(const struct proc *p, void (*fn)(const struct range *r, void *ctx),
			void *ctx);

/* model_transfers.c */
void model__copy_add(struct model *m, const struct gs_hdr *ev);
void model__sync_add(struct model *m, const struct gs_hdr *ev);
void model__nccl_add(struct model *m, const struct gs_hdr *ev);

/* model_gpu.c */
void model__gpu_add(struct model *m, const struct gs_hdr *ev);
/* Merge a device's pending intervals that start before `upto` into its totals. */
void model__dev_flush(struct dev_stat *d, __u64 upto);
void model__gpu_free(struct model *m);

/* model_os.c */
void model__os_add(struct model *m, const struct gs_hdr *ev);
void model__os_free(struct os_stat *o);
/* The aggregates as a result (sorted lists allocated: os_result_free). */
void model__os_result(const struct os_stat *o, struct os_result *out);
void os_result_free(struct os_result *r);
/* A retired process's: its aggregates as a result, the table freed (NULL stays NULL). */
struct os_result *model__os_fold(struct os_stat *o);
void os_result_copy(const struct os_result *from, struct os_result *to);

/* model_stacks.c */
void model__stack_add(struct model *m, const struct gs_hdr *ev);
void model__stacks_retire(struct model *m, __u32 pid);
void model__stacks_free(struct model *m);

/* model_devcode.c */
void model__devcode_add(struct model *m, const struct gs_hdr *ev);
/* A process's kernel by mangled name, NULL if no module read named it. */
const struct dev_kernel *model__devkernel(const struct model *m, __u32 pid, const char *name);
void model__devcode_free(struct model *m);

#endif
