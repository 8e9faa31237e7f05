/* SPDX-License-Identifier: MIT */
/*
 * The one event schema. Every plane (kernel eBPF, the in-process library, NVML, gpuscope
 * itself) produces these records; recordings are these records back to back.
 *
 * Rules: plain fixed-width data, no pointers, no `long`; every record starts with
 * struct gs_hdr, whose `type` comes first and whose `size` frames the record; times are
 * CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns() in the kernel). Padding is explicit so
 * that clang's BPF target and gcc lay the structs out identically; sizes are asserted in
 * src/core/event.c.
 */
#ifndef GPUSCOPE_EVENT_H
#define GPUSCOPE_EVENT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define GS_SCHEMA_VERSION 1

#define GS_COMM_LEN  16
#define GS_PATH_MAX  256
#define GS_NAME_MAX  1024
#define GS_CMD_MAX   512
#define GS_STACK_MAX 64
#define GS_SYM_MAX   512

enum gs_event_type {
	GS_EV_NONE = 0,
	GS_EV_LAUNCH = 1,     /* kernel or graph launch */
	GS_EV_KNAME = 2,      /* handle -> mangled kernel name */
	GS_EV_KALIAS = 3,     /* handle -> another handle that carries the name */
	GS_EV_MEM = 4,	      /* allocation, free, VMM create/map/unmap/release */
	GS_EV_COPY = 5,	      /* memcpy and memset families */
	GS_EV_SYNC = 6,	      /* synchronisation, waits and polls */
	GS_EV_API = 7,	      /* other driver calls: lifecycle, capture, failures */
	GS_EV_NCCL = 8,	      /* NCCL collectives, p2p, groups, communicators */
	GS_EV_PROC = 9,	      /* fork, exec, exit of a traced process */
	GS_EV_LIB = 10,	      /* a traced process opened a CUDA/NCCL library */
	GS_EV_SESSION = 11,   /* gpuscope: start and end of a trace */
	GS_EV_ATTACH = 12,    /* gpuscope: probes attached to a file */
	GS_EV_DROPS = 13,     /* gpuscope: cumulative drop counters */
	GS_EV_GPU = 14,	      /* in-process plane: when a launch or copy ran on the GPU */
	GS_EV_OFFCPU = 15,    /* OS: a thread of a traced process off the CPU */
	GS_EV_FAULTS = 16,    /* OS: page faults of a thread, batched */
	GS_EV_BLOCK = 17,     /* OS: a block I/O request a traced thread issued */
	GS_EV_NET = 18,	      /* OS: bytes a traced thread sent or received on a socket */
	GS_EV_SYSCALL = 19,   /* OS: a selected system call */
	GS_EV_STACK = 20,     /* the user call stack of a call (launch, allocation, failure) */
	GS_EV_SYMBOL = 21,    /* gpuscope: the name of a code address in a process */
	GS_EV_NVML = 22,      /* NVML sampler: one GPU's device metrics */
	GS_EV_DEVCODE = 23,   /* in-process plane: device code a process loaded, and its kernels */
	GS_EV_PROBE_OUT = 24, /* in-process plane: a record a device-side probe wrote */
	GS_EV_HOST = 25,      /* gpuscope: the machine, at the start of a session */
	GS_EV_GPU_INFO = 26,  /* NVML: a GPU's identity, at the start of a session */
	GS_EV_PROC_INFO = 27, /* gpuscope: a process's command line and cgroup */
	GS_EV_BLOCKDEV = 28,  /* gpuscope: the name of a block device the OS plane saw */
	GS_EV_RETIRE = 29,    /* gpuscope: every record of an exited process has been delivered */
	GS_EV_PYTHON = 30,    /* a process's Python interpreter, and whether its frames are read */
	GS_EV_PYSTACK = 31,   /* kernel probes: a thread's Python frames, before its stack record */
	GS_EV_PYEXC = 32,     /* kernel probes: a Python exception raised, or left uncaught */
	GS_EV_MAX,
};

enum gs_source {
	GS_SRC_UPROBE = 1,     /* kernel eBPF uprobes on CUDA/NCCL libraries */
	GS_SRC_TRACEPOINT = 2, /* kernel eBPF tracepoints */
	GS_SRC_INJECT = 3,     /* in-process (LD_PRELOAD) plane */
	GS_SRC_NVML = 4,       /* NVML sampler */
	GS_SRC_GPUSCOPE = 5,   /* gpuscope itself */
};

/* A block request in the OS plane's map of those in flight (key: its struct request *):
 * made by pid_tgid (0: an untraced task), issued to the device at ts (0: not yet). */
struct gs_block_req {
	__u64 ts, pid_tgid, sector;
	__u32 bytes, dev, op;
};

/* gs_hdr.flags */
enum gs_hdr_flag {
	/* A block request whose completion the kernel ran no program for: its record was
	 * written when its request's address was taken again, its dur_ns 0 (end unknown). */
	GS_HDR_END_UNSEEN = 1,
	/* An API record of a graph's node (GS_SH_A_KNODE, A_CHILD) that is not a kernel: a
	 * child graph (arg1 the child), a conditional node (its bodies run as the GPU
	 * decides: not counted), another kind (nothing to count). */
	GS_HDR_GNODE_CHILD = 2,
	GS_HDR_GNODE_COND = 4,
	GS_HDR_GNODE_OTHER = 8,
};

