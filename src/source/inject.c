// SPDX-License-Identifier: MIT
/* gpuscope's side of the in-process plane, a source of the session (see inject.h). */
#include <dirent.h>
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
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/procfs.h"
#include "core/shmring.h"
#include "core/util.h"
#include "core/hmap.h"
#include "source/inject.h"

#ifndef GS_INJECT_SO
#error "GS_INJECT_SO names the built library to carry (set by the Makefile)"
#endif

/* The library, carried inside gpuscope so that one binary is all there is to install. */
__asm__(".section .rodata\n"
	".balign 64\n"
	".globl gs_inject_so\n"
	".hidden gs_inject_so\n"
	"gs_inject_so:\n"
	".incbin \"" GS_INJECT_SO "\"\n"
	".globl gs_inject_so_end\n"
	".hidden gs_inject_so_end\n"
	"gs_inject_so_end:\n"
	".previous\n");
extern const unsigned char gs_inject_so[], gs_inject_so_end[];

#define SO_NAME	   "libgpuscope-inject.so"
#define DIR_PREFIX "gpuscope-"

/* What a directory anyone may write to lets one user have the agent read: rings open at once
 * per user and in all, and searches of every process's mappings per scan (each reads the
 * maps of every process). Beyond, a ring waits for the next scan, or is refused. */
#define RINGS_PER_USER	  64
#define RINGS_MAX	  1024
#define SEARCHES_PER_SCAN 16
#define FRESH_MAX	  1024
#define FULL_SCAN_NS	  1000000000ULL
#define NAME_LEN	  64
#define REFUSED_MAX	  4096
/* A producer's counters are believed up to this many events a second of its ring's life. */
#define RING_MAX_RATE 100000000ULL

/* The counters a ring's header carries, as the agent accepts them. */
struct ring_counts {
	__u64 drops[GS_EV_MAX];
	__u64 unwrapped;    /* driver entry points handed out unwrapped */
	__u64 gates_forced; /* GPU timing gates the watchdog had to open (inject/gate.h) */
};

struct ring {
	struct shmring r;
	dev_t dev;
	ino_t ino;
	uid_t uid;     /* the file's owner */
	__u32 pid;     /* the producer's, as gpuscope sees it (the agent: found from the mapping) */
	__u64 created; /* on the producer's clock, bounded by its process's life */
	bool done;     /* closed: its counters are kept in `seen` */
	struct ring_counts seen;
	char name[NAME_LEN]; /* in the directory */
};

struct inject {
	struct inject_opts o;
	struct stream *s;
	bool agent;
	/* run: processes of the session held in the stream before a ring of theirs is open
	 * (pid -> 1, or 2 once it exited: released at the next scan that finds no ring) */
	struct hmap pending;
	__u64 next_scan;  /* (gs_now_ns) */
	__u64 scan_every; /* ns */
	int lock_fd;
	int watch_fd; /* the agent: inotify on its directory (-1: none), a ring is found at once */
	struct ring_counts retired; /* counters of rings read out and removed */
	/* Files refused and left in place, not looked at again: (inode, device) -> their
	 * change time in ns + 1 (a file made later may get the same inode). At most
	 * REFUSED_MAX: then forgotten at once, and refused again as they are met. */
	struct hmap refused;
	struct hmap open; /* (inode, device) of the rings open: (void *)1 */
	/* The agent: names inotify announced since the last look (beyond FRESH_MAX, or when
	 * inotify lost some, the whole directory is read instead), and when it last was. */
	char (*fresh)[NAME_LEN];
	unsigned int nfresh;
	bool rescan;
	__u64 last_full;
	struct ring *cur; /* the ring being drained (the agent's record callback) */
	unsigned int scans;
	char dir[PATH_MAX];    /* rings (and the library, where it may be executed from) */
	char so_dir[PATH_MAX]; /* the library's own directory if not `dir`, else "" */
	char so_path[PATH_MAX];
	struct ring *rings;
	size_t n, cap;
	__u64 rings_lost;
	__u64 warn_window;	    /* (gs_now_ns) when the current minute of warnings began */
	unsigned int warned, muted; /* in it: warnings given, and held back */
};

/* A warning about one ring. Whoever may write a ring may make it fail: at most 10 a minute,
 * so that another user cannot flood the agent's log (the rest are counted, and said). */
