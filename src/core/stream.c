// SPDX-License-Identifier: MIT
/* The event stream (see stream.h). */
#include <stdlib.h>

#include "core/hmap.h"
#include "core/stream.h"
#include "core/util.h"

#define MAX_STAGES 16

struct stage {
	__u64 types;
	stream_fn fn;
	stream_filter_fn filter;
	void *ctx;
};

/* A process seen to exit, or held by a source: holds left, and whether its exit is in. */
struct life {
	unsigned int holds;
	bool exited;
};

struct stream {
	struct stage filters[MAX_STAGES], consumers[MAX_STAGES];
	unsigned int nfilters, nconsumers;
	struct {
		stream_retire_fn fn;
		void *ctx;
	} retire[MAX_STAGES];
	unsigned int nretire;
	struct hmap lives; /* pid -> struct life */
	__u64 records;
	bool replay; /* retire at the recorded retire records only */
};

struct stream *stream__new(void)
{
	return xcalloc(1, sizeof(struct stream));
}

void stream__free(struct stream *s)
{
	if (!s)
		return;
	hmap_free_with(&s->lives, NULL);
	free(s);
}

static void add_stage(struct stage *v, unsigned int *n, const struct stage *st)
{
	gs_check_room(*n, MAX_STAGES, "stages on the event stream");
	v[(*n)++] = *st;
}

void stream__subscribe(struct stream *s, __u64 types, stream_fn fn, void *ctx)
{
	add_stage(s->consumers, &s->nconsumers,
		  &(struct stage){ .types = types, .fn = fn, .ctx = ctx });
}

void stream__filter(struct stream *s, __u64 types, stream_filter_fn fn, void *ctx)
{
	add_stage(s->filters, &s->nfilters,
		  &(struct stage){ .types = types, .filter = fn, .ctx = ctx });
}

void stream__on_retire(struct stream *s, stream_retire_fn fn, void *ctx)
{
	gs_check_room(s->nretire, MAX_STAGES, "retire callbacks on the event stream");
	s->retire[s->nretire].fn = fn;
	s->retire[s->nretire++].ctx = ctx;
}

static struct life *life_of(struct stream *s, __u32 pid)
{
	struct life *l = hmap_get_or_new(&s->lives, pid, 0, sizeof(*l));

	return l;
}

/* The process is done when its exit is in and no source holds it: a retire record says so
 * (the callbacks are called when it has been delivered). */
static void maybe_retire(struct stream *s, __u32 pid)
{
	struct life *l = hmap_get(&s->lives, pid, 0);
	struct gs_ev_retire r;

	if (!l || !l->exited || l->holds)
		return;
	free(hmap_del(&s->lives, pid, 0));
	stream__emit(s, &r.h, GS_EV_RETIRE, sizeof(r), pid);
}

void stream__replay(struct stream *s)
{
	s->replay = true;
}

void stream__push(struct stream *s, const struct gs_hdr *ev)
{
	__u64 bit = ev->type < 64 ? STREAM_TYPE(ev->type) : 0;

	for (unsigned int i = 0; i < s->nfilters && ev; i++)
		if (s->filters[i].types & bit)
			ev = s->filters[i].filter(s->filters[i].ctx, ev);
	if (!ev)
		return;
	s->records++;
	for (unsigned int i = 0; i < s->nconsumers; i++)
		if (s->consumers[i].types & bit)
			s->consumers[i].fn(s->consumers[i].ctx, ev);
	if (ev->type == GS_EV_RETIRE && ev->source == GS_SRC_GPUSCOPE) {
		for (unsigned int i = 0; i < s->nretire; i++)
			s->retire[i].fn(s->retire[i].ctx, ev->pid);
	} else if (ev->type == GS_EV_PROC &&
		   ((const struct gs_ev_proc *)ev)->kind == GS_PROC_EXIT && s->nretire &&
		   !s->replay) {
		life_of(s, ev->pid)->exited = true;
		maybe_retire(s, ev->pid);
	}
}

void stream__emit(struct stream *s, struct gs_hdr *h, __u16 type, __u32 size, __u32 pid)
{
	h->type = type;
	h->source = GS_SRC_GPUSCOPE;
	h->flags = 0;
	h->size = size;
	h->ts = gs_now_ns();
	h->pid = pid;
	h->tid = 0;
	stream__push(s, h);
}

void stream__hold(struct stream *s, __u32 pid)
{
	life_of(s, pid)->holds++;
}

void stream__release(struct stream *s, __u32 pid)
{
	struct life *l = hmap_get(&s->lives, pid, 0);

	if (l && l->holds)
		l->holds--;
	maybe_retire(s, pid);
}

__u64 stream__records(const struct stream *s)
{
	return s->records;
}
