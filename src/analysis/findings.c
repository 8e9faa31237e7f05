// SPDX-License-Identifier: MIT
/*
 * Cross-layer findings: a GPU stream that sat idle, and why. When a stream's next operation
 * starts long after its previous one ended, and the launch call itself came late, the GPU
 * was waiting for the launching thread. What that thread did in the meantime comes from
 * its recent OS activity (off-CPU intervals with their reason and system call, block I/O it
 * issued, page faults it took): the cause is the largest of blocked, blocked on disk,
 * preempted, faulting, and otherwise running its own code.
 *
 * The GPU record of the late launch arrives after the OS records of the wait (they were
 * written when the thread got the CPU back, before it called the launch), so the history
 * needed is already there.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "core/util.h"

#define FINDING_MIN_NS 1000000ULL  /* a gap worth a finding */
#define LAUNCH_GAP_NS  10000000ULL /* without GPU times: launches this far apart */

static struct thread_os *history(struct model *m, __u32 tid)
{
	struct thread_os *t = hmap_get(&m->threads_os, tid, 0);

	if (!t) {
		t = xcalloc(1, sizeof(*t));
		hmap_put(&m->threads_os, tid, 0, t);
	}
	return t;
}

void model__history_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_offcpu *o = (const void *)ev;
	const struct gs_ev_block *b = (const void *)ev;
	const struct gs_ev_faults *f = (const void *)ev;
	struct thread_os *t = history(m, ev->tid);
	unsigned int i;

	t->pid = ev->pid;
	switch (ev->type) {
	case GS_EV_OFFCPU:
		i = t->noff++ % THREAD_HIST;
		t->off[i].start = o->h.ts;
		t->off[i].end = o->h.ts + o->dur_ns;
		t->off[i].syscall = o->syscall;
		t->off[i].reason = o->reason;
		break;
	case GS_EV_BLOCK:
		/* Reads and writes: what a thread waits for (not flushes and discards, which
		 * an unlink or fsync may send without waiting). */
		if (b->op != GS_BLOCK_READ && b->op != GS_BLOCK_WRITE)
			break;
		/* One large read is many requests in flight together (hundreds where a device
		 * takes small ones): kept as one span, so that the history holds all of it. */
		if (t->nio) {
			i = (t->nio - 1) % THREAD_HIST;
			if (t->io[i].dev == b->dev && b->h.ts <= t->io[i].end &&
			    b->h.ts + b->dur_ns >= t->io[i].start) {
				t->io[i].start = GS_MIN(t->io[i].start, b->h.ts);
				t->io[i].end = GS_MAX(t->io[i].end, b->h.ts + b->dur_ns);
				t->io[i].bytes += b->bytes;
				t->io[i].count++;
				break;
			}
		}
		i = t->nio++ % THREAD_HIST;
		t->io[i].start = b->h.ts;
		t->io[i].end = b->h.ts + b->dur_ns;
		t->io[i].dev = b->dev;
		t->io[i].bytes = b->bytes;
		t->io[i].count = 1;
		break;
	case GS_EV_FAULTS:
		i = t->nfaults++ % THREAD_HIST;
		t->faults[i].start = f->h.ts;
		t->faults[i].end = f->last_ts;
		t->faults[i].count = f->count;
		t->faults[i].major = f->major;
		break;
	}
}

static __u64 overlap(__u64 a0, __u64 a1, __u64 b0, __u64 b1)
{
	__u64 lo = GS_MAX(a0, b0), hi = GS_MIN(a1, b1);

	return hi > lo ? hi - lo : 0;
}

/* What the thread did in [from, to). */
static void explain(const struct thread_os *t, __u64 from, __u64 to, struct finding *f)
{
	__u64 by_reason[GS_OFFCPU_OTHER + 1] = { 0 }, longest = 0;
	unsigned int n;

	f->syscall = -1;
	n = GS_MIN(t->noff, THREAD_HIST);
	for (unsigned int i = 0; i < n; i++) {
		__u64 o = overlap(t->off[i].start, t->off[i].end, from, to);

		if (!o)
			continue;
		f->off_ns += o;
		by_reason[t->off[i].reason] += o;
		if (o > longest) {
			longest = o;
			f->syscall = t->off[i].syscall;
		}
		f->longest_off_ns = longest;
	}
	n = GS_MIN(t->nio, THREAD_HIST);
	for (unsigned int i = 0; i < n; i++)
		if (overlap(t->io[i].start, t->io[i].end, from, to)) {
			f->io_dev = t->io[i].dev;
			f->io_count += t->io[i].count;
			f->io_bytes += t->io[i].bytes;
		}
	n = GS_MIN(t->nfaults, THREAD_HIST);
	for (unsigned int i = 0; i < n; i++)
		if (t->faults[i].start < to && t->faults[i].end >= from) {
			f->faults += t->faults[i].count;
			f->major_faults += t->faults[i].major;
		}
	/* Off the CPU for most of it: why; else on it. */
	if (2 * f->off_ns >= to - from) {
		if (by_reason[GS_OFFCPU_DISK] >= by_reason[GS_OFFCPU_SLEEP] &&
		    by_reason[GS_OFFCPU_DISK] >= by_reason[GS_OFFCPU_PREEMPTED])
			f->cause = CAUSE_DISK;
		else if (by_reason[GS_OFFCPU_PREEMPTED] > by_reason[GS_OFFCPU_SLEEP])
			f->cause = CAUSE_PREEMPTED;
		else
			f->cause = f->io_count ? CAUSE_DISK : CAUSE_BLOCKED;
	} else {
		/* A storm: a fault every 10 us or more often. */
		f->cause = f->faults * 10000 >= to - from ? CAUSE_FAULTS : CAUSE_ON_CPU;
	}
}

