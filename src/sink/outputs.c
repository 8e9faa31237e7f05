// SPDX-License-Identifier: MIT
/* What a session writes for its user (see outputs.h). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/output.h"
#include "core/util.h"
#include "sink/outputs.h"
#include "sink/sinks.h"

/* Close a file written at the end (bad: its writing failed): 0 or GS_EXIT_RUNTIME. */
static int finish_file(FILE *f, const char *what, const char *path, int bad)
{
	char err[PATH_MAX + 128];

	if (output_close(f, what, path, err, sizeof(err)) == 0 && !bad)
		return GS_EXIT_OK;
	if (bad)
		snprintf(err, sizeof(err), "writing %s '%s' failed", what, path);
	gs_err("%s", err);
	return GS_EXIT_RUNTIME;
}

int outputs__open(struct outputs *o, const struct output_paths *p)
{
	char err[PATH_MAX + 128];

	memset(o, 0, sizeof(*o));
	o->p = *p;
	if (p->perfetto && p->chrome && !strcmp(p->perfetto, p->chrome)) {
		gs_err("the Perfetto and the Chrome trace cannot both go to '%s'", p->perfetto);
		return GS_EXIT_RUNTIME;
	}
	if (p->record && !(o->rec = recording__create(p->record)))
		goto fail;
	if (p->perfetto && !(o->tl[0] = timeline__open_perfetto(p->perfetto, err, sizeof(err))))
		goto fail_msg;
	if (p->chrome && !(o->tl[1] = timeline__open_chrome(p->chrome, err, sizeof(err))))
		goto fail_msg;
	if (p->json &&
	    !(o->json = output_open("write the JSON report to", p->json, err, sizeof(err))))
		goto fail_msg;
	if (p->folded &&
	    !(o->folded = output_open("write the folded stacks to", p->folded, err, sizeof(err))))
		goto fail_msg;
	if (p->memmap &&
	    !(o->memmap = output_open("write the memory map to", p->memmap, err, sizeof(err))))
		goto fail_msg;
	return GS_EXIT_OK;
fail_msg:
	gs_err("%s", err);
fail:
	outputs__close(o, &(struct outputs_end){ .analyses = false });
	return GS_EXIT_RUNTIME;
}

static void add(void *ctx, const struct gs_hdr *ev)
{
	struct outputs *o = ctx;

	if (o->rec && !o->record_failed && recording__write(o->rec, ev))
		o->record_failed = true;
	for (int i = 0; i < 2; i++)
		if (o->tl[i])
			timeline__add(o->tl[i], o->a, ev);
}

void outputs__subscribe(struct outputs *o, struct stream *s, const struct analyses *a)
{
	o->a = a;
	if (o->rec || o->tl[0] || o->tl[1])
		stream__subscribe(s, STREAM_ALL, add, o);
}

static int write_report(struct outputs *o, const struct outputs_end *e)
{
	struct report *r = analyses__report(o->a);
	struct text_opts to = { .wide = e->wide, .top = e->top };
	int code = GS_EXIT_OK;

	if (o->json) {
		report_json__write(o->json, r);
	} else if (e->text) {
		report_text__write(e->text, r, &to);
		if (ferror(e->text)) {
			gs_err("writing the report failed");
			code = GS_EXIT_RUNTIME;
		}
	}
	report__free(r);
	return code;
}

int outputs__close(struct outputs *o, const struct outputs_end *e)
{
	char err[PATH_MAX + 128];
	int code = GS_EXIT_OK, r;

	if (o->rec && (recording__close(o->rec) || o->record_failed))
		code = GS_EXIT_RUNTIME;
	for (int i = 0; i < 2; i++) {
		if (o->tl[i] && e->analyses)
			timeline__steps(o->tl[i], o->a);
		if (o->tl[i] && timeline__close(o->tl[i], err, sizeof(err))) {
			gs_err("%s", err);
			code = GS_EXIT_RUNTIME;
		}
	}
	if (o->memmap) {
		r = e->analyses && memmap__write(o->memmap, o->a);
		r = finish_file(o->memmap, "the memory map to", o->p.memmap, r);
		code = code ?: r;
	}
	if (o->folded) {
		r = e->analyses && folded__write(o->folded, o->a->model);
		r = finish_file(o->folded, "the folded stacks to", o->p.folded, r);
		code = code ?: r;
	}
	if (e->analyses) {
		r = write_report(o, e);
		code = code ?: r;
	}
	if (o->json) {
		r = finish_file(o->json, "the JSON report to", o->p.json, 0);
		code = code ?: r;
	}
	memset(o, 0, sizeof(*o));
	return code;
}
