// SPDX-License-Identifier: MIT
/*
 * The process's ring, and what every record carries.
 *
 * The ring is created at the first wrapped call, before the driver is called, so a process
 * that never uses CUDA (a shell the program starts, say) costs nothing, and the ring is
 * there before the driver sees the call (the agent, which also probes libcuda from the
 * kernel, knows from it which calls the ring has). A forked child creates its own. Rings
 * are found by their names in the session's directory: <pid>.ring, or with the agent,
 * where processes of several pid namespaces meet, <pid>-<random>.ring.
 *
 * Owns the per-thread state every file reads: the thread's id and how deep it is in our
 * wrappers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/shmring.h"
#include "inject/inject.h"

bool gs_active GS_HIDDEN GS_HOT;
bool gs_ab_norecord GS_HIDDEN GS_HOT;
__thread int gs_depth GS_HIDDEN __attribute__((tls_model("initial-exec")));

static struct {
	char dir[PATH_MAX];
	__u64 ring_bytes;
	bool agent;	/* the node agent's directory, not a gpuscope run's session */
	bool exit_wait; /* wait_claimed registered */
	pthread_mutex_t lock;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* What every record reads. */
static struct {
	__u32 pid;
	int ring_state; /* 0 none yet, 1 ready, -1 failed; atomic */
	bool no_warm;	/* (ab.c's "+nowarm": gs_ring_warm does nothing) */
	struct shmring ring;
} R GS_HOT;

/* Where this thread's next record will likely go (the ring's head after its last). */
static __thread __u64 tl_next __attribute__((tls_model("initial-exec")));

static __thread __u32 tl_tid __attribute__((tls_model("initial-exec")));

bool gs_agent_locked(const char *dir)
{
	char path[PATH_MAX + 16];
	bool held;
	int fd;

	snprintf(path, sizeof(path), "%s/agent.lock", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	held = flock(fd, LOCK_SH | LOCK_NB) && errno == EWOULDBLOCK;
	close(fd); /* (drops the lock if we got it: then nobody is there) */
	return held;
}

/* With the agent, a ring is read only once the agent has seen a process of the file's owner
 * map it (docs/security.md). A short program may end before a busy agent has looked: at
 * exit, a process whose ring is not claimed yet gives the agent up to CLAIM_WAIT_MS, for as
 * long as the agent is there. (Once; nothing else ever waits for the agent.) */
#define CLAIM_WAIT_MS 1000

static void wait_claimed(void)
{
	if (__atomic_load_n(&R.ring_state, __ATOMIC_ACQUIRE) != 1 || R.pid != (__u32)getpid())
		return;
	for (int i = 0; i < CLAIM_WAIT_MS && !__atomic_load_n(&R.ring.h->claimed, __ATOMIC_ACQUIRE);
	     i++) {
		if (i % 100 == 0 && !gs_agent_locked(g.dir))
			return;
		usleep(1000);
	}
}

void gs_ring_init(const char *dir, bool agent, __u64 ring_bytes)
{
	snprintf(g.dir, sizeof(g.dir), "%s", dir);
	g.agent = agent;
	R.pid = (__u32)getpid();
	g.ring_bytes = ring_bytes;
	if (g.ring_bytes < GS_SHMRING_MIN || g.ring_bytes > GS_SHMRING_MAX ||
	    (g.ring_bytes & (g.ring_bytes - 1)))
		g.ring_bytes = 16ULL << 20;
}

void gs_ring_after_fork(void)
{
	/* The parent's ring stays mapped but is the parent's: make our own at the next record. */
	R.pid = (__u32)getpid();
	tl_tid = 0;
	__atomic_store_n(&R.ring_state, 0, __ATOMIC_RELEASE);
	pthread_mutex_init(&g.lock, NULL);
}

bool gs_thread(void *(*fn)(void *))
{
	sigset_t all, old;
	pthread_t th;
	bool ok;

	/* No signal of the program is ever delivered to our thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ok = pthread_create(&th, NULL, fn, NULL) == 0;
	if (ok)
		pthread_detach(th);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ok;
}

bool gs_nested(void)
{
	return gs_depth > 1;
}

static bool make_ring(void)
{
	char path[PATH_MAX + 32];
	int state;

	/* A call from a signal handler may have interrupted this very thread here: it must
	 * not wait for the lock (its record is lost, the only one that can be). */
	if (gs_nested()) {
		if (pthread_mutex_trylock(&g.lock))
			return false;
	} else {
		pthread_mutex_lock(&g.lock);
	}
	state = __atomic_load_n(&R.ring_state, __ATOMIC_ACQUIRE);
	if (state == 0) {
		int err = -ENOSPC;

		if (g.agent) {
			__u64 nonce = 0;

			if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce))
				nonce = gs_clock() ^ ((__u64)R.pid << 40);
			snprintf(path, sizeof(path), "%s/%u-%016llx.ring", g.dir, R.pid,
				 (unsigned long long)nonce);
		} else {
			snprintf(path, sizeof(path), "%s/%u.ring", g.dir, R.pid);
		}
		/* Where shared memory is short (a container's /dev/shm), a smaller ring. */
		for (__u64 n = g.ring_bytes; n >= GS_SHMRING_MIN && err == -ENOSPC; n /= 2)
			err = shmring_create(&R.ring, path, n, R.pid, gs_clock());
		state = err ? -1 : 1;
		__atomic_store_n(&R.ring_state, state, __ATOMIC_RELEASE);
		if (state == 1 && g.agent && !g.exit_wait) /* (a forked child inherits it) */
			g.exit_wait = atexit(wait_claimed) == 0;
	}
	pthread_mutex_unlock(&g.lock);
	return state == 1;
}

