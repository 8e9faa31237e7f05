/* SPDX-License-Identifier: MIT */
/*
 * Names of stack addresses, while their processes live (core/symbolize.c). A filter on the
 * stream: before a stack record goes on, a symbol record for each of its addresses seen
 * for the first time, so that a recording replays with the names. A process's modules are
 * forgotten when it execs, and all it held (its symbolizer, open files, the addresses
 * named) when it is retired (core/stream.h): what a live session keeps stays bounded by the
 * processes alive.
 */
#ifndef GS_SOURCE_SYMBOLS_H
#define GS_SOURCE_SYMBOLS_H

#include "core/stream.h"

struct symbols;

struct symbols *symbols__attach(struct stream *s);
void symbols__free(struct symbols *y);
/* Processes whose names are kept now (for tests of boundedness). */
__u64 symbols__procs(const struct symbols *y);

#endif
