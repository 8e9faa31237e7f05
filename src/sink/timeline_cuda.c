// SPDX-License-Identifier: MIT
/* Timeline: CUDA records -- launches, GPU work with flows from their calls, copies and
 * their bandwidth, NCCL, memory counters, processes (see timeline_int.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/demangle.h"
#include "core/names.h"
#include "core/util.h"
#include "gpuscope/cuda_abi.h"
#include "sink/sinks.h"
#include "sink/timeline_int.h"

void tl_launch(struct timeline *tl, const struct model *m, const struct gs_ev_launch *l)
{
	struct tl_event e = { .cat = NULL };
	const struct kname *k =
		l->flags & GS_LAUNCH_GRAPH ? NULL : tl_kernel_name(tl, m, l->h.pid, l->func);
	/* Recorded into a graph, not run (the graph's launch runs it). */
	bool captured = model__capturing(m, l->h.pid, l->stream);
	char shape[96], label[80];

	snprintf(shape, sizeof(shape), "grid (%u, %u, %u) block (%u, %u, %u)", l->grid[0],
		 l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2]);
	tl_arg_str(&e, "kernel", l->flags & GS_LAUNCH_GRAPH ? "graph" : k ? k->full : "(unknown)");
	if (!(l->flags & GS_LAUNCH_GRAPH)) {
		tl_arg_str(&e, "shape", shape);
		tl_arg_u64(&e, "shared memory", l->shmem);
	}
	tl_arg_hex(&e, "stream", l->stream);
	tl_arg_hex(&e, "handle", l->func);
	if (captured)
		tl_arg_str(&e, "captured", "into a CUDA graph: runs when the graph is launched");
	/* Every launch that runs gets a GPU record when every launch is timed: a flow to it.
	 * (Not a graph launch's under CUPTI: its kernels' records are not tied to it.) */
	if (tl->gpu_time == 1 && !l->c.result && !captured &&
	    !(tl->gpu_cupti && (l->flags & GS_LAUNCH_GRAPH)))
		e.flow_out = tl_flow_id(&l->h);
	tl_call_slice(tl, m, &l->h, &l->c, &e);
	if (tl->gpu_time == 1 || l->c.result || captured)
		return;
	/* No GPU time: the launch as an instant on its stream's launch track. */
	snprintf(label, sizeof(label), "launches on stream 0x%llx", (unsigned long long)l->stream);
	e = (struct tl_event){ .track = tl_child_track(tl, m, l->h.pid, U_LAUNCHES, l->stream,
						       label),
			       .ts = l->h.ts + l->c.dur_ns,
			       .name = l->flags & GS_LAUNCH_GRAPH ? "graph"
				       : k			  ? k->short_
								  : "?",
			       .cat = "kernel" };
	tl_arg_str(&e, "kernel", l->flags & GS_LAUNCH_GRAPH ? "graph" : k ? k->full : "(unknown)");
	tl_arg_str(&e, "shape", shape);
	tl->ops->instant(tl->w, &e);
}

