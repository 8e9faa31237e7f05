/* SPDX-License-Identifier: MIT */
/*
 * The trace model: what the event stream says, aggregated. One model is fed the same way
 * live (from the ring buffer) and offline (from a recording), which is why a replayed
 * recording gives the same report. Analyses read the model; nothing here prints.
 *
 * Per process it keeps kernel names (handles are process-local), launch statistics per
 * kernel handle, and an allocation model: linear allocations and VMM mappings as address
 * ranges in a balanced tree (so any pointer can be classified as device or host memory),
 * VMM physical handles, address reservations, and stream captures turned into graphs.
 */
#ifndef GS_ANALYSIS_MODEL_H
#define GS_ANALYSIS_MODEL_H

#include <stdbool.h>
#include "core/hist.h"
#include "core/hmap.h"
#include "gpuscope/api.h"

enum mem_kind {
	MK_DEVICE = 0, /* linear device memory and VMM physical memory */
	MK_MANAGED = 1,
	MK_HOST = 2, /* page-locked host memory */
	MEM_KINDS = 3,
	MK_MAPPING = 3, /* range kind only: a VMM mapping (its bytes count at cuMemCreate) */
};

/* Devices whose memory is told apart per process; an unknown one (and any beyond) is the
 * last slot. */
#define MEM_DEVS 16

struct mem_site;

enum oom_cause {
	OOM_EXHAUSTION = 1,    /* less free than was asked */
	OOM_FRAGMENTATION = 2, /* enough free, in pieces too small */
	OOM_UNCLEAR = 3,       /* NVML saw enough free, the process's own view no piece */
	OOM_CAUSES
};

struct range {
	__u64 addr, size;
	__u64 ts;
	__u64 handle; /* MK_MAPPING: the physical handle */
	__u32 tid;
	__u16 api;
	__u8 kind;	       /* enum mem_kind */
	__s8 device;	       /* MK_DEVICE: the device, -1 if not known */
	bool pooled;	       /* stream-ordered, from a pool */
	struct mem_site *site; /* who allocated it (analysis/memsites.c) */
	__u32 hist;	       /* its entry in the memory history, or NO_HIST */
};

#define NO_HIST 0xffffffffu

struct vmm_handle {
	__u64 handle, size, ts;
	__s32 device;
	__u32 tid;
	__u32 mapped; /* live mappings of this handle */
	__u16 api;
	bool released;
	struct mem_site *site;
};

/* Kernels launched into a stream while it was captured: what its graph runs. */
struct capture {
	size_t n, cap;
	struct {
		__u64 handle;
		__u64 count;
	} * k;
};

struct proc {
	__u32 pid, ppid;
	char comm[16];
	char exe[256];
	bool complete; /* seen from its start: every allocation is known */
	bool exited;
	__s32 exit_code;
	__u64 start_ts, end_ts;
	__u64 launches;
	void *ranges; /* tsearch tree of struct range */
	__u64 nranges;
	struct hmap vmm;       /* handle -> struct vmm_handle */
	struct hmap resv;      /* va -> struct range (MK_MAPPING kind unused) */
	struct hmap capturing; /* stream -> struct capture */
	struct hmap graphs;    /* graph -> struct capture */
	struct hmap execs;     /* graph exec -> graph (value: boxed __u64) */
	__u64 in_use[MEM_KINDS], peak[MEM_KINDS];
	/* Device memory (MK_DEVICE) per device: the slot of model__mem_slot(). */
	__u64 dev_in_use[MEM_DEVS + 1], dev_peak[MEM_DEVS + 1];
	struct hmap ctx_dev; /* CUcontext -> boxed __s32 device (creation, or GPU records) */
	__u64 reserved;	     /* VMM address space reserved */
	__u64 allocs, frees, failed_allocs, untracked_frees;
	__u64 copy_bytes, sync_ns; /* successful copies; time in synchronisation calls */
	struct os_stat *os;	   /* NULL until an OS plane record */
	/* Device memory by allocator: stream-ordered (pools), VMM physical, VMM mapped. */
	__u64 pool_in_use, pool_peak, vmm_physical, vmm_mapped;
	/* Allocation sites (analysis/memsites.c): this process's, and their sampling. */
	struct mem_site **sites;
	size_t nsites, sites_cap;
	__u64 sample_next, sample_every;
	unsigned int nticks;
	struct mem_frag *frag[MEM_DEVS + 1]; /* fragmentation over time, per device slot */
	__u64 ooms[OOM_CAUSES];		     /* out-of-memory failures by enum oom_cause */
	__u64 leak_sites;		     /* sites suspected now */
};

