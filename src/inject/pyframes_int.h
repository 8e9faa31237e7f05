/* SPDX-License-Identifier: MIT */
/* How a walk of Python frames reads the interpreter's memory (pyframes_read.c), for
 * pyframes.c. */
#ifndef GS_INJECT_PYFRAMES_INT_H
#define GS_INJECT_PYFRAMES_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

/* The process whose memory is read (this one, after a fork the child). */
void py_reads_init(pid_t pid);
/* n bytes at addr by one call (false: not all readable). */
bool py_rd(void *dst, __u64 addr, size_t n);
/* n bytes at addr in this thread's callers' frames, in place (false: not there). */
bool py_in_place(void *dst, __u64 addr, size_t n);
/* A walk: begun (the windows the thread's last walk read, read again by one call), its
 * reads (in place, from a window, or into one), ended (its windows kept for the next). */
bool py_walk_begin(void);
bool py_walk_read(void *dst, __u64 addr, size_t n);
void py_walk_end(void);
/* Inside a walk: the pseudo-addresses of this thread's walks by depth (PY_SEEN), each named
 * already in this process: a frame found there at its depth is not looked up in the table of
 * those named (512 KiB, a line and a page each, which the program's work evicts between
 * stacks). NULL: none (ab.c's "+nomemo"). */
#define PY_SEEN 64
__u64 *py_walk_seen(void);
/* (GPUSCOPE_INJECT_DEBUG) reads in place, calls, the pages of windows read, walks begun by
 * reading the last's again. */
void py_reads_counts(__u64 *in_place, __u64 *by_call, __u64 *pages, __u64 *walks_replayed);

#endif
