// SPDX-License-Identifier: MIT
/* A session: sources, the stream, the loop's round, signals, teardown (see session.h). */
#include <stdlib.h>
#include <string.h>

#include "core/session.h"
#include "core/util.h"

static struct session *signalled_session;

static void on_signal(int sig)
{
	struct session *s = signalled_session;

	if (!s)
		return;
	if (!s->sig)
		s->sig = sig;
	s->signals++;
}

void session__init(struct session *s)
{
	memset(s, 0, sizeof(*s));
	s->stream = stream__new();
}

void session__add_source(struct session *s, const struct source_ops *ops, void *obj)
{
	gs_check_room(s->nsrc, SESSION_MAX, "sources in a session");
	s->src[s->nsrc].ops = ops;
	s->src[s->nsrc++].obj = obj;
}

void session__own(struct session *s, void (*close)(void *obj), void *obj)
{
	if (!obj)
		return;
	gs_check_room(s->nown, SESSION_MAX, "consumers owned by a session");
	s->own[s->nown].close = close;
	s->own[s->nown++].obj = obj;
}

void session__catch_signals(struct session *s)
{
	struct sigaction sa = { .sa_handler = on_signal };

	signalled_session = s;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int session__poll(struct session *s, int timeout_ms)
{
	int total = 0, wait = timeout_ms;

	/* The first source that polls waits; the rest deliver what they have. (A source
	 * without a poll, such as the host's facts, is no place to wait: had the next one been
	 * given 0, the loop around this would spin.) */
	for (unsigned int i = 0; i < s->nsrc; i++) {
		int n;

		if (!s->src[i].ops->poll)
			continue;
		n = s->src[i].ops->poll(s->src[i].obj, wait);
		wait = 0;
		total += n > 0 ? n : 0;
	}
	return total;
}

void session__start(struct session *s)
{
	for (unsigned int i = 0; i < s->nsrc; i++)
		if (s->src[i].ops->start)
			s->src[i].ops->start(s->src[i].obj);
}

void session__finish(struct session *s)
{
	for (unsigned int i = 0; i < s->nsrc; i++)
		if (s->src[i].ops->finish)
			s->src[i].ops->finish(s->src[i].obj);
}

void session__drops(struct session *s, struct gs_ev_drops *d)
{
	for (unsigned int i = 0; i < s->nsrc; i++)
		if (s->src[i].ops->drops)
			s->src[i].ops->drops(s->src[i].obj, d);
}

__u64 session__drops_total(struct session *s)
{
	struct gs_ev_drops d = {};
	__u64 n = 0;

	session__drops(s, &d);
	for (int t = 0; t < GS_EV_MAX; t++)
		n += d.by_type[t];
	return n;
}

void session__close(struct session *s)
{
	for (unsigned int i = s->nsrc; i-- > 0;)
		if (s->src[i].ops->close)
			s->src[i].ops->close(s->src[i].obj);
	for (unsigned int i = s->nown; i-- > 0;)
		s->own[i].close(s->own[i].obj);
	stream__free(s->stream);
	if (signalled_session == s)
		signalled_session = NULL;
	memset(s, 0, sizeof(*s));
}
