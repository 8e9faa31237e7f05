// SPDX-License-Identifier: MIT
/* gpuscope's side of the in-process plane, a source of the session (see inject.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/procfs.h"
#include "core/shmring.h"
#include "core/util.h"
#include "core/hmap.h"
#include "source/inject_int.h"

static void inject__close(struct inject *in);
static const struct source_ops ops;
static void track(void *ctx, const struct gs_hdr *ev);

/* Checks of the agent's directory, which processes of any user write to. 0 or -1. */
static int agent_dir_ok(const char *dir)
{
	struct stat st;

	if (strlen(dir) >= PATH_MAX - 64 || dir[0] != '/') {
		gs_err("--inject-dir wants an absolute path, not '%s'", dir);
		return -1;
	}
	if (mkdir(dir, 01777) == 0)
		chmod(dir, 01777); /* (the umask took bits off) */
	else if (errno != EEXIST) {
		gs_err("cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		gs_err("%s is not a directory of this user%s", dir,
		       S_ISLNK(st.st_mode) ? " (a symbolic link)" : "");
		return -1;
	}
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
		gs_err("%s may be written by anyone but is not sticky (chmod +t it)", dir);
		return -1;
	}
	return 0;
}

static struct inject *inject_new(struct session *s, const struct inject_opts *o)
{
	struct inject *in = xcalloc(1, sizeof(*in));

	in->o = *o;
	in->s = s->stream;
	in->lock_fd = -1;
	in->watch_fd = -1;
	if (!in->o.uid)
		in->o.uid = geteuid();
	return in;
}

int inject__open_agent(struct session *s, const char *dir, const struct inject_opts *o,
		       struct inject **out)
{
	struct inject *in;
	char path[PATH_MAX + 32];

	if (agent_dir_ok(dir))
		return -1;
	in = inject_new(s, o);
	in->agent = true;
	/* (With the kernel's probes, which see every process's calls, a scan a second; new
	 * processes are looked for at once. Without, every poll.) */
	in->scan_every = o->skip_before_ring ? 1000000000ULL : 0;
	gs_strlcpy(in->dir, dir, sizeof(in->dir));
	/* (A short program's ring is best found while it runs: its process is the proof of
	 * whose it is.) */
	in->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (in->watch_fd >= 0 &&
	    inotify_add_watch(in->watch_fd, dir, IN_MOVED_TO | IN_CREATE) < 0) {
		close(in->watch_fd);
		in->watch_fd = -1;
	}
	if (in->watch_fd >= 0)
		in->fresh = xcalloc(FRESH_MAX, NAME_LEN);
	snprintf(path, sizeof(path), "%s/agent.lock", dir);
	in->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (in->lock_fd < 0 || fchmod(in->lock_fd, 0644)) {
		gs_err("cannot open %s: %s", path, strerror(errno));
		goto fail;
	}
	if (flock(in->lock_fd, LOCK_EX | LOCK_NB)) {
		gs_err("%s is in use by another gpuscope exporter", dir);
		goto fail;
	}
	snprintf(in->so_path, sizeof(in->so_path), "%s/%s", dir, INJ_SO_NAME);
	if (inj_noexec(dir))
		gs_warn("%s is on a noexec mount: programs cannot preload %s from it", dir,
			in->so_path);
	if (inj_replace_library(in->so_path)) {
		gs_err("cannot write %s: %s", in->so_path, strerror(errno));
		goto fail;
	}
	gs_debug("in-process plane for the node: %s", dir);
	session__add_source(s, &ops, in);
	*out = in;
	return 0;
fail:
	inject__close(in);
	return -1;
}

int inject__wait(struct inject *in, int timeout_ms)
{
	struct pollfd p = { .fd = in->watch_fd, .events = POLLIN };

	if (in->watch_fd < 0) {
		poll(NULL, 0, timeout_ms);
		return 0;
	}
	return poll(&p, 1, timeout_ms) > 0; /* (read by the next look) */
}

const char *inject__library(const struct inject *in)
{
	return in->so_path;
}

size_t inject__rings(const struct inject *in)
{
	size_t n = 0;

	for (size_t i = 0; i < in->n; i++)
		n += !in->rings[i].done;
	return n;
}

