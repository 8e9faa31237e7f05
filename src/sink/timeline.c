// SPDX-License-Identifier: MIT
/* The event stream as timeline tracks (see timeline.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/demangle.h"
#include "core/hmap.h"
#include "gpuscope/cuda_abi.h"
#include "core/names.h"
#include "core/procfs.h"
#include "core/util.h"
#include "sink/sinks.h"
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
	struct hmap ends;   /* stream track uuid -> boxed last end (slices must not overlap) */
	struct hmap knames; /* (pid, handle) -> struct kname */
	struct hmap procs;  /* pid -> struct proc_state */
	struct hmap io;	    /* (pid, dev) -> struct io_lanes */
	struct hmap stacks; /* tid -> struct pending_stack: for the call record that follows */
	__u32 gpu_time;	    /* the session's: 1 every launch has a GPU record coming */
	__u64 findings;	    /* the model's findings already shown */
	__u64 ooms, leaks;  /* the model's OOM findings and suspected leaks already shown */
	bool have_session;
};

struct timeline *timeline__new(const struct tl_writer_ops *ops, void *w, const char *path)
{
	struct timeline *tl = xcalloc(1, sizeof(*tl));

	(void)path;
	tl->ops = ops;
	tl->w = w;
	return tl;
}

static __u64 flow_id(const struct gs_hdr *h)
{
	/* A launch call and its GPU record share pid, tid and the call's start time. */
	__u64 x = h->ts ^ ((__u64)h->pid << 40) ^ ((__u64)h->tid << 20);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x ? x : 1;
}

/* ---- tracks ----------------------------------------------------------------------------- */

static bool declared(struct timeline *tl, __u64 uuid)
{
	if (hmap_get(&tl->tracks, uuid, 0))
		return true;
	hmap_put(&tl->tracks, uuid, 0, (void *)1);
	return false;
}

static struct proc_state *proc_state(struct timeline *tl, __u32 pid)
{
	struct proc_state *p = hmap_get_or_new(&tl->procs, pid, 0, sizeof(*p));

	return p;
}

static __u64 process_track(struct timeline *tl, const struct model *m, __u32 pid)
{
	__u64 uuid = UUID(U_PROC, 0, pid);
	const char *comm = model__comm(m, pid);
	struct proc_state *ps = proc_state(tl, pid);
	const char *cmdline = model__cmdline(m, pid);
	char name[300];

	/* Named once the model knows the command (a record before it may not), again when
	 * its command line changes (an exec). */
	if (declared(tl, uuid) && (ps->named || !comm[0]) && cmdline == ps->cmdline)
		return uuid;
	ps->cmdline = cmdline;
	if (comm[0]) {
		snprintf(name, sizeof(name), "%s", comm);
		ps->named = true;
	} else {
		snprintf(name, sizeof(name), "pid %u", pid);
	}
	tl->ops->track(tl->w, &(struct tl_track){ .uuid = uuid,
						  .kind = TL_PROCESS,
						  .pid = pid,
						  .name = name,
						  .cmdline = cmdline });
	return uuid;
}

static __u64 thread_track(struct timeline *tl, const struct model *m, __u32 pid, __u32 tid)
{
	__u64 parent = process_track(tl, m, pid), uuid = UUID(U_THREAD, pid, tid);
	char name[32];

	if (!declared(tl, uuid)) {
		snprintf(name, sizeof(name), "thread %u", tid);
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = uuid,
							  .parent = parent,
							  .kind = TL_THREAD,
							  .pid = pid,
							  .tid = tid ? tid : pid,
							  .name = name });
	}
	return uuid;
}

static __u64 child_track(struct timeline *tl, const struct model *m, __u32 pid, int space,
			 __u64 key, const char *name)
{
	__u64 parent = process_track(tl, m, pid), uuid = UUID(space, pid, key);

	if (!declared(tl, uuid))
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = uuid,
							  .parent = parent,
							  .kind = TL_CHILD,
							  .pid = pid,
							  .tid = (__u32)key,
							  .name = name });
	return uuid;
}

static __u64 gpu_track(struct timeline *tl, __s32 device)
{
	__u64 gpu = UUID(U_GPU, 0, (__u32)device);
	char name[32];

	if (!declared(tl, gpu)) {
		snprintf(name, sizeof(name), "GPU %d", device);
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = gpu,
							  .kind = TL_GPU,
							  .device = device,
							  .name = name });
	}
	return gpu;
}

