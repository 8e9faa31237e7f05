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

struct range {
	__u64 addr, size;
	__u64 ts;
	__u64 handle; /* MK_MAPPING: the physical handle */
	__u32 tid;
	__u16 api;
	__u8 kind;   /* enum mem_kind */
	__s8 device; /* MK_DEVICE: the device, -1 if not known */
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
	__u64 faults, major_faults;
	/* Asleep (waiting on another thread, say): the same process's thread that was
	 * blocked longest in the meantime, and in what. other_tid 0: none. */
	__u32 other_tid, other_cause;
	__s32 other_syscall;
	__u32 other_io_count;
	__u64 other_off_ns, other_io_bytes;
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
	__u64 gpu_start_unknown; /* launches with GS_GPU_START_UNKNOWN */
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
};

struct model *model__new(void);
void model__free(struct model *m);
/* Drop what is kept of a process (gone a while: a long-running agent must not grow). */
void model__forget_proc(struct model *m, __u32 pid);
/* Feed one validated record. */
void model__add(struct model *m, const struct gs_hdr *ev);

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
/* The name of a code address: its symbol record's, else NULL. */
const char *model__symbol(const struct model *m, __u32 pid, __u64 addr);
/* NET_TCP, NET_UDP or NET_OTHER of a record's protocol. */
int model__net_proto(unsigned int family, unsigned int protocol);

#endif