/* The in-process plane names its own threads with this prefix (at most 15 bytes in all):
 * the OS plane leaves them out. */
#define GS_THREAD_PREFIX "gpuscope-"

struct gs_hdr {
	__u16 type;  /* enum gs_event_type */
	__u8 source; /* enum gs_source */
	__u8 flags;  /* GS_HDR_* */
	__u32 size;  /* bytes in the whole record, header included */
	__u64 ts;    /* CLOCK_MONOTONIC ns; for calls, the entry time */
	__u32 pid;   /* process (tgid) */
	__u32 tid;   /* thread */
};

/* Common part of every record that describes one API call. */
struct gs_call {
	__u64 dur_ns; /* entry to return */
	__u64 caller; /* return address of the call (user space) */
	__u16 api;    /* enum gs_api */
	__u16 pad;
	__s32 result; /* CUresult / ncclResult_t; 0 is success */
};

enum gs_launch_flags {
	GS_LAUNCH_COOPERATIVE = 1 << 0,
	GS_LAUNCH_PTSZ = 1 << 1, /* per-thread default stream variant */
	GS_LAUNCH_GRAPH = 1 << 2,
	GS_LAUNCH_CLUSTER = 1 << 3, /* cuLaunchKernelEx with a cluster dimension */
	/* Recorded at entry, its return not seen (kernel plane, uprobe sessions): result 0
	 * and dur_ns 0 mean not known, not success in no time. */
	GS_LAUNCH_NO_RETURN = 1 << 4,
};

struct gs_ev_launch {
	struct gs_hdr h;
	struct gs_call c;
	__u64 func;   /* CUfunction or CUkernel handle; CUgraphExec for graph launches */
	__u64 stream; /* CUstream (0 = legacy default stream) */
	__u32 grid[3];
	__u32 block[3];
	__u32 shmem; /* dynamic shared memory bytes */
	__u32 flags; /* enum gs_launch_flags */
};

/* Name spaces of handles in kname/kalias records. */
enum gs_handle_ns {
	GS_NS_DRIVER = 0, /* CUkernel / CUfunction handles, as passed to launches */
	GS_NS_HOSTFN = 1, /* host stub addresses (runtime registration) */
};

struct gs_ev_kname {
	struct gs_hdr h;
	__u64 handle; /* in name space `ns` */
	__u64 scope;  /* CUlibrary / CUmodule / fatbin handle */
	/* Where the name is in the process. The kernel cannot read a page that is not
	 * resident; then len is 0 and gpuscope reads the name from there itself. */
	__u64 name_addr;
	__u16 api;
	__u16 len; /* bytes of name, without the terminating NUL */
	__u8 ns;
	__u8 truncated;
	__u16 pad;
	char name[GS_NAME_MAX]; /* NUL-terminated; records are cut after it */
};

struct gs_ev_kalias {
	struct gs_hdr h;
	__u64 handle; /* driver handle that has no name of its own */
	__u64 target; /* the handle (in target_ns) that has one */
	__u16 api;
	__u8 target_ns;
	__u8 pad[5];
};

enum gs_mem_op {
	GS_MEM_ALLOC = 1, /* device linear memory */
	GS_MEM_ALLOC_MANAGED = 2,
	GS_MEM_ALLOC_HOST = 3, /* page-locked host memory */
	GS_MEM_FREE = 4,       /* device or managed */
	GS_MEM_FREE_HOST = 5,
	GS_MEM_ALLOC_ASYNC = 6, /* stream-ordered, from a pool */
	GS_MEM_FREE_ASYNC = 7,
	GS_MEM_VMM_CREATE = 8,	/* physical allocation: addr = handle */
	GS_MEM_VMM_RELEASE = 9, /* addr = handle */
	GS_MEM_VMM_MAP = 10,	/* addr = va, aux = handle, aux2 = offset */
	GS_MEM_VMM_UNMAP = 11,
	GS_MEM_VA_RESERVE = 12,
	GS_MEM_VA_FREE = 13,
};

struct gs_ev_mem {
	struct gs_hdr h;
	struct gs_call c;
	__u64 addr;
	__u64 size;
	__u64 aux;    /* stream, VMM handle, or pitch */
	__u64 aux2;   /* pool, map offset */
	__u32 op;     /* enum gs_mem_op */
	__s32 device; /* -1 when the call does not say */
};

enum gs_copy_kind {
	GS_COPY_UNKNOWN = 0,
	GS_COPY_HTOD = 1,
	GS_COPY_DTOH = 2,
	GS_COPY_DTOD = 3,
	GS_COPY_HTOH = 4,
	GS_COPY_PEER = 5,
	GS_COPY_DEFAULT = 6, /* unified addressing: direction from the pointers */
	GS_COPY_MEMSET = 7,
	GS_COPY_ARRAY = 8, /* to or from a CUDA array */
	GS_COPY_KIND_MAX,
};