/* The OS plane's records, aggregated (analysis/os.c), for a process and for the run. */
enum {
	NET_TCP,
	NET_UDP,
	NET_OTHER,
	NET_PROTOS
};

struct sys_stat {
	__u64 count, total_ns, max_ns;
};

struct io_stat {
	__u64 count, bytes, total_ns, max_ns, errors;
	__u64 ends_unseen; /* of count, requests whose completion no program saw (no time) */
};

struct os_stat {
	__u64 offcpu_count[GS_OFFCPU_OTHER + 1], offcpu_ns[GS_OFFCPU_OTHER + 1]; /* by reason */
	__u64 runq_ns; /* of the off-CPU time, runnable and waiting for a CPU */
	__u64 faults, major_faults;
	struct io_stat io[GS_BLOCK_OTHER + 1];			  /* by operation */
	__u64 net_calls[2][NET_PROTOS], net_bytes[2][NET_PROTOS]; /* [enum gs_net_dir] */
	__u64 thread_exits;
	bool oom_killed;
	struct hmap syscalls; /* nr -> struct sys_stat */
	struct hmap devices;  /* dev -> struct io_stat */
};

/*
 * Cross-layer findings (analysis/findings.c): a GPU stream that sat idle waiting for its
 * next launch, and what the launching thread was doing meanwhile, from its recent OS
 * activity.
 */
#define THREAD_HIST 128

struct thread_os {
	__u32 pid;
	struct {
		__u64 start, end, off_ns; /* off_ns: of the span, the time off the CPU */
		__s32 syscall;
		__u32 reason;
	} off[THREAD_HIST];
	struct {
		__u64 start, end, bytes;
		__u32 dev, count; /* requests of one device that overlap in time, merged */
	} io[THREAD_HIST];
	struct {
		__u64 start, end;
		__u32 count, major;
	} faults[THREAD_HIST];
	unsigned int noff, nio, nfaults; /* written so far (rings of THREAD_HIST) */
};

enum finding_cause {
	CAUSE_BLOCKED = 1, /* off CPU, asleep or blocked, for most of the gap */
	CAUSE_DISK = 2,	   /* ... blocked on disk or a page-in */
	CAUSE_PREEMPTED = 3,
	CAUSE_FAULTS = 4, /* on CPU, taking page faults */
	CAUSE_ON_CPU = 5, /* on CPU: the program's own work */
	CAUSE_QUEUED = 6, /* a kernel that waited on the GPU with its stream free */
};

struct finding {
	__u64 gap_start, gap_ns; /* the stream's idle time */
	__u64 wait_ns;		 /* of which the launch had not been called yet */
	__u64 off_ns;		 /* of that, the launching thread off the CPU */
	__u64 longest_off_ns;	 /* its longest single interval off the CPU */
	__u64 stream;
	__u32 pid, tid;
	__s32 device;
	__u32 cause;   /* enum finding_cause */
	__s32 syscall; /* the one the thread was in longest, -1 none */
	__u32 io_dev;  /* block I/O the thread issued meanwhile */
	__u32 io_count;
	__u64 io_bytes;
	__u64 io_ns; /* of the wait, with that I/O in flight */
	__u64 faults, major_faults;
	/* Asleep (waiting on another thread, say): the same process's thread that was
	 * blocked longest in the meantime, and in what. other_tid 0: none. */
	__u32 other_tid, other_cause;
	__s32 other_syscall;
	__u32 other_io_count;
	__u64 other_off_ns, other_io_bytes, other_io_ns;
	__u32 other_io_dev;
	bool launch_gap; /* no GPU times: a gap between launches, not a GPU idle time */
	/* CAUSE_QUEUED: a kernel that started gap_ns after its stream was free (its launch
	 * returned, the stream's work before it done): what ran on the device meanwhile (the
	 * other stream of the trace that overlapped the wait most), and whether the stream
	 * had been told to wait for an event since its previous work. */
	bool after_event_wait;
	__u32 busy_pid;
	__u64 busy_stream, busy_ns;	  /* busy_ns 0: nothing the trace saw */
	char kernel[64], busy_kernel[64]; /* shortened, demangled */
};

