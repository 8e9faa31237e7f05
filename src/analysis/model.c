// SPDX-License-Identifier: MIT
/*
 * The model's top layer (see model.h, model_int.h): records dispatched to the layers below,
 * observers, a process retired or forgotten, the session's records, and the queries that
 * are about the model as a whole.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/util.h"

struct model *model__new(void)
{
	return xcalloc(1, sizeof(struct model));
}

void model__observe(struct model *m, const struct model_observer *o, void *ctx)
{
	gs_check_room(m->nobs, MAX_OBSERVERS, "observers of the model");
	m->obs[m->nobs].o = o;
	m->obs[m->nobs++].ctx = ctx;
}

static void free_values(struct hmap *h)
{
	hmap_free_with(h, NULL);
}

/* What a process holds besides its summary and OS aggregates. */
static void proc_release(struct proc *p)
{
	model__memory_free(p);
	model__graphs_free(p);
}

static void proc_free(void *v)
{
	struct proc *p = v;

	proc_release(p);
	model__os_free(p->os);
	free(p->os);
	if (p->os_done)
		os_result_free(p->os_done);
	free(p->os_done);
	free(p);
}

void model__retire(struct model *m, __u32 pid)
{
	struct proc *p = model__proc_get(m, pid);

	if (!p || p->retired)
		return;
	/* The analyses first, while everything of it is there; its stacks before its kernel
	 * names go. */
	MODEL_NOTIFY(m, retire, pid);
	model__stacks_retire(m, pid);
	model__kernels_retire(m, p);
	model__memory_retire(m, p);
	hmap_drop_key(&m->thread_ctx, true, 0, pid, free);
	proc_release(p);
	p->os_done = model__os_fold(p->os);
	p->os = NULL;
	p->retired = true;
}

void model__forget_proc(struct model *m, __u32 pid)
{
	struct proc *p;

	MODEL_NOTIFY(m, forget, pid);
	p = hmap_del(&m->procs, pid, 0);
	if (p)
		proc_free(p);
	model__kernels_forget(m, pid);
	hmap_drop_key(&m->thread_ctx, true, 0, pid, free);
	hmap_drop_key(&m->streams, false, 0, pid, free);
}

void model__free(struct model *m)
{
	if (!m)
		return;
	hmap_free_with(&m->procs, proc_free);
	model__kernels_free(m);
	model__gpu_free(m);
	free_values(&m->comms);
	free_values(&m->errors);
	free_values(&m->thread_ctx);
	model__os_free(&m->os);
	model__stacks_free(m);
	model__devcode_free(m);
	model__facts_free(m);
	model__strings_free(m);
	free(m->retired_allocs);
	free(m->libs);
	free(m);
}

/* ---- processes and the session ------------------------------------------------------------- */

/* The record's file, bounded by its field (a ring's bytes may not end it), interned. */
static const char *intern_path(struct model *m, const struct gs_ev_proc *e)
{
	char path[sizeof(e->path) + 1];

	gs_strlcpy(path, e->path, sizeof(path));
	return model__intern(m, path);
}

static void add_proc_event(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_proc *e = (const void *)ev;
	struct proc *p = model__proc(m, e->h.pid);

	switch (e->kind) {
	case GS_PROC_FORK:
		p->s.ppid = e->ppid;
		p->s.complete = true;
		p->s.start_ts = e->h.ts;
		gs_strlcpy(p->s.comm, e->comm, sizeof(p->s.comm));
		break;
	case GS_PROC_EXEC:
		p->s.complete = true;
		if (!p->s.start_ts)
			p->s.start_ts = e->h.ts;
		if (e->ppid && !p->s.ppid)
			p->s.ppid = e->ppid;
		gs_strlcpy(p->s.comm, e->comm, sizeof(p->s.comm));
		p->s.exe = intern_path(m, e);
		break;
	case GS_PROC_EXIT:
		p->s.exited = true;
		p->s.exit_code = e->exit_code;
		/* (A process gone before its name could be read from /proc has it here.) */
		if ((!p->s.comm[0] || !strcmp(p->s.comm, "?")) && e->comm[0])
			gs_strlcpy(p->s.comm, e->comm, sizeof(p->s.comm));
		p->s.end_ts = e->h.ts;
		MODEL_NOTIFY(m, tick, e->h.pid, e->h.ts, true); /* (its last word) */
		break;
	case GS_PROC_FOUND:
		p->s.ppid = e->ppid;
		p->s.complete = false;
		gs_strlcpy(p->s.comm, e->comm, sizeof(p->s.comm));
		p->s.exe = intern_path(m, e);
		break;
	}
}