enum gs_copy_flags {
	GS_COPY_ASYNC = 1 << 0,
	GS_COPY_2D = 1 << 1,
	GS_COPY_3D = 1 << 2,
	GS_COPY_NO_RETURN = 1 << 3, /* a set recorded at entry: result and call time not read */
};

struct gs_ev_copy {
	struct gs_hdr h;
	struct gs_call c;
	__u64 dst;
	__u64 src; /* memset: the value */
	__u64 bytes;
	__u64 stream;
	__u32 kind;  /* enum gs_copy_kind */
	__u32 flags; /* enum gs_copy_flags */
};

struct gs_ev_sync {
	struct gs_hdr h;
	struct gs_call c;
	__u64 handle; /* stream, event or context */
	__u64 aux;    /* cuStreamWaitEvent: the event */
};

struct gs_ev_api {
	struct gs_hdr h;
	struct gs_call c;
	__u64 arg0;
	__u64 arg1;
	__u64 out; /* value written through the call's out-parameter, if any */
};

enum gs_nccl_op {
	GS_NCCL_ALL_REDUCE = 1,
	GS_NCCL_ALL_GATHER = 2,
	GS_NCCL_REDUCE_SCATTER = 3,
	GS_NCCL_BROADCAST = 4,
	GS_NCCL_REDUCE = 5,
	GS_NCCL_SEND = 6,
	GS_NCCL_RECV = 7,
	GS_NCCL_GROUP_START = 8,
	GS_NCCL_GROUP_END = 9,
	GS_NCCL_COMM_INIT = 10,
	GS_NCCL_COMM_DESTROY = 11,
};

struct gs_ev_nccl {
	struct gs_hdr h;
	struct gs_call c;
	__u64 comm;
	__u64 count;
	__u64 stream;
	__u64 sendbuf;
	__u64 recvbuf;
	__u32 op;	/* enum gs_nccl_op */
	__s32 datatype; /* ncclDataType_t, -1 when none */
	__s32 redop;	/* ncclRedOp_t, -1 when none */
	__s32 peer;	/* root or peer rank, -1 when none */
	__s32 nranks;	/* communicator init: size, else -1 */
	__s32 rank;	/* communicator init: this rank, else -1 */
};

enum gs_gpu_kind {
	GS_GPU_KERNEL = 1,
	GS_GPU_GRAPH = 2, /* a whole graph launch */
	GS_GPU_COPY = 3,
	GS_GPU_MEMSET = 4,
	/* Calibration, once per context: what an event pair measures beyond the kernel
	 * between (end_ns - start_ns; src/inject/gputime.c); func says which measure */
	GS_GPU_CALIBRATION = 5,
};

/* A calibration record's func (src/inject/gputime_ctx.c): what the analysis takes off kernel
 * times comes from the first two and GS_CAL_LAUNCH (analysis/model_gpu.c), inside graphs from
 * GS_CAL_GRAPH and GS_CAL_GRAPH_EMPTY, in carriers from GS_CAL_CARRIED and GS_CAL_CARRIED_EMPTY. */
enum gs_gpu_cal {
	GS_CAL_OVERHEAD = 0, /* a gated pair around the calibration kernel, less its span */
	GS_CAL_EMPTY = 1,    /* a gated pair with nothing between */
	GS_CAL_SPAN = 2,     /* the calibration kernel's span, by its own reading of the timer */
	/* Two calibration kernels in a gated chain: the second's time from the end event
	 * before it to its own, less its span (GS_CAL_OVERHEAD's kind, for chained launches) */
	GS_CAL_CHAINED = 3,
	/* The same two inside a CUDA graph, as a twin has them (src/inject/gputime_graph.c):
	 * event nodes in line around the calibration kernel after another one, less its span;
	 * and two event nodes in line with nothing between. */
	GS_CAL_GRAPH = 4,
	GS_CAL_GRAPH_EMPTY = 5,
	/* What a kernel between two events adds to an empty pair beyond its own duration as
	 * CUPTI has it (its launch and drain on the GPU's front end), measured against CUPTI
	 * for the GPU's architecture (bench/gputime_bias.py) or set by GPUSCOPE_EVENT_LAUNCH_NS:
	 * one a context, where known (end_ns - start_ns). */
	GS_CAL_LAUNCH = 6,
	/* An event pair with nothing between, recorded right after a kernel's end event (as a
	 * launch on a busy stream has its start event): bench/busy_bias.py, not used. */
	GS_CAL_BUSY_EMPTY = 7,
	/* The least a kernel launched onto a busy stream reads over its duration, for the GPU's
	 * architecture (analysis/model_gpu.c). */
	GS_CAL_BUSY_MIN = 8,
	/* A carrier (src/inject/gputime_carry.c) around the calibration kernel, its node set
	 * before each run as a launch sets it, less the span; an empty carrier (two event
	 * nodes first in a graph); and the first again without the set before each run
	 * (bench/gputime_bias.py, not used). */
	GS_CAL_CARRIED = 9,
	GS_CAL_CARRIED_EMPTY = 10,
	GS_CAL_CARRIED_STILL = 11,
	/* --gpu-time=cupti (src/inject/gputime_cupti.c), once a process: how its kernels were
	 * timed, end_ns - start_ns one of enum gs_cupti_state; and at its exit, the driver's
	 * kernel records that no launch of the process could be matched to (end_ns - start_ns:
	 * how many). */
	GS_CAL_CUPTI = 12,
	GS_CAL_CUPTI_UNMATCHED = 13,
};

