/* SPDX-License-Identifier: MIT */
/*
 * The event stream: the one path every record takes. Sources push records in; filters see
 * each first (and may put records of their own before it, replace it, or stop it);
 * consumers -- the model, the recorder, timelines, the status line -- then get it, in the
 * order they subscribed. Live (run, attach, top, exporter) and offline (report) build the
 * same stream and differ only in the sources that feed it.
 *
 * What the stream guarantees:
 *  - order: records reach every consumer in the order they were pushed. Each source
 *    delivers a process's records in the order the process made them (the kernel's ring
 *    buffer, a process's in-process ring, a recording), so a process's records are in order
 *    however sources interleave;
 *  - one clock: every time is CLOCK_MONOTONIC nanoseconds; records gpuscope makes itself
 *    (stream__emit) are stamped here;
 *  - a process's end: once its exit record has been delivered and no source still holds
 *    records of it (stream__hold), a retire record (GS_EV_RETIRE) goes to every consumer,
 *    then the retire callbacks are called once, so consumers can free what they keep per
 *    process while it ran. A replay retires at the recorded retire records instead, so a
 *    process's state goes where it went in the live run.
 *
 * Push is re-entrant: a filter or a consumer may push (an attach record for a library a
 * process opened); such a record is delivered whole before the one that caused it goes on.
 */
#ifndef GS_CORE_STREAM_H
#define GS_CORE_STREAM_H

#include <stdbool.h>
#include "gpuscope/event.h"

#define STREAM_ALL     (~0ULL)
#define STREAM_TYPE(t) (1ULL << (t))

struct stream;

typedef void (*stream_fn)(void *ctx, const struct gs_hdr *ev);
/* The record to pass on: ev itself, another (the filter keeps it valid until it returns
 * again), or NULL to stop it. */
typedef const struct gs_hdr *(*stream_filter_fn)(void *ctx, const struct gs_hdr *ev);
typedef void (*stream_retire_fn)(void *ctx, __u32 pid);

struct stream *stream__new(void);
void stream__free(struct stream *s);

/* Consumers get the records whose type is in `types` (STREAM_TYPE bits, or STREAM_ALL). */
void stream__subscribe(struct stream *s, __u64 types, stream_fn fn, void *ctx);
/* Filters run before every consumer, in the order they were added. */
void stream__filter(struct stream *s, __u64 types, stream_filter_fn fn, void *ctx);
void stream__on_retire(struct stream *s, stream_retire_fn fn, void *ctx);

/* A source's record, ev->size bytes, already checked by its source. */
void stream__push(struct stream *s, const struct gs_hdr *ev);
/* A record gpuscope makes: its header is filled (type, size, pid, source gpuscope, now). */
void stream__emit(struct stream *s, struct gs_hdr *h, __u16 type, __u32 size, __u32 pid);

/* The records are a recording's: retire at its retire records only. */
void stream__replay(struct stream *s);
/* A source that will deliver more of pid's records holds it until it releases it. */
void stream__hold(struct stream *s, __u32 pid);
void stream__release(struct stream *s, __u32 pid);

/* Records pushed so far (emitted ones included). */
__u64 stream__records(const struct stream *s);

#endif
