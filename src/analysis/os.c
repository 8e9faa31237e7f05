// SPDX-License-Identifier: MIT
/* The OS plane's records, aggregated per process and for the run (see model.h). */
#include <stdlib.h>

#include "analysis/model.h"
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
		o->offcpu_count[off->reason]++;
		o->offcpu_ns[off->reason] += off->dur_ns;
		o->runq_ns += off->runq_ns;
		break;
	case GS_EV_FAULTS:
		o->faults += f->count;
		o->major_faults += f->major;
		break;
	case GS_EV_BLOCK:
		io_add(&o->io[b->op], b);
		dev = hmap_get(&o->devices, b->dev, 0);
		if (!dev) {
			dev = xcalloc(1, sizeof(*dev));
			hmap_put(&o->devices, b->dev, 0, dev);
		}
		io_add(dev, b);
		break;
	case GS_EV_NET:
		o->net_calls[n->dir][model__net_proto(n->family, n->protocol)]++;
		o->net_bytes[n->dir][model__net_proto(n->family, n->protocol)] += n->bytes;
		break;
	case GS_EV_SYSCALL:
		ss = hmap_get(&o->syscalls, sc->nr, 0);
		if (!ss) {
			ss = xcalloc(1, sizeof(*ss));
			hmap_put(&o->syscalls, sc->nr, 0, ss);
		}
		ss->count++;
		ss->total_ns += sc->dur_ns;
		ss->max_ns = GS_MAX(ss->max_ns, sc->dur_ns);
		break;
	case GS_EV_PROC:
		if (((const struct gs_ev_proc *)ev)->kind == GS_PROC_THREAD_EXIT)
			o->thread_exits++;
		else if (((const struct gs_ev_proc *)ev)->kind == GS_PROC_OOM_KILL)
			o->oom_killed = true;
		break;
	}
}

void model__os_add(struct model *m, const struct gs_hdr *ev)
{
	struct proc *p = model__proc(m, ev->pid);

	if (!p->os)
		p->os = xcalloc(1, sizeof(*p->os));
	m->os_events++;
	add(&m->os, ev);
	add(p->os, ev);
}

void model__os_free(struct os_stat *o)
{
	struct hmap_slot *s;

	if (!o)
		return;
	hmap_for_each (&o->syscalls, s)
		free(s->val);
	hmap_for_each (&o->devices, s)
		free(s->val);
	hmap_free(&o->syscalls);
	hmap_free(&o->devices);
}