#define MAX_FINDINGS	 16
#define RECENT_FINDINGS	 64
#define PENDING_FINDINGS 64

/*
 * Allocation sites and memory analyses (analysis/memsites.c). A site is where allocations
 * come from: the call's stack when one was taken (every allocation's, unless stacks are
 * off), else the API alone. Each site's outstanding bytes are sampled over time (at most
 * SITE_SAMPLES samples: when full, every other one goes and sampling slows by half); a
 * site whose bytes keep growing over the later half of what was seen of it, by a
 * Mann-Kendall trend test, is a suspected leak.
 */
#define SITE_SAMPLES 128
#define MAX_OOMS     32
#define OOM_TOP	     3

struct leak_test {
	bool suspected;
	unsigned int n;	   /* samples tested */
	double confidence; /* that the bytes grow: 1 - p of Mann-Kendall's S (one-sided) */
	double slope_bps;  /* Sen's slope over the window, bytes/s */
	__u64 from, to;	   /* the window */
	__s64 growth;	   /* bytes: its last sample less its first */
};

struct mem_site {
	__u32 pid, id;			 /* id: 1, 2, ... in the order sites were first seen */
	__u16 api;			 /* of its first allocation */
	__u8 kind;			 /* enum mem_kind of its first allocation */
	const struct stack_entry *stack; /* NULL: no stack taken */
	__u64 live_bytes, live_count, peak_bytes;
	__u64 allocs, alloc_bytes, frees, failed;
	__u64 first_ts, last_ts;
	unsigned int nsamples;
	struct {
		__u64 ts, bytes;
	} samples[SITE_SAMPLES];
	/* The trend test as of its latest evaluation (every 8th tick, and model__leaks_check),
	 * and when it first said so. */
	bool suspected;
	__u64 suspected_since;	       /* 0 never */
	__u64 suspected_last;	       /* the latest evaluation that suspected it */
	struct leak_test at_suspicion; /* that evaluation's test */
};

/*
 * Fragmentation of a process's live device ranges on one device, over time. Holes are
 * the free ranges between its live allocations, within their span. The driver backs
 * device memory with pages of MEM_PAGE bytes, placed anywhere: a free range of whole pages
 * is memory any request can use (or address space never backed), never fragmentation.
 * What is stranded is the free part of pages that also hold live allocations (small
 * allocations share pages): usable by requests that fit in one such piece, by no larger
 * one. The score is the stranded share of those pages.
 */
#define MEM_PAGE (2ULL << 20)

struct frag_sample {
	__u64 ts, live, holes, largest_hole, ranges;
	__u64 stranded, largest_stranded;
};

struct mem_frag {
	unsigned int n;
	struct frag_sample s[SITE_SAMPLES];
};

struct oom_finding {
	__u64 ts, requested;
	__u32 pid, tid;
	__u16 api;
	__s32 device;
	__u32 cause;		  /* enum oom_cause */
	__u32 site;		  /* the failing call's site id (0: none) */
	__u64 live_dev, live_all; /* this process's device bytes: on that device, on all */
	bool have_nvml;		  /* NVML's reading of the device (its latest before) */
	__u64 nvml_used, nvml_total;
	__u64 others_bytes; /* other traced processes' bytes on the device */
	__u32 others;
	__u64 holes, largest_hole, span;  /* the process's address space there */
	__u64 stranded, largest_stranded; /* free in its partly used pages (struct frag_sample) */
	struct {
		__u32 site;
		__u64 bytes;
	} top[OOM_TOP]; /* the sites holding most of it */
	unsigned int ntop;
};