enum gs_cupti_state {
	GS_CUPTI_ON = 1,      /* by the driver's own timestamps (CUPTI's kernel activity) */
	GS_CUPTI_MISSING = 2, /* CUPTI not found or refused: event pairs instead */
	GS_CUPTI_HANDED = 3,  /* the program's own profiler took CUPTI: untimed from then */
};

enum gs_gpu_flags {
	/* The start event completed before the call began: the stream was idle, and the work
	 * itself started only once the call submitted it (see analysis/gputime.c). */
	GS_GPU_IDLE_STREAM = 1 << 0,
	/* Held behind a gate until the start event, the work and the end event were all
	 * queued (src/inject/gate.h): its times are exact. */
	GS_GPU_GATED = 1 << 1,
	/* Its gate was opened by the watcher while the call was still inside the driver (a
	 * launch that waits for the GPU in the call): the start event completed before the
	 * work was queued, and when the work started is not known. */
	GS_GPU_START_UNKNOWN = 1 << 2,
	/* Not gated, its end event recorded long after the call returned (the thread
	 * descheduled, or faulting), and completed soon after: the work may have ended
	 * before the event was recorded, and when is not known. */
	GS_GPU_END_LATE = 1 << 3,
	/* Held with the launches before and after it behind one gate (a chain,
	 * src/inject/gputime_chain.c); timed from the end event of the launch before it, but
	 * for a chain's first (GS_GPU_FROM_PREV); call_end_ns is when the chain's gate opened,
	 * if later than the call's end: its wait in the queue counts from then. */
	GS_GPU_CHAINED = 1 << 4,
	/* Its start is the end event of the launch before it on its stream: in its chain, or
	 * (without GS_GPU_CHAINED) on a busy stream, the launch before held to be followed
	 * (src/inject/gputime_chain.c). */
	GS_GPU_FROM_PREV = 1 << 5,
	/* A kernel node of a CUDA graph, timed by event nodes around it in the graph's twin
	 * (src/inject/gputime_graph.c): func is the node's kernel, h.ts and call_end_ns the
	 * graph launch's call, stream its stream. */
	GS_GPU_IN_GRAPH = 1 << 6,
	/* Run by a carrier: a graph of gpuscope's own, [event record node, this kernel, event
	 * record node], launched in place of the program's launch on an idle stream
	 * (src/inject/gputime_carry.c). With GS_GPU_GATED, its times are corrected to read as
	 * the gated pairs of the same kernel and launch shape read; else as the events read. */
	GS_GPU_CARRIED = 1 << 7,
};

/* gs_ev_gpu.flags2 */
enum gs_gpu_flags2 {
	/* Its times were written by the driver itself (CUPTI's kernel activity, as the
	 * PyTorch profiler has them: src/inject/gputime_cupti.c): exact, nothing to take off. */
	GS_GPU_BY_DRIVER = 1 << 0,
};

/*
 * GPU execution of one launch or asynchronous copy, from CUDA events recorded around it,
 * on the host clock. h.ts, h.pid and h.tid are those of the call that started it.
 */
struct gs_ev_gpu {
	struct gs_hdr h;
	__u64 start_ns;	   /* CLOCK_MONOTONIC: the start event completed */
	__u64 end_ns;	   /* the end event completed */
	__u64 call_end_ns; /* the call returned (it began at h.ts) */
	__u64 func;	   /* kernel handle or graph exec; 0 for copies */
	__u64 stream;
	__u64 bytes;	/* copies and sets */
	__u64 dst, src; /* copies: the pointers (sets: dst) */
	__u64 ctx;	/* CUcontext */
	__u16 api;
	__u8 kind;	 /* enum gs_gpu_kind */
	__u8 flags;	 /* enum gs_gpu_flags */
	__s32 device;	 /* ordinal, -1 if unknown */
	__u32 copy_kind; /* enum gs_copy_kind, as the API said */
	__u32 flags2;	 /* enum gs_gpu_flags2 (0 in recordings before it) */
};

enum gs_proc_kind {
	GS_PROC_FORK = 1,
	GS_PROC_EXEC = 2,
	GS_PROC_EXIT = 3,
	GS_PROC_FOUND = 4,	 /* gpuscope: a process already running when tracing began */
	GS_PROC_THREAD_EXIT = 5, /* a thread (h.tid) ended, not the last of its process */
	GS_PROC_OOM_KILL = 6,	 /* the kernel's OOM killer chose this process */
};

struct gs_ev_proc {
	struct gs_hdr h;
	__u32 kind;
	__u32 ppid;
	__s32 exit_code; /* wait(2) status for GS_PROC_EXIT */
	__u32 pad;
	char comm[GS_COMM_LEN];
	char path[GS_PATH_MAX]; /* exec: the file */
};

