// SPDX-License-Identifier: MIT
/* A recording as a source of a session (see replay.h). */
#include <stdlib.h>

#include "core/recording.h"
#include "core/util.h"
#include "source/replay.h"

#define BATCH 4096 /* records a poll */

struct replay {
	struct recording *rec;
	struct stream *s;
	bool done, bad;
	char err[512];
};

static int poll_fn(void *obj, int timeout_ms)
{
	struct replay *r = obj;
	const struct gs_hdr *ev;
	int n = 0, k = 0;

	(void)timeout_ms;
	while (!r->done && n < BATCH) {
		k = recording__next(r->rec, &ev, r->err, sizeof(r->err));
		if (k <= 0)
			break;
		stream__push(r->s, ev);
		n++;
	}
	if (k < 0)
		r->bad = true;
	if (k <= 0)
		r->done = true;
	return n;
}

static void finish_fn(void *obj)
{
	while (poll_fn(obj, 0) > 0)
		;
}

static void close_fn(void *obj)
{
	recording__close(((struct replay *)obj)->rec);
	free(obj);
}

static const struct source_ops ops = {
	.name = "recording", .poll = poll_fn, .finish = finish_fn, .close = close_fn
};

struct replay *replay__open(struct session *s, const char *path, char *err, size_t errlen)
{
	struct replay *r;
	struct recording *rec = recording__open(path, err, errlen);

	if (!rec)
		return NULL;
	r = xcalloc(1, sizeof(*r));
	r->rec = rec;
	r->s = s->stream;
	stream__replay(s->stream);
	session__add_source(s, &ops, r);
	return r;
}

bool replay__done(const struct replay *r, bool *bad, const char **err)
{
	*bad = r->bad;
	*err = r->err;
	return r->done;
}