/* One allocation, for the memory map (kept when model->keep_history is set). */
struct mem_hist {
	__u64 addr, size, t0, t1; /* t1: freed, 0 never */
	__u32 pid, site;
	__u16 api;
	__s8 device;
	__u8 kind;
	bool failed; /* a failed allocation: addr 0, t0 its time */
};

#define MEM_HIST_MAX (4u << 20)

/* Call stacks (GS_EV_STACK), counted per distinct stack of a call in a process. */
struct stack_entry {
	__u32 pid;
	__u16 api;
	__u16 nframes;
	__u64 arg; /* launches: the kernel handle */
	__u64 count;
	__u64 ip[GS_STACK_MAX];
};

/* GPU execution times of a kernel (or graph), from the in-process plane's records. */
struct gpu_stat {
	__u64 count, total_ns, min_ns, max_ns;
	__u64 queue_ns;	     /* launch call to GPU start, summed */
	__u64 idle_starts;   /* started on an idle stream, ungated (see analysis/gputime.c) */
	__u64 gated;	     /* held behind a gate until queued (src/inject/gate.h): exact */
	__u64 start_unknown; /* not in the figures above: when it started is not known */
	struct hist dur, queue;
};

/* One stream's GPU activity, in submission order. */
struct stream_stat {
	__u32 pid;
	__u32 tid; /* a thread's own default stream: its thread; else 0 */
	__s32 device;
	__u64 stream;
	__u64 ops, busy_ns, first_start, last_end;
	__u64 gaps, idle_ns, max_gap_ns; /* idle time between one op's end and the next's start */
	__u64 last_call;		 /* its latest operation's call */
};

#define DEV_RECENT 64

/*
 * A device's busy time: the union of its operations' intervals over every stream and
 * process. Records arrive in (roughly) submission order, not in GPU order: intervals wait
 * in `pending` until no earlier one can still come (a watermark behind the latest call
 * seen), then are merged in start order.
 */
struct dev_stat {
	__s32 device;
	__u64 ops, busy_ns, first_start, last_end;
	__u64 gaps, idle_ns, max_gap_ns;
	__u64 late; /* arrived behind the watermark: counted, merged as well as possible */
	/* Calibration (GS_GPU_CALIBRATION): what an event pair adds to a kernel's time, its
	 * samples and their median, taken off kernel times on this device. */
	__u64 cal[16], overhead_ns;
	unsigned int ncal;
	__u64 cur_start, cur_end; /* the merged interval still open */
	bool have_cur;
	struct {
		__u64 start, end;
	} * pending;
	size_t npending, cap;
	size_t flush_at; /* flush when npending reaches it: twice what the last flush kept */
	__u64 flushes;
	/* Its latest operations, whatever their stream: what ran while a kernel waited. */
	struct dev_op {
		__u64 start, end, stream, func;
		__u32 pid, tid;
	} recent[DEV_RECENT];
	unsigned int nrecent; /* written so far (a ring) */
};

#define KSTAT_SHAPES 4
#define KSTAT_APIS   4

struct kshape {
	__u32 grid[3], block[3], shmem;
	__u64 count;
};

struct kstat {
	__u32 pid;
	__u64 handle;
	__u64 launches;	  /* successful launch calls (captured ones included) */
	__u64 captured;	  /* of which recorded into a graph rather than run */
	__u64 graph_runs; /* runs through graph launches of a capture containing it */
	__u64 errors;
	__u64 call_ns;
	__u32 flags; /* GS_LAUNCH_* seen */
	struct kshape shapes[KSTAT_SHAPES];
	__u64 other_shapes;
	struct {
		__u16 api;
		__u64 count;
	} apis[KSTAT_APIS];
	struct gpu_stat *gpu; /* NULL until a GPU record for it */
};

struct name_entry {
	char *name; /* mangled, as the driver saw it */
	__u16 api;
	__u8 ns;
};

struct alias_entry {
	__u64 target;
	__u8 ns;
};

struct copy_stat {
	__u64 count, bytes; /* successful calls */
	__u64 sync_count, sync_bytes, sync_ns;
	__u64 async_count, async_bytes;
	__u64 errors;
	__u64 gpu_count, gpu_bytes, gpu_ns; /* timed on the GPU (asynchronous ones) */
};

