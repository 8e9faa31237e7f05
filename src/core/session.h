/* SPDX-License-Identifier: MIT */
/*
 * A session: the sources a command asks for, the event stream they feed, the loop that
 * polls them, the signals that stop it, and one teardown path. run, attach, top, exporter
 * and report are each a session; they differ in their sources and in what consumes the
 * stream.
 *
 * A source is an object with a table of operations (struct source_ops): start pushes the
 * facts known at the start (the machine, the GPUs), poll delivers what it has into the stream, finish delivers the rest at the end, drops adds its loss
 * counters, close frees it. Consumers and filters subscribe to the stream directly
 * (core/stream.h); a consumer that must be closed with the session is added with
 * session__own, and is closed after every source (so that what the sources deliver last
 * still reaches it).
 */
#ifndef GS_CORE_SESSION_H
#define GS_CORE_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include "core/stream.h"

#define SESSION_MAX 16

struct source_ops {
	const char *name;
	/* The session starts (its start record is in the stream): push what is known now. */
	void (*start)(void *obj);
	/* Deliver what is ready, waiting at most timeout_ms for it: records delivered (>= 0). */
	int (*poll)(void *obj, int timeout_ms);
	/* The session ends: deliver everything still to come. */
	void (*finish)(void *obj);
	/* Add the source's loss counters. */
	void (*drops)(void *obj, struct gs_ev_drops *d);
	void (*close)(void *obj);
};

struct session {
	struct stream *stream;
	struct {
		const struct source_ops *ops;
		void *obj;
	} src[SESSION_MAX];
	unsigned int nsrc;
	struct {
		void (*close)(void *obj);
		void *obj;
	} own[SESSION_MAX];
	unsigned int nown;
	/* The first of SIGINT, SIGTERM, SIGHUP received (0: none), and how many came. */
	volatile sig_atomic_t sig, signals;
};

/* A session with an empty stream. */
void session__init(struct session *s);
/* Sources are polled in the order they were added (the first that polls waits). */
void session__add_source(struct session *s, const struct source_ops *ops, void *obj);
/* Close obj with the session, after its sources (NULL-safe). */
void session__own(struct session *s, void (*close)(void *obj), void *obj);
/* SIGINT, SIGTERM and SIGHUP are noted in s (SIGPIPE ignored); one session a process. */
void session__catch_signals(struct session *s);
/* The session's start record is in the stream: every source's start facts follow it. */
void session__start(struct session *s);
/* One round: every source polled; the first that polls waits up to timeout_ms. Records
 * delivered. */
int session__poll(struct session *s, int timeout_ms);
/* The end: every source delivers the rest. */
void session__finish(struct session *s);
/* The sources' loss counters, added up into d. */
void session__drops(struct session *s, struct gs_ev_drops *d);
__u64 session__drops_total(struct session *s);
/* Close the sources, then what the session owns, then the stream. */
void session__close(struct session *s);

#endif