/* The thread of the same process blocked longest in [from, to), while the launching
 * thread slept (a data loader reading from disk while the trainer waits for it). */
static void other_threads(const struct model *m, __u32 tid, __u64 from, __u64 to, struct finding *f)
{
	struct hmap_slot *s;

	hmap_for_each (&m->threads_os, s) {
		const struct thread_os *t = s->val;
		struct finding g = { 0 };

		if (s->k1 == tid || t->pid != f->pid)
			continue;
		explain(t, from, to, &g);
		/* Waiting on disk first, then asleep in anything but an idle wait (futex, poll,
		 * epoll: a pool thread with nothing to do). */
		if (g.cause == CAUSE_BLOCKED &&
		    (g.syscall == 202 || g.syscall == 7 || g.syscall == 232 || g.syscall == 271 ||
		     g.syscall == 281 || g.syscall < 0))
			continue;
		/* Asleep: in one operation over most of the wait, not in many short naps (a
		 * polling thread, gpuscope's own harvester). On disk: any. */
		if ((g.cause != CAUSE_DISK && g.cause != CAUSE_BLOCKED) ||
		    (g.cause == CAUSE_BLOCKED && 2 * g.longest_off_ns < to - from))
			continue;
		if (f->other_tid && (f->other_cause == CAUSE_DISK) > (g.cause == CAUSE_DISK))
			continue;
		if (f->other_tid && (f->other_cause == CAUSE_DISK) == (g.cause == CAUSE_DISK) &&
		    g.off_ns <= f->other_off_ns)
			continue;
		f->other_tid = (__u32)s->k1;
		f->other_cause = g.cause;
		f->other_syscall = g.syscall;
		f->other_off_ns = g.off_ns;
		f->other_io_count = g.io_count;
		f->other_io_bytes = g.io_bytes;
		f->other_io_dev = g.io_dev;
	}
}

static int longer_first(const void *a, const void *b)
{
	const struct finding *x = a, *y = b;

	return x->gap_ns < y->gap_ns ? 1 : x->gap_ns > y->gap_ns ? -1 : 0;
}

static void keep(struct model *m, const struct finding *f)
{
	m->findings_total++;
	m->last_finding = *f;
	if (m->nfindings < MAX_FINDINGS)
		m->findings[m->nfindings++] = *f;
	else if (f->gap_ns > m->findings[MAX_FINDINGS - 1].gap_ns)
		m->findings[MAX_FINDINGS - 1] = *f;
	else
		return;
	qsort(m->findings, m->nfindings, sizeof(*f), longer_first);
}

static bool os_plane(const struct model *m)
{
	return m->have_start && (m->start.flags & GS_SESSION_OS);
}

/*
 * Kernel probes see when launches were called, not when kernels ran: a launch that comes
 * LAUNCH_GAP_NS or more after the previous one into its stream is where the GPU may have
 * run dry (unless enough was queued), and what the launching thread did meanwhile is
 * explained as for an idle stream.
 */
void model__launch_gap(struct model *m, const struct gs_ev_launch *l)
{
	__u64 *last = hmap_get(&m->launch_ends, l->h.pid, l->stream), from;
	const struct thread_os *t = hmap_get(&m->threads_os, l->h.tid, 0);
	struct finding f = { 0 };

	if (!last) {
		last = xcalloc(1, sizeof(*last));
		hmap_put(&m->launch_ends, l->h.pid, l->stream, last);
	}
	from = *last;
	*last = GS_MAX(*last, l->h.ts + l->c.dur_ns);
	/* (With GPU times, idle streams are found from them instead.) */
	if (!from || l->h.ts < from + LAUNCH_GAP_NS || !os_plane(m) ||
	    ((m->start.flags & GS_SESSION_INJECT) && m->start.gpu_time))
		return;
	f.launch_gap = true;
	f.gap_start = from;
	f.gap_ns = f.wait_ns = l->h.ts - from;
	f.stream = l->stream;
	f.pid = l->h.pid;
	f.tid = l->h.tid;
	f.device = -1;
	f.cause = CAUSE_ON_CPU;
	f.syscall = -1;
	if (t)
		explain(t, from, l->h.ts, &f);
	if (f.cause == CAUSE_BLOCKED)
		other_threads(m, l->h.tid, from, l->h.ts, &f);
	keep(m, &f);
}

void model__explain_gap(struct model *m, const struct gs_ev_gpu *e, __u64 gap_start, __u64 start)
{
	__u64 late_from = gap_start, until = GS_MIN(e->h.ts, start);
	const struct thread_os *t = hmap_get(&m->threads_os, e->h.tid, 0);
	struct finding f = { 0 };

	/* Only gaps the launch call itself explains: it came after the stream went idle. */
	/* (Without the OS plane nothing says what the thread did.) */
	if (start - gap_start < FINDING_MIN_NS || until <= late_from ||
	    until - late_from < FINDING_MIN_NS || !os_plane(m))
		return;
	f.gap_start = gap_start;
	f.gap_ns = start - gap_start;
	f.wait_ns = until - late_from;
	f.stream = e->stream;
	f.pid = e->h.pid;
	f.tid = e->h.tid;
	f.device = e->device;
	f.cause = CAUSE_ON_CPU;
	f.syscall = -1;
	if (t)
		explain(t, late_from, until, &f);
	if (f.cause == CAUSE_BLOCKED)
		other_threads(m, e->h.tid, late_from, until, &f);
	keep(m, &f);
}

void model__findings_free(struct model *m)
{
	struct hmap_slot *s;

	hmap_for_each (&m->threads_os, s)
		free(s->val);
	hmap_free(&m->threads_os);
	hmap_for_each (&m->launch_ends, s)
		free(s->val);
	hmap_free(&m->launch_ends);
}