static __u64 stream_track(struct timeline *tl, __s32 device, __u32 pid, __u64 stream)
{
	__u64 gpu = gpu_track(tl, device), uuid;
	char name[96];

	uuid = UUID(U_STREAM, pid, stream) ^ ((__u64)(__u32)device << 48);
	if (!declared(tl, uuid)) {
		if (stream == 0 || stream == GS_CU_STREAM_LEGACY)
			snprintf(name, sizeof(name), "default stream (pid %u)", pid);
		else if (stream == GS_CU_STREAM_PER_THREAD)
			snprintf(name, sizeof(name), "per-thread stream (pid %u)", pid);
		else
			snprintf(name, sizeof(name), "stream 0x%llx (pid %u)",
				 (unsigned long long)stream, pid);
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = uuid,
							  .parent = gpu,
							  .kind = TL_GPU_STREAM,
							  .pid = pid,
							  .device = device,
							  .name = name });
	}
	return uuid;
}

static __u64 counter_track(struct timeline *tl, const struct model *m, __u32 pid,
			   enum counter_kind kind, const char *name, bool bytes)
{
	__u64 parent = process_track(tl, m, pid), uuid = UUID(U_COUNTER, pid, kind);

	if (!declared(tl, uuid))
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = uuid,
							  .parent = parent,
							  .kind = TL_COUNTER,
							  .pid = pid,
							  .name = name,
							  .bytes = bytes });
	return uuid;
}

/* ---- names and arguments ------------------------------------------------------------------ */

static const struct kname *kernel_name(struct timeline *tl, const struct model *m, __u32 pid,
				       __u64 handle)
{
	struct kname *k = hmap_get(&tl->knames, pid, handle);
	const char *mangled;

	if (k)
		return k;
	mangled = model__kernel_name(m, pid, handle);
	if (!mangled)
		return NULL; /* not cached: the name may come later */
	k = xcalloc(1, sizeof(*k));
	k->full = demangle(mangled);
	shorten_name(k->full, SHORT_NAME - 1, k->short_, sizeof(k->short_));
	hmap_put(&tl->knames, pid, handle, k);
	return k;
}

static void arg_str(struct tl_event *e, const char *key, const char *v)
{
	if (e->nargs < TL_MAX_ARGS && v)
		e->args[e->nargs++] = (struct tl_arg){ .key = key, .type = TL_STR, .s = v };
}

static void arg_u64(struct tl_event *e, const char *key, __u64 v)
{
	if (e->nargs < TL_MAX_ARGS)
		e->args[e->nargs++] = (struct tl_arg){ .key = key, .type = TL_U64, .u = v };
}

static void arg_hex(struct tl_event *e, const char *key, __u64 v)
{
	if (e->nargs < TL_MAX_ARGS)
		e->args[e->nargs++] = (struct tl_arg){ .key = key, .type = TL_HEX, .u = v };
}

static void arg_result(struct tl_event *e, const struct gs_call *c)
{
	if (!c->result)
		return;
	arg_str(e, "error", result_name(c->api, c->result));
	if (e->nargs < TL_MAX_ARGS)
		e->args[e->nargs++] =
			(struct tl_arg){ .key = "result", .type = TL_I64, .i = c->result };
}

/* A call's stack comes just before the call: keep it for the call's slice. */
static void stack(struct timeline *tl, const struct model *m, const struct gs_ev_stack *s)
{
	struct pending_stack *p = hmap_get(&tl->stacks, s->h.tid, 0);
	size_t len = 0;

	if (!p) {
		p = xcalloc(1, sizeof(*p));
		hmap_put(&tl->stacks, s->h.tid, 0, p);
	}
	p->ts = s->h.ts;
	p->text[0] = 0;
	for (unsigned int i = 0; i < s->nframes && len + 1 < sizeof(p->text); i++) {
		const char *name = model__symbol(m, s->h.pid, s->ip[i]);
		char *d = name ? demangle(name) : NULL;
		int n = d ? snprintf(p->text + len, sizeof(p->text) - len, "%s%s", i ? "\n" : "", d)
			  : snprintf(p->text + len, sizeof(p->text) - len, "%s0x%llx",
				     i ? "\n" : "", (unsigned long long)s->ip[i]);

		free(d);
		if (n < 0)
			break;
		len = GS_MIN(len + (size_t)n, sizeof(p->text) - 1);
	}
}

/* The call's own slice on its thread. */
static void call_slice(struct timeline *tl, const struct model *m, const struct gs_hdr *h,
		       const struct gs_call *c, struct tl_event *e)
{
	const struct gs_api_desc *d = api_desc(c->api);
	struct pending_stack *p = hmap_get(&tl->stacks, h->tid, 0);

	if (p && p->ts == h->ts && p->text[0]) {
		arg_str(e, "stack", p->text); /* (the text lives until the next stack) */
		p->ts = 0;
	}

	e->track = thread_track(tl, m, h->pid, h->tid);
	e->ts = h->ts;
	e->dur = c->dur_ns;
	e->name = api_name(c->api);
	if (!e->cat)
		e->cat = d && d->lib == GS_LIB_CUDART ? "cuda_runtime" : "cuda_driver";
	arg_result(e, c);
	tl->ops->slice(tl->w, e);
}