void tl_memory_counters(struct timeline *tl, const struct model *m, __u32 pid, __u64 ts)
{
	static const char *const names[MEM_KINDS] = {
		[MK_MANAGED] = "managed memory in use",
		[MK_HOST] = "pinned host memory in use",
	};
	struct model_proc mp, *p = &mp;
	struct proc_state *ps = tl_proc_state(tl, pid);
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
				 tl_counter_track(tl, m, pid, (enum counter_kind)(C_DEV_MEMORY + d),
						  name, true),
				 ts, (double)p->dev_in_use[d]);
		ps->dev_in_use[d] = p->dev_in_use[d];
	}
	for (int k = 0; k < MEM_KINDS; k++) {
		if (k == MK_DEVICE || p->in_use[k] == ps->in_use[k])
			continue;
		tl->ops->counter(tl->w,
				 tl_counter_track(tl, m, pid, (enum counter_kind)(C_MEMORY + k),
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
	track = tl_counter_track(tl, m, pid, (enum counter_kind)(C_COPY_BW + direction), name,
				 false);
	tl->ops->counter(tl->w, track, start, (double)bytes / (double)(end - start));
	tl->ops->counter(tl->w, track, end, 0);
}

void tl_copy(struct timeline *tl, const struct model *m, const struct gs_ev_copy *c)
{
	struct tl_event e = { .cat = c->kind == GS_COPY_MEMSET ? "gpu_memset" : "gpu_memcpy" };
	unsigned int dir = model__copy_direction(m, c->h.pid, c->kind, c->dst, c->src);

	tl_arg_u64(&e, "bytes", c->bytes);
	tl_arg_str(&e, "kind", copy_kind_name(dir));
	tl_arg_hex(&e, "dst", c->dst);
	if (c->kind != GS_COPY_MEMSET)
		tl_arg_hex(&e, "src", c->src);
	if (c->flags & GS_COPY_ASYNC)
		tl_arg_hex(&e, "stream", c->stream);
	if (tl->gpu_time == 1 && (c->flags & GS_COPY_ASYNC) && !c->c.result)
		e.flow_out = tl_flow_id(&c->h);
	e.cat = "cuda_driver";
	tl_call_slice(tl, m, &c->h, &c->c, &e);
	/* A synchronous copy's bandwidth from its call; an asynchronous one's from its GPU
	 * record, if it has one. */
	if (!(c->flags & GS_COPY_ASYNC) && !c->c.result && c->kind != GS_COPY_MEMSET)
		copy_bandwidth(tl, m, c->h.pid, dir, c->h.ts, c->h.ts + c->c.dur_ns, c->bytes);
}

void tl_nccl(struct timeline *tl, const struct model *m, const struct gs_ev_nccl *n)
{
	struct tl_event e = { .cat = "collective_comm" };
	int size = nccl_type_size(n->datatype);

	e.track = tl_child_track(tl, m, n->h.pid, U_NCCL, 0, "NCCL");
	e.ts = n->h.ts;
	e.dur = n->c.dur_ns;
	e.name = nccl_op_name(n->op);
	if (n->op <= GS_NCCL_RECV) {
		tl_arg_u64(&e, "count", n->count);
		if (size)
			tl_arg_u64(&e, "bytes", n->count * (__u64)size);
		tl_arg_hex(&e, "stream", n->stream);
	}
	if (n->peer >= 0)
		tl_arg_u64(&e, n->op >= GS_NCCL_SEND ? "peer" : "root", (__u64)n->peer);
	if (n->nranks >= 0) {
		tl_arg_u64(&e, "ranks", (__u64)n->nranks);
		tl_arg_u64(&e, "rank", (__u64)n->rank);
	}
	tl_arg_hex(&e, "comm", n->comm);
	tl_arg_u64(&e, "thread", n->h.tid);
	tl_arg_result(&e, &n->c);
	tl->ops->slice(tl->w, &e);
}

void tl_gpu(struct timeline *tl, const struct model *m, const struct gs_ev_gpu *g)
{
	bool launch = g->kind == GS_GPU_KERNEL || g->kind == GS_GPU_GRAPH;
	bool unknown = g->flags & GS_GPU_START_UNKNOWN;
	/* As the report's analysis takes it: ungated work on an idle stream cannot start
	 * before its call submitted it. */
	__u64 submitted = launch ? g->call_end_ns : g->h.ts;
	__u64 start = !(g->flags & GS_GPU_GATED) && g->start_ns < submitted
			      ? GS_MIN(submitted, g->end_ns)
			      : g->start_ns;
	__u64 end = g->end_ns, *last; /* [start, end] of the track's latest slice */
	/* (A kernel a graph ran, by CUPTI's record: no call of its own to flow from.) */
	bool callless = (g->flags & GS_GPU_IN_GRAPH) && (g->flags2 & GS_GPU_BY_DRIVER);
	struct tl_event e = { .flow_in = callless ? 0 : tl_flow_id(&g->h) };
	const struct kname *k;
	char name[64];

	if (g->kind == GS_GPU_CALIBRATION)
		return;
	e.track = tl_stream_track(tl, g->device, g->h.pid, g->stream);
	/* One stream runs one thing at a time; the event pair's own time may make
	 * neighbours touch: keep them apart. Records come in about the order they ran, but
	 * not always: CUPTI's come later than a copy's pair after them; one that ran before
	 * the latest is kept before it. */
	last = hmap_get_or_new(&tl->ends, e.track, 0, 2 * sizeof(*last));
	if (start >= last[0]) {
		start = GS_MAX(start, last[1]);
		end = GS_MAX(end, start + 1);
		last[0] = start;
		last[1] = end;
	} else {
		end = GS_MAX(GS_MIN(end, last[0]), start + 1);
	}
	e.ts = start;
	e.dur = end - start;
	switch (g->kind) {
	case GS_GPU_KERNEL:
		k = tl_kernel_name(tl, m, g->h.pid, g->func);
		e.name = k ? k->short_ : "(unknown kernel)";
		e.cat = "kernel";
		tl_arg_str(&e, "kernel", k ? k->full : "(unknown)");
		break;
	case GS_GPU_GRAPH:
		e.name = "graph";
		e.cat = "kernel";
		tl_arg_hex(&e, "graph exec", g->func);
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
		tl_arg_u64(&e, "bytes", g->bytes);
		break;
	}
	if (!callless)
		tl_arg_u64(&e, "queued ns", start > g->h.ts ? start - g->h.ts : 0);
	tl_arg_u64(&e, "device", (__u64)(__u32)g->device);
	tl_arg_hex(&e, "stream", g->stream);
	if (!callless)
		tl_arg_u64(&e, "launching thread", g->h.tid);
	tl_arg_str(&e, "timing",
		   g->flags2 & GS_GPU_BY_DRIVER ? "the driver's own timestamps (CUPTI)"
		   : unknown		     ? "start unknown (the call waited inside the driver)"
		   : g->flags & GS_GPU_GATED ? "exact (gated)"
		   : start != g->start_ns    ? "start from the call (idle stream)"
					     : "events");
	tl->ops->slice(tl->w, &e);
	if (g->kind == GS_GPU_COPY)
		copy_bandwidth(tl, m, g->h.pid,
			       model__copy_direction(m, g->h.pid, g->copy_kind, g->dst, g->src),
			       start, end, g->bytes);
}

/* A record a device-side probe wrote into a GPU ring buffer: an instant at the GPU's time
 * (on our clock), on its ring's track under the device. */
void tl_probe_out(struct timeline *tl, const struct gs_ev_probe_out *r)
{
	static const char *const words[] = { "u64[0]", "u64[1]", "u64[2]", "u64[3]" };
	struct tl_event e = { .name = "probe record", .cat = "gpu_probe" };
	size_t n = GS_MIN((size_t)r->len, sizeof(r->data)), shown = GS_MIN(n, (size_t)64);
	char name[64], hex[2 * 64 + 4];
	__u64 gpu = tl_gpu_track(tl, r->device), w;

	e.track = UUID(U_PROBE_RING, r->h.pid, r->map) ^ ((__u64)(__u32)r->device << 48);
	if (!tl_declared(tl, e.track)) {
		snprintf(name, sizeof(name), "probe ring %u (pid %u)", r->map, r->h.pid);
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = e.track,
							  .parent = gpu,
							  .kind = TL_GPU_STREAM,
							  .pid = r->h.pid,
							  .device = r->device,
							  .name = name });
	}
	e.ts = r->h.ts;
	tl_arg_u64(&e, "bytes", r->len);
	for (size_t i = 0; i < 4 && 8 * (i + 1) <= n; i++) {
		memcpy(&w, r->data + 8 * i, sizeof(w));
		tl_arg_hex(&e, words[i], w);
	}
	for (size_t i = 0; i < shown; i++)
		snprintf(hex + 2 * i, 3, "%02x", r->data[i]);
	hex[2 * shown] = 0;
	if (shown < n)
		strcat(hex, "...");
	tl_arg_str(&e, "data", hex);
	tl_arg_u64(&e, "GPU timer ns", r->gpu_ns);
	tl->ops->instant(tl->w, &e);
}

void tl_proc(struct timeline *tl, const struct model *m, const struct gs_ev_proc *p)
{
	struct tl_event e = { .cat = "process" };
	__u64 track = tl_process_track(tl, m, p->h.pid);

	e.track = track;
	e.ts = p->h.ts;
	switch (p->kind) {
	case GS_PROC_EXIT:
		e.name = "exit";
		tl_arg_u64(&e, "status", (__u64)(__u32)p->exit_code);
		break;
	case GS_PROC_EXEC:
		e.name = "exec";
		tl_arg_str(&e, "file", p->path);
		break;
	case GS_PROC_THREAD_EXIT:
		e.name = "thread exit";
		tl_arg_u64(&e, "thread", p->h.tid);
		break;
	case GS_PROC_OOM_KILL:
		e.name = "killed by the OOM killer";
		break;
	default:
		return;
	}
	tl->ops->instant(tl->w, &e);
}