#define RING_WARNINGS_PER_MIN 10

__attribute__((format(printf, 2, 3))) static void ring_warn(struct inject *in, const char *fmt, ...)
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

/* Remove a session directory and what is in it (flat: rings and the library). */
static void remove_dir(const char *dir)
{
	char path[PATH_MAX + 256];
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(dir);
}

/* Sessions of gpuscope processes that are gone (killed before they could clean up). */
static void remove_stale(const char *base)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(base);

	if (!d)
		return;
	while ((de = readdir(d))) {
		long pid;
		char *end;

		if (strncmp(de->d_name, DIR_PREFIX, strlen(DIR_PREFIX)))
			continue;
		pid = strtol(de->d_name + strlen(DIR_PREFIX), &end, 10);
		if (pid <= 0 || *end != '-' || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid()) {
			gs_debug("removing %s, left by gpuscope %ld", path, pid);
			remove_dir(path);
		}
	}
	closedir(d);
}

static int make_dir(const char *base, char *out, size_t n)
{
	struct stat st;

	if (stat(base, &st) || !S_ISDIR(st.st_mode) || access(base, W_OK | X_OK))
		return -1;
	remove_stale(base);
	if (snprintf(out, n, "%s/" DIR_PREFIX "%d-XXXXXX", base, (int)getpid()) >= (int)n)
		return -1;
	return mkdtemp(out) ? 0 : -1;
}

static bool noexec(const char *dir)
{
	struct statvfs sv;

	return statvfs(dir, &sv) == 0 && (sv.f_flag & ST_NOEXEC);
}

static int write_library(const char *path)
{
	size_t len = (size_t)(gs_inject_so_end - gs_inject_so), off = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);

	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t w = write(fd, gs_inject_so + off, len - off);

		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	/* (0755 whatever the umask: other users' programs load it from the agent's
	 * directory) */
	if (fchmod(fd, 0755)) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* Written beside, then renamed over: a program that has the old one mapped keeps it. */