int inject__open(struct session *s, const struct inject_opts *o, struct inject **out)
{
	struct inject *in = inject_new(s, o);
	const char *tmp = getenv("TMPDIR");
	const char *so_base;

	in->scan_every = 100000000ULL;
	/* Rings in shared memory; /tmp will do where there is none. */
	if (inj_make_dir("/dev/shm", in->dir, sizeof(in->dir)) &&
	    inj_make_dir("/tmp", in->dir, sizeof(in->dir))) {
		gs_err("cannot create a session directory in /dev/shm or /tmp: %s",
		       strerror(errno));
		in->dir[0] = 0;
		goto fail;
	}
	/* The library must be mapped executable: not from a noexec mount (a container's
	 * /dev/shm often is). */
	so_base = in->dir;
	if (inj_noexec(in->dir)) {
		const char *bases[] = { tmp && *tmp ? tmp : "/tmp", "/var/tmp", "/run" };

		for (size_t i = 0; i < 3 && !in->so_dir[0]; i++)
			if (!inj_noexec(bases[i]) &&
			    inj_make_dir(bases[i], in->so_dir, sizeof(in->so_dir)) == 0)
				so_base = in->so_dir;
		if (!in->so_dir[0]) {
			gs_err("--inject: no directory to put the library in that allows executing "
			       "it (/dev/shm, $TMPDIR, /tmp, /var/tmp and /run are noexec or not "
			       "writable)");
			goto fail;
		}
	}
	if (snprintf(in->so_path, sizeof(in->so_path), "%s/%s", so_base, INJ_SO_NAME) >=
		    (int)sizeof(in->so_path) ||
	    inj_write_library(in->so_path)) {
		gs_err("cannot write %s: %s", in->so_path, strerror(errno));
		goto fail;
	}
	/* Run as another user (run -u), the command makes its rings in the session's
	 * directory and loads the library from it. */
	if (in->o.uid != geteuid() &&
	    (chown(in->dir, in->o.uid, in->o.gid) ||
	     (in->so_dir[0] && chown(in->so_dir, in->o.uid, in->o.gid)))) {
		gs_err("cannot give the session directory to uid %u: %s", (unsigned)in->o.uid,
		       strerror(errno));
		goto fail;
	}
	gs_debug("in-process plane: session %s, library %s", in->dir, in->so_path);
	stream__subscribe(s->stream, STREAM_TYPE(GS_EV_PROC), track, in);
	session__add_source(s, &ops, in);
	*out = in;
	return 0;
fail:
	inject__close(in);
	return -1;
}

static void inject__close(struct inject *in)
{
	struct hmap_slot *sl;

	if (!in)
		return;
	for (size_t i = 0; i < in->n; i++)
		if (!in->rings[i].done)
			shmring_close(&in->rings[i].r);
	free(in->rings);
	hmap_for_each (&in->pending, sl)
		stream__release(in->s, (__u32)sl->k1);
	hmap_free(&in->pending);
	hmap_free(&in->refused);
	hmap_free(&in->open);
	free(in->fresh);
	if (in->lock_fd >= 0)
		close(in->lock_fd);
	if (in->watch_fd >= 0)
		close(in->watch_fd);
	if (in->agent) {
		/* Programs keep the library and their rings; a restarted agent reads on. */
	} else if (getenv("GPUSCOPE_KEEP_SESSION")) {
		/* For debugging the plane itself: leave the rings to look at. */
		gs_info("in-process session kept: %s", in->dir);
	} else {
		if (in->dir[0])
			inj_remove_dir(in->dir);
		if (in->so_dir[0])
			inj_remove_dir(in->so_dir);
	}
	free(in);
}

/* A ring file's name: <pid>.ring, or the agent's <pid>-<16 hex digits>.ring. */
/*
 * The session's processes that may still make a ring are held in the stream (run; see
 * inject.h): from their fork or exec until a ring of theirs is open, or until a scan after
 * their exit finds none (a ring appears before the process's first call, so before it can
 * have exited).
 */
