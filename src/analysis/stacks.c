// SPDX-License-Identifier: MIT
/* Call stacks and the names of their addresses (see model.h). */
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "core/util.h"

static __u64 stack_hash(const struct gs_ev_stack *s)
{
	__u64 h = 0xcbf29ce484222325ULL ^ s->api ^ (s->arg << 16);

	for (unsigned int i = 0; i < s->nframes && i < GS_STACK_MAX; i++)
		h = (h ^ s->ip[i]) * 0x100000001b3ULL;
	return h;
}

void model__stack_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_symbol *y = (const void *)ev;
	const struct gs_ev_stack *s = (const void *)ev;
	struct stack_entry *e;
	__u64 h;

	if (ev->type == GS_EV_SYMBOL) {
		if (!hmap_get(&m->symbols, ev->pid, y->addr))
			hmap_put(&m->symbols, ev->pid, y->addr, xstrdup(y->name));
		return;
	}
	m->stack_records++;
	h = stack_hash(s);
	/* (Linear probing on the hash: a collision of different stacks takes the next key.) */
	for (;; h++) {
		e = hmap_get(&m->stacks, h, ev->pid);
		if (!e || (e->api == s->api && e->arg == s->arg && e->nframes == s->nframes &&
			   !memcmp(e->ip, s->ip, s->nframes * sizeof(s->ip[0]))))
			break;
	}
	if (!e) {
		e = xcalloc(1, sizeof(*e));
		e->pid = ev->pid;
		e->api = s->api;
		e->arg = s->arg;
		e->nframes = GS_MIN(s->nframes, GS_STACK_MAX);
		memcpy(e->ip, s->ip, e->nframes * sizeof(e->ip[0]));
		hmap_put(&m->stacks, h, ev->pid, e);
	}
	e->count++;
	model__site_stack(m, ev, e);
}

const char *model__symbol(const struct model *m, __u32 pid, __u64 addr)
{
	return hmap_get(&m->symbols, pid, addr);
}

void model__stacks_free(struct model *m)
{
	struct hmap_slot *s;

	hmap_for_each (&m->symbols, s)
		free(s->val);
	hmap_for_each (&m->stacks, s)
		free(s->val);
	hmap_free(&m->symbols);
	hmap_free(&m->stacks);
}
