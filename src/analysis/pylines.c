// SPDX-License-Identifier: MIT
/* GPU work by Python line (see pylines.h). */
#include <stdlib.h>
#include <string.h>

#include "analysis/pylines.h"
#include "core/hmap.h"
#include "core/util.h"
#include "core/names.h"

#define PENDING 65536 /* launches whose GPU record may still come, at most */
#define LINES	100000

struct line {
	char *where;
	__u64 launches, timed, gpu_ns;
};

struct pylines {
	struct model *m;
	struct hmap lines;   /* name hash -> struct line (collisions: the next hash) */
	struct hmap pending; /* (pid << 32 | tid, call ts) -> struct line */
	__u64 (*ring)[2];    /* the pending keys, oldest first over */
	size_t next;
	__u64 dropped; /* lines past LINES, counted nowhere but here */
};

static struct line *line_of(struct pylines *pl, const char *where)
{
	struct line *l;
	__u64 h;

	for (h = gs_str_hash(0xcbf29ce484222325ULL, where);; h++) {
		l = hmap_get(&pl->lines, h, 0);
		if (!l || !strcmp(l->where, where))
			break;
	}
	if (l || pl->lines.len >= LINES)
		return l;
	l = xcalloc(1, sizeof(*l));
	l->where = xstrdup(where);
	hmap_put(&pl->lines, h, 0, l);
	return l;
}

static void on_stack(void *ctx, const struct gs_hdr *h, const struct stack_entry *e)
{
	struct pylines *pl = ctx;
	const struct gs_ev_stack *st = (const void *)h;
	const char *where = NULL;
	struct line *l;
	__u64 *k;

	(void)e;
	if (!api_desc(st->api) || api_desc(st->api)->family != GS_FAM_LAUNCH)
		return;
	/* (Of another thread's frames too: past the mark, the line the launch was for.) */
	for (unsigned int i = 0; i < st->nframes && !where; i++)
		if (GS_IS_PYFRAME(st->ip[i]) && st->ip[i] != GS_PYFRAME_BORROWED)
			where = model__symbol(pl->m, h->pid, st->ip[i]);
	if (!where)
		return;
	if (!(l = line_of(pl, where))) {
		pl->dropped++;
		return;
	}
	l->launches++;
	/* Its GPU record comes later, under the call's thread and time. */
	k = pl->ring[pl->next++ % PENDING];
	if (k[0] || k[1])
		hmap_del(&pl->pending, k[0], k[1]);
	k[0] = (__u64)h->pid << 32 | h->tid;
	k[1] = h->ts;
	hmap_put(&pl->pending, k[0], k[1], l);
}

static void on_gpu(void *ctx, const struct gs_ev_gpu *e, __u64 dur)
{
	struct pylines *pl = ctx;
	struct line *l;

	if (e->kind != GS_GPU_KERNEL && e->kind != GS_GPU_GRAPH)
		return;
	l = hmap_del(&pl->pending, (__u64)e->h.pid << 32 | e->h.tid, e->h.ts);
	if (!l)
		return;
	l->timed++;
	l->gpu_ns += dur;
}

static const struct model_observer observer = { .stack = on_stack, .gpu = on_gpu };

struct pylines *pylines__attach(struct model *m)
{
	struct pylines *pl = xcalloc(1, sizeof(*pl));

	pl->m = m;
	pl->ring = xcalloc(PENDING, sizeof(*pl->ring));
	model__observe(m, &observer, pl);
	return pl;
}

void pylines__free(struct pylines *pl)
{
	struct hmap_slot *s;

	if (!pl)
		return;
	hmap_for_each (&pl->lines, s) {
		free(((struct line *)s->val)->where);
		free(s->val);
	}
	hmap_free(&pl->lines);
	hmap_free(&pl->pending);
	free(pl->ring);
	free(pl);
}

static int by_time(const void *a, const void *b)
{
	const struct line *x = *(struct line *const *)a, *y = *(struct line *const *)b;

	if (x->gpu_ns != y->gpu_ns)
		return x->gpu_ns < y->gpu_ns ? 1 : -1;
	if (x->launches != y->launches)
		return x->launches < y->launches ? 1 : -1;
	return strcmp(x->where, y->where);
}

void pylines__report(const struct pylines *pl, struct report *r)
{
	struct line **v = xcalloc(pl->lines.len + 1, sizeof(*v));
	struct hmap_slot *s;
	size_t n = 0;

	hmap_for_each (&pl->lines, s) {
		const struct line *l = s->val;

		v[n++] = s->val;
		r->pyline_launches += l->launches;
		r->pyline_timed += l->timed;
		r->pyline_gpu_ns += l->gpu_ns;
	}
	qsort(v, n, sizeof(*v), by_time);
	r->pylines_total = n;
	r->npylines = GS_MIN(n, (size_t)REP_PYLINES);
	r->pylines = xcalloc(r->npylines + 1, sizeof(*r->pylines));
	for (size_t i = 0; i < r->npylines; i++) {
		gs_strlcpy(r->pylines[i].where, v[i]->where, sizeof(r->pylines[i].where));
		r->pylines[i].launches = v[i]->launches;
		r->pylines[i].timed = v[i]->timed;
		r->pylines[i].gpu_ns = v[i]->gpu_ns;
	}
	free(v);
}
