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

#include "analysis/findings.h"
#include "core/demangle.h"
#include "core/hmap.h"
#include "core/util.h"

#define FINDING_MIN_NS	 1000000ULL  /* a gap worth a finding */
#define LAUNCH_GAP_NS	 10000000ULL /* without GPU times: launches this far apart */
#define SETTLE_NS	 2000000ULL  /* see defer() */
#define MERGE_NS	 1000000ULL  /* history: closer than this, one span */
#define THREAD_HIST	 128
#define PENDING_FINDINGS 64

/* A thread's recent OS activity (rings of THREAD_HIST). */
struct thread_os {
	__u32 pid;
	struct {
		__u64 start, end, off_ns; /* off_ns: of the span, the time off the CPU */
		__s32 syscall;
		__u32 reason;
	} off[THREAD_HIST];
	struct {
		__u64 start, end, bytes;
		__u32 dev, count; /* requests of one device that overlap in time, merged */
	} io[THREAD_HIST];
	struct {
		__u64 start, end;
		__u32 count, major;
	} faults[THREAD_HIST];
	struct {
		__u64 start, end;
		__s32 nr;
	} calls[THREAD_HIST];			 /* the reported (long, selected) system calls */
	unsigned int noff, nio, nfaults, ncalls; /* written so far */
};

struct findings {
	struct model *m;
	struct hmap threads_os;	  /* tid -> struct thread_os */
	struct hmap launch_ends;  /* (pid, stream) -> boxed end of the last launch call */
	struct hmap stream_waits; /* (pid, stream) -> boxed time of its last cuStreamWaitEvent */
	/* the longest ones, longest first; all of them counted */
	struct finding list[MAX_FINDINGS];
	size_t n;
	__u64 total;
	struct finding recent[RECENT_FINDINGS]; /* finding n at [n % RECENT_FINDINGS] */
	/* Gaps whose OS records may still be on their way (defer()). */
	struct pending_finding {
		struct finding f;
		__u64 from, until;
	} pending[PENDING_FINDINGS];
	unsigned int npending;
	__u64 os_clock; /* the latest time an OS record was written at */
};

static void settle(struct findings *fs, bool all);

static struct thread_os *history(struct findings *fs, __u32 tid)
{
	struct thread_os *t = hmap_get_or_new(&fs->threads_os, tid, 0, sizeof(*t));

	return t;
}