/* ---- records ------------------------------------------------------------------------------ */

static void launch(struct timeline *tl, const struct model *m, const struct gs_ev_launch *l)
{
	struct tl_event e = { .cat = NULL };
	const struct kname *k =
		l->flags & GS_LAUNCH_GRAPH ? NULL : kernel_name(tl, m, l->h.pid, l->func);
	/* Recorded into a graph, not run (the graph's launch runs it). */
	bool captured = model__capturing(m, l->h.pid, l->stream);
	char shape[96], label[80];

	snprintf(shape, sizeof(shape), "grid (%u, %u, %u) block (%u, %u, %u)", l->grid[0],
		 l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2]);
	arg_str(&e, "kernel", l->flags & GS_LAUNCH_GRAPH ? "graph" : k ? k->full : "(unknown)");
	if (!(l->flags & GS_LAUNCH_GRAPH)) {
		arg_str(&e, "shape", shape);
		arg_u64(&e, "shared memory", l->shmem);
	}
	arg_hex(&e, "stream", l->stream);
	arg_hex(&e, "handle", l->func);
	if (captured)
		arg_str(&e, "captured", "into a CUDA graph: runs when the graph is launched");
	/* Every launch that runs gets a GPU record when every launch is timed: a flow to it. */
	if (tl->gpu_time == 1 && !l->c.result && !captured)
		e.flow_out = flow_id(&l->h);
	call_slice(tl, m, &l->h, &l->c, &e);
	if (tl->gpu_time == 1 || l->c.result || captured)
		return;
	/* No GPU time: the launch as an instant on its stream's launch track. */
	snprintf(label, sizeof(label), "launches on stream 0x%llx", (unsigned long long)l->stream);
	e = (struct tl_event){ .track = child_track(tl, m, l->h.pid, U_LAUNCHES, l->stream, label),
			       .ts = l->h.ts + l->c.dur_ns,
			       .name = l->flags & GS_LAUNCH_GRAPH ? "graph"
				       : k			  ? k->short_
								  : "?",
			       .cat = "kernel" };
	arg_str(&e, "kernel", l->flags & GS_LAUNCH_GRAPH ? "graph" : k ? k->full : "(unknown)");
	arg_str(&e, "shape", shape);
	tl->ops->instant(tl->w, &e);
}

static void memory_counters(struct timeline *tl, const struct model *m, __u32 pid, __u64 ts)
{
	static const char *const names[MEM_KINDS] = {
		[MK_MANAGED] = "managed memory in use",
		[MK_HOST] = "pinned host memory in use",
	};
	struct model_proc mp, *p = &mp;
	struct proc_state *ps = proc_state(tl, pid);
	char name[48];

	if (!model__process(m, pid, &mp))
		return;
	/* Device memory per device (a process's total across its GPUs says little). */
	for (int d = 0; d <= MEM_DEVS; d++) {
		if (p->dev_in_use[d] == ps->dev_in_use[d])
			continue;
		if (d < MEM_DEVS)
			snprintf(name, sizeof(name), "device memory in use (GPU %d)", d);
		else
			snprintf(name, sizeof(name), "device memory in use (GPU ?)");
		tl->ops->counter(tl->w,
				 counter_track(tl, m, pid, (enum counter_kind)(C_DEV_MEMORY + d),
					       name, true),
				 ts, (double)p->dev_in_use[d]);
		ps->dev_in_use[d] = p->dev_in_use[d];
	}
	for (int k = 0; k < MEM_KINDS; k++) {
		if (k == MK_DEVICE || p->in_use[k] == ps->in_use[k])
			continue;
		tl->ops->counter(tl->w,
				 counter_track(tl, m, pid, (enum counter_kind)(C_MEMORY + k),
					       names[k], true),
				 ts, (double)p->in_use[k]);
		ps->in_use[k] = p->in_use[k];
	}
}

static void copy_bandwidth(struct timeline *tl, const struct model *m, __u32 pid,
			   unsigned int direction, __u64 start, __u64 end, __u64 bytes)
{
	char name[64];
	__u64 track;

	if (end <= start || !bytes)
		return;
	snprintf(name, sizeof(name), "copy %s GB/s", copy_kind_name(direction));
	track = counter_track(tl, m, pid, (enum counter_kind)(C_COPY_BW + direction), name, false);
	tl->ops->counter(tl->w, track, start, (double)bytes / (double)(end - start));
	tl->ops->counter(tl->w, track, end, 0);
}

