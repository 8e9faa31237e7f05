// SPDX-License-Identifier: MIT
/* The model and its analyses, built together (see analyses.h). */
#include <string.h>

#include "analysis/analyses.h"

static void model_add(void *ctx, const struct gs_hdr *ev)
{
	model__add(ctx, ev);
}

static void model_retire(void *ctx, __u32 pid)
{
	model__retire(ctx, pid);
}

void analyses__attach(struct analyses *a, struct stream *s, const struct analyses_opts *o)
{
	memset(a, 0, sizeof(*a));
	a->model = model__new();
	model__keep_history(a->model, o->keep_history);
	if (!o->caller_feeds)
		stream__subscribe(s, STREAM_ALL, model_add, a->model);
	a->memsites = memsites__attach(a->model, o->keep_history);
	a->pylines = pylines__attach(a->model);
	if (o->findings || o->steps) { /* (run, attach, report; the agent's online) */
		struct steps_opts so = { .func = o->step_func,
					 .online = !o->findings,
					 .fed = o->caller_feeds };

		a->steps = steps__attach(s, a->model, &so);
	}
	if (o->findings) {
		a->findings = findings__attach(s, a->model);
		a->pyexc = pyexc__attach(s, a->model);
	}
	if (o->retire)
		stream__on_retire(s, model_retire, a->model);
}

void analyses__add(struct analyses *a, const struct gs_hdr *ev)
{
	model__add(a->model, ev);
	if (a->steps)
		steps__add(a->steps, ev);
}

void analyses__free(struct analyses *a)
{
	findings__free(a->findings);
	memsites__free(a->memsites);
	pylines__free(a->pylines);
	steps__free(a->steps);
	pyexc__free(a->pyexc);
	model__free(a->model);
	memset(a, 0, sizeof(*a));
}

struct report *analyses__report(const struct analyses *a)
{
	struct report *r = report__build(a->model, a->findings, a->memsites);

	pylines__report(a->pylines, r);
	if (a->pyexc)
		pyexc__report(a->pyexc, r);
	if (a->steps)
		steps__report(a->steps, r, a->findings);
	return r;
}
