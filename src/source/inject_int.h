/* SPDX-License-Identifier: MIT */
/*
 * The in-process plane's reader, inside (see inject.h): what its two files share.
 *   inject.c       the session's directory or the agent's, the library written there, the
 *                  source's loop: rings drained, finished and removed;
 *   inject_find.c  new rings found in the directory and proved whose they are, or refused
 *                  (the agent's directory is any user's: docs/security.md).
 */
#ifndef GS_SOURCE_INJECT_INT_H
#define GS_SOURCE_INJECT_INT_H

#include <limits.h>
#include <sys/types.h>

#include "core/hmap.h"
#include "core/shmring.h"
#include "source/inject.h"

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
	__u64 time_capped;  /* launches due for GPU timing left untimed by its rate */
	__u64 time_lost;    /* ... for want of events or queue room */
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

/* Whoever may write a ring may make it fail: at most this many warnings about rings a
 * minute, so that another user cannot flood the agent's log (the rest are counted, said). */
#define RING_WARNINGS_PER_MIN 10

/* inject_lib.c */
#define INJ_SO_NAME "libgpuscope-inject.so"
/* A new session directory under base (stale ones of gone gpuscopes removed first). */
int inj_make_dir(const char *base, char *out, size_t n);
/* A session directory and what is in it removed (flat: rings and the library). */
void inj_remove_dir(const char *dir);
bool inj_noexec(const char *dir);
/* The carried library written to path (new file), or written beside and renamed over. */
int inj_write_library(const char *path);
int inj_replace_library(const char *path);

/* inject_find.c */
/* A warning about one ring (at most RING_WARNINGS_PER_MIN a minute). */
void inject_warn(struct inject *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* New rings opened, or refused (full: the whole directory, not only what inotify said). */
void inject_scan(struct inject *in, bool full);

#endif