static int replace_library(const char *path)
{
	char tmp[PATH_MAX + 16];

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
	if (write_library(tmp) || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

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
	snprintf(in->so_path, sizeof(in->so_path), "%s/%s", dir, SO_NAME);
	if (noexec(dir))
		gs_warn("%s is on a noexec mount: programs cannot preload %s from it", dir,
			in->so_path);
	if (replace_library(in->so_path)) {
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
	if (make_dir("/dev/shm", in->dir, sizeof(in->dir)) &&
	    make_dir("/tmp", in->dir, sizeof(in->dir))) {
		gs_err("cannot create a session directory in /dev/shm or /tmp: %s",
		       strerror(errno));
		in->dir[0] = 0;
		goto fail;
	}
	/* The library must be mapped executable: not from a noexec mount (a container's
	 * /dev/shm often is). */
	so_base = in->dir;
	if (noexec(in->dir)) {
		const char *bases[] = { tmp && *tmp ? tmp : "/tmp", "/var/tmp", "/run" };

		for (size_t i = 0; i < 3 && !in->so_dir[0]; i++)
			if (!noexec(bases[i]) &&
			    make_dir(bases[i], in->so_dir, sizeof(in->so_dir)) == 0)
				so_base = in->so_dir;
		if (!in->so_dir[0]) {
			gs_err("--inject: no directory to put the library in that allows executing "
			       "it (/dev/shm, $TMPDIR, /tmp, /var/tmp and /run are noexec or not "
			       "writable)");
			goto fail;
		}
	}
	if (snprintf(in->so_path, sizeof(in->so_path), "%s/%s", so_base, SO_NAME) >=
		    (int)sizeof(in->so_path) ||
	    write_library(in->so_path)) {
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
			remove_dir(in->dir);
		if (in->so_dir[0])
			remove_dir(in->so_dir);
	}
	free(in);
}

static char *env_pair(const char *name, const char *value)
{
	struct strbuf sb = {};

	sb_printf(&sb, "%s=%s", name, value);
	return sb.buf;
}

char **inject__env(const struct inject *in, char *const *env)
{
	static const char *const ours[] = {
		"LD_PRELOAD=",	      "GPUSCOPE_INJECT_DIR=", "GPUSCOPE_PID=",
		"GPUSCOPE_GPU_TIME=", "GPUSCOPE_RING_BYTES=", "GPUSCOPE_STACKS=",
		"GPUSCOPE_DEVCODE=",  "GPUSCOPE_PROBE=",      "GPUSCOPE_PROBE_OUT="
	};
	const char *preload = NULL;
	char num[32], **out;
	size_t n = 0, k = 0;

	while (env[n])
		n++;
	out = xcalloc(n + sizeof(ours) / sizeof(ours[0]) + 1, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		bool skip = false;

		for (size_t j = 0; j < sizeof(ours) / sizeof(ours[0]); j++)
			if (!strncmp(env[i], ours[j], strlen(ours[j])))
				skip = true;
		if (!strncmp(env[i], "LD_PRELOAD=", 11))
			preload = env[i] + 11;
		if (!skip)
			out[k++] = xstrdup(env[i]);
	}
	/* Ours first, so that our definitions of the driver's functions are the ones bound. */
	if (preload && *preload) {
		struct strbuf sb = {};

		sb_printf(&sb, "LD_PRELOAD=%s:%s", in->so_path, preload);
		out[k++] = sb.buf;
	} else {
		out[k++] = env_pair("LD_PRELOAD", in->so_path);
	}
	out[k++] = env_pair("GPUSCOPE_INJECT_DIR", in->dir);
	snprintf(num, sizeof(num), "%d", (int)getpid());
	out[k++] = env_pair("GPUSCOPE_PID", num);
	if (in->o.gpu_time == 0)
		snprintf(num, sizeof(num), "off");
	else if (in->o.gpu_time == 1)
		snprintf(num, sizeof(num), "all");
	else
		snprintf(num, sizeof(num), "%u", in->o.gpu_time);
	out[k++] = env_pair("GPUSCOPE_GPU_TIME", num);
	if (in->o.device_code)
		out[k++] = env_pair("GPUSCOPE_DEVCODE", "1");
	if (in->o.probe_bundle && in->o.probe_out) {
		out[k++] = env_pair("GPUSCOPE_PROBE", in->o.probe_bundle);
		out[k++] = env_pair("GPUSCOPE_PROBE_OUT", in->o.probe_out);
	}
	snprintf(num, sizeof(num), "%llu", (unsigned long long)in->o.ring_bytes);
	out[k++] = env_pair("GPUSCOPE_RING_BYTES", num);
	snprintf(num, sizeof(num), "%u", in->o.stack_every);
	out[k++] = env_pair("GPUSCOPE_STACKS", num);
	out[k] = NULL;
	return out;
}

void inject__free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/* A ring file's name: <pid>.ring, or the agent's <pid>-<16 hex digits>.ring. */
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
		if (!proc_runs_as(mapper, st->st_uid)) {
			*why = "the process that maps it does not run as the file's owner";
			return 0;
		}
		return mapper;
	}
	if (!in->agent && in->o.traced && in->o.traced(in->o.ctx, named))
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
		ring_warn(in, "in-process ring of pid %u: %s; its events are lost", pid, err);
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
	pid = ring_owner(in, named, &st, searches, &why);
	if (pid < 0)
		return -1;
	if (!pid) {
		refuse(in, d, name, &st, why, in->agent || in->o.skip_before_ring);
		return 0;
	}
	if (rings_open(in, st.st_uid, &all) >= RINGS_PER_USER || all >= RINGS_MAX) {
		refuse(in, d, name, &st, "its user has too many rings open", false);
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
static void scan(struct inject *in, bool full)
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
	}
	in->n = k;
}

int inject__poll(struct inject *in, bool do_scan, bool final)
{
	char err[160];
	int total = 0;

	if (do_scan || final) {
		scan(in, final);
		in->scans++;
		release_gone(in, final);
	} else if (in->watch_fd >= 0) {
		scan(in, false); /* (what inotify announced, at once) */
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
			ring_warn(in, "in-process ring of pid %u: %s; reading it stops here",
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
	}
	for (int t = 0; t < GS_EV_MAX; t++)
		d->by_type[t] += in->retired.drops[t];
	d->unwrapped += in->retired.unwrapped;
	d->gates_forced += in->retired.gates_forced;
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
