// SPDX-License-Identifier: MIT
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "core/names.h"
#include "core/util.h"

struct model *model__new(void)
{
	return xcalloc(1, sizeof(struct model));
}

static void free_values(struct hmap *h)
{
	struct hmap_slot *s;

	hmap_for_each (h, s)
		free(s->val);
	hmap_free(h);
}

static void free_captures(struct hmap *h)
{
	struct hmap_slot *s;

	hmap_for_each (h, s) {
		struct capture *c = s->val;

		free(c->k);
		free(c);
	}
	hmap_free(h);
}

/* Remove the entries whose first key matches `pid` (shifted right by `shift`; shift 64: the
 * second key), freeing
 * each with `fn`. (Collected first: deleting shifts the table under an iteration.) */
static void drop_pid(struct hmap *h, __u32 pid, unsigned int shift, void (*fn)(void *))
{
	struct hmap_slot *s;
	__u64 *keys = NULL;
	size_t n = 0, cap = 0;

	hmap_for_each (h, s) {
		/* (shift 64: the pid is the second key) */
		if ((shift == 64 ? s->k2 : s->k1 >> shift) != pid)
			continue;
		if (n + 2 > cap) {
			cap = cap ? 2 * cap : 64;
			keys = xrealloc(keys, cap * sizeof(*keys));
		}
		keys[n++] = s->k1;
		keys[n++] = s->k2;
	}
	for (size_t i = 0; i < n; i += 2)
		fn(hmap_del(h, keys[i], keys[i + 1]));
	free(keys);
}

static void free_kstat(void *v)
{
	struct kstat *k = v;

	free(k->gpu);
	free(k);
}

static void free_name(void *v)
{
	free(((struct name_entry *)v)->name);
	free(v);
}

static void free_proc(struct proc *p)
{
	free(p->sites);
	for (int i = 0; i <= MEM_DEVS; i++)
		free(p->frag[i]);
	model__memory_free(p);
	free_captures(&p->capturing);
	free_captures(&p->graphs);
	free_values(&p->execs);
	model__os_free(p->os);
	free(p->os);
	free(p);
}

void model__forget_proc(struct model *m, __u32 pid)
{
	struct proc *p;

	model__sites_forget(m, pid);
	p = hmap_del(&m->procs, pid, 0);

	if (p)
		free_proc(p);
	drop_pid(&m->kernels, pid, 0, free_kstat);
	drop_pid(&m->graph_execs, pid, 0, free_kstat);
	drop_pid(&m->names, pid, 1, free_name);
	drop_pid(&m->aliases, pid, 0, free);
	drop_pid(&m->launch_ends, pid, 0, free);
	drop_pid(&m->stream_waits, pid, 0, free);
	drop_pid(&m->thread_ctx, pid, 64, free);
	drop_pid(&m->streams, pid, 0, free);
}

void model__free(struct model *m)
{
	struct hmap_slot *s;

	if (!m)
		return;
	hmap_for_each (&m->procs, s)
		free_proc(s->val);
	hmap_free(&m->procs);
	hmap_for_each (&m->names, s)
		free(((struct name_entry *)s->val)->name);
	free_values(&m->names);
	free_values(&m->aliases);
	model__gpu_free(m);
	free_values(&m->kernels);
	free_values(&m->graph_execs);
	free_values(&m->comms);
	free_values(&m->errors);
	free_values(&m->thread_ctx);
	model__os_free(&m->os);
	model__findings_free(m);
	model__stacks_free(m);
	model__devcode_free(m);
	model__sites_free(m);
	free(m->libs);
	free(m);
}

void model__keep_history(struct model *m, bool keep)
{
	m->keep_history = keep;
}

bool model__ended(const struct model *m)
{
	return m && m->have_end;
}

size_t model__libraries(const struct model *m)
{
	return m->nlibs;
}

const struct proc *model__process(const struct model *m, __u32 pid)
{
	return hmap_get(&m->procs, pid, 0);
}

struct proc *model__proc(struct model *m, __u32 pid)
{
	struct proc *p = hmap_get(&m->procs, pid, 0);

	if (!p) {
		p = xcalloc(1, sizeof(*p));
		p->pid = pid;
		p->exit_code = -1;
		hmap_put(&m->procs, pid, 0, p);
	}
	return p;
}

void model__note_error(struct model *m, const struct gs_hdr *h, const struct gs_call *c)
{
	struct err_stat *e;

	if (c->result == 0 || result_is_status(c->api, c->result))
		return;
	e = hmap_get(&m->errors, c->api, (__u32)c->result);
	if (!e) {
		e = xcalloc(1, sizeof(*e));
		e->api = c->api;
		e->result = c->result;
		e->first_ts = h->ts;
		e->pid = h->pid;
		e->tid = h->tid;
		hmap_put(&m->errors, c->api, (__u32)c->result, e);
	}
	e->count++;
}

