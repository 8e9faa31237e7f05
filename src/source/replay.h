/* SPDX-License-Identifier: MIT */
/* A recording as a source of a session (gpuscope report): its records into the stream, in
 * the order they were written, as the live session's consumers got them. */
#ifndef GS_SOURCE_REPLAY_H
#define GS_SOURCE_REPLAY_H

#include <stdbool.h>
#include "core/session.h"

struct replay;

/* Open the recording at path ("-": stdin) as a source of s: NULL with a message in err. */
struct replay *replay__open(struct session *s, const char *path, char *err, size_t errlen);
/* Whether it has all been read; *bad: it ended on a malformed record (err says what). */
bool replay__done(const struct replay *r, bool *bad, const char **err);

#endif
