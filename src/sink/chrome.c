// SPDX-License-Identifier: MIT
/*
 * Chrome's JSON trace format, as the PyTorch profiler (Kineto) writes it, for tools that
 * read that: complete events ("X") with microsecond times (nanoseconds as three decimals),
 * GPU work on pid = device and one tid per stream, flows from a launch to its kernel as
 * "s"/"f" pairs of category "ac2g", counters as "C" events of their process, and
 * process/thread names as metadata. Events are written as they come; the closing brackets
 * at the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hmap.h"
#include "core/json.h"
#include "core/util.h"
#include "sink/timeline.h"

#define FLOW_MASK ((1ULL << 53) - 1) /* ids stay exact as JSON numbers */

struct ctrack {
	__u32 pid, tid;
	char *counter; /* counter tracks: the counter's name */
};

struct chrome {
	FILE *f;
	bool own;
	bool first;
	struct hmap tracks; /* uuid -> struct ctrack */
	__u32 next_tid;	    /* for tracks that are no thread */
};

static void ts_us(FILE *f, const char *key, __u64 ns)
{
	fprintf(f, ",\"%s\":%llu.%03llu", key, (unsigned long long)(ns / 1000),
		(unsigned long long)(ns % 1000));
}

static void begin(struct chrome *c)
{
	fputs(c->first ? "\n" : ",\n", c->f);
	c->first = false;
}

static void meta(struct chrome *c, const char *what, __u32 pid, __u32 tid, const char *name)
{
	begin(c);
	fprintf(c->f,
		"{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":", what,
		pid, tid);
	json_write_string(c->f, name);
	fputs("}}", c->f);
}

static void c_track(void *w, const struct tl_track *t)
{
	struct chrome *c = w;
	struct ctrack *ct = hmap_get_or_new(&c->tracks, t->uuid, 0, sizeof(*ct));

	switch (t->kind) {
	case TL_PROCESS:
		ct->pid = t->pid;
		meta(c, "process_name", t->pid, 0, t->name);
		if (t->cmdline)
			meta(c, "process_labels", t->pid, 0, t->cmdline);
		break;
	case TL_THREAD:
		ct->pid = t->pid;
		ct->tid = t->tid;
		meta(c, "thread_name", t->pid, t->tid, t->name);
		break;
	case TL_GPU:
		/* As Kineto: GPU work under pid = the device's ordinal. */
		ct->pid = (__u32)t->device;
		meta(c, "process_name", ct->pid, 0, t->name);
		break;
	case TL_GPU_STREAM:
	case TL_CHILD:
		ct->pid = t->kind == TL_GPU_STREAM ? (__u32)t->device : t->pid;
		if (!ct->tid)
			ct->tid = ++c->next_tid + 0x40000000u; /* clear of real thread ids */
		meta(c, "thread_name", ct->pid, ct->tid, t->name);
		break;
	case TL_COUNTER:
		ct->pid = t->pid;
		free(ct->counter);
		ct->counter = xstrdup(t->name);
		break;
	}
}

static void args(struct chrome *c, const struct tl_event *e)
{
	fputs(",\"args\":{", c->f);
	for (int i = 0; i < e->nargs; i++) {
		const struct tl_arg *a = &e->args[i];

		if (i)
			fputc(',', c->f);
		json_write_string(c->f, a->key);
		fputc(':', c->f);
		switch (a->type) {
		case TL_STR:
			json_write_string(c->f, a->s);
			break;
		case TL_U64:
			fprintf(c->f, "%llu", (unsigned long long)a->u);
			break;
		case TL_I64:
			fprintf(c->f, "%lld", (long long)a->i);
			break;
		case TL_HEX:
			fprintf(c->f, "\"0x%llx\"", (unsigned long long)a->u);
			break;
		case TL_F64:
			fprintf(c->f, "%.17g", a->f);
			break;
		}
	}
	fputc('}', c->f);
}

static const struct ctrack *track_of(struct chrome *c, __u64 uuid)
{
	static const struct ctrack none;
	const struct ctrack *t = hmap_get(&c->tracks, uuid, 0);

	return t ? t : &none;
}

static void event(struct chrome *c, const struct tl_event *e, const char *ph)
{
	const struct ctrack *t = track_of(c, e->track);

	begin(c);
	fprintf(c->f, "{\"ph\":\"%s\",\"cat\":", ph);
	json_write_string(c->f, e->cat ? e->cat : "gpuscope");
	fputs(",\"name\":", c->f);
	json_write_string(c->f, e->name);
	fprintf(c->f, ",\"pid\":%u,\"tid\":%u", t->pid, t->tid);
	ts_us(c->f, "ts", e->ts);
	if (*ph == 'X')
		ts_us(c->f, "dur", e->dur);
	else
		fputs(",\"s\":\"t\"", c->f);
	args(c, e);
	fputc('}', c->f);
}

static void flow(struct chrome *c, const struct tl_event *e, __u64 id, bool start)
{
	const struct ctrack *t = track_of(c, e->track);

	begin(c);
	fprintf(c->f,
		"{\"ph\":\"%s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%llu,\"pid\":%u,"
		"\"tid\":%u",
		start ? "s" : "f", (unsigned long long)(id & FLOW_MASK), t->pid, t->tid);
	ts_us(c->f, "ts", e->ts);
	fputs(start ? "}" : ",\"bp\":\"e\"}", c->f);
}

static void c_slice(void *w, const struct tl_event *e)
{
	struct chrome *c = w;

	event(c, e, "X");
	if (e->flow_out)
		flow(c, e, e->flow_out, true);
	if (e->flow_in)
		flow(c, e, e->flow_in, false);
}

static void c_instant(void *w, const struct tl_event *e)
{
	event(w, e, "i");
}

static void c_counter(void *w, __u64 track, __u64 ts, double value)
{
	struct chrome *c = w;
	const struct ctrack *t = track_of(c, track);

	begin(c);
	fputs("{\"ph\":\"C\",\"name\":", c->f);
	json_write_string(c->f, t->counter ? t->counter : "counter");
	fprintf(c->f, ",\"pid\":%u,\"tid\":0", t->pid);
	ts_us(c->f, "ts", ts);
	fprintf(c->f, ",\"args\":{\"value\":%.17g}}", value);
}

static int c_close(void *w)
{
	struct chrome *c = w;
	struct hmap_slot *s;
	int err = 0;

	fputs("\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"gpuscope\","
	      "\"clock\":\"CLOCK_MONOTONIC\"}}\n",
	      c->f);
	if ((ferror(c->f) || fflush(c->f)) && !err)
		err = -(errno ? errno : EIO);
	if (c->own && fclose(c->f) && !err)
		err = -(errno ? errno : EIO);
	hmap_for_each (&c->tracks, s) {
		free(((struct ctrack *)s->val)->counter);
		free(s->val);
	}
	hmap_free(&c->tracks);
	free(c);
	return err;
}

static const struct tl_writer_ops chrome_ops = { .track = c_track,
						 .slice = c_slice,
						 .instant = c_instant,
						 .counter = c_counter,
						 .close = c_close };

struct timeline *timeline__open_chrome(const char *path, char *err, size_t errlen)
{
	struct chrome *c = xcalloc(1, sizeof(*c));

	c->f = timeline__open_file(path, &c->own, err, errlen);
	if (!c->f) {
		free(c);
		return NULL;
	}
	c->first = true;
	fputs("{\"traceEvents\":[", c->f);
	return timeline__new(&chrome_ops, c, path);
}