static void add_session(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_session *e = (const void *)ev;

	if (e->kind == GS_SESSION_START) {
		m->start = *e;
		m->have_start = true;
		/* The command of `run` is traced from before its exec: it is complete. */
		if (e->mode == GS_MODE_RUN && e->target_pid > 0) {
			struct proc *p = model__proc(m, (__u32)e->target_pid);

			p->s.complete = true;
			p->s.start_ts = e->h.ts;
		}
	} else {
		m->end = *e;
		m->have_end = true;
	}
}

static void add_attach(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_attach *e = (const void *)ev;

	for (size_t i = 0; i < m->nlibs; i++)
		if (m->libs[i].dev == e->dev && m->libs[i].ino == e->ino)
			return;
	m->libs = xrealloc(m->libs, (m->nlibs + 1) * sizeof(*m->libs));
	m->libs[m->nlibs++] = *e;
}

static void nvml_seen(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_nvml *n = (const void *)ev;

	if (n->gpu < 0 || n->gpu >= MEM_DEVS || !(n->have & GS_NVML_MEMORY))
		return;
	m->nvml_mem[n->gpu].have = true;
	m->nvml_mem[n->gpu].ts = n->h.ts;
	m->nvml_mem[n->gpu].used = n->mem_used;
	m->nvml_mem[n->gpu].total = n->mem_total;
}

/* Calls with a call header: counted, their failures noted. */
static void count_call(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_call *c = (const void *)(ev + 1);

	m->api_calls[c->api]++;
	model__note_error(m, ev, c);
}

static void add_api_call(struct model *m, const struct gs_hdr *ev)
{
	count_call(m, ev);
	model__api_add(m, ev);
	model__context_add(m, (const void *)ev);
}

static void add_mem_call(struct model *m, const struct gs_hdr *ev)
{
	count_call(m, ev);
	model__memory_add(m, model__proc(m, ev->pid), (const void *)ev);
}

/* Copies, synchronisation and NCCL: counted, then each by its own. */
static void add_transfer(struct model *m, const struct gs_hdr *ev)
{
	count_call(m, ev);
	if (ev->type == GS_EV_COPY)
		model__copy_add(m, ev);
	else if (ev->type == GS_EV_SYNC)
		model__sync_add(m, ev);
	else
		model__nccl_add(m, ev);
}

/* The process's OS records, and those of its threads' ends and OOM kills. */
static void add_proc_record(struct model *m, const struct gs_hdr *ev)
{
	add_proc_event(m, ev);
	if (((const struct gs_ev_proc *)ev)->kind >= GS_PROC_THREAD_EXIT)
		model__os_add(m, ev);
}

static void add_drops(struct model *m, const struct gs_hdr *ev)
{
	m->drops = *(const struct gs_ev_drops *)ev;
	m->have_drops = true;
}

static void add_probe_out(struct model *m, const struct gs_hdr *ev)
{
	m->probe_records++;
	m->probe_bytes += ((const struct gs_ev_probe_out *)ev)->len;
}