struct sync_stat {
	__u64 calls, total_ns, max_ns, not_ready;
};

/* Upper bounds of the NCCL call-duration buckets (ns): 10 us to 10 s, decades. */
#define NCCL_BUCKETS 7
extern const __u64 nccl_bucket_ns[NCCL_BUCKETS];

struct nccl_stat {
	__u64 calls, bytes, total_ns, max_ns, errors;
	__u64 buckets[NCCL_BUCKETS + 1]; /* calls per duration bucket; the last: above 10 s */
	__u64 unknown_size; /* collectives on communicators whose size was never seen */
};

struct comm_entry {
	__u64 comm;
	__u32 pid;
	__s32 rank, nranks;
	__u64 calls;
	bool destroyed;
};

struct err_stat {
	__u64 count, first_ts;
	__u32 pid, tid;
	__u16 api;
	__s32 result;
};

#define NCCL_OPS (GS_NCCL_COMM_DESTROY + 1)

struct model {
	struct gs_ev_session start, end;
	bool have_start, have_end;
	struct hmap procs;	 /* pid -> struct proc */
	struct hmap names;	 /* (pid << 1 | ns, handle) -> struct name_entry */
	struct hmap aliases;	 /* (pid, handle) -> struct alias_entry */
	struct hmap kernels;	 /* (pid, handle) -> struct kstat */
	struct hmap graph_execs; /* (pid, exec) -> struct kstat (launches of the graph) */
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
	__u64 copy_bytes;
	__u64 in_use[MEM_KINDS], peak[MEM_KINDS];
	__u64 nameless; /* name records whose string could not be read */
	__u64 api_calls[GS_API_MAX];
	__u64 alloc_calls[GS_API_MAX], alloc_bytes[GS_API_MAX]; /* successful allocations */
	/* GPU timing (in-process plane) */
	struct hmap streams; /* (pid, stream) -> struct stream_stat */
	struct hmap devices; /* (device + 1, 0) -> struct dev_stat */
	__u64 gpu_records, gpu_latest_call;
	__u64 gpu_start_unknown; /* launches with GS_GPU_START_UNKNOWN, or ... */
	__u64 gpu_start_late; /* ... ungated on an idle stream, their call long after the start */
	__u64 gpu_end_late;   /* ... ungated, their end event recorded late (GS_GPU_END_LATE) */
	__u64 gpu_copy_end_late; /* copies and sets with GS_GPU_END_LATE: not in copy figures */
	/* OS plane */
	struct os_stat os;
	__u64 os_events;
	struct hmap threads_os; /* tid -> struct thread_os */
	struct hmap thread_ctx; /* (tid, pid) -> struct ctx_stack: the thread's current context */
	/* findings: the longest ones, longest first; all of them counted */
	struct finding findings[MAX_FINDINGS];
	size_t nfindings;
	__u64 findings_total;
	struct hmap launch_ends;  /* (pid, stream) -> boxed end of the last launch call */
	struct hmap stream_waits; /* (pid, stream) -> boxed time of its last cuStreamWaitEvent */
	/* The latest kept (for timelines): finding n at [n % RECENT_FINDINGS]. */
	struct finding recent_findings[RECENT_FINDINGS];
	/* Gaps whose OS records may still be on their way (analysis/findings.c, defer()). */
	struct pending_finding {
		struct finding f;
		__u64 from, until;
	} pending_findings[PENDING_FINDINGS];
	unsigned int npending_findings;
	__u64 os_clock; /* the latest time an OS record was written at */
	/* stacks */
	struct hmap symbols; /* (pid, addr) -> char * (GS_EV_SYMBOL) */
	struct hmap stacks;  /* (hash, pid) -> struct stack_entry */
	__u64 stack_records;
	/* device code the processes loaded (analysis/devcode.c) */
	struct hmap devmods;	/* (pid, scope) -> struct dev_module */
	struct hmap devkernels; /* (pid, hash of the name) -> struct dev_kernel */
	__u64 devmods_total;
	/* records device-side probes wrote into GPU ring buffers (GS_EV_PROBE_OUT) */
	__u64 probe_records, probe_bytes;
	/* memory analyses (analysis/memsites.c) */
	struct hmap last_stack; /* (tid, pid) -> struct last_stack: a thread's latest stack */
	struct hmap sites;	/* (pid, key) -> struct mem_site */
	__u32 next_site;
	struct oom_finding ooms[MAX_OOMS]; /* the first ones */
	size_t nooms;
	__u64 ooms_total;
	struct oom_finding last_oom;			/* the latest (for timelines) */
	__u64 leak_sites;				/* suspected at the latest check */
	__u64 leaks_total;				/* sites ever found suspected */
	struct mem_site *recent_leaks[RECENT_FINDINGS]; /* leak n at [n % RECENT_FINDINGS] */
	struct {
		bool have;
		__u64 ts, used, total;
	} nvml_mem[MEM_DEVS]; /* NVML's latest memory reading per GPU index */
	bool keep_history;    /* set before the first record: keep `hist` */
	struct mem_hist *hist;
	size_t nhist, hist_cap;
	bool hist_truncated;
};