static void copy(struct timeline *tl, const struct model *m, const struct gs_ev_copy *c)
{
	struct tl_event e = { .cat = c->kind == GS_COPY_MEMSET ? "gpu_memset" : "gpu_memcpy" };
	unsigned int dir = model__copy_direction(m, c->h.pid, c->kind, c->dst, c->src);

	arg_u64(&e, "bytes", c->bytes);
	arg_str(&e, "kind", copy_kind_name(dir));
	arg_hex(&e, "dst", c->dst);
	if (c->kind != GS_COPY_MEMSET)
		arg_hex(&e, "src", c->src);
	if (c->flags & GS_COPY_ASYNC)
		arg_hex(&e, "stream", c->stream);
	if (tl->gpu_time == 1 && (c->flags & GS_COPY_ASYNC) && !c->c.result)
		e.flow_out = flow_id(&c->h);
	e.cat = "cuda_driver";
	call_slice(tl, m, &c->h, &c->c, &e);
	/* A synchronous copy's bandwidth from its call; an asynchronous one's from its GPU
	 * record, if it has one. */
	if (!(c->flags & GS_COPY_ASYNC) && !c->c.result && c->kind != GS_COPY_MEMSET)
		copy_bandwidth(tl, m, c->h.pid, dir, c->h.ts, c->h.ts + c->c.dur_ns, c->bytes);
}

static void nccl(struct timeline *tl, const struct model *m, const struct gs_ev_nccl *n)
{
	struct tl_event e = { .cat = "collective_comm" };
	int size = nccl_type_size(n->datatype);

	e.track = child_track(tl, m, n->h.pid, U_NCCL, 0, "NCCL");
	e.ts = n->h.ts;
	e.dur = n->c.dur_ns;
	e.name = nccl_op_name(n->op);
	if (n->op <= GS_NCCL_RECV) {
		arg_u64(&e, "count", n->count);
		if (size)
			arg_u64(&e, "bytes", n->count * (__u64)size);
		arg_hex(&e, "stream", n->stream);
	}
	if (n->peer >= 0)
		arg_u64(&e, n->op >= GS_NCCL_SEND ? "peer" : "root", (__u64)n->peer);
	if (n->nranks >= 0) {
		arg_u64(&e, "ranks", (__u64)n->nranks);
		arg_u64(&e, "rank", (__u64)n->rank);
	}
	arg_hex(&e, "comm", n->comm);
	arg_u64(&e, "thread", n->h.tid);
	arg_result(&e, &n->c);
	tl->ops->slice(tl->w, &e);
}

static void gpu(struct timeline *tl, const struct model *m, const struct gs_ev_gpu *g)
{
	bool launch = g->kind == GS_GPU_KERNEL || g->kind == GS_GPU_GRAPH;
	bool unknown = g->flags & GS_GPU_START_UNKNOWN;
	/* As the report's analysis takes it: ungated work on an idle stream cannot start
	 * before its call submitted it. */
	__u64 submitted = launch ? g->call_end_ns : g->h.ts;
	__u64 start = !(g->flags & GS_GPU_GATED) && g->start_ns < submitted
			      ? GS_MIN(submitted, g->end_ns)
			      : g->start_ns;
	__u64 end = g->end_ns, *last;
	struct tl_event e = { .flow_in = flow_id(&g->h) };
	const struct kname *k;
	char name[64];

	if (g->kind == GS_GPU_CALIBRATION)
		return;
	e.track = stream_track(tl, g->device, g->h.pid, g->stream);
	/* One stream runs one thing at a time; the event pair's own time may make
	 * neighbours touch: keep them apart. */
	last = hmap_get_or_new(&tl->ends, e.track, 0, sizeof(*last));
	start = GS_MAX(start, *last);
	end = GS_MAX(end, start + 1);
	*last = end;
	e.ts = start;
	e.dur = end - start;
	switch (g->kind) {
	case GS_GPU_KERNEL:
		k = kernel_name(tl, m, g->h.pid, g->func);
		e.name = k ? k->short_ : "(unknown kernel)";
		e.cat = "kernel";
		arg_str(&e, "kernel", k ? k->full : "(unknown)");
		break;
	case GS_GPU_GRAPH:
		e.name = "graph";
		e.cat = "kernel";
		arg_hex(&e, "graph exec", g->func);
		break;
	default:
		snprintf(name, sizeof(name), "%s %s",
			 g->kind == GS_GPU_MEMSET ? "memset" : "memcpy",
			 g->kind == GS_GPU_MEMSET
				 ? ""
				 : copy_kind_name(model__copy_direction(m, g->h.pid, g->copy_kind,
									g->dst, g->src)));
		e.name = name;
		e.cat = g->kind == GS_GPU_MEMSET ? "gpu_memset" : "gpu_memcpy";
		arg_u64(&e, "bytes", g->bytes);
		break;
	}
	arg_u64(&e, "queued ns", start > g->h.ts ? start - g->h.ts : 0);
	arg_u64(&e, "device", (__u64)(__u32)g->device);
	arg_hex(&e, "stream", g->stream);
	arg_u64(&e, "launching thread", g->h.tid);
	arg_str(&e, "timing",
		unknown			  ? "start unknown (the call waited inside the driver)"
		: g->flags & GS_GPU_GATED ? "exact (gated)"
		: start != g->start_ns	  ? "start from the call (idle stream)"
					  : "events");
	tl->ops->slice(tl->w, &e);
	if (g->kind == GS_GPU_COPY)
		copy_bandwidth(tl, m, g->h.pid,
			       model__copy_direction(m, g->h.pid, g->copy_kind, g->dst, g->src),
			       start, end, g->bytes);
}

