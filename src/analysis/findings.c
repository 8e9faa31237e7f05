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
 *
 * A kernel can also wait on the GPU with its stream free: launched in time, its stream's
 * earlier work done, and yet started later. Then it waited for an event of another stream
 * (cuStreamWaitEvent), or for the device, busy with other streams' or processes' work. The
 * finding names the stream of the trace that ran longest during the wait (from the
 * device's latest operations, those recorded before this one: work recorded later is not
 * seen) and says whether the stream had been told to wait for an event.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "core/demangle.h"
#include "core/util.h"

#define FINDING_MIN_NS 1000000ULL  /* a gap worth a finding */
#define LAUNCH_GAP_NS  10000000ULL /* without GPU times: launches this far apart */
#define SETTLE_NS      2000000ULL  /* see defer() */
#define MERGE_NS       1000000ULL  /* history: closer than this, one span */

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
	__u64 written = ev->type == GS_EV_OFFCPU  ? o->h.ts + o->dur_ns
			: ev->type == GS_EV_BLOCK ? b->h.ts + b->dur_ns
						  : f->last_ts;
	unsigned int i;

	t->pid = ev->pid;
	switch (ev->type) {
	case GS_EV_OFFCPU:
		/* One read is often many intervals off the CPU waiting for the disk (one per
		 * request): those of the same call, close together, are one span (with the time
		 * really off the CPU in it). (Naps are not merged: many short ones are a polling
		 * thread, not one long wait.) */
		if (t->noff && o->reason == GS_OFFCPU_DISK) {
			i = (t->noff - 1) % THREAD_HIST;
			if (t->off[i].reason == o->reason && t->off[i].syscall == o->syscall &&
			    o->h.ts >= t->off[i].end && o->h.ts <= t->off[i].end + MERGE_NS) {
				t->off[i].end = o->h.ts + o->dur_ns;
				t->off[i].off_ns += o->dur_ns;
				break;
			}
		}
		i = t->noff++ % THREAD_HIST;
		t->off[i].start = o->h.ts;
		t->off[i].end = o->h.ts + o->dur_ns;
		t->off[i].off_ns = o->dur_ns;
		t->off[i].syscall = o->syscall;
		t->off[i].reason = o->reason;
		break;
	case GS_EV_BLOCK:
		/* Reads and writes: what a thread waits for (not flushes and discards, which
		 * an unlink or fsync may send without waiting). */
		if (b->op != GS_BLOCK_READ && b->op != GS_BLOCK_WRITE)
			break;
		/* One large read is many requests, in flight together or one after another
		 * (hundreds where a device takes small ones): kept as one span, so that the
		 * history holds all of it. */
		if (t->nio) {
			i = (t->nio - 1) % THREAD_HIST;
			if (t->io[i].dev == b->dev && b->h.ts <= t->io[i].end + MERGE_NS &&
			    b->h.ts + b->dur_ns + MERGE_NS >= t->io[i].start) {
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
	if (written > m->os_clock) {
		m->os_clock = written;
		if (m->npending_findings)
			model__findings_settle(m, false);
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

		/* Of a merged span, the share that was off the CPU. */
		if (o && t->off[i].end > t->off[i].start)
			o = (__u64)((double)o * (double)t->off[i].off_ns /
				    (double)(t->off[i].end - t->off[i].start));

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
	for (unsigned int i = 0; i < n; i++) {
		__u64 o = overlap(t->io[i].start, t->io[i].end, from, to);

		if (o) {
			f->io_dev = t->io[i].dev;
			f->io_count += t->io[i].count;
			f->io_bytes += t->io[i].bytes;
			f->io_ns = GS_MIN(f->io_ns + o, to - from);
		}
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
	} else if (f->io_count && 2 * f->io_ns >= to - from) {
		/* On the CPU, with its own I/O in flight most of the time: submitting it. A
		 * fast disk behind a hypervisor takes a read of a thousand small requests
		 * about as fast as they are sent, each a costly exit (seen: 64 MiB in 64 KiB
		 * requests, 50 ms, mostly on the CPU in pread64). */
		f->cause = CAUSE_DISK;
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
		f->other_io_ns = g.io_ns;
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
	m->recent_findings[m->findings_total++ % RECENT_FINDINGS] = *f;
	if (m->nfindings < MAX_FINDINGS)
		m->findings[m->nfindings++] = *f;
	else if (f->gap_ns > m->findings[MAX_FINDINGS - 1].gap_ns)
		m->findings[MAX_FINDINGS - 1] = *f;
	else
		return;
	qsort(m->findings, m->nfindings, sizeof(*f), longer_first);
}

/* What the thread (and, asleep, the others) did in [from, until): then the finding. */
static void resolve(struct model *m, struct finding *f, __u64 from, __u64 until)
{
	const struct thread_os *t = hmap_get(&m->threads_os, f->tid, 0);

	if (t)
		explain(t, from, until, f);
	if (f->cause == CAUSE_BLOCKED)
		other_threads(m, f->tid, from, until, f);
	keep(m, f);
}

/*
 * The OS records of a window may still be on their way: they come from the kernel's ring
 * buffer, the record that shows the gap from another source (the in-process plane's ring,
 * drained in the same pass, or later in it). A finding is explained once an OS record
 * written SETTLE_NS past the window's end has been seen (records come out of the kernel's
 * ring in the order they were written), or when the session ends.
 */
static void defer(struct model *m, const struct finding *f, __u64 from, __u64 until)
{
	struct pending_finding *p;

	if (m->npending_findings == PENDING_FINDINGS) {
		p = &m->pending_findings[0];
		resolve(m, &p->f, p->from, p->until);
		memmove(p, p + 1, (PENDING_FINDINGS - 1) * sizeof(*p));
		m->npending_findings--;
	}
	p = &m->pending_findings[m->npending_findings++];
	p->f = *f;
	p->from = from;
	p->until = until;
	model__findings_settle(m, false);
}

void model__findings_settle(struct model *m, bool all)
{
	unsigned int kept = 0;

	for (unsigned int i = 0; i < m->npending_findings; i++) {
		struct pending_finding *p = &m->pending_findings[i];

		if (all || p->until + SETTLE_NS <= m->os_clock)
			resolve(m, &p->f, p->from, p->until);
		else
			m->pending_findings[kept++] = *p;
	}
	m->npending_findings = kept;
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
	defer(m, &f, from, l->h.ts);
}

void model__explain_gap(struct model *m, const struct gs_ev_gpu *e, __u64 gap_start, __u64 start)
{
	__u64 late_from = gap_start, until = GS_MIN(e->h.ts, start);
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
	defer(m, &f, late_from, until);
}

/* ---- kernels that waited in queue ------------------------------------------------------ */

void model__stream_waited(struct model *m, const struct gs_ev_sync *e)
{
	__u64 key = model__stream_key(e->handle, e->h.tid, e->c.api);
	__u64 *ts;

	if (e->c.result)
		return;
	ts = hmap_get(&m->stream_waits, e->h.pid, key);
	if (!ts) {
		ts = xcalloc(1, sizeof(*ts));
		hmap_put(&m->stream_waits, e->h.pid, key, ts);
	}
	*ts = e->h.ts;
}

static void short_kernel(const struct model *m, __u32 pid, __u64 func, char *out, size_t n)
{
	const char *mangled = model__kernel_name(m, pid, func);
	char *full = mangled ? demangle(mangled) : NULL;

	if (full)
		shorten_name(full, n - 1, out, n);
	else
		snprintf(out, n, "%s", mangled ? mangled : "(unknown)");
	free(full);
}

void model__queue_wait(struct model *m, const struct gs_ev_gpu *e, const struct dev_stat *d,
		       __u64 key, __u64 prev_call, __u64 ready, __u64 start)
{
	const __u64 *waited = hmap_get(&m->stream_waits, e->h.pid, key);
	struct finding f = { 0 };
	unsigned int n = GS_MIN(d->nrecent, DEV_RECENT);

	f.gap_start = ready;
	f.gap_ns = start - ready;
	f.stream = e->stream;
	f.pid = e->h.pid;
	f.tid = e->h.tid;
	f.device = e->device;
	f.cause = CAUSE_QUEUED;
	f.syscall = -1;
	f.after_event_wait = waited && *waited >= prev_call && *waited <= e->h.ts;
	/* The other stream that ran longest in [ready, start), over its recent operations. */
	for (unsigned int i = 0; i < n; i++) {
		const struct dev_op *a = &d->recent[i];
		__u64 total = 0;
		bool seen = false;

		if (a->pid == e->h.pid && a->stream == key)
			continue;
		for (unsigned int k = 0; k < i && !seen; k++)
			seen = d->recent[k].pid == a->pid && d->recent[k].stream == a->stream;
		if (seen)
			continue;
		for (unsigned int k = i; k < n; k++)
			if (d->recent[k].pid == a->pid && d->recent[k].stream == a->stream)
				total +=
					overlap(d->recent[k].start, d->recent[k].end, ready, start);
		if (total > f.busy_ns) {
			f.busy_ns = total;
			f.busy_pid = a->pid;
			f.busy_stream = a->stream;
			short_kernel(m, a->pid, a->func, f.busy_kernel, sizeof(f.busy_kernel));
		}
	}
	short_kernel(m, e->h.pid, e->func, f.kernel, sizeof(f.kernel));
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
	hmap_for_each (&m->stream_waits, s)
		free(s->val);
	hmap_free(&m->stream_waits);
}