struct model *model__new(void);
void model__free(struct model *m);
/* Drop what is kept of a process (gone a while: a long-running agent must not grow). */
void model__forget_proc(struct model *m, __u32 pid);
/* Feed one validated record. */
void model__add(struct model *m, const struct gs_hdr *ev);

/* Keep every allocation's history (the memory map): set before the first record. */
void model__keep_history(struct model *m, bool keep);
/* Whether the session's end record is in (NULL-safe: no). */
bool model__ended(const struct model *m);
/* Library and program files probed (attach records). */
size_t model__libraries(const struct model *m);
/* A process the records named, NULL if none did. */
const struct proc *model__process(const struct model *m, __u32 pid);

/* Mangled name of a launched handle, following aliases; NULL if never seen. */
const char *model__kernel_name(const struct model *m, __u32 pid, __u64 handle);
/* What a pointer is, in a process: MK_DEVICE, MK_MANAGED, MK_HOST, or -1 unknown. */
int model__classify(const struct model *m, __u32 pid, __u64 addr);
/* Visit every live range of a process in address order. */
void model__walk_ranges(const struct proc *p, void (*fn)(const struct range *r, void *ctx),
			void *ctx);

/* internal: shared by the model's files */
struct proc *model__proc(struct model *m, __u32 pid);
void model__kernels_add(struct model *m, const struct gs_hdr *ev);
void model__memory_add(struct model *m, struct proc *p, const struct gs_ev_mem *e);
/* Contexts made and made current (API records), and what GPU records say of them: which
 * device a call without one was made for. */
void model__context_add(struct model *m, const struct gs_ev_api *e);
void model__context_seen(struct model *m, __u32 pid, __u64 ctx, __s32 device);
int model__mem_slot(int device);
void model__memory_free(struct proc *p);
void model__transfers_add(struct model *m, const struct gs_hdr *ev);
void model__note_error(struct model *m, const struct gs_hdr *h, const struct gs_call *c);
struct kstat *model__kstat(struct hmap *h, __u32 pid, __u64 handle);
/* A copy's direction: as the API said, or for unified-addressing copies from the pointers. */
unsigned int model__copy_direction(const struct model *m, __u32 pid, unsigned int kind,
				   __u64 dst_addr, __u64 src_addr);
void model__gpu_add(struct model *m, const struct gs_ev_gpu *e);
/* Merge a device's pending intervals that start before `upto` into its totals. */
void model__dev_flush(struct dev_stat *d, __u64 upto);
void model__gpu_free(struct model *m);
void model__os_add(struct model *m, const struct gs_hdr *ev);
void model__os_free(struct os_stat *o);
/* A stream idle from gap_start until e's work started: explain it if it is long enough. */
void model__explain_gap(struct model *m, const struct gs_ev_gpu *e, __u64 gap_start, __u64 start);
/* A kernel that waited [ready, start) on the GPU with its stream free (analysis/findings.c);
 * key: its stream's (model__stream_key), prev_call: the call of the stream's previous work. */
void model__queue_wait(struct model *m, const struct gs_ev_gpu *e, const struct dev_stat *d,
		       __u64 key, __u64 prev_call, __u64 ready, __u64 start);