enum gs_lib_kind {
	GS_LIB_NONE = 0,
	GS_LIB_CUDA = 1,   /* libcuda.so.1 (driver) */
	GS_LIB_CUDART = 2, /* libcudart.so.* (runtime) */
	GS_LIB_NCCL = 3,   /* libnccl.so.2 */
	GS_LIB_EXE = 4,	   /* an executable with the runtime linked in statically */
	GS_LIB_KIND_MAX,
};

struct gs_ev_lib {
	struct gs_hdr h;
	__u32 kind; /* enum gs_lib_kind, from the file name */
	__u32 pad;
	char path[GS_PATH_MAX];
};

enum gs_session_kind {
	GS_SESSION_START = 1,
	GS_SESSION_END = 2,
};

enum gs_session_mode {
	GS_MODE_RUN = 1,
	GS_MODE_ATTACH = 2,
};

enum gs_session_flags {
	GS_SESSION_INTERRUPTED = 1 << 0, /* stopped by SIGINT/SIGTERM */
	GS_SESSION_TARGET_LOST = 1 << 1, /* the traced process vanished */
	GS_SESSION_DURATION = 1 << 2,	 /* stopped by -d */
	GS_SESSION_INJECT = 1 << 3,	 /* the driver calls came from the in-process plane */
	GS_SESSION_OS = 1 << 4,		 /* the OS plane was on */
	GS_SESSION_GPU_CHAINS = 1 << 5, /* GPU time of every launch, chained (--gpu-time=chained) */
	GS_SESSION_GPU_CUPTI = 1 << 6,	/* ... of every kernel, by CUPTI (--gpu-time=all) */
	GS_SESSION_GPU_CUPTI_GRAPHS = 1 << 7, /* ... graphs' at every run too (--gpu-time=cupti) */
};

struct gs_ev_session {
	struct gs_hdr h;
	__u32 kind; /* enum gs_session_kind */
	__u32 mode; /* enum gs_session_mode */
	__s32 target_pid;
	__s32 exit_status; /* end: wait(2) status of the run target, -1 if none */
	__u64 realtime_ns; /* CLOCK_REALTIME at h.ts */
	__u32 flags;	   /* enum gs_session_flags */
	__u32 follow;	   /* children followed */
	__u32 gpu_time;	   /* in-process plane: 0 no GPU timing, 1 every launch, N every Nth */
	__u32 os_min_us;   /* OS plane: shorter off-CPU intervals and system calls not reported */
	char cmd[GS_CMD_MAX];
};

struct gs_ev_attach {
	struct gs_hdr h;
	__u64 dev;
	__u64 ino;
	__u32 kind;	/* enum gs_lib_kind */
	__u32 nprobes;	/* functions found and attached */
	__u32 nmissing; /* functions of the table this file lacks */
	__u32 late;	/* attached after the process had mapped it */
	char path[GS_PATH_MAX];
};

struct gs_ev_drops {
	struct gs_hdr h;
	__u64 by_type[GS_EV_MAX]; /* ring buffer drops per event type (cumulative), both planes */
	__u64 lost_calls;	  /* calls whose entry state could not be kept */
	__u64 unwrapped;	  /* in-process: driver entry points handed out unwrapped */
	__u64 rings_lost;   /* in-process: rings abandoned (corrupt, or writer died mid-record) */
	__u64 gates_forced; /* in-process: timing gates opened by the watchdog */
	__u64 time_capped;  /* in-process: launches due for GPU timing left untimed by its rate */
	__u64 time_lost;    /* in-process: ... for want of events or queue room */
};

/* ---- the OS plane (src/bpf/os.bpf.c) ---------------------------------------------------- */

enum gs_offcpu_reason {
	GS_OFFCPU_PREEMPTED = 1, /* still runnable: the CPU went to another task */
	GS_OFFCPU_SLEEP = 2,	 /* blocked, interruptible: waiting for an event, a lock, a timer */
	GS_OFFCPU_DISK = 3,	 /* blocked, uninterruptible: disk I/O, a page-in, some locks */
	GS_OFFCPU_OTHER = 4,	 /* stopped, traced, or another state */
};

struct gs_ev_offcpu {
	struct gs_hdr h;    /* ts: switched out */
	__u64 dur_ns;	    /* until it ran again */
	__u64 runq_ns;	    /* of which runnable and waiting for a CPU */
	__s32 syscall;	    /* the system call it was in (x86-64 number), -1 none */
	__u32 reason;	    /* enum gs_offcpu_reason */
	__u32 major_faults; /* page-ins (major faults) the thread took meanwhile */
	__u32 cpu;	    /* where it ran before */
};

struct gs_ev_faults {
	struct gs_hdr h;  /* ts: the batch's first fault */
	__u64 last_ts;	  /* its last */
	__u64 addr;	  /* the first fault's address */
	__u64 ip;	  /* and instruction */
	__u32 count;	  /* faults in the batch (one thread, at most a millisecond) */
	__u32 major;	  /* of which major (the page was read in), from the thread's counter */
	__u32 error_code; /* the first's (x86: 1 protection, 2 write, 4 user, 16 fetch) */
	__u32 pad;
};

