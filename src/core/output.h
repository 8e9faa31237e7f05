/* SPDX-License-Identifier: MIT */
/*
 * Files gpuscope writes for its user (recordings, reports, traces, folded stacks, memory
 * maps). Opened once, before anything is traced, so that a path that cannot be written is
 * said at once and not after the program ran; and written through what was opened, so that
 * the path is not looked up again (a link planted meanwhile in a shared directory is never
 * followed to write). A file gpuscope creates is private (0600), and under sudo it belongs
 * to the user who ran sudo (SUDO_UID, SUDO_GID), not to root; an existing file keeps its
 * owner and mode.
 */
#ifndef GS_CORE_OUTPUT_H
#define GS_CORE_OUTPUT_H

#include <stdio.h>

/* `path` for writing ("-": stdout). NULL with "cannot VERB 'path': why" in err (verb: "write
 * the trace to"). */
FILE *output_open(const char *verb, const char *path, char *err, size_t errlen);
/* Flush and close (stdout: flushed only): 0, or -1 with "writing WHAT 'path' failed: why"
 * in err (what: "the trace to"). */
int output_close(FILE *f, const char *what, const char *path, char *err, size_t errlen);

#endif
