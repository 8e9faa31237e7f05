/* SPDX-License-Identifier: MIT */
/*
 * What the model's queries, its analyses' findings and the report hand out: plain values,
 * copied, with no pointer into the model. Sinks see these and nothing of the model's state.
 */
#ifndef GS_ANALYSIS_RESULTS_H
#define GS_ANALYSIS_RESULTS_H

#include <stdbool.h>
#include "core/hist.h"
#include "gpuscope/api.h"

enum mem_kind {
	MK_DEVICE = 0, /* linear device memory and VMM physical memory */
	MK_MANAGED = 1,
	MK_HOST = 2, /* page-locked host memory */
	MEM_KINDS = 3,
	MK_MAPPING = 3, /* range kind only: a VMM mapping (its bytes count at cuMemCreate) */
};

/* Devices whose memory is told apart per process; an unknown one (and any beyond) is the
 * last slot (model__mem_slot). */
#define MEM_DEVS 16

/* A live allocation (model__each_alloc), in address order. */
struct model_alloc {
	__u64 addr, size, ts;
	__u64 handle; /* MK_MAPPING: the physical handle */
	__u32 pid, tid;
	__u16 api;
	__u8 kind;   /* enum mem_kind */
	__s8 device; /* MK_DEVICE and mappings: the device, -1 if not known */
	bool pooled; /* stream-ordered, from a pool */
};

/* A process, as the model knows it (model__process). */
struct model_proc {
	__u32 pid, ppid;
	char comm[16];
	const char *exe; /* interned ("" until a record names it) */
	bool complete;	 /* seen from its start: every allocation is known */
	bool exited;
	__s32 exit_code;
	__u64 start_ts, end_ts;
	__u64 launches;
	__u64 in_use[MEM_KINDS], peak[MEM_KINDS];
	__u64 dev_in_use[MEM_DEVS + 1], dev_peak[MEM_DEVS + 1]; /* device memory per slot */
	__u64 reserved;						/* VMM address space reserved */
	__u64 allocs, frees, failed_allocs, untracked_frees;
	__u64 copy_bytes, sync_ns;
	__u64 pool_in_use, pool_peak, vmm_physical, vmm_mapped;
	__u64 nranges; /* live allocations and mappings */
	/* its facts (GS_EV_PROC_INFO), interned: NULL when no record gave them */
	const char *cmdline, *cgroup;
	__u32 uid;
	bool cmdline_truncated;
	/* its Python interpreter (GS_EV_PYTHON): PY_VERSION_HEX, 0 when none was seen */
	__u32 py_version;
	__u16 py_status; /* enum gs_python_status */
	bool py_mixed;	 /* the interpreter's native frames found and replaced */
};

/* The model's running totals (model__counters). */
struct model_counters {
	__u64 events, first_ts, last_ts;
	__u64 t0; /* the session's start, else the first record's time */
	__u64 launches, graph_launches, launch_errors, copy_bytes;
	__u64 in_use[MEM_KINDS], peak[MEM_KINDS];
	__u64 procs;
};

/* ---- kernels ------------------------------------------------------------------------------ */

#define KSTAT_SHAPES 4
#define KSTAT_APIS   4

struct kshape {
	__u32 grid[3], block[3], shmem;
	__u64 count;
};

/* Launches of a kernel by one entry point. */
struct kapi_count {
	__u16 api;
	__u64 count;
};

/* GPU execution times of a kernel (or graph), from the in-process plane's records. */
struct gpu_stat {
	__u64 count, total_ns, min_ns, max_ns;
	__u64 queue_ns;	     /* launch call to GPU start, summed */
	__u64 idle_starts;   /* started on an idle stream, ungated (see analysis/model_gpu.c) */
	__u64 gated;	     /* held behind a gate until queued (src/inject/gate.h): exact */
	__u64 chained;	     /* of which held in a chain (src/inject/gputime_chain.c) */
	__u64 followed;	     /* timed from the end event before it on a busy stream (same) */
	__u64 in_graph;	     /* of which run inside a CUDA graph (src/inject/gputime_graph.c) */
	__u64 carried;	     /* run by a carrier of ours (src/inject/gputime_carry.c): exact */
	__u64 by_driver;     /* timed by the driver (CUPTI: src/inject/gputime_cupti.c): exact */
	__u64 start_unknown; /* not in the figures above: when it started is not known */
	struct hist dur, queue;
};