static void add_proc_event(struct model *m, const struct gs_ev_proc *e)
{
	struct proc *p = model__proc(m, e->h.pid);

	switch (e->kind) {
	case GS_PROC_FORK:
		p->ppid = e->ppid;
		p->complete = true;
		p->start_ts = e->h.ts;
		gs_strlcpy(p->comm, e->comm, sizeof(p->comm));
		break;
	case GS_PROC_EXEC:
		p->complete = true;
		if (!p->start_ts)
			p->start_ts = e->h.ts;
		if (e->ppid && !p->ppid)
			p->ppid = e->ppid;
		gs_strlcpy(p->comm, e->comm, sizeof(p->comm));
		gs_strlcpy(p->exe, e->path, sizeof(p->exe));
		break;
	case GS_PROC_EXIT:
		p->exited = true;
		p->exit_code = e->exit_code;
		/* (A process gone before its name could be read from /proc has it here.) */
		if ((!p->comm[0] || !strcmp(p->comm, "?")) && e->comm[0])
			gs_strlcpy(p->comm, e->comm, sizeof(p->comm));
		p->end_ts = e->h.ts;
		model__mem_tick(m, p, e->h.ts, true); /* (its last word) */
		break;
	case GS_PROC_FOUND:
		p->ppid = e->ppid;
		p->complete = false;
		gs_strlcpy(p->comm, e->comm, sizeof(p->comm));
		gs_strlcpy(p->exe, e->path, sizeof(p->exe));
		break;
	}
}

static void add_session(struct model *m, const struct gs_ev_session *e)
{
	if (e->kind == GS_SESSION_START) {
		m->start = *e;
		m->have_start = true;
		/* The command of `run` is traced from before its exec: it is complete. */
		if (e->mode == GS_MODE_RUN && e->target_pid > 0) {
			struct proc *p = model__proc(m, (__u32)e->target_pid);

			p->complete = true;
			p->start_ts = e->h.ts;
		}
	} else {
		m->end = *e;
		m->have_end = true;
		model__findings_settle(m, true);
	}
}

static void add_attach(struct model *m, const struct gs_ev_attach *e)
{
	for (size_t i = 0; i < m->nlibs; i++)
		if (m->libs[i].dev == e->dev && m->libs[i].ino == e->ino)
			return;
	m->libs = xrealloc(m->libs, (m->nlibs + 1) * sizeof(*m->libs));
	m->libs[m->nlibs++] = *e;
}

void model__add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_call *c = (const void *)(ev + 1);

	m->events++;
	if (!m->first_ts || ev->ts < m->first_ts)
		m->first_ts = ev->ts;
	if (ev->ts > m->last_ts)
		m->last_ts = ev->ts;
	switch (ev->type) {
	case GS_EV_LAUNCH:
		model__launch_gap(m, (const void *)ev);
		model__kernels_add(m, ev);
		break;
	case GS_EV_KNAME:
	case GS_EV_KALIAS:
		model__kernels_add(m, ev);
		break;
	case GS_EV_API:
		m->api_calls[c->api]++;
		model__note_error(m, ev, c);
		model__kernels_add(m, ev);
		model__context_add(m, (const void *)ev);
		break;
	case GS_EV_MEM:
		m->api_calls[c->api]++;
		model__note_error(m, ev, c);
		model__memory_add(m, model__proc(m, ev->pid), (const void *)ev);
		break;
	case GS_EV_COPY:
	case GS_EV_SYNC:
	case GS_EV_NCCL:
		m->api_calls[c->api]++;
		model__note_error(m, ev, c);
		model__transfers_add(m, ev);
		break;
	case GS_EV_PROC:
		add_proc_event(m, (const void *)ev);
		if (((const struct gs_ev_proc *)ev)->kind >= GS_PROC_THREAD_EXIT)
			model__os_add(m, ev);
		break;
	case GS_EV_OFFCPU:
	case GS_EV_FAULTS:
	case GS_EV_BLOCK:
		model__history_add(m, ev);
		model__os_add(m, ev);
		break;
	case GS_EV_NET:
	case GS_EV_SYSCALL:
		model__os_add(m, ev);
		break;
	case GS_EV_STACK:
	case GS_EV_SYMBOL:
		model__stack_add(m, ev);
		break;
	case GS_EV_SESSION:
		add_session(m, (const void *)ev);
		break;
	case GS_EV_ATTACH:
		add_attach(m, (const void *)ev);
		break;
	case GS_EV_GPU:
		model__gpu_add(m, (const void *)ev);
		break;
	case GS_EV_DROPS:
		m->drops = *(const struct gs_ev_drops *)ev;
		m->have_drops = true;
		break;
	case GS_EV_NVML:
		model__nvml_seen(m, ev);
		break;
	case GS_EV_DEVCODE:
		model__devcode_add(m, (const void *)ev);
		break;
	case GS_EV_PROBE_OUT:
		m->probe_records++;
		m->probe_bytes += ((const struct gs_ev_probe_out *)ev)->len;
		break;
	default: /* GS_EV_LIB: control only */
		break;
	}
	/* The memory analyses sample a process's sites as its records come. */
	if (ev->type <= GS_EV_NCCL || ev->type == GS_EV_GPU) {
		struct proc *p = hmap_get(&m->procs, ev->pid, 0);

		if (p && p->nsites && ev->ts >= p->sample_next)
			model__mem_tick(m, p, ev->ts, false);
	}
}
