/* SPDX-License-Identifier: MIT */
/*
 * What a session writes for its user: the recording and timelines, fed by the stream as
 * records come, and at the end the report (text or JSON), folded stacks and the memory
 * map. Every file is opened when the session is built, before anything is traced
 * (core/output.h): a path that cannot be written is one line and exit status 2 at once.
 */
#ifndef GS_SINK_OUTPUTS_H
#define GS_SINK_OUTPUTS_H

#include <stdbool.h>
#include <stdio.h>
#include "core/recording.h"
#include "core/stream.h"
#include "sink/timeline.h"

struct output_paths {
	const char *record;	       /* the recording */
	const char *json;	       /* the report as JSON; NULL: text */
	const char *perfetto, *chrome; /* timelines */
	const char *folded, *memmap;   /* at the end */
};

struct outputs {
	struct output_paths p;
	struct recording *rec;
	bool record_failed;
	struct timeline *tl[2];
	FILE *json, *folded, *memmap;
	const struct analyses *a;
};

/* Open the files the paths name ("-": stdout). 0, or GS_EXIT_RUNTIME with one message and
 * nothing left open. */
int outputs__open(struct outputs *o, const struct output_paths *p);
/* The recording and the timelines take every record (the timelines after the model: a). */
void outputs__subscribe(struct outputs *o, struct stream *s, const struct analyses *a);

struct outputs_end {
	bool analyses; /* write the report, folded stacks and the memory map */
	FILE *text;    /* the text report, if not JSON (NULL: none) */
	bool wide;
	size_t top;
};
/* Close the recording and timelines, write what is written at the end, close everything.
 * 0 or GS_EXIT_RUNTIME (messages printed). */
int outputs__close(struct outputs *o, const struct outputs_end *e);

#endif
