/* SPDX-License-Identifier: MIT */
/*
 * Recordings: the event stream on disk. A 16-byte file header ("GPUSCOPE", format version,
 * header size), then records exactly as in memory, each framed by its header's size field.
 * Reading validates every record (core/event.h); a bad or cut-off record ends the stream
 * with an error that says where.
 */
#ifndef GS_CORE_RECORDING_H
#define GS_CORE_RECORDING_H

#include <stdbool.h>
#include <stdio.h>
#include "gpuscope/event.h"

#define GS_REC_MAGIC   "GPUSCOPE"
#define GS_REC_VERSION 12

struct recording;

/* Writer. Errors are reported on stderr and returned as -errno. */
struct recording *recording__create(const char *path);
int recording__write(struct recording *r, const struct gs_hdr *ev);
int recording__close(struct recording *r); /* flushes; NULL-safe */

/* Reader. */
struct recording *recording__open(const char *path, char *err, size_t errlen);
/*
 * Next record: 1 and *ev set (valid until the next call), 0 at a clean end, -1 on a
 * malformed or truncated record (err says what and at which byte offset).
 */
int recording__next(struct recording *r, const struct gs_hdr **ev, char *err, size_t errlen);

#endif
