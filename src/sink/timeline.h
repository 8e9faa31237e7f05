/* SPDX-License-Identifier: MIT */
/*
 * Timelines: the event stream as tracks of slices, instants, counters and flows, for trace
 * viewers. One converter (timeline.c) decides what goes where; writers render it in a
 * format: Perfetto's protobuf (perfetto.c) or Chrome's JSON trace (chrome.c). Both are
 * streamed: each record is written as it comes, nothing is held but the tracks and the
 * interned strings.
 *
 * Tracks:
 *   process                    (one per traced process; exits as instants)
 *     thread                   CUDA driver/runtime calls as slices
 *     thread (OS)              its system calls and off-CPU intervals (they nest)
 *     block I/O DEV #n         requests the process issued, in lanes (they overlap)
 *     NCCL                     NCCL calls as slices
 *     launches on stream S     launch instants, where a launch has no GPU time
 *     counters                 device, pinned host and managed memory in use; copy GB/s;
 *                              page faults, socket bytes (cumulative)
 *   GPU d
 *     stream S (pid P)         kernels and copies with their GPU times, a flow from each
 *                              launch call to its kernel
 *     probe ring R (pid P)     records device-side probes wrote into a GPU ring buffer, as
 *                              instants at the GPU's time
 *
 * Times are CLOCK_MONOTONIC nanoseconds, as in the event stream.
 */
#ifndef GS_SINK_TIMELINE_H
#define GS_SINK_TIMELINE_H

#include <stdbool.h>
#include <stdio.h>
#include "analysis/analyses.h"

enum tl_track_kind {
	TL_PROCESS = 1,
	TL_THREAD = 2,
	TL_GPU = 3,	   /* a device */
	TL_GPU_STREAM = 4, /* a stream's GPU work, under its device */
	TL_CHILD = 5,	   /* any other slice track of a process (NCCL, launch instants) */
	TL_COUNTER = 6,	   /* under a process (pid) or a device (pid 0) */
};

struct tl_track {
	__u64 uuid, parent; /* parent 0: top level */
	enum tl_track_kind kind;
	__u32 pid, tid;	     /* TL_THREAD: both; process tracks and children: pid */
	__s32 device;	     /* TL_GPU, TL_GPU_STREAM */
	const char *name;    /* process name, thread name, track name */
	const char *cmdline; /* TL_PROCESS: its command line if recorded, else NULL */
	bool bytes;	     /* TL_COUNTER: the value is a size in bytes */
};

enum tl_arg_type {
	TL_STR = 1,
	TL_U64 = 2,
	TL_I64 = 3,
	TL_HEX = 4, /* a handle or address */
	TL_F64 = 5,
};

struct tl_arg {
	const char *key;
	enum tl_arg_type type;
	union {
		const char *s;
		__u64 u;
		__s64 i;
		double f;
	};
};

#define TL_MAX_ARGS 12

struct tl_event {
	__u64 track;
	__u64 ts, dur;	  /* slices: dur; instants: dur 0 */
	const char *name; /* shown on the slice */
	const char *cat;  /* category, as the PyTorch profiler names them */
	__u64 flow_out;	  /* a flow starts here (0: none) */
	__u64 flow_in;	  /* a flow ends here (0: none) */
	struct tl_arg args[TL_MAX_ARGS];
	int nargs;
};

struct tl_writer_ops {
	/* Declared once, before its first event; a child after its parent. */
	void (*track)(void *w, const struct tl_track *t);
	void (*slice)(void *w, const struct tl_event *e);
	void (*instant)(void *w, const struct tl_event *e);
	void (*counter)(void *w, __u64 track, __u64 ts, double value);
	/* Finish the file: 0, or -errno of the first write that failed. */
	int (*close)(void *w);
};

struct timeline;

/* Open a timeline writing to `path` ("-": stdout) in Perfetto's format or Chrome's JSON;
 * NULL with a message in err. */
struct timeline *timeline__open_perfetto(const char *path, char *err, size_t errlen);
struct timeline *timeline__open_chrome(const char *path, char *err, size_t errlen);
/* After the model has the same record (names and memory come from it, findings from its
 * analyses). */
void timeline__add(struct timeline *tl, const struct analyses *a, const struct gs_hdr *ev);
/* At the end, before closing: what is only known then (the steps of a loop). */
void timeline__steps(struct timeline *tl, const struct analyses *a);
/* 0, or a message in err. Frees tl either way. */
int timeline__close(struct timeline *tl, char *err, size_t errlen);

/* For the writers. */
struct timeline *timeline__new(const struct tl_writer_ops *ops, void *w, const char *path);
/* `path` opened for writing ("-": stdout, *own false); NULL with a message in err. */
FILE *timeline__open_file(const char *path, bool *own, char *err, size_t errlen);

#endif
