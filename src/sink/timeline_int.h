/* SPDX-License-Identifier: MIT */
/*
 * The timeline converter's own state and helpers, for its files: timeline.c (the
 * dispatch), timeline_tracks.c (tracks, names, call slices), timeline_cuda.c (launches, GPU work, copies, NCCL,
 * memory counters, processes), timeline_os.c (the OS plane and NVML's device counters),
 * timeline_findings.c (findings and the memory analyses' results).
 */
#ifndef GS_SINK_TIMELINE_INT_H
#define GS_SINK_TIMELINE_INT_H

#include "core/hmap.h"
#include "sink/timeline.h"

#define SHORT_NAME 48

/* uuid spaces: the kind in the top byte, then what identifies the track. */
#define UUID(kind, a, b) (((__u64)(kind) << 56) ^ ((__u64)(a) << 24) ^ (__u64)(b) ^ 0x5bd1e995ULL)

enum {
	U_PROC = 1,
	U_THREAD = 2,
	U_GPU = 3,
	U_STREAM = 4,
	U_NCCL = 5,
	U_LAUNCHES = 6,
	U_COUNTER = 7,
	U_OS = 8,
	U_BLOCK = 9,
	U_GPU_COUNTER = 10,
	U_PROBE_RING = 11,
	U_STEPS = 12,
};

#define IO_LANES     32
#define IO_LANE_KEEP 32

enum counter_kind {
	C_MEMORY = 0,		   /* + enum mem_kind */
	C_COPY_BW = 0 + MEM_KINDS, /* + copy kind */
	C_FAULTS = C_COPY_BW + GS_COPY_KIND_MAX,
	C_MAJOR_FAULTS,
	C_NET,				       /* + dir * NET_PROTOS + proto */
	C_DEV_MEMORY = C_NET + 2 * NET_PROTOS, /* + model__mem_slot() */
	C_FRAG = C_DEV_MEMORY + MEM_DEVS + 1,  /* + model__mem_slot() */
};

/* Block requests overlap: each goes on the first lane where it overlaps none of the
 * lane's recent requests (records come in completion order, not issue order). */
struct io_lanes {
	struct {
		__u64 start, end;
	} lane[IO_LANES][IO_LANE_KEEP];
	unsigned int next[IO_LANES];
};

struct kname {
	char *full;		 /* demangled */
	char short_[SHORT_NAME]; /* shown on slices */
};

struct pending_stack {
	__u64 ts;
	char text[2048]; /* innermost first, one frame a line */
};

struct proc_state {
	__u64 in_use[MEM_KINDS]; /* last value written to each memory counter */
	__u64 dev_in_use[MEM_DEVS + 1];
	__u64 faults, major_faults, net[2][NET_PROTOS]; /* cumulative counters */
	bool named;
	const char *cmdline; /* (the model's, interned: a new one is another pointer) */
	unsigned int ticks;  /* the memory analyses' samples already shown */
};

struct timeline {
	const struct tl_writer_ops *ops;
	void *w;
	struct hmap tracks; /* uuid -> (void *)1: declared */
	struct hmap ends;   /* stream track uuid -> boxed [start, end] of the latest slice there
			     * (slices must not overlap) */
	struct hmap knames; /* (pid, handle) -> struct kname */
	struct hmap procs;  /* pid -> struct proc_state */
	struct hmap io;	    /* (pid, dev) -> struct io_lanes */
	struct hmap stacks; /* tid -> struct pending_stack: for the call record that follows */
	__u32 gpu_time;	    /* the session's: 1 every launch has a GPU record coming */
	bool gpu_cupti;	    /* ... graphs' by CUPTI's records: a graph launch's are its kernels' */
	__u64 findings;	    /* the model's findings already shown */
	__u64 ooms, leaks;  /* the model's OOM findings and suspected leaks already shown */
	bool have_session;
};

/* timeline_tracks.c: tracks (declared once each), names and arguments, a call's slice (its
 * stack: the record before it). */
__u64 tl_flow_id(const struct gs_hdr *h);
bool tl_declared(struct timeline *tl, __u64 uuid);
struct proc_state *tl_proc_state(struct timeline *tl, __u32 pid);
__u64 tl_process_track(struct timeline *tl, const struct model *m, __u32 pid);
__u64 tl_thread_track(struct timeline *tl, const struct model *m, __u32 pid, __u32 tid);
__u64 tl_child_track(struct timeline *tl, const struct model *m, __u32 pid, int space, __u64 key,
		     const char *name);
__u64 tl_gpu_track(struct timeline *tl, __s32 device);
__u64 tl_stream_track(struct timeline *tl, __s32 device, __u32 pid, __u64 stream);
__u64 tl_counter_track(struct timeline *tl, const struct model *m, __u32 pid,
		       enum counter_kind kind, const char *name, bool bytes);
const struct kname *tl_kernel_name(struct timeline *tl, const struct model *m, __u32 pid,
				   __u64 handle);
void tl_arg_str(struct tl_event *e, const char *key, const char *v);
void tl_arg_u64(struct tl_event *e, const char *key, __u64 v);
void tl_arg_hex(struct tl_event *e, const char *key, __u64 v);
void tl_arg_result(struct tl_event *e, const struct gs_call *c);
void tl_stack(struct timeline *tl, const struct model *m, const struct gs_ev_stack *s);
void tl_call_slice(struct timeline *tl, const struct model *m, const struct gs_hdr *h,
		   const struct gs_call *c, struct tl_event *e);

/* timeline_cuda.c */
void tl_launch(struct timeline *tl, const struct model *m, const struct gs_ev_launch *l);
void tl_memory_counters(struct timeline *tl, const struct model *m, __u32 pid, __u64 ts);
void tl_copy(struct timeline *tl, const struct model *m, const struct gs_ev_copy *c);
void tl_nccl(struct timeline *tl, const struct model *m, const struct gs_ev_nccl *n);
void tl_gpu(struct timeline *tl, const struct model *m, const struct gs_ev_gpu *g);
void tl_probe_out(struct timeline *tl, const struct gs_ev_probe_out *r);
void tl_proc(struct timeline *tl, const struct model *m, const struct gs_ev_proc *p);

/* timeline_findings.c */
void tl_findings(struct timeline *tl, const struct analyses *a);
void tl_memory_findings(struct timeline *tl, const struct analyses *a, __u32 pid);

/* timeline_os.c */
void tl_nvml_sample(struct timeline *tl, const struct gs_ev_nvml *n);
void tl_os_event(struct timeline *tl, const struct model *m, const struct gs_hdr *ev);

#endif
