// SPDX-License-Identifier: MIT
/* The OS plane's records, aggregated per process and for the run (see model_int.h). */
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/util.h"

#define AF_INET_     2
#define AF_INET6_    10
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17

int model__net_proto(unsigned int family, unsigned int protocol)
{
	if (family != AF_INET_ && family != AF_INET6_)
		return NET_OTHER;
	return protocol == IPPROTO_TCP_ ? NET_TCP : protocol == IPPROTO_UDP_ ? NET_UDP : NET_OTHER;
}

static void io_add(struct io_stat *s, const struct gs_ev_block *b)
{
	s->count++;
	s->bytes += b->bytes;
	s->total_ns += b->dur_ns;
	s->max_ns = GS_MAX(s->max_ns, b->dur_ns);
	s->errors += b->error != 0;
	s->ends_unseen += (b->h.flags & GS_HDR_END_UNSEEN) != 0;
}

static void add(struct os_stat *o, const struct gs_hdr *ev)
{
	const struct gs_ev_offcpu *off = (const void *)ev;
	const struct gs_ev_faults *f = (const void *)ev;
	const struct gs_ev_block *b = (const void *)ev;
	const struct gs_ev_net *n = (const void *)ev;
	const struct gs_ev_syscall *sc = (const void *)ev;
	struct sys_stat *ss;
	struct io_stat *dev;

	switch (ev->type) {
	case GS_EV_OFFCPU:
		o->c.offcpu_count[off->reason]++;
		o->c.offcpu_ns[off->reason] += off->dur_ns;
		o->c.runq_ns += off->runq_ns;
		break;
	case GS_EV_FAULTS:
		o->c.faults += f->count;
		o->c.major_faults += f->major;
		break;
	case GS_EV_BLOCK:
		io_add(&o->c.io[b->op], b);
		dev = hmap_get_or_new(&o->devices, b->dev, 0, sizeof(*dev));
		io_add(dev, b);
		break;
	case GS_EV_NET:
		o->c.net_calls[n->dir][model__net_proto(n->family, n->protocol)]++;
		o->c.net_bytes[n->dir][model__net_proto(n->family, n->protocol)] += n->bytes;
		break;
	case GS_EV_SYSCALL:
		ss = hmap_get_or_new(&o->syscalls, sc->nr, 0, sizeof(*ss));
		ss->count++;
		ss->total_ns += sc->dur_ns;
		ss->max_ns = GS_MAX(ss->max_ns, sc->dur_ns);
		break;
	case GS_EV_PROC:
		if (((const struct gs_ev_proc *)ev)->kind == GS_PROC_THREAD_EXIT)
			o->c.thread_exits++;
		else if (((const struct gs_ev_proc *)ev)->kind == GS_PROC_OOM_KILL)
			o->c.oom_killed = true;
		break;
	}
}

/* A retired process's result back into a table (freed), for a record that came late. */
static struct os_stat *unfold(struct os_result *r)
{
	struct os_stat *o = xcalloc(1, sizeof(*o));

	if (!r)
		return o;
	o->c = *r;
	o->c.syscalls = NULL;
	o->c.devices = NULL;
	o->c.nsyscalls = o->c.ndevices = 0;
	for (size_t i = 0; i < r->nsyscalls; i++)
		*(struct sys_stat *)hmap_get_or_new(&o->syscalls, r->syscalls[i].nr, 0,
						    sizeof(struct sys_stat)) = r->syscalls[i].s;
	for (size_t i = 0; i < r->ndevices; i++)
		*(struct io_stat *)hmap_get_or_new(&o->devices, r->devices[i].dev, 0,
						   sizeof(struct io_stat)) = r->devices[i].s;
	os_result_free(r);
	free(r);
	return o;
}

void model__os_add(struct model *m, const struct gs_hdr *ev)
{
	struct proc *p = model__proc(m, ev->pid);

	m->os_events++;
	add(&m->os, ev);
	if (p->retired) { /* a late record (a source's last flush): unfolded, added, folded */
		p->os = unfold(p->os_done);
		p->os_done = NULL;
		add(p->os, ev);
		p->os_done = model__os_fold(p->os);
		p->os = NULL;
		return;
	}
	if (!p->os)
		p->os = xcalloc(1, sizeof(*p->os));
	add(p->os, ev);
}

void model__os_free(struct os_stat *o)
{
	if (!o)
		return;
	hmap_free_with(&o->syscalls, NULL);
	hmap_free_with(&o->devices, NULL);
}

static int syscall_order(const void *a, const void *b)
{
	const struct os_syscall *x = a, *y = b;

	return x->s.total_ns < y->s.total_ns ? 1 : x->s.total_ns > y->s.total_ns ? -1 : 0;
}

static int device_order(const void *a, const void *b)
{
	const struct os_device *x = a, *y = b;

	return x->s.total_ns < y->s.total_ns ? 1 : x->s.total_ns > y->s.total_ns ? -1 : 0;
}

void model__os_result(const struct os_stat *o, struct os_result *out)
{
	const struct hmap_slot *s;

	memset(out, 0, sizeof(*out));
	if (!o)
		return;
	*out = o->c;
	out->syscalls = xcalloc(o->syscalls.len + 1, sizeof(*out->syscalls));
	hmap_for_each (&o->syscalls, s)
		out->syscalls[out->nsyscalls++] =
			(struct os_syscall){ (__u32)s->k1, *(const struct sys_stat *)s->val };
	qsort(out->syscalls, out->nsyscalls, sizeof(*out->syscalls), syscall_order);
	out->devices = xcalloc(o->devices.len + 1, sizeof(*out->devices));
	hmap_for_each (&o->devices, s)
		out->devices[out->ndevices++] =
			(struct os_device){ (__u32)s->k1, *(const struct io_stat *)s->val };
	qsort(out->devices, out->ndevices, sizeof(*out->devices), device_order);
}

struct os_result *model__os_fold(struct os_stat *o)
{
	struct os_result *r;

	if (!o)
		return NULL;
	r = xmalloc(sizeof(*r));
	model__os_result(o, r);
	/* (Exactly sized: kept for every process a session saw.) */
	r->syscalls = r->nsyscalls ? xrealloc(r->syscalls, r->nsyscalls * sizeof(*r->syscalls))
				   : (free(r->syscalls), NULL);
	r->devices = r->ndevices ? xrealloc(r->devices, r->ndevices * sizeof(*r->devices))
				 : (free(r->devices), NULL);
	model__os_free(o);
	free(o);
	return r;
}

void os_result_copy(const struct os_result *from, struct os_result *to)
{
	*to = *from;
	to->syscalls = xcalloc(from->nsyscalls + 1, sizeof(*to->syscalls));
	if (from->nsyscalls)
		memcpy(to->syscalls, from->syscalls, from->nsyscalls * sizeof(*to->syscalls));
	to->devices = xcalloc(from->ndevices + 1, sizeof(*to->devices));
	if (from->ndevices)
		memcpy(to->devices, from->devices, from->ndevices * sizeof(*to->devices));
}

void os_result_free(struct os_result *r)
{
	free(r->syscalls);
	free(r->devices);
	memset(r, 0, sizeof(*r));
}