/* A record a device-side probe wrote into a GPU ring buffer: an instant at the GPU's time
 * (on our clock), on its ring's track under the device. */
static void probe_out(struct timeline *tl, const struct gs_ev_probe_out *r)
{
	static const char *const words[] = { "u64[0]", "u64[1]", "u64[2]", "u64[3]" };
	struct tl_event e = { .name = "probe record", .cat = "gpu_probe" };
	size_t n = GS_MIN((size_t)r->len, sizeof(r->data)), shown = GS_MIN(n, (size_t)64);
	char name[64], hex[2 * 64 + 4];
	__u64 gpu = gpu_track(tl, r->device), w;

	e.track = UUID(U_PROBE_RING, r->h.pid, r->map) ^ ((__u64)(__u32)r->device << 48);
	if (!declared(tl, e.track)) {
		snprintf(name, sizeof(name), "probe ring %u (pid %u)", r->map, r->h.pid);
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = e.track,
							  .parent = gpu,
							  .kind = TL_GPU_STREAM,
							  .pid = r->h.pid,
							  .device = r->device,
							  .name = name });
	}
	e.ts = r->h.ts;
	arg_u64(&e, "bytes", r->len);
	for (size_t i = 0; i < 4 && 8 * (i + 1) <= n; i++) {
		memcpy(&w, r->data + 8 * i, sizeof(w));
		arg_hex(&e, words[i], w);
	}
	for (size_t i = 0; i < shown; i++)
		snprintf(hex + 2 * i, 3, "%02x", r->data[i]);
	hex[2 * shown] = 0;
	if (shown < n)
		strcat(hex, "...");
	arg_str(&e, "data", hex);
	arg_u64(&e, "GPU timer ns", r->gpu_ns);
	tl->ops->instant(tl->w, &e);
}

static void proc(struct timeline *tl, const struct model *m, const struct gs_ev_proc *p)
{
	struct tl_event e = { .cat = "process" };
	__u64 track = process_track(tl, m, p->h.pid);

	e.track = track;
	e.ts = p->h.ts;
	switch (p->kind) {
	case GS_PROC_EXIT:
		e.name = "exit";
		arg_u64(&e, "status", (__u64)(__u32)p->exit_code);
		break;
	case GS_PROC_EXEC:
		e.name = "exec";
		arg_str(&e, "file", p->path);
		break;
	case GS_PROC_THREAD_EXIT:
		e.name = "thread exit";
		arg_u64(&e, "thread", p->h.tid);
		break;
	case GS_PROC_OOM_KILL:
		e.name = "killed by the OOM killer";
		break;
	default:
		return;
	}
	tl->ops->instant(tl->w, &e);
}

/*
 * The model's newest finding, as an instant where its gap began: on the stream's track when
 * GPU times show the stream idle, else (a gap between launch calls) on the launching
 * thread's.
 */
static void findings(struct timeline *tl, const struct analyses *a)
{
	struct model_counters c;
	char text[512];

	if (!a->findings)
		return;
	model__counters(a->model, &c);
	/* (More than the ring holds at once cannot happen: at most a few are settled by one
	 * record.) */
	if (findings__total(a->findings) - tl->findings > RECENT_FINDINGS)
		tl->findings = findings__total(a->findings) - RECENT_FINDINGS;
	for (; tl->findings < findings__total(a->findings); tl->findings++) {
		const struct finding *f = findings__recent(a->findings, tl->findings);
		struct tl_event e = { .ts = f->gap_start, .cat = "finding" };

		if (f->launch_gap) {
			e.track = thread_track(tl, a->model, f->pid, f->tid);
			e.name = "no launch: stream waiting";
		} else {
			e.track = stream_track(tl, f->device, f->pid, f->stream);
			e.name = f->cause == CAUSE_QUEUED ? "kernel waiting on the GPU"
							  : "idle: waiting for a launch";
		}
		arg_str(&e, "finding", finding_describe(f, c.t0, text, sizeof(text)));
		tl->ops->instant(tl->w, &e);
	}
}

/* ---- memory analyses: OOM findings, suspected leaks, fragmentation ---------------------- */