enum gs_block_op {
	GS_BLOCK_READ = 0,
	GS_BLOCK_WRITE = 1,
	GS_BLOCK_FLUSH = 2,
	GS_BLOCK_DISCARD = 3,
	GS_BLOCK_OTHER = 4,
};

struct gs_ev_block {
	struct gs_hdr h; /* ts: issued to the device; pid/tid: the thread that issued it */
	__u64 dur_ns;	 /* issue to completion */
	__u64 sector;
	__u32 bytes;
	__u32 dev; /* the kernel's dev_t: major << 20 | minor */
	__u32 op;  /* enum gs_block_op */
	__s32 error;
};

enum gs_net_dir {
	GS_NET_SEND = 0,
	GS_NET_RECV = 1,
};

struct gs_ev_net {
	struct gs_hdr h;
	__u64 bytes;
	__u16 family;	/* AF_INET, AF_INET6, AF_UNIX ... */
	__u16 protocol; /* IPPROTO_TCP, IPPROTO_UDP ... */
	__u32 dir;	/* enum gs_net_dir */
};

struct gs_ev_syscall {
	struct gs_hdr h; /* ts: entry */
	__u64 dur_ns;
	__s64 ret;
	__u64 arg0; /* fd, address, futex word */
	__u64 arg1; /* ioctl: request; futex: op; read/write: count; mmap: length */
	__u32 nr;   /* x86-64 system call number */
	__u32 pad;
};

/* ---- call stacks ----------------------------------------------------------------------- */

/*
 * A call's user stack, taken when it returned: ip[0] is where it returns to (in its
 * caller), then the callers' return addresses (frame pointers: a library built without
 * them ends the chain early). Written just before the call's own record, with the same
 * h.ts, pid and tid. Records are cut after the last frame (h.size).
 */
struct gs_ev_stack {
	struct gs_hdr h;
	__u64 arg; /* launches: the kernel handle */
	__u16 api; /* the call's */
	__u16 nframes;
	__u32 skipped; /* in-process: launches of this thread whose stack was due (every Nth)
			* but not taken since its previous stack, to keep to a rate
			* (inject/stacks.c); 0 from the kernel probes, whose skips come at
			* the end in one record (source/kernel.c). A record of no frames
			* carries only these (a thread's last skips, or the probes'). */
	__u64 ip[GS_STACK_MAX];
};

/* A stack record of no frames is no stack: it only carries skips (inject/stacks.c's of a
 * thread, source/kernel.c's of the kernel probes). */
static inline int gs_stack_only_skips(const struct gs_ev_stack *s)
{
	return !s->nframes;
}

/*
 * A Python frame in a stack (ip[]): a pseudo-address with bit 63 set (no user address has
 * it), the code object's address (8-byte aligned) in bits 19..62 and the instruction's byte
 * offset in its code in bits 0..18 (offsets past that are cut to it). Its name, as the
 * plane that took it resolved it, comes in a gs_ev_symbol record:
 * "QUALNAME (FILE:LINE)". The interpreter's own native frames are replaced by the Python
 * frames they ran, native frames above and below kept.
 */
#define GS_PYFRAME_BIT	  (1ULL << 63)
#define GS_PYFRAME_OFF	  ((1ULL << 19) - 1)
#define GS_IS_PYFRAME(ip) (((ip)&GS_PYFRAME_BIT) != 0)
#define GS_PYFRAME(code, off)                            \
	(GS_PYFRAME_BIT | (((__u64)(code) >> 3) << 19) | \
	 ((__u64)(off) < GS_PYFRAME_OFF ? (__u64)(off) : GS_PYFRAME_OFF))
/* Where a stack of a thread with no Python state goes on with the Python frames of the
 * thread it works for (gs_ev_pystack's borrowed; named "[on a thread without Python]"). */
#define GS_PYFRAME_BORROWED GS_PYFRAME(0, 1)

/* The name of an address gpuscope resolved in a process (so that a recording replays
 * with names after the process is gone). Records are cut after the name (h.size). */
struct gs_ev_symbol {
	struct gs_hdr h;
	__u64 addr;
	__u16 len; /* bytes of name, without the NUL */
	__u16 pad[3];
	char name[GS_SYM_MAX]; /* "function" (mangled as in the file), else "module+0xoff" */
};

/* Which fields of a gs_ev_nvml sample are there (a GPU may not have them). */
enum gs_nvml_have {
	GS_NVML_UTIL = 1 << 0,
	GS_NVML_MEMORY = 1 << 1,
	GS_NVML_POWER = 1 << 2,
	GS_NVML_TEMP = 1 << 3,
	GS_NVML_CLOCK = 1 << 4,
	GS_NVML_GPM = 1 << 5,
	GS_NVML_LOST = 1 << 6, /* the GPU fell off the bus */
};

struct gs_ev_nvml {
	struct gs_hdr h;	   /* ts: when sampled; pid/tid 0 */
	__s32 gpu;		   /* NVML index */
	__u32 have;		   /* enum gs_nvml_have */
	__u32 util_gpu;		   /* percent */
	__u32 util_mem;		   /* percent */
	__u64 mem_used, mem_total; /* bytes */
	__u32 power_mw, temp_c;
	__u32 clock_sm_mhz, clock_mem_mhz;
	double sm_active, tensor_active, dram_active; /* GPM ratios, 0..1 */
};

