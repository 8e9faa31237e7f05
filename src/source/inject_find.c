// SPDX-License-Identifier: MIT
/*
 * New rings in the directory (see inject_int.h): found as inotify announces them (the
 * agent) or by reading the directory, proved whose they are -- a live process of the file's
 * owner maps it -- and opened, or refused and counted. Nothing here trusts a name, a header
 * or a file's size: another user may have written them (docs/security.md).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/procfs.h"
#include "core/util.h"
#include "source/inject_int.h"

void inject_warn(struct inject *in, const char *fmt, ...)
{
	__u64 now = gs_now_ns();
	char msg[512];
	va_list ap;

	if (now - in->warn_window >= 60000000000ULL) {
		if (in->muted)
			gs_warn("%u more warnings about in-process rings in the last minute",
				in->muted);
		in->warn_window = now;
		in->warned = in->muted = 0;
	}
	if (in->warned >= RING_WARNINGS_PER_MIN) {
		in->muted++;
		return;
	}
	in->warned++;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	gs_warn("%s", msg);
}

static __u32 ring_pid(const char *name)
{
	char *end;
	long pid = strtol(name, &end, 10);

	if (pid <= 0 || pid > INT_MAX)
		return 0;
	if (*end == '-' && strspn(end + 1, "0123456789abcdef") == 16)
		end += 17;
	return !strcmp(end, ".ring") ? (__u32)pid : 0;
}

static void *file_tag(const struct stat *st)
{
	return (void *)(uintptr_t)((__u64)st->st_ctim.tv_sec * 1000000000ULL +
				   (__u64)st->st_ctim.tv_nsec + 1);
}

static bool was_refused(const struct inject *in, const struct stat *st)
{
	return hmap_get(&in->refused, st->st_ino, st->st_dev) == file_tag(st);
}

/* A ring file not read: counted lost, and removed (the agent) or remembered (it stays). */
static void refuse(struct inject *in, DIR *d, const char *name, const struct stat *st,
		   const char *why, bool remove)
{
	gs_debug("in-process ring %s refused: %s", name, why);
	in->rings_lost++;
	if (remove && unlinkat(dirfd(d), name, 0) == 0)
		return;
	if (in->refused.len >= REFUSED_MAX)
		hmap_free(&in->refused);
	hmap_put(&in->refused, st->st_ino, st->st_dev, file_tag(st));
}

/*
 * Whose a ring is: the pid its records go under, 0 if it has no proof of an owner (why
 * says), or -1 to look again at the next scan. Proof: a process that maps the file and runs
 * as the file's owner (the agent looks for it on this side of any pid namespace, from the
 * named pid; the name alone proves nothing); for `run`, also one of its processes, gone
 * now, if the file belongs to the user it runs the command as. Without `searches`, no
 * search of every process: -1 where one is needed.
 */
static long ring_owner(struct inject *in, __u32 named, const struct stat *st,
		       unsigned int *searches, const char **why)
{
	unsigned int ma = major(st->st_dev), mi = minor(st->st_dev);
	pid_t mapper = 0;

	if (!in->agent && st->st_uid != in->o.uid) {
		*why = "its file is not the traced command's user's";
		return 0;
	}
	if (proc_maps_file((pid_t)named, ma, mi, st->st_ino))
		mapper = (pid_t)named;
	else if (in->agent) {
		if (!searches || *searches >= SEARCHES_PER_SCAN)
			return -1;
		++*searches;
		mapper = proc_find_mapper((pid_t)named, ma, mi, st->st_ino, st->st_uid);
	}
	if (mapper) {
		__u64 start;

		if (proc_runs_as(mapper, st->st_uid))
			return mapper;
		/* (Gone between the two reads: as a process gone before, below. Seen once in
		 * 2,500 short processes under run: a whole process's records lost.) */
		if (proc_start_ns(mapper, &start) == 0) {
			*why = "the process that maps it does not run as the file's owner";
			return 0;
		}
	}
	if (!in->agent &&
	    ((in->o.traced && in->o.traced(in->o.ctx, named)) || hmap_get(&in->pending, named, 0)))
		return named;
	*why = "no process of its owner maps it";
	return 0;
}

/* How many rings are open, of a user and in all. */
static size_t rings_open(const struct inject *in, uid_t uid, size_t *all)
{
	size_t n = 0;

	*all = 0;
	for (size_t i = 0; i < in->n; i++) {
		*all += !in->rings[i].done;
		n += !in->rings[i].done && in->rings[i].uid == uid;
	}
	return n;
}