static void memory_findings(struct timeline *tl, const struct analyses *a, __u32 pid)
{
	const struct model *m = a->model;
	const struct memsites *ms = a->memsites;
	struct proc_state *ps;
	char text[1536], name[64];
	unsigned int ticks;

	if (memsites__ooms_total(ms) != tl->ooms) {
		struct rep_oom ro;
		struct tl_event e = { .cat = "finding", .name = "out of memory" };

		memsites__last_oom(ms, &ro);
		e.ts = ro.o.ts;
		e.track = thread_track(tl, m, ro.o.pid, ro.o.tid);
		arg_str(&e, "finding", report__oom_text(&ro, text, sizeof(text)));
		arg_str(&e, "cause", oom_cause_name(ro.o.cause));
		arg_u64(&e, "requested", ro.o.requested);
		arg_str(&e, "site", ro.site);
		tl->ops->instant(tl->w, &e);
		tl->ooms = memsites__ooms_total(ms);
	}
	if (memsites__leaks_total(ms) - tl->leaks > RECENT_LEAKS)
		tl->leaks = memsites__leaks_total(ms) - RECENT_LEAKS;
	for (; tl->leaks < memsites__leaks_total(ms); tl->leaks++) {
		const struct memsites_leak *l = memsites__leak(ms, tl->leaks);
		struct tl_event e = { .ts = l->since, .cat = "finding", .name = "suspected leak" };
		char rate[32];

		snprintf(text, sizeof(text),
			 "allocations at %s keep growing: +%s/s, confidence %.4f%% over %u samples",
			 l->label, fmt_bytes(rate, sizeof(rate), l->t.slope_bps),
			 100 * l->t.confidence, l->t.n);
		e.track = thread_track(tl, m, l->pid, l->pid);
		arg_str(&e, "finding", text);
		arg_str(&e, "site", l->label);
		arg_u64(&e, "outstanding", l->live_bytes);
		tl->ops->instant(tl->w, &e);
	}
	/* Fragmentation, at each of the process's samples. */
	ticks = memsites__ticks(ms, pid);
	if (!ticks || (ps = proc_state(tl, pid))->ticks == ticks)
		return;
	ps->ticks = ticks;
	for (int d = 0; d <= MEM_DEVS; d++) {
		struct frag_sample f;

		if (!memsites__frag_last(ms, pid, d, &f))
			continue;
		if (d < MEM_DEVS)
			snprintf(name, sizeof(name), "fragmentation (GPU %d)", d);
		else
			snprintf(name, sizeof(name), "fragmentation (GPU ?)");
		tl->ops->counter(
			tl->w,
			counter_track(tl, m, pid, (enum counter_kind)(C_FRAG + d), name, false),
			f.ts, frag_score(&f));
	}
}

/* ---- NVML: device metrics as counters of the GPU ------------------------------------------ */

static void gpu_counter(struct timeline *tl, const struct gs_ev_nvml *n, unsigned int which,
			const char *what, bool bytes, double v)
{
	__u64 uuid = UUID(U_GPU_COUNTER, (__u32)n->gpu, which);
	char name[64];

	if (!declared(tl, uuid)) {
		snprintf(name, sizeof(name), "GPU %d %s", n->gpu, what);
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = uuid,
							  .parent = gpu_track(tl, n->gpu),
							  .kind = TL_COUNTER,
							  .pid = (__u32)n->gpu,
							  .device = n->gpu,
							  .name = name,
							  .bytes = bytes });
	}
	tl->ops->counter(tl->w, uuid, n->h.ts, v);
}

static void nvml_sample(struct timeline *tl, const struct gs_ev_nvml *n)
{
	if (n->gpu < 0 || (n->have & GS_NVML_LOST))
		return;
	if (n->have & GS_NVML_UTIL)
		gpu_counter(tl, n, 0, "utilization %", false, n->util_gpu);
	if (n->have & GS_NVML_MEMORY)
		gpu_counter(tl, n, 1, "memory used", true, (double)n->mem_used);
	if (n->have & GS_NVML_POWER)
		gpu_counter(tl, n, 2, "power W", false, n->power_mw / 1000.0);
	if (n->have & GS_NVML_TEMP)
		gpu_counter(tl, n, 3, "temperature C", false, n->temp_c);
	if (n->have & GS_NVML_CLOCK)
		gpu_counter(tl, n, 4, "SM clock MHz", false, n->clock_sm_mhz);
	if (n->have & GS_NVML_GPM) {
		gpu_counter(tl, n, 5, "SM active", false, n->sm_active);
		gpu_counter(tl, n, 6, "tensor active", false, n->tensor_active);
		gpu_counter(tl, n, 7, "DRAM active", false, n->dram_active);
	}
}

/* ---- the OS plane ------------------------------------------------------------------------ */

static __u64 os_track(struct timeline *tl, const struct model *m, __u32 pid, __u32 tid)
{
	char name[48];

	snprintf(name, sizeof(name), "thread %u (OS)", tid);
	return child_track(tl, m, pid, U_OS, tid, name);
}