/*
 * Device code a process loaded (cuModuleLoadData[Ex], cuModuleLoadFatBinary,
 * cuLibraryLoadData), as the in-process plane read it: a module record, then one record per
 * kernel in it. Whether a kernel has PTX decides whether device-side probes can be put in
 * it (PTX is what gets rewritten; SASS alone cannot be).
 */
enum gs_devcode_kind {
	GS_CODE_PTX = 1,     /* PTX text */
	GS_CODE_FATBIN = 2,  /* a fatbin, or the wrapper __cudaRegisterFatBinary is given */
	GS_CODE_CUBIN = 3,   /* an ELF cubin: SASS for one architecture */
	GS_CODE_UNKNOWN = 4, /* none of those, or not readable */
	GS_CODE_KIND_MAX,
};

struct gs_ev_devcode {
	struct gs_hdr h;
	__u64 scope;  /* the CUmodule / CUlibrary the code became */
	__u64 bytes;  /* module: bytes of the image (a fatbin: its container) */
	__u16 api;    /* the loading call */
	__u8 kind;    /* enum gs_devcode_kind */
	__u8 kernel;  /* 1: a kernel's record (name: its mangled name); 0: the module's */
	__u8 has_ptx; /* kernel: its code has PTX */
	__u8 pad;
	__u16 ptx_arch; /* the highest PTX architecture (module) or the kernel's (75: compute_75) */
	__u16 sass_arch; /* the highest SASS architecture, 0 none */
	__u16 nptx;	 /* module: PTX entries */
	__u16 nsass;	 /* module: SASS entries (cubins) */
	__u16 pad1;
	__u32 nkernels;	     /* module: kernels found in it (their records follow) */
	__u16 len;	     /* bytes of name, without its NUL */
	__u16 sass_arch_low; /* the lowest SASS architecture, 0 none */
	/* kernel: its name; module: why it could not be read, or empty */
	char name[GS_NAME_MAX];
};

/*
 * A record a device-side probe wrote into a GPU ring buffer (bpf_ringbuf_output,
 * bpf_perf_event_output), drained by the in-process plane while the kernels run. Records are
 * cut after the data (h.size, a multiple of 8).
 */
#define GS_PROBE_OUT_MAX 256
struct gs_ev_probe_out {
	struct gs_hdr h; /* ts: when the GPU wrote it (its timer on the event clock); tid 0 */
	__u64 gpu_ns;	 /* the GPU's global timer then */
	__s32 device;	 /* the context's device ordinal */
	__u16 map;	 /* the ring: its index among the probe object's maps */
	__u16 len;	 /* bytes of data */
	__u8 data[GS_PROBE_OUT_MAX];
};

/*
 * Host facts: what gpuscope read from the machine while it traced, recorded once so that a
 * recording renders as the live run did (nothing is read from /proc or /sys at render
 * time). Strings are NUL-terminated within their fields.
 */
#define GS_HOST_STR 96
#define GS_GPUS_MAX 64 /* GPU indexes a host record may name */
struct gs_ev_host {
	struct gs_hdr h; /* pid/tid 0 */
	__u32 cpus;	 /* online */
	__u32 pad;
	__u64 memory;	       /* bytes (MemTotal) */
	char hostname[64];     /* uname nodename */
	char kernel[64];       /* uname release */
	char arch[16];	       /* uname machine */
	char os[GS_HOST_STR];  /* os-release PRETTY_NAME */
	char cpu[GS_HOST_STR]; /* /proc/cpuinfo model name */
	char driver[32];       /* NVIDIA kernel driver version, "" without one */
	char gpuscope[32];     /* gpuscope's version */
	char boot_id[40];      /* /proc/sys/kernel/random/boot_id: the machine's boot */
};

struct gs_ev_gpu_info {
	struct gs_hdr h; /* pid/tid 0 */
	__s32 gpu;	 /* NVML index (the timelines' and GS_EV_NVML's) */
	__u32 minor;	 /* /dev/nvidiaN */
	__u64 memory;	 /* bytes */
	char name[GS_HOST_STR];
	char uuid[64];
	char pci_bus_id[40];
	char driver[32]; /* NVML's driver version */
};

/* A process's command line and control group, read when gpuscope first saw the process
 * (and again after an exec). The command line's arguments are separated by spaces; one
 * longer than the field is cut (cmdline_truncated). Records are cut after the command
 * line's NUL (h.size, a multiple of 8). */
#define GS_CMDLINE_MAX 1024
#define GS_CGROUP_MAX  256
struct gs_ev_proc_info {
	struct gs_hdr h; /* pid: the process */
	__u32 uid;	 /* real uid */
	__u16 cmdline_len;
	__u8 cmdline_truncated;
	__u8 pad;
	char cgroup[GS_CGROUP_MAX]; /* cgroup v2 path ("0::" line), "" if none */
	char cmdline[GS_CMDLINE_MAX];
};