static void track(void *ctx, const struct gs_hdr *ev)
{
	struct inject *in = ctx;
	const struct gs_ev_proc *p = (const void *)ev;
	void *st = hmap_get(&in->pending, ev->pid, 0);

	if (p->kind == GS_PROC_FORK || p->kind == GS_PROC_EXEC || p->kind == GS_PROC_FOUND) {
		if (!st) {
			hmap_put(&in->pending, ev->pid, 0, (void *)1);
			stream__hold(in->s, ev->pid);
		}
	} else if (p->kind == GS_PROC_EXIT && st) {
		hmap_put(&in->pending, ev->pid, 0, (void *)2);
	}
}

static void release_gone(struct inject *in, bool all)
{
	struct hmap_slot *sl;
	__u64 *gone = NULL;
	size_t n = 0, cap = 0;

	hmap_for_each (&in->pending, sl) {
		if (!all && sl->val != (void *)2)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			gone = xrealloc(gone, cap * sizeof(*gone));
		}
		gone[n++] = sl->k1;
	}
	for (size_t i = 0; i < n; i++) {
		hmap_del(&in->pending, gone[i], 0);
		stream__release(in->s, (__u32)gone[i]);
	}
	free(gone);
}

/* The header's counters as the agent takes them (see inject__drops). */
static __u64 accept(__u64 prev, __u64 claimed, __u64 bound)
{
	if (claimed <= prev)
		return prev;
	return GS_MAX(prev, GS_MIN(claimed, bound));
}

static void read_counts(struct ring *r)
{
	struct shmring_hdr h;
	char err[128];
	__u64 age = gs_now_ns() - GS_MIN(r->created, gs_now_ns());
	__u64 bound = (age / 1000000 + 1000) * (RING_MAX_RATE / 1000);

	if (shmring_read_hdr(&r->r, &h, err, sizeof(err)))
		return;
	for (int t = 0; t < GS_EV_MAX; t++)
		r->seen.drops[t] = accept(r->seen.drops[t], h.drops[t], bound);
	r->seen.unwrapped = accept(r->seen.unwrapped, h.unwrapped, bound);
	r->seen.gates_forced = accept(r->seen.gates_forced, h.gates_forced, bound);
	r->seen.time_capped = accept(r->seen.time_capped, h.time_capped, bound);
	r->seen.time_lost = accept(r->seen.time_lost, h.time_lost, bound);
}

static void finish(struct inject *in, struct ring *r, bool lost)
{
	read_counts(r);
	shmring_close(&r->r);
	hmap_del(&in->open, r->ino, r->dev);
	r->done = true;
	if (lost)
		in->rings_lost++;
	if (in->o.on_ring)
		in->o.on_ring(in->o.ctx, r->pid, r->created, false);
	stream__release(in->s, r->pid);
	/* Read out: its file goes (16 MiB of shared memory a process; a job of thousands of
	 * short processes filled /dev/shm). Run's are named by pid alone: only if the name
	 * is still this file's. */
	{
		char path[PATH_MAX + 80];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", in->dir, r->name);
		if (in->agent ||
		    (lstat(path, &st) == 0 && st.st_dev == r->dev && st.st_ino == r->ino))
			unlink(path);
	}
}

static bool gone(__u32 pid)
{
	return kill((pid_t)pid, 0) && errno == ESRCH;
}

/* A ring's records, as the agent delivers them: under the pid the agent knows the process
 * by, and without the calls made before the ring was there (see skip_before_ring). */
static void agent_record(void *ctx, const struct gs_hdr *ev)
{
	struct inject *in = ctx;
	union {
		struct gs_hdr h;
		unsigned char b[GS_EVENT_MAX_SIZE];
	} rec;

	if (in->o.skip_before_ring && ev->ts < in->cur->created &&
	    (ev->type <= GS_EV_NCCL || ev->type == GS_EV_STACK))
		return;
	memcpy(&rec, ev, ev->size);
	rec.h.pid = in->cur->pid;
	stream__push(in->s, &rec.h);
}

static void run_record(void *ctx, const struct gs_hdr *ev)
{
	struct inject *in = ctx;

	stream__push(in->s, ev);
}

/* Rings read out to the end leave the array, their counters kept (a session may see
 * thousands of processes; the agent runs for days). */