static void offcpu(struct timeline *tl, const struct model *m, const struct gs_ev_offcpu *o)
{
	struct tl_event e = { .track = os_track(tl, m, o->h.pid, o->h.tid),
			      .ts = o->h.ts,
			      .dur = o->dur_ns,
			      .cat = "off_cpu" };
	char name[48];

	snprintf(name, sizeof(name), "off CPU: %s", offcpu_reason_name(o->reason));
	e.name = name;
	if (o->syscall >= 0)
		arg_str(&e, "in system call", syscall_name((unsigned int)o->syscall));
	arg_u64(&e, "runnable, waiting ns", o->runq_ns);
	if (o->major_faults)
		arg_u64(&e, "major page faults", o->major_faults);
	arg_u64(&e, "cpu before", o->cpu);
	tl->ops->slice(tl->w, &e);
}

static void syscall_slice(struct timeline *tl, const struct model *m,
			  const struct gs_ev_syscall *sc)
{
	struct tl_event e = { .track = os_track(tl, m, sc->h.pid, sc->h.tid),
			      .ts = sc->h.ts,
			      .dur = sc->dur_ns,
			      .name = syscall_name(sc->nr),
			      .cat = "syscall" };

	if (e.nargs < TL_MAX_ARGS)
		e.args[e.nargs++] =
			(struct tl_arg){ .key = "return", .type = TL_I64, .i = sc->ret };
	arg_hex(&e, "arg0", sc->arg0);
	arg_u64(&e, "arg1", sc->arg1);
	tl->ops->slice(tl->w, &e);
}

static void cumulative(struct timeline *tl, const struct model *m, __u32 pid, int kind,
		       const char *name, __u64 *total, __u64 add, __u64 ts, bool bytes)
{
	*total += add;
	tl->ops->counter(tl->w, counter_track(tl, m, pid, (enum counter_kind)kind, name, bytes), ts,
			 (double)*total);
}

static void block_io(struct timeline *tl, const struct model *m, const struct gs_ev_block *b)
{
	struct io_lanes *l = hmap_get(&tl->io, b->h.pid, b->dev);
	__u64 start = b->h.ts, end = b->h.ts + b->dur_ns;
	char dev[48], name[80];
	unsigned int lane = 0;
	struct tl_event e = { .ts = start, .dur = b->dur_ns, .cat = "block_io" };

	if (!l) {
		l = xcalloc(1, sizeof(*l));
		hmap_put(&tl->io, b->h.pid, b->dev, l);
	}
	for (; lane < IO_LANES; lane++) {
		bool clear = true;

		for (int k = 0; k < IO_LANE_KEEP && clear; k++)
			clear = l->lane[lane][k].end <= start || l->lane[lane][k].start >= end;
		if (clear)
			break;
	}
	/* More in flight at once than lanes: an instant (slices on a track must nest). */
	if (lane == IO_LANES) {
		lane = IO_LANES - 1;
		e.dur = 0;
	} else {
		l->lane[lane][l->next[lane]].start = start;
		l->lane[lane][l->next[lane]].end = end;
		l->next[lane] = (l->next[lane] + 1) % IO_LANE_KEEP;
	}
	block_dev_name(b->dev, dev, sizeof(dev));
	snprintf(name, sizeof(name), "block I/O %s #%u", dev, lane + 1);
	e.track = child_track(tl, m, b->h.pid, U_BLOCK, (__u64)b->dev << 8 | lane, name);
	e.name = block_op_name(b->op);
	arg_u64(&e, "bytes", b->bytes);
	arg_u64(&e, "sector", b->sector);
	arg_str(&e, "device", dev);
	arg_u64(&e, "issuing thread", b->h.tid);
	if (b->error)
		arg_u64(&e, "error", (__u64)(__u32)b->error);
	if (b->h.flags & GS_HDR_END_UNSEEN)
		arg_str(&e, "completion", "unseen: issued here, its end not known");
	if (!e.dur) {
		arg_u64(&e, "duration ns", b->dur_ns);
		tl->ops->instant(tl->w, &e);
		return;
	}
	tl->ops->slice(tl->w, &e);
}

/* A thread's faults of up to a millisecond, with the first one's address. */
static void fault_batch(struct timeline *tl, const struct model *m, const struct gs_ev_faults *f)
{
	struct tl_event e = { .track = os_track(tl, m, f->h.pid, f->h.tid),
			      .ts = f->h.ts,
			      .name = f->major ? "page faults (major)" : "page faults",
			      .cat = "page_fault" };

	arg_u64(&e, "count", f->count);
	arg_u64(&e, "major", f->major);
	arg_hex(&e, "first address", f->addr);
	arg_hex(&e, "first instruction", f->ip);
	arg_str(&e, "first access",
		f->error_code & 16  ? "instruction fetch"
		: f->error_code & 2 ? "write"
				    : "read");
	arg_u64(&e, "over ns", f->last_ts - f->h.ts);
	tl->ops->instant(tl->w, &e);
}

