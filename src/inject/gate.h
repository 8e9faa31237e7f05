/* SPDX-License-Identifier: MIT */
/*
 * Gates: why events alone cannot time work on an idle stream, and what fixes it.
 *
 * An event completes when the GPU reaches it. On a busy stream, the start event recorded
 * before a launch completes when the work ahead finishes, which is when the kernel starts;
 * the end event, queued long before the kernel ends, completes when it ends. On an idle
 * stream both go wrong: the start event completes the moment it is submitted, before the
 * launch call has even run (measured on an H200: +1.4 us median, up to +6 us for a 2 us
 * kernel), and a kernel shorter than the rest of its launch call is over before the end
 * event is submitted, which then completes at its own submission.
 *
 * So the work is held back by a gate: a stream memory operation that
 * waits until a value in host memory reaches a sequence number. Gate, start event, launch,
 * end event are queued; then the host opens the gate, and the GPU runs the three back to
 * back, as on a busy stream. The gate is opened right after the end event is recorded, in
 * the same call: the program's work waits for nothing but the recording of one event.
 *
 * A launch call that waits for the GPU inside the call would wait on our gate for ever:
 * measured on an H200, a kernel's first launch that has to grow the context's local memory
 * does (a first launch that only loads its module does not). So a watcher thread of ours,
 * which never calls the driver (a blocked launch may hold its locks), opens gates: those
 * of first launches once they are closed longer than a short hold, any other found closed
 * on two passes a millisecond apart. A gate opened by anyone but its own call did not hold
 * its work back, and the call is timed as ungated.
 *
 * One 64-bit value per context, only ever raised (an atomic maximum), so a gate opened by
 * a later sequence number never closes again; 32-bit where 64-bit stream memory operations
 * are not supported. Where neither is, timing goes on without gates.
 */
#ifndef GS_INJECT_GATE_H
#define GS_INJECT_GATE_H

#include <stdbool.h>
#include "inject/inject.h"

struct gs_gate {
	volatile __u64 *host; /* NULL: no gates in this context (set once, before use) */
	__u64 dev;	      /* its device address */
	__u64 issued;	      /* last sequence number handed out (atomic) */
	__u64 stuck_seen;     /* watchdog: value found blocked on the previous pass */
	bool wide;	      /* 64-bit operations */
	bool off;	      /* stream memory operations turned out not supported */
	__u64 forced;	      /* gates the watcher had to open */
	__u64 watch_seq;      /* latest gate of a call that may block (atomic) */
	__u64 watch_deadline; /* when the watcher opens it (gs_clock ns, atomic) */
	__u64 hold_seq;	      /* a gate held on purpose, for a chain of launches (atomic) */
	__u64 hold_deadline;  /* when the watcher opens it, uncounted (atomic) */
};

/* With the context current: host memory for the gate (64 bytes at offset 0; the rest of
 * the page, device-visible at dev + offset, is free for calibration), and the watcher
 * started. False if gates cannot be used. */
bool gs_gate_init(struct gs_gate *g);
/* Close a gate on `stream`; *seq is 0 when no gate could be closed. */
void gs_gate_close(struct gs_gate *g, __u64 stream, bool ptsz, __u64 *seq);
/* Open it. True if it was still closed: it held its work back until now. */
bool gs_gate_open(struct gs_gate *g, __u64 seq);
/* The call after gate `seq` may block inside the driver: the watcher opens the gate
 * once it has been closed hold_ns. */
void gs_gate_watch(struct gs_gate *g, __u64 seq, __u64 hold_ns);
/* Gate `seq` is held on purpose past its call (a chain of launches): the watcher opens it at
 * `deadline` (gs_clock ns) if nobody has, without counting it as forced. */
void gs_gate_hold(struct gs_gate *g, __u64 seq, __u64 deadline);
/* In a forked child: no watcher, no gates of the parent's contexts. */
void gs_gate_after_fork(void);

#endif