struct gs_ev_blockdev {
	struct gs_hdr h; /* pid/tid 0 */
	__u32 dev;	 /* as gs_ev_block's: major << 20 | minor */
	__u32 pad;
	char name[32]; /* /sys/dev/block/M:m/uevent DEVNAME */
};

/* A process is retired (core/stream.h): it exited and no source holds more of its records.
 * Recorded, so that a replay retires it where the live run did. */
struct gs_ev_retire {
	struct gs_hdr h; /* pid: the process */
};

/* gs_ev_python.status */
enum gs_python_status {
	GS_PY_FRAMES = 1,      /* its frames are read: stacks carry them */
	GS_PY_UNSUPPORTED = 2, /* no known layout for this version: native stacks only */
	GS_PY_NO_STATE = 3,    /* the interpreter's thread states cannot be found */
};

/* A process's Python interpreter, once, when a plane first took a stack in it. */
struct gs_ev_python {
	struct gs_hdr h;
	__u32 version; /* PY_VERSION_HEX: 0x030b02f0 is 3.11.2 */
	__u16 status;  /* enum gs_python_status */
	__u8 mixed;    /* the interpreter's native frames are replaced (found where they are) */
	__u8 pad;
};

/*
 * The kernel probes' walk of a thread's Python frames, written just before its stack record
 * (same h.ts, pid, tid): frames innermost first (GS_PYFRAME pseudo-addresses), bit i of
 * entry set if frame i is the outermost of one evaluation of the interpreter. gpuscope puts
 * them into the stack record and drops this one. Cut after the last frame (h.size).
 * borrowed: the thread has no Python state (PyTorch's autograd engine threads, which launch
 * the backward pass), and the frames are those of the process's Python thread whose launch
 * showed its own frames last (the one waiting in loss.backward()), as they are now.
 */
#define GS_PYSTACK_MAX 64
struct gs_ev_pystack {
	struct gs_hdr h;
	__u64 entry;
	__u16 nframes;
	__u16 borrowed;
	__u16 pad[2];
	__u64 frames[GS_PYSTACK_MAX];
};

/* What the kernel probes' walker reads, for one process (by tgid): where _PyRuntime is and
 * its version's offsets (core/pylayout.h; -1 not there). */
struct gs_py_cfg {
	__u64 runtime;
	__s16 rt_interp_head, interp_threads, ts_next, ts_tid, ts_frame, cframe_cur;
	__s16 f_code, f_prev, f_instr, f_entry, f_owner, co_code;
	__u8 lasti_int;
	__u8 str_ascii;	  /* where a compact ASCII string's characters start */
	__u8 frame_bytes; /* a frame's bytes the walk reads (in one read) */
	__u8 pad;
	__u32 last_tid; /* (the walker's) the thread whose own frames a launch showed last */
};

/*
 * A Python exception (the kernel probes: uprobes on the interpreter's _PyErr_SetObject,
 * every raise, and _PyErr_Display, the default hooks' print of an uncaught one). Raises are
 * counted in the kernel by (process, type, site: the innermost Python frame); the first
 * GS_PYEXC_FULL of a site, and every uncaught one, come as a full record: the type's name,
 * its message where it is an ASCII string (the value raised, or its first argument), and
 * the thread's Python frames then, innermost first (GS_PYFRAME; for an uncaught one, those
 * of its traceback, outermost first). A site's count comes when its process exits or the
 * trace ends (GS_PYEXC_COUNT: type, site and count only). Cut after the last frame (h.size).
 */
enum gs_pyexc_kind {
	GS_PYEXC_RAISED = 1,
	GS_PYEXC_UNCAUGHT = 2,
	GS_PYEXC_COUNT = 3,
};

#define GS_PYEXC_FULL 2
#define GS_PYEXC_TYPE 64
#define GS_PYEXC_TEXT 160
struct gs_ev_pyexc {
	struct gs_hdr h;
	__u8 kind;	  /* enum gs_pyexc_kind */
	__u8 outer_first; /* frames outermost first (an uncaught one's, from its traceback) */
	__u16 nframes;
	__u32 pad2;
	__u64 type_addr;	  /* the type object */
	__u64 site;		  /* the innermost Python frame (GS_PYFRAME), 0 none */
	__u64 count;		  /* GS_PYEXC_COUNT: the site's raises in all; else 1 */
	char type[GS_PYEXC_TYPE]; /* NUL-terminated ("" if unreadable or a count) */
	char text[GS_PYEXC_TEXT]; /* NUL-terminated, cut */
	__u64 frames[GS_PYSTACK_MAX];
};

/* The kernel's count of a site's raises (a key of its map). */
struct gs_pyexc_key {
	__u32 tgid, pad;
	__u64 type_addr, site;
};

/* Largest record of any type. */
#define GS_EVENT_MAX_SIZE                                              \
	(sizeof(struct gs_ev_devcode) > sizeof(struct gs_ev_probe_out) \
		 ? sizeof(struct gs_ev_devcode)                        \
		 : sizeof(struct gs_ev_probe_out))

#endif /* GPUSCOPE_EVENT_H */