static void os_event(struct timeline *tl, const struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_faults *f = (const void *)ev;
	const struct gs_ev_net *n = (const void *)ev;
	struct proc_state *ps = proc_state(tl, ev->pid);
	char name[48];
	int proto;

	switch (ev->type) {
	case GS_EV_OFFCPU:
		offcpu(tl, m, (const void *)ev);
		break;
	case GS_EV_SYSCALL:
		syscall_slice(tl, m, (const void *)ev);
		break;
	case GS_EV_BLOCK:
		block_io(tl, m, (const void *)ev);
		break;
	case GS_EV_FAULTS:
		fault_batch(tl, m, f);
		cumulative(tl, m, ev->pid, C_FAULTS, "page faults", &ps->faults, f->count,
			   f->last_ts, false);
		if (f->major)
			cumulative(tl, m, ev->pid, C_MAJOR_FAULTS, "major page faults",
				   &ps->major_faults, f->major, f->last_ts, false);
		break;
	case GS_EV_NET:
		proto = model__net_proto(n->family, n->protocol);
		snprintf(name, sizeof(name), "%s %s bytes", net_proto_name(proto),
			 n->dir == GS_NET_SEND ? "sent" : "received");
		cumulative(tl, m, ev->pid, C_NET + (int)n->dir * NET_PROTOS + proto, name,
			   &ps->net[n->dir][proto], n->bytes, ev->ts, true);
		break;
	}
}

void timeline__add(struct timeline *tl, const struct analyses *a, const struct gs_hdr *ev)
{
	const struct model *m = a->model;

	const struct gs_ev_session *s = (const void *)ev;
	const struct gs_ev_mem *mem = (const void *)ev;
	const struct gs_ev_sync *sy = (const void *)ev;
	const struct gs_ev_api *api = (const void *)ev;
	struct tl_event e = { .cat = NULL };

	switch (ev->type) {
	case GS_EV_SESSION:
		if (s->kind == GS_SESSION_START) {
			tl->gpu_time = s->gpu_time;
			tl->have_session = true;
		}
		break;
	case GS_EV_PROC:
		proc(tl, m, (const void *)ev);
		break;
	case GS_EV_LAUNCH:
		launch(tl, m, (const void *)ev);
		break;
	case GS_EV_MEM:
		arg_u64(&e, "bytes", mem->size);
		arg_hex(&e, "address", mem->addr);
		call_slice(tl, m, ev, &mem->c, &e);
		memory_counters(tl, m, ev->pid, ev->ts + mem->c.dur_ns);
		break;
	case GS_EV_COPY:
		copy(tl, m, (const void *)ev);
		break;
	case GS_EV_SYNC:
		e.cat = "cuda_sync";
		arg_hex(&e, "handle", sy->handle);
		call_slice(tl, m, ev, &sy->c, &e);
		break;
	case GS_EV_API:
		call_slice(tl, m, ev, &api->c, &e);
		break;
	case GS_EV_NCCL:
		nccl(tl, m, (const void *)ev);
		break;
	case GS_EV_GPU:
		gpu(tl, m, (const void *)ev);
		break;
	case GS_EV_OFFCPU:
	case GS_EV_SYSCALL:
	case GS_EV_BLOCK:
	case GS_EV_FAULTS:
	case GS_EV_NET:
		os_event(tl, m, ev);
		break;
	case GS_EV_STACK:
		stack(tl, m, (const void *)ev);
		break;
	case GS_EV_NVML:
		nvml_sample(tl, (const void *)ev);
		break;
	case GS_EV_PROBE_OUT:
		probe_out(tl, (const void *)ev);
		break;
	default:
		break;
	}
	if (a->findings && findings__total(a->findings) != tl->findings)
		findings(tl, a);
	memory_findings(tl, a, ev->pid);
}

int timeline__close(struct timeline *tl, char *err, size_t errlen)
{
	struct hmap_slot *s;
	int r = tl->ops->close(tl->w);

	if (r)
		snprintf(err, errlen, "writing the trace failed: %s", strerror(-r));
	hmap_for_each (&tl->knames, s) {
		free(((struct kname *)s->val)->full);
		free(s->val);
	}
	hmap_for_each (&tl->ends, s)
		free(s->val);
	hmap_for_each (&tl->procs, s)
		free(s->val);
	hmap_free_with(&tl->io, NULL);
	hmap_free_with(&tl->stacks, NULL);
	hmap_free(&tl->knames);
	hmap_free(&tl->ends);
	hmap_free(&tl->procs);
	hmap_free(&tl->tracks);
	free(tl);
	return r ? -1 : 0;
}