static void open_ring(struct inject *in, DIR *d, const char *name, int fd, const struct stat *st,
		      __u32 pid)
{
	struct ring *r;
	char err[128];
	__u64 start, now = gs_now_ns();

	if (in->n == in->cap) {
		in->cap = in->cap ? 2 * in->cap : 16;
		in->rings = xrealloc(in->rings, in->cap * sizeof(*in->rings));
	}
	r = &in->rings[in->n];
	memset(r, 0, sizeof(*r));
	r->dev = st->st_dev;
	r->ino = st->st_ino;
	r->uid = st->st_uid;
	r->pid = pid;
	gs_strlcpy(r->name, name, sizeof(r->name));
	if (shmring_open_fd(&r->r, fd, err, sizeof(err))) {
		inject_warn(in, "in-process ring of pid %u: %s; its events are lost", pid, err);
		r->done = true;
		in->rings_lost++;
		if (in->agent)
			unlinkat(dirfd(d), name, 0);
	} else {
		hmap_put(&in->open, r->ino, r->dev, (void *)1);
		if (in->agent)
			shmring_claim(&r->r, err, sizeof(err)); /* (cut: the first read says so) */
		/* (The header's word: bounded by the process's life, where that is known.) */
		r->created = GS_MIN(r->r.h->created_ns, now);
		if (proc_start_ns((pid_t)pid, &start) == 0)
			r->created = GS_MAX(r->created, start);
		/* Held until read to the end (the hold made for it, if any, is its now). */
		if (!hmap_del(&in->pending, pid, 0))
			stream__hold(in->s, pid);
		if (in->o.on_ring)
			in->o.on_ring(in->o.ctx, pid, r->created, true);
	}
	in->n++;
	gs_debug("in-process ring of pid %u found", pid);
}

/* One file of the directory: opened, refused, or left for later (-1). */
static int consider(struct inject *in, DIR *d, const char *name, unsigned int *searches)
{
	__u32 named = ring_pid(name);
	const char *why = NULL;
	struct stat st;
	size_t all;
	long pid;
	int fd;

	if (!named || fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
	    was_refused(in, &st))
		return 0;
	/* (A process that execs makes a new ring under the same name.) */
	if (hmap_get(&in->open, st.st_ino, st.st_dev))
		return 0;
	/* (Before the proof, which reads a process's maps: a user past the share costs the
	 * agent a stat a file.) */
	if (rings_open(in, st.st_uid, &all) >= RINGS_PER_USER || all >= RINGS_MAX) {
		refuse(in, d, name, &st, "its user has too many rings open", false);
		return 0;
	}
	pid = ring_owner(in, named, &st, searches, &why);
	if (pid < 0)
		return -1;
	if (!pid) {
		refuse(in, d, name, &st, why, in->agent || in->o.skip_before_ring);
		return 0;
	}
	fd = openat(dirfd(d), name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	open_ring(in, d, name, fd, &st, (__u32)pid);
	close(fd);
	return 0;
}

/* The names inotify announced (the agent). */
static void read_watch(struct inject *in)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while ((n = read(in->watch_fd, buf, sizeof(buf))) > 0)
		for (char *p = buf; p + sizeof(struct inotify_event) <= buf + n;) {
			const struct inotify_event *e = (const void *)p;

			p += sizeof(*e) + e->len;
			if (e->mask & IN_Q_OVERFLOW)
				in->rescan = true;
			else if (e->len && ring_pid(e->name) && in->nfresh < FRESH_MAX &&
				 strlen(e->name) < NAME_LEN)
				gs_strlcpy(in->fresh[in->nfresh++], e->name, NAME_LEN);
			else if (e->len && ring_pid(e->name))
				in->rescan = true;
		}
}

/* New rings: first those whose named process maps them (cheap, and how a program finds its
 * ring), then at most SEARCHES_PER_SCAN that need every process looked at, so that files
 * which need a search cannot delay the others. The agent looks at the names inotify gave
 * it, and reads the whole directory once a second (a directory another user fills with
 * thousands of files is not read at every round); `run`, and a full look, read it all. */
void inject_scan(struct inject *in, bool full)
{
	char later[SEARCHES_PER_SCAN][NAME_LEN];
	unsigned int searches = 0, nlater = 0, nfresh;
	__u64 now = gs_now_ns();
	struct dirent *de;
	DIR *d;

	if (in->watch_fd >= 0)
		read_watch(in);
	full |= in->watch_fd < 0 || in->rescan || now - in->last_full >= FULL_SCAN_NS;
	if (!full && !in->nfresh)
		return;
	d = opendir(in->dir);
	if (!d)
		return;
	nfresh = full ? 0 : in->nfresh;
	if (full) {
		in->rescan = false;
		in->last_full = now;
	}
	in->nfresh = 0;
	for (unsigned int i = 0; !full && i < nfresh; i++)
		if (consider(in, d, in->fresh[i], NULL) < 0 && nlater < SEARCHES_PER_SCAN)
			gs_strlcpy(later[nlater++], in->fresh[i], NAME_LEN);
	while (full && (de = readdir(d)))
		if (consider(in, d, de->d_name, NULL) < 0 && nlater < SEARCHES_PER_SCAN &&
		    strlen(de->d_name) < NAME_LEN)
			gs_strlcpy(later[nlater++], de->d_name, NAME_LEN);
	for (unsigned int i = 0; i < nlater; i++)
		consider(in, d, later[i], &searches);
	closedir(d);
}