static void history_add(struct findings *fs, const struct gs_hdr *ev)
{
	const struct gs_ev_offcpu *o = (const void *)ev;
	const struct gs_ev_block *b = (const void *)ev;
	const struct gs_ev_faults *f = (const void *)ev;
	const struct gs_ev_syscall *c = (const void *)ev;
	struct thread_os *t = history(fs, ev->tid);
	__u64 written = ev->type == GS_EV_OFFCPU    ? o->h.ts + o->dur_ns
			: ev->type == GS_EV_BLOCK   ? b->h.ts + b->dur_ns
			: ev->type == GS_EV_SYSCALL ? c->h.ts + c->dur_ns
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
	case GS_EV_SYSCALL:
		i = t->ncalls++ % THREAD_HIST;
		t->calls[i].start = c->h.ts;
		t->calls[i].end = c->h.ts + c->dur_ns;
		t->calls[i].nr = (__s32)c->nr;
		break;
	}
	if (written > fs->os_clock) {
		fs->os_clock = written;
		if (fs->npending)
			settle(fs, false);
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

		/* Of a merged span, the share that was off the CPU (at most all of it: a
		 * recording's intervals are anything). */
		if (o && t->off[i].off_ns < t->off[i].end - t->off[i].start)
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
	/* No time off the CPU named a call (none, or none seen entering: on the CPU in a
	 * read that submits requests as fast as a disk takes them): the call it was in. */
	n = GS_MIN(t->ncalls, THREAD_HIST);
	for (unsigned int i = 0; i < n && f->syscall < 0; i++)
		if (2 * overlap(t->calls[i].start, t->calls[i].end, from, to) >= to - from)
			f->syscall = t->calls[i].nr;
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
static void other_threads(const struct findings *fs, __u32 tid, __u64 from, __u64 to,
			  struct finding *f)
{
	struct hmap_slot *s;

	hmap_for_each (&fs->threads_os, s) {
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

static void keep(struct findings *fs, const struct finding *f)
{
	fs->recent[fs->total++ % RECENT_FINDINGS] = *f;
	if (fs->n < MAX_FINDINGS)
		fs->list[fs->n++] = *f;
	else if (f->gap_ns > fs->list[MAX_FINDINGS - 1].gap_ns)
		fs->list[MAX_FINDINGS - 1] = *f;
	else
		return;
	qsort(fs->list, fs->n, sizeof(*f), longer_first);
}

/* A block device's name as recorded, else "major:minor". */
static void dev_name(const struct findings *fs, __u32 dev, char *buf, size_t n)
{
	const char *name = model__blockdev_name(fs->m, dev);

	if (name && name[0])
		snprintf(buf, n, "%s", name);
	else
		snprintf(buf, n, "%u:%u", dev >> 20, dev & 0xfffff);
}

/* What the thread (and, asleep, the others) did in [from, until): then the finding. */
static void resolve(struct findings *fs, struct finding *f, __u64 from, __u64 until)
{
	const struct thread_os *t = hmap_get(&fs->threads_os, f->tid, 0);

	if (t)
		explain(t, from, until, f);
	if (f->cause == CAUSE_BLOCKED)
		other_threads(fs, f->tid, from, until, f);
	dev_name(fs, f->io_dev, f->io_dev_name, sizeof(f->io_dev_name));
	dev_name(fs, f->other_io_dev, f->other_io_dev_name, sizeof(f->other_io_dev_name));
	keep(fs, f);
}

/*
 * The OS records of a window may still be on their way: they come from the kernel's ring
 * buffer, the record that shows the gap from another source (the in-process plane's ring,
 * drained in the same pass, or later in it). A finding is explained once an OS record
 * written SETTLE_NS past the window's end has been seen (records come out of the kernel's
 * ring in the order they were written), or when the session ends.
 */
static void defer(struct findings *fs, const struct finding *f, __u64 from, __u64 until)
{
	struct pending_finding *p;

	if (fs->npending == PENDING_FINDINGS) {
		p = &fs->pending[0];
		resolve(fs, &p->f, p->from, p->until);
		memmove(p, p + 1, (PENDING_FINDINGS - 1) * sizeof(*p));
		fs->npending--;
	}
	p = &fs->pending[fs->npending++];
	p->f = *f;
	p->from = from;
	p->until = until;
	settle(fs, false);
}

/* Explain the pending findings whose records must all be in by now (all: every one; pid:
 * that process's, whose records are all in once it is retired). */
static void settle_some(struct findings *fs, bool all, __u32 pid)
{
	unsigned int kept = 0;

	for (unsigned int i = 0; i < fs->npending; i++) {
		struct pending_finding *p = &fs->pending[i];

		if (all || p->until + SETTLE_NS <= fs->os_clock || (pid && p->f.pid == pid))
			resolve(fs, &p->f, p->from, p->until);
		else
			fs->pending[kept++] = *p;
	}
	fs->npending = kept;
}

static void settle(struct findings *fs, bool all)
{
	settle_some(fs, all, 0);
}

void findings__settle(struct findings *fs)
{
	settle(fs, true);
}

/*
 * Kernel probes see when launches were called, not when kernels ran: a launch that comes
 * LAUNCH_GAP_NS or more after the previous one into its stream is where the GPU may have
 * run dry (unless enough was queued), and what the launching thread did meanwhile is
 * explained as for an idle stream.
 */
static void launch_gap(struct findings *fs, const struct gs_ev_launch *l)
{
	__u64 *last = hmap_get(&fs->launch_ends, l->h.pid, l->stream), from;
	const struct gs_ev_session *start = model__start(fs->m);
	struct finding f = { 0 };

	if (!last) {
		last = xcalloc(1, sizeof(*last));
		hmap_put(&fs->launch_ends, l->h.pid, l->stream, last);
	}
	from = *last;
	*last = GS_MAX(*last, l->h.ts + l->c.dur_ns);
	/* (With GPU times, idle streams are found from them instead.) */
	if (!from || l->h.ts < from + LAUNCH_GAP_NS || !model__os_plane(fs->m) ||
	    ((start->flags & GS_SESSION_INJECT) && start->gpu_time))
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
	defer(fs, &f, from, l->h.ts);
}

static void on_gap(void *ctx, const struct gs_ev_gpu *e, __u64 gap_start, __u64 start)
{
	struct findings *fs = ctx;
	__u64 late_from = gap_start, until = GS_MIN(e->h.ts, start);
	struct finding f = { 0 };

	/* Only gaps the launch call itself explains: it came after the stream went idle. */
	/* (Without the OS plane nothing says what the thread did.) */
	if (start - gap_start < FINDING_MIN_NS || until <= late_from ||
	    until - late_from < FINDING_MIN_NS || !model__os_plane(fs->m))
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
	defer(fs, &f, late_from, until);
}

/* ---- kernels that waited in queue ------------------------------------------------------ */

static void stream_waited(struct findings *fs, const struct gs_ev_sync *e)
{
	__u64 key = model__stream_key(e->handle, e->h.tid, e->c.api);
	__u64 *ts;

	if (e->c.result)
		return;
	ts = hmap_get_or_new(&fs->stream_waits, e->h.pid, key, sizeof(*ts));
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

static void on_queue_wait(void *ctx, const struct gs_ev_gpu *e, __u64 key, __u64 prev_call,
			  __u64 ready, __u64 start, const struct gpu_op *recent, unsigned int n)
{
	struct findings *fs = ctx;
	const struct model *m = fs->m;
	const __u64 *waited = hmap_get(&fs->stream_waits, e->h.pid, key);
	struct finding f = { 0 };

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
		const struct gpu_op *a = &recent[i];
		__u64 total = 0;
		bool seen = false;

		if (a->pid == e->h.pid && a->stream == key)
			continue;
		for (unsigned int k = 0; k < i && !seen; k++)
			seen = recent[k].pid == a->pid && recent[k].stream == a->stream;
		if (seen)
			continue;
		for (unsigned int k = i; k < n; k++)
			if (recent[k].pid == a->pid && recent[k].stream == a->stream)
				total += overlap(recent[k].start, recent[k].end, ready, start);
		if (total > f.busy_ns) {
			f.busy_ns = total;
			f.busy_pid = a->pid;
			f.busy_stream = a->stream;
			short_kernel(m, a->pid, a->func, f.busy_kernel, sizeof(f.busy_kernel));
		}
	}
	short_kernel(m, e->h.pid, e->func, f.kernel, sizeof(f.kernel));
	keep(fs, &f);
}

/* ---- the stream, the model, the ends ------------------------------------------------------- */

static void on_record(void *ctx, const struct gs_hdr *ev)
{
	struct findings *fs = ctx;
	const struct gs_ev_sync *s = (const void *)ev;

	switch (ev->type) {
	case GS_EV_OFFCPU:
	case GS_EV_FAULTS:
	case GS_EV_BLOCK:
	case GS_EV_SYSCALL:
		/* (A retired process's findings are settled: what its threads did after its
		 * exit record, in records that came later, explains nothing.) */
		if (!model__retired(fs->m, ev->pid))
			history_add(fs, ev);
		break;
	case GS_EV_LAUNCH:
		launch_gap(fs, (const void *)ev);
		break;
	case GS_EV_SYNC:
		if (s->c.api == GS_API_CU_STREAM_WAIT_EVENT ||
		    s->c.api == GS_API_CU_STREAM_WAIT_EVENT_PTSZ)
			stream_waited(fs, s);
		break;
	case GS_EV_SESSION:
		if (((const struct gs_ev_session *)ev)->kind == GS_SESSION_END)
			settle(fs, true);
		break;
	}
}

static bool thread_of(void *ctx, const struct hmap_slot *s)
{
	return ((const struct thread_os *)s->val)->pid == *(const __u32 *)ctx;
}

/* A process retired: its OS records are all in, its findings are explained, its threads'
 * history goes. */
static void on_retire(void *ctx, __u32 pid)
{
	struct findings *fs = ctx;

	settle_some(fs, false, pid);
	hmap_drop_if(&fs->threads_os, thread_of, &pid, free);
	hmap_drop_key(&fs->launch_ends, false, 0, pid, free);
	hmap_drop_key(&fs->stream_waits, false, 0, pid, free);
}

static const struct model_observer observer = {
	.gap = on_gap, .queue_wait = on_queue_wait, .retire = on_retire, .forget = on_retire
};

struct findings *findings__attach(struct stream *s, struct model *m)
{
	struct findings *fs = xcalloc(1, sizeof(*fs));

	fs->m = m;
	model__observe(m, &observer, fs);
	stream__subscribe(s,
			  STREAM_TYPE(GS_EV_OFFCPU) | STREAM_TYPE(GS_EV_FAULTS) |
				  STREAM_TYPE(GS_EV_BLOCK) | STREAM_TYPE(GS_EV_SYSCALL) |
				  STREAM_TYPE(GS_EV_LAUNCH) | STREAM_TYPE(GS_EV_SYNC) |
				  STREAM_TYPE(GS_EV_SESSION),
			  on_record, fs);
	return fs;
}

static void free_values(struct hmap *h)
{
	hmap_free_with(h, NULL);
}

void findings__free(struct findings *fs)
{
	if (!fs)
		return;
	free_values(&fs->threads_os);
	free_values(&fs->launch_ends);
	free_values(&fs->stream_waits);
	free(fs);
}

const struct finding *findings__list(const struct findings *fs, size_t *n)
{
	*n = fs->n;
	return fs->list;
}

__u64 findings__total(const struct findings *fs)
{
	return fs->total;
}

const struct finding *findings__recent(const struct findings *fs, __u64 n)
{
	return n < fs->total && fs->total - n <= RECENT_FINDINGS ? &fs->recent[n % RECENT_FINDINGS]
								 : NULL;
}