static void retire(struct inject *in)
{
	size_t k = 0;

	for (size_t i = 0; i < in->n; i++) {
		struct ring *r = &in->rings[i];

		if (!r->done) {
			in->rings[k++] = *r;
			continue;
		}
		for (int t = 0; t < GS_EV_MAX; t++)
			in->retired.drops[t] += r->seen.drops[t];
		in->retired.unwrapped += r->seen.unwrapped;
		in->retired.gates_forced += r->seen.gates_forced;
		in->retired.time_capped += r->seen.time_capped;
		in->retired.time_lost += r->seen.time_lost;
	}
	in->n = k;
}

int inject__poll(struct inject *in, bool do_scan, bool final)
{
	char err[160];
	int total = 0;

	if (do_scan || final) {
		inject_scan(in, final);
		in->scans++;
		release_gone(in, final);
	} else if (in->watch_fd >= 0) {
		inject_scan(in, false); /* (what inotify announced, at once) */
	}
	for (size_t i = 0; i < in->n; i++) {
		struct ring *r = &in->rings[i];
		bool busy, dead;
		int n;

		if (r->done)
			continue;
		/* Gone before this drain: then the drain reads all it ever wrote. (The agent's:
		 * its process is gone, or, looked at every tenth scan, as reading a big
		 * program's maps is not free, no longer maps it: it exec'ed.) */
		if (in->agent)
			dead = final || gone(r->pid) ||
			       (do_scan && in->scans % 10 == 0 &&
				!proc_maps_file((pid_t)r->pid, major(r->dev), minor(r->dev),
						r->ino));
		else
			dead = final || gone(r->pid);
		in->cur = r;
		n = shmring_drain(&r->r, in->agent ? agent_record : run_record, in, &busy, err,
				  sizeof(err));
		if (n < 0) {
			inject_warn(in, "in-process ring of pid %u: %s; reading it stops here",
				    r->pid, err);
			finish(in, r, true);
			continue;
		}
		total += n;
		read_counts(r);
		/* Everything of a process that is gone has been read (a ring holds at most a
		 * lap): unless its last record was being written when it died, which then never
		 * ends. */
		if (dead) {
			__u64 head = 0;
			bool cut = shmring_read_head(&r->r, &head, err, sizeof(err)) != 0;

			finish(in, r, cut || busy || head != r->r.tail);
		}
	}
	retire(in);
	return total;
}

void inject__drops(const struct inject *in, struct gs_ev_drops *d)
{
	for (size_t i = 0; i < in->n; i++) {
		const struct ring_counts *c = &in->rings[i].seen;

		for (int t = 0; t < GS_EV_MAX; t++)
			d->by_type[t] += c->drops[t];
		d->unwrapped += c->unwrapped;
		d->gates_forced += c->gates_forced;
		d->time_capped += c->time_capped;
		d->time_lost += c->time_lost;
	}
	for (int t = 0; t < GS_EV_MAX; t++)
		d->by_type[t] += in->retired.drops[t];
	d->unwrapped += in->retired.unwrapped;
	d->gates_forced += in->retired.gates_forced;
	d->time_capped += in->retired.time_capped;
	d->time_lost += in->retired.time_lost;
	d->rings_lost += in->rings_lost;
}

static int poll_fn(void *obj, int timeout_ms)
{
	struct inject *in = obj;
	__u64 now;
	bool do_scan;

	/* (The agent without the kernel's probes: the first source, it waits for a ring.) */
	if (timeout_ms > 0)
		inject__wait(in, timeout_ms);
	now = gs_now_ns();
	do_scan = now >= in->next_scan;
	if (do_scan)
		in->next_scan = now + in->scan_every;
	return inject__poll(in, do_scan, false);
}

static void finish_fn(void *obj)
{
	inject__poll(obj, true, true);
}

static void drops_fn(void *obj, struct gs_ev_drops *d)
{
	inject__drops(obj, d);
}

static void close_fn(void *obj)
{
	inject__close(obj);
}

static const struct source_ops ops = {
	.name = "inject", .poll = poll_fn, .finish = finish_fn, .drops = drops_fn, .close = close_fn
};
