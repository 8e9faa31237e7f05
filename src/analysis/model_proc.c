// SPDX-License-Identifier: MIT
/* The model's bottom layer: processes, host facts, errors, interned names (model_int.h). */
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/names.h"
#include "core/util.h"

struct proc *model__proc(struct model *m, __u32 pid)
{
	struct proc *p = hmap_get(&m->procs, pid, 0);

	if (!p) {
		p = xcalloc(1, sizeof(*p));
		p->s.pid = pid;
		p->s.exit_code = -1;
		hmap_put(&m->procs, pid, 0, p);
	}
	return p;
}

struct proc *model__proc_get(const struct model *m, __u32 pid)
{
	return hmap_get(&m->procs, pid, 0);
}

const char *model__comm(const struct model *m, __u32 pid)
{
	const struct proc *p = model__proc_get(m, pid);

	return p ? p->s.comm : "";
}

bool model__retired(const struct model *m, __u32 pid)
{
	const struct proc *p = model__proc_get(m, pid);

	return p && p->retired;
}

bool model__exited(const struct model *m, __u32 pid)
{
	const struct proc *p = model__proc_get(m, pid);

	return p && p->s.exited;
}

const char *model__cmdline(const struct model *m, __u32 pid)
{
	const struct proc *p = model__proc_get(m, pid);

	return p ? p->s.cmdline : NULL;
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

static __u64 str_hash(const char *s)
{
	__u64 h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

const char *model__intern(struct model *m, const char *s)
{
	__u64 h;
	char *v;

	if (!s)
		return NULL;
	/* (Linear probing on the hash: another string under it takes the next key.) */
	for (h = str_hash(s);; h++) {
		v = hmap_get(&m->strings, h, 0);
		if (!v || !strcmp(v, s))
			break;
	}
	if (!v) {
		v = xstrdup(s);
		hmap_put(&m->strings, h, 0, v);
	}
	return v;
}

void model__strings_free(struct model *m)
{
	hmap_free_with(&m->strings, NULL);
}

/* ---- host facts ---------------------------------------------------------------------------- */

#define MAX_BLOCKDEVS 4096 /* (a recording's records decide how many) */

void model__facts_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_proc_info *i = (const void *)ev;
	const struct gs_ev_gpu_info *g = (const void *)ev;
	const struct gs_ev_blockdev *b = (const void *)ev;
	struct proc *p;

	switch (ev->type) {
	case GS_EV_HOST:
		m->host = *(const struct gs_ev_host *)ev;
		m->have_host = true;
		break;
	case GS_EV_GPU_INFO:
		/* (Checked: 0 <= gpu < GS_GPUS_MAX.) */
		if (!m->gpu_info[g->gpu])
			m->gpu_info[g->gpu] = xmalloc(sizeof(*g));
		*m->gpu_info[g->gpu] = *g;
		break;
	case GS_EV_PROC_INFO:
		p = model__proc(m, ev->pid);
		p->s.cmdline = model__intern(m, i->cmdline);
		p->s.cgroup = i->cgroup[0] ? model__intern(m, i->cgroup) : NULL;
		p->s.uid = i->uid;
		p->s.cmdline_truncated = i->cmdline_truncated;
		break;
	case GS_EV_PYTHON:
		p = model__proc(m, ev->pid);
		p->s.py_version = ((const struct gs_ev_python *)ev)->version;
		p->s.py_status = ((const struct gs_ev_python *)ev)->status;
		p->s.py_mixed = ((const struct gs_ev_python *)ev)->mixed;
		break;
	case GS_EV_BLOCKDEV:
		if (m->blockdevs.len < MAX_BLOCKDEVS || hmap_get(&m->blockdevs, b->dev, 0))
			hmap_put(&m->blockdevs, b->dev, 0, (void *)model__intern(m, b->name));
		break;
	default:
		break;
	}
}

void model__facts_free(struct model *m)
{
	for (int i = 0; i < GS_GPUS_MAX; i++)
		free(m->gpu_info[i]);
	hmap_free(&m->blockdevs);
}

const struct gs_ev_host *model__host(const struct model *m)
{
	return m->have_host ? &m->host : NULL;
}

const struct gs_ev_gpu_info *model__gpu_info(const struct model *m, int gpu)
{
	return gpu >= 0 && gpu < GS_GPUS_MAX ? m->gpu_info[gpu] : NULL;
}

const char *model__blockdev_name(const struct model *m, __u32 dev)
{
	return hmap_get(&m->blockdevs, dev, 0);
}