/* Explain the findings waiting for their OS records: those whose records must all be in by
 * now, or (the session over) all. */
void model__findings_settle(struct model *m, bool all);
/* cuStreamWaitEvent: the stream waits for an event from here on. */
void model__stream_waited(struct model *m, const struct gs_ev_sync *e);
/* A stream as streams are told apart (the legacy default stream under one name; each
 * thread's per-thread default stream its own). */
__u64 model__stream_key(__u64 stream, __u32 tid, __u16 api);
void model__history_add(struct model *m, const struct gs_hdr *ev);
/* Without GPU times: a long gap between launches into a stream, explained the same way. */
void model__launch_gap(struct model *m, const struct gs_ev_launch *l);
void model__findings_free(struct model *m);
void model__stack_add(struct model *m, const struct gs_hdr *ev);
void model__stacks_free(struct model *m);
/* Device code (analysis/devcode.c). */
struct dev_module {
	__u32 pid;
	__u64 scope, bytes, ts;
	__u16 api, ptx_arch, sass_arch, sass_arch_low, nptx, nsass;
	__u8 kind; /* enum gs_devcode_kind */
	__u32 nkernels, with_ptx;
	char *why; /* NULL: read */
};
/* A kernel by name in a process: loaded in modules with PTX for it, and without. */
struct dev_kernel {
	__u32 pid;
	char *name;
	__u16 ptx_arch, sass_arch, sass_arch_low; /* over the modules it is in */
	__u32 with_ptx, without_ptx;		  /* modules */
};
void model__devcode_add(struct model *m, const struct gs_ev_devcode *e);
/* A process's kernel by mangled name, NULL if no module read named it. */
const struct dev_kernel *model__devkernel(const struct model *m, __u32 pid, const char *name);
void model__devcode_free(struct model *m);
/* The name of a code address: its symbol record's, else NULL. */
const char *model__symbol(const struct model *m, __u32 pid, __u64 addr);
/* analysis/memsites.c */
/* A stack record: the latest of its thread (an allocation's comes just before it). */
void model__site_stack(struct model *m, const struct gs_hdr *h, const struct stack_entry *e);
/* The site of an allocation being made (created on first use). */
struct mem_site *model__site_of(struct model *m, struct proc *p, const struct gs_ev_mem *e,
				int kind);
void model__site_alloc(struct model *m, struct proc *p, struct range *r, const struct gs_ev_mem *e);
void model__site_free(struct model *m, struct range *r, __u64 ts);
/* Bytes a site holds that are not a range (VMM physical memory). */
void model__site_add(struct mem_site *s, __u64 bytes, __u64 ts);
void model__site_sub(struct mem_site *s, __u64 bytes, __u64 ts);
/* A failed allocation: its OOM finding if it ran out of memory. */
void model__site_failed(struct model *m, struct proc *p, const struct gs_ev_mem *e, int device);
/* Sample the process's sites and fragmentation if it is time (any record of it). */
void model__mem_tick(struct model *m, struct proc *p, __u64 ts, bool force);
/* Run the trend test on every site (as of `now`, or its process's end); returns how many
 * are suspected. */
__u64 model__leaks_check(struct model *m, __u64 now);
/* The trend test of one site, as of `now` (nothing changes). */
void model__site_trend(const struct mem_site *s, __u64 now, struct leak_test *t);
void model__nvml_seen(struct model *m, const struct gs_hdr *ev);
/* A site's frames as text: "f < g < h" (at most `frames`), or its API without a stack. */
void model__site_label(const struct model *m, const struct mem_site *s, unsigned int frames,
		       char *buf, size_t n);
/* The fragmentation of a process's device slot now. */
void model__frag_now(const struct proc *p, int slot, __u64 ts, struct frag_sample *out);
/* Fragmentation 0..1 of a sample: stranded / (stranded + live) (0 with nothing live). */
double model__frag_score(const struct frag_sample *s);
void model__sites_free(struct model *m);
void model__sites_forget(struct model *m, __u32 pid);

/* NET_TCP, NET_UDP or NET_OTHER of a record's protocol. */
int model__net_proto(unsigned int family, unsigned int protocol);

#endif