GS_HOT_FN void *gs_emit_reserve(__u32 size, __u16 type)
{
	int state = __atomic_load_n(&R.ring_state, __ATOMIC_ACQUIRE);
	void *rec;

	if (state < 0 || (state == 0 && !make_ring()) ||
	    __atomic_load_n(&gs_ab_norecord, __ATOMIC_RELAXED))
		return NULL;
	rec = shmring_reserve(&R.ring, size, type);
	/* (The head's line is this thread's own just now: its compare-and-swap.) */
	tl_next = __atomic_load_n(&R.ring.h->head, __ATOMIC_RELAXED);
	return rec;
}

/*
 * Before a launch's call: the lines its record will likely take, and the ring's head, asked
 * for now to write, from what this thread knows (nothing read that may miss). The driver's
 * call, microseconds, runs meanwhile; its record is written after it, when the program's
 * work since the last launch has evicted them (the record's part of a launch 93 ns on an
 * H200 guest back to back, 350-370 with 4 MiB written between launches: launch_cold.c).
 * A guess wrong (another thread's record came between) costs nothing but the prefetches.
 */
GS_HOT_FN void gs_ring_warm(void)
{
	const unsigned char *at;

	if (__atomic_load_n(&R.ring_state, __ATOMIC_ACQUIRE) != 1 ||
	    __atomic_load_n(&R.no_warm, __ATOMIC_RELAXED))
		return;
	at = R.ring.data + (tl_next & R.ring.mask);
	__builtin_prefetch(&R.ring.h->head, 1, 3);
	__builtin_prefetch(at, 1, 3);
	__builtin_prefetch(at + 64, 1, 3);
}

void gs_ab_prefetch(bool on, bool warm)
{
	__atomic_store_n(&R.ring.no_prefetch, !on, __ATOMIC_RELAXED);
	__atomic_store_n(&R.no_warm, !warm, __ATOMIC_RELAXED);
}

GS_HOT_FN void gs_ring_prepare(void)
{
	if (__atomic_load_n(&R.ring_state, __ATOMIC_ACQUIRE) == 0)
		make_ring();
}

GS_HOT_FN void gs_emit_commit(void *rec)
{
	shmring_commit(&R.ring, rec);
}

GS_HOT_FN __u32 gs_self_tid(void)
{
	if (!tl_tid)
		tl_tid = (__u32)syscall(SYS_gettid);
	return tl_tid;
}

GS_HOT_FN void gs_fill_hdr(struct gs_hdr *h, __u16 type, __u32 size, __u64 ts)
{
	gs_self_tid();
	h->type = type;
	h->source = GS_SRC_INJECT;
	h->flags = 0;
	h->size = size;
	h->ts = ts;
	h->pid = R.pid;
	h->tid = tl_tid;
}

/* A name record: handle (of scope) is named name, by api, at ts. */
void gs_emit_kname(__u64 handle, __u64 scope, const char *name, unsigned int api, __u64 ts)
{
	size_t len = name ? strnlen(name, GS_NAME_MAX - 1) : 0;
	__u32 size = (__u32)((offsetof(struct gs_ev_kname, name) + len + 1 + 7) & ~(size_t)7);
	struct gs_ev_kname *e = gs_emit_reserve(size, GS_EV_KNAME);

	if (!e)
		return;
	gs_fill_hdr(&e->h, GS_EV_KNAME, size, ts);
	e->handle = handle;
	e->scope = scope;
	e->name_addr = (__u64)(unsigned long)name;
	e->api = (__u16)api;
	e->len = (__u16)len;
	e->ns = GS_NS_DRIVER;
	e->truncated = name && name[len] != 0;
	e->pad = 0;
	memcpy(e->name, name ? name : "", len);
	e->name[len] = 0;
	gs_emit_commit(e);
}

void gs_count_gate_forced(void)
{
	if (__atomic_load_n(&R.ring_state, __ATOMIC_ACQUIRE) == 1)
		__atomic_fetch_add(&R.ring.h->gates_forced, 1, __ATOMIC_RELAXED);
}

void gs_count_time_capped(void)
{
	if (__atomic_load_n(&R.ring_state, __ATOMIC_ACQUIRE) == 1)
		__atomic_fetch_add(&R.ring.h->time_capped, 1, __ATOMIC_RELAXED);
}

void gs_count_time_lost(void)
{
	if (__atomic_load_n(&R.ring_state, __ATOMIC_ACQUIRE) == 1)
		__atomic_fetch_add(&R.ring.h->time_lost, 1, __ATOMIC_RELAXED);
}

void gs_count_unwrapped(void)
{
	if (gs_active && (__atomic_load_n(&R.ring_state, __ATOMIC_ACQUIRE) == 1 || make_ring()))
		__atomic_fetch_add(&R.ring.h->unwrapped, 1, __ATOMIC_RELAXED);
}