/* A kernel handle of a process (model__each_kernel). */
struct model_kernel {
	__u32 pid;
	__u64 handle;
	const char *name; /* mangled, NULL if never named (valid during the callback) */
	__u64 launches, captured, graph_runs, errors, call_ns;
	__u64 gpu_count, gpu_ns; /* launches timed on the GPU, and their time */
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

/* An operation that ran on a device (a device's latest ones: what ran while a kernel
 * waited). */
struct gpu_op {
	__u64 start, end, stream, func;
	__u32 pid, tid;
};

/* A device's busy time: the union of its operations' intervals over every stream and
 * process, everything merged. */
struct dev_busy {
	__s32 device;
	__u64 ops, busy_ns, first_start, last_end;
	__u64 gaps, idle_ns, max_gap_ns;
	__u64 late;		   /* arrived behind the watermark: merged as well as possible */
	__u64 overhead_ns;	   /* what an event pair adds, taken off kernel times */
	__u64 chained_overhead_ns; /* the same for a launch timed from the end before it */
	__u64 busy_overhead_ns;	   /* the same for a kernel launched onto a busy stream */
	__u64 graph_overhead_ns;   /* the same for a kernel inside a graph (its twin's nodes) */
	__u64 carried_overhead_ns; /* the same for a launch run by a carrier (its nodes) */
	__u64 launch_ns;	   /* overhead_ns is an empty pair and this (GS_CAL_LAUNCH); 0: the
			  * midpoint rule (model_gpu.c) */
	__u64 busy_min_ns; /* busy_overhead_ns is overhead_ns, at least this (GS_CAL_BUSY_MIN) */
	__u64 flushes;
};

/* ---- copies, synchronisation, NCCL, errors ------------------------------------------------- */

struct copy_stat {
	__u64 count, bytes; /* successful calls */
	__u64 empty;	    /* of which of zero bytes (no copy made: CUPTI records none) */
	__u64 captured, captured_bytes; /* of which recorded into a graph being captured */
	__u64 graph_runs, graph_bytes;	/* run by graph launches (captured ones) */
	__u64 sync_count, sync_bytes, sync_ns;
	__u64 async_count, async_bytes;
	__u64 results_unread; /* of the asynchronous ones, recorded at entry (GS_COPY_NO_RETURN) */
	__u64 errors;
	__u64 gpu_count, gpu_bytes, gpu_ns; /* timed on the GPU (asynchronous ones) */
};

struct sync_stat {
	__u64 calls, total_ns, max_ns, not_ready;
};

/* Upper bounds of the NCCL call-duration buckets (ns): 10 us to 10 s, decades. */
#define NCCL_BUCKETS 7
extern const __u64 nccl_bucket_ns[NCCL_BUCKETS];
#define NCCL_OPS (GS_NCCL_COMM_DESTROY + 1)

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

/* ---- the OS plane ------------------------------------------------------------------------- */

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

/* The OS plane's records, aggregated, for a process or the run: system calls and devices
 * listed, most time first. */
struct os_result {
	__u64 offcpu_count[GS_OFFCPU_OTHER + 1], offcpu_ns[GS_OFFCPU_OTHER + 1]; /* by reason */
	__u64 runq_ns; /* of the off-CPU time, runnable and waiting for a CPU */
	__u64 faults, major_faults;
	struct io_stat io[GS_BLOCK_OTHER + 1];			  /* by operation */
	__u64 net_calls[2][NET_PROTOS], net_bytes[2][NET_PROTOS]; /* [enum gs_net_dir] */
	__u64 thread_exits;
	bool oom_killed;
	struct os_syscall {
		__u32 nr;
		struct sys_stat s;
	} * syscalls;
	size_t nsyscalls;
	struct os_device {
		__u32 dev;
		struct io_stat s;
	} * devices;
	size_t ndevices;
};

/* ---- findings ------------------------------------------------------------------------------ */

enum finding_cause {
	CAUSE_BLOCKED = 1, /* off CPU, asleep or blocked, for most of the gap */
	CAUSE_DISK = 2,	   /* ... blocked on disk or a page-in */
	CAUSE_PREEMPTED = 3,
	CAUSE_FAULTS = 4, /* on CPU, taking page faults */
	CAUSE_ON_CPU = 5, /* on CPU: the program's own work */
	CAUSE_QUEUED = 6, /* a kernel that waited on the GPU with its stream free */
};

/* A GPU stream that sat idle, or a kernel that waited, and why (analysis/findings.c). */
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
	char io_dev_name[32], other_io_dev_name[32]; /* the devices' names, as recorded */
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

/* ---- memory analyses (analysis/memsites.c) ------------------------------------------------- */

enum oom_cause {
	OOM_EXHAUSTION = 1,    /* less free than was asked */
	OOM_FRAGMENTATION = 2, /* enough free, in pieces too small */
	OOM_UNCLEAR = 3,       /* NVML saw enough free, the process's own view no piece */
	OOM_CAUSES
};

#define OOM_TOP 3

struct leak_test {
	bool suspected;
	unsigned int n;	   /* samples tested */
	double confidence; /* that the bytes grow: 1 - p of Mann-Kendall's S (one-sided) */
	double slope_bps;  /* Sen's slope over the window, bytes/s */
	__u64 from, to;	   /* the window */
	__s64 growth;	   /* bytes: its last sample less its first */
};

/* The driver backs device memory with pages of MEM_PAGE bytes (see memsites.h). */
#define MEM_PAGE (2ULL << 20)

struct frag_sample {
	__u64 ts, live, holes, largest_hole, ranges;
	__u64 stranded, largest_stranded;
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

/* One allocation, for the memory map (kept when asked: memsites). */
struct mem_hist {
	__u64 addr, size, t0, t1; /* t1: freed, 0 never */
	__u32 pid, site;
	__u16 api;
	__s8 device;
	__u8 kind;
	bool failed; /* a failed allocation: addr 0, t0 its time */
};

/* ---- call stacks and device code ---------------------------------------------------------- */

/* Call stacks (GS_EV_STACK), counted per distinct stack of a call in a process. */
struct stack_entry {
	__u32 pid;
	__u16 api;
	__u16 nframes;
	__u64 arg; /* launches: the kernel handle */
	__u64 count;
	__u64 ip[GS_STACK_MAX];
};

/* A module a process loaded, as the in-process plane read it. */
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

#endif