/* What each record type does (NULL: nothing; GS_EV_LIB is control only). */
static void (*const adders[GS_EV_MAX])(struct model *m, const struct gs_hdr *ev) = {
	[GS_EV_LAUNCH] = model__launch_add,
	[GS_EV_KNAME] = model__name_add,
	[GS_EV_KALIAS] = model__alias_add,
	[GS_EV_API] = add_api_call,
	[GS_EV_MEM] = add_mem_call,
	[GS_EV_COPY] = add_transfer,
	[GS_EV_SYNC] = add_transfer,
	[GS_EV_NCCL] = add_transfer,
	[GS_EV_PROC] = add_proc_record,
	[GS_EV_OFFCPU] = model__os_add,
	[GS_EV_FAULTS] = model__os_add,
	[GS_EV_BLOCK] = model__os_add,
	[GS_EV_NET] = model__os_add,
	[GS_EV_SYSCALL] = model__os_add,
	[GS_EV_STACK] = model__stack_add,
	[GS_EV_SYMBOL] = model__stack_add,
	[GS_EV_SESSION] = add_session,
	[GS_EV_ATTACH] = add_attach,
	[GS_EV_GPU] = model__gpu_add,
	[GS_EV_DROPS] = add_drops,
	[GS_EV_NVML] = nvml_seen,
	[GS_EV_DEVCODE] = model__devcode_add,
	[GS_EV_HOST] = model__facts_add,
	[GS_EV_GPU_INFO] = model__facts_add,
	[GS_EV_PROC_INFO] = model__facts_add,
	[GS_EV_PYTHON] = model__facts_add,
	[GS_EV_BLOCKDEV] = model__facts_add,
	[GS_EV_PROBE_OUT] = add_probe_out,
};

void model__add(struct model *m, const struct gs_hdr *ev)
{
	if (ev->type >= GS_EV_MAX) /* (checked by every source: not reached) */
		return;
	m->events++;
	if (!m->first_ts || ev->ts < m->first_ts)
		m->first_ts = ev->ts;
	if (ev->ts > m->last_ts)
		m->last_ts = ev->ts;
	if (adders[ev->type])
		adders[ev->type](m, ev);
	/* A process's calls and GPU records are its clock, for the analyses that sample. */
	if ((ev->type <= GS_EV_NCCL || ev->type == GS_EV_GPU) && model__proc_get(m, ev->pid))
		MODEL_NOTIFY(m, tick, ev->pid, ev->ts, false);
}

/* ---- queries ------------------------------------------------------------------------------- */

void model__keep_history(struct model *m, bool keep)
{
	m->keep_history = keep;
}

bool model__keeps_history(const struct model *m)
{
	return m->keep_history;
}

const struct gs_ev_session *model__start(const struct model *m)
{
	return m && m->have_start ? &m->start : NULL;
}

const struct gs_ev_session *model__end(const struct model *m)
{
	return m && m->have_end ? &m->end : NULL;
}

bool model__ended(const struct model *m)
{
	return m && m->have_end;
}

bool model__os_plane(const struct model *m)
{
	return m->have_start && (m->start.flags & GS_SESSION_OS);
}

size_t model__libraries(const struct model *m)
{
	return m->nlibs;
}

void model__counters(const struct model *m, struct model_counters *c)
{
	memset(c, 0, sizeof(*c));
	c->events = m->events;
	c->first_ts = m->first_ts;
	c->last_ts = m->last_ts;
	c->t0 = m->have_start ? m->start.h.ts : m->first_ts;
	c->launches = m->launches;
	c->graph_launches = m->graph_launches;
	c->launch_errors = m->launch_errors;
	c->copy_bytes = m->copy_bytes;
	memcpy(c->in_use, m->in_use, sizeof(c->in_use));
	memcpy(c->peak, m->peak, sizeof(c->peak));
	c->procs = m->procs.len;
}

bool model__process(const struct model *m, __u32 pid, struct model_proc *out)
{
	const struct proc *p = model__proc_get(m, pid);

	if (p && out)
		*out = p->s;
	return p != NULL;
}

void model__each_process(const struct model *m, void (*fn)(void *ctx, const struct model_proc *p),
			 void *ctx)
{
	const struct hmap_slot *s;

	hmap_for_each (&m->procs, s)
		fn(ctx, &((const struct proc *)s->val)->s);
}

void model__set_comm(struct model *m, __u32 pid, const char *comm)
{
	struct proc *p = model__proc_get(m, pid);

	if (p)
		gs_strlcpy(p->s.comm, comm, sizeof(p->s.comm));
}

void model__set_complete(struct model *m, __u32 pid, bool complete)
{
	struct proc *p = model__proc_get(m, pid);

	if (p)
		p->s.complete = complete;
}
