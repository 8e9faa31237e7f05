// SPDX-License-Identifier: MIT
/* Timeline: tracks (each declared once), kernel names, arguments, a call's slice with its
 * stack (see timeline_int.h). */
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

__u64 tl_flow_id(const struct gs_hdr *h)
{
	/* A launch call and its GPU record share pid, tid and the call's start time. */
	__u64 x = h->ts ^ ((__u64)h->pid << 40) ^ ((__u64)h->tid << 20);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x ? x : 1;
}

/* ---- tracks ----------------------------------------------------------------------------- */

bool tl_declared(struct timeline *tl, __u64 uuid)
{
	if (hmap_get(&tl->tracks, uuid, 0))
		return true;
	hmap_put(&tl->tracks, uuid, 0, (void *)1);
	return false;
}

struct proc_state *tl_proc_state(struct timeline *tl, __u32 pid)
{
	struct proc_state *p = hmap_get_or_new(&tl->procs, pid, 0, sizeof(*p));

	return p;
}

__u64 tl_process_track(struct timeline *tl, const struct model *m, __u32 pid)
{
	__u64 uuid = UUID(U_PROC, 0, pid);
	const char *comm = model__comm(m, pid);
	struct proc_state *ps = tl_proc_state(tl, pid);
	const char *cmdline = model__cmdline(m, pid);
	char name[300];

	/* Named once the model knows the command (a record before it may not), again when
	 * its command line changes (an exec). */
	if (tl_declared(tl, uuid) && (ps->named || !comm[0]) && cmdline == ps->cmdline)
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

__u64 tl_thread_track(struct timeline *tl, const struct model *m, __u32 pid, __u32 tid)
{
	__u64 parent = tl_process_track(tl, m, pid), uuid = UUID(U_THREAD, pid, tid);
	char name[32];

	if (!tl_declared(tl, uuid)) {
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

__u64 tl_child_track(struct timeline *tl, const struct model *m, __u32 pid, int space, __u64 key,
		     const char *name)
{
	__u64 parent = tl_process_track(tl, m, pid), uuid = UUID(space, pid, key);

	if (!tl_declared(tl, uuid))
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = uuid,
							  .parent = parent,
							  .kind = TL_CHILD,
							  .pid = pid,
							  .tid = (__u32)key,
							  .name = name });
	return uuid;
}

__u64 tl_gpu_track(struct timeline *tl, __s32 device)
{
	__u64 gpu = UUID(U_GPU, 0, (__u32)device);
	char name[32];

	if (!tl_declared(tl, gpu)) {
		snprintf(name, sizeof(name), "GPU %d", device);
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = gpu,
							  .kind = TL_GPU,
							  .device = device,
							  .name = name });
	}
	return gpu;
}

__u64 tl_stream_track(struct timeline *tl, __s32 device, __u32 pid, __u64 stream)
{
	__u64 gpu = tl_gpu_track(tl, device), uuid;
	char name[96];

	uuid = UUID(U_STREAM, pid, stream) ^ ((__u64)(__u32)device << 48);
	if (!tl_declared(tl, uuid)) {
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

__u64 tl_counter_track(struct timeline *tl, const struct model *m, __u32 pid,
		       enum counter_kind kind, const char *name, bool bytes)
{
	__u64 parent = tl_process_track(tl, m, pid), uuid = UUID(U_COUNTER, pid, kind);

	if (!tl_declared(tl, uuid))
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = uuid,
							  .parent = parent,
							  .kind = TL_COUNTER,
							  .pid = pid,
							  .name = name,
							  .bytes = bytes });
	return uuid;
}

/* ---- names and arguments ------------------------------------------------------------------ */

const struct kname *tl_kernel_name(struct timeline *tl, const struct model *m, __u32 pid,
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

void tl_arg_str(struct tl_event *e, const char *key, const char *v)
{
	if (e->nargs < TL_MAX_ARGS && v)
		e->args[e->nargs++] = (struct tl_arg){ .key = key, .type = TL_STR, .s = v };
}

void tl_arg_u64(struct tl_event *e, const char *key, __u64 v)
{
	if (e->nargs < TL_MAX_ARGS)
		e->args[e->nargs++] = (struct tl_arg){ .key = key, .type = TL_U64, .u = v };
}

void tl_arg_hex(struct tl_event *e, const char *key, __u64 v)
{
	if (e->nargs < TL_MAX_ARGS)
		e->args[e->nargs++] = (struct tl_arg){ .key = key, .type = TL_HEX, .u = v };
}

void tl_arg_result(struct tl_event *e, const struct gs_call *c)
{
	if (!c->result)
		return;
	tl_arg_str(e, "error", result_name(c->api, c->result));
	if (e->nargs < TL_MAX_ARGS)
		e->args[e->nargs++] =
			(struct tl_arg){ .key = "result", .type = TL_I64, .i = c->result };
}

/* A call's stack comes just before the call: keep it for the call's slice. */
void tl_stack(struct timeline *tl, const struct model *m, const struct gs_ev_stack *s)
{
	struct pending_stack *p = hmap_get(&tl->stacks, s->h.tid, 0);
	size_t len = 0;

	if (gs_stack_only_skips(s))
		return;
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
void tl_call_slice(struct timeline *tl, const struct model *m, const struct gs_hdr *h,
		   const struct gs_call *c, struct tl_event *e)
{
	const struct gs_api_desc *d = api_desc(c->api);
	struct pending_stack *p = hmap_get(&tl->stacks, h->tid, 0);

	if (p && p->ts == h->ts && p->text[0]) {
		tl_arg_str(e, "stack", p->text); /* (the text lives until the next stack) */
		p->ts = 0;
	}

	e->track = tl_thread_track(tl, m, h->pid, h->tid);
	e->ts = h->ts;
	e->dur = c->dur_ns;
	e->name = api_name(c->api);
	if (!e->cat)
		e->cat = d && d->lib == GS_LIB_CUDART ? "cuda_runtime" : "cuda_driver";
	tl_arg_result(e, c);
	tl->ops->slice(tl->w, e);
}

/* ---- records ------------------------------------------------------------------------------ */
