// SPDX-License-Identifier: MIT
/*
 * Activation and the process's ring.
 *
 * The library acts only if a gpuscope session is really there: the session directory named
 * by GPUSCOPE_INJECT_DIR exists and belongs to this user, and the gpuscope process named by
 * GPUSCOPE_PID is alive. It never acts in a setuid or otherwise secure-execution program.
 * Inactive, every wrapper only forwards to the driver.
 *
 * The ring is created at the first record, so a process that never uses CUDA (a shell the
 * program starts, say) costs nothing; a forked child creates its own. gpuscope finds rings
 * by their names, <pid>.ring, in the session directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/shmring.h"
#include "inject/gputime.h"
#include "inject/inject.h"

bool gs_active GS_HIDDEN;

static struct {
	char dir[PATH_MAX];
	__u64 ring_bytes;
	__u32 pid;
	struct shmring ring;
	int ring_state; /* 0 none yet, 1 ready, -1 failed; atomic */
	pthread_mutex_t lock;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread __u32 tl_tid __attribute__((tls_model("initial-exec")));

static bool session_alive(void)
{
	const char *dir = getenv("GPUSCOPE_INJECT_DIR");
	const char *pid = getenv("GPUSCOPE_PID");
	struct stat st;
	long gs_pid;

	if (!dir || !pid || strlen(dir) >= sizeof(g.dir) - 32)
		return false;
	if (stat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return false;
	gs_pid = strtol(pid, NULL, 10);
	if (gs_pid <= 0 || (kill((pid_t)gs_pid, 0) && errno != EPERM))
		return false;
	strcpy(g.dir, dir);
	return true;
}

static void after_fork_child(void)
{
	/* The parent's ring stays mapped but is the parent's: make our own at the next record. */
	g.pid = (__u32)getpid();
	tl_tid = 0;
	__atomic_store_n(&g.ring_state, 0, __ATOMIC_RELEASE);
	pthread_mutex_init(&g.lock, NULL);
	gs_timing_after_fork();
}

__attribute__((constructor)) static void gs_inject_init(void)
{
	const char *bytes = getenv("GPUSCOPE_RING_BYTES");

	if (getauxval(AT_SECURE) || gs_resolve_other_copy() || !session_alive())
		return;
	gs_clock_init();
	g.pid = (__u32)getpid();
	g.ring_bytes = bytes ? strtoull(bytes, NULL, 10) : 16ULL << 20;
	if (g.ring_bytes < GS_SHMRING_MIN || g.ring_bytes > GS_SHMRING_MAX ||
	    (g.ring_bytes & (g.ring_bytes - 1)))
		g.ring_bytes = 16ULL << 20;
	gs_resolve_init();
	gs_timing_init(getenv("GPUSCOPE_GPU_TIME"));
	gs_stacks_init(getenv("GPUSCOPE_STACKS"));
	pthread_atfork(NULL, NULL, after_fork_child);
	gs_active = true;
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
	state = __atomic_load_n(&g.ring_state, __ATOMIC_ACQUIRE);
	if (state == 0) {
		int err = -ENOSPC;

		snprintf(path, sizeof(path), "%s/%u.ring", g.dir, g.pid);
		/* Where shared memory is short (a container's /dev/shm), a smaller ring. */
		for (__u64 n = g.ring_bytes; n >= GS_SHMRING_MIN && err == -ENOSPC; n /= 2)
			err = shmring_create(&g.ring, path, n, g.pid, gs_clock());
		state = err ? -1 : 1;
		__atomic_store_n(&g.ring_state, state, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&g.lock);
	return state == 1;
}

void *gs_emit_reserve(__u32 size, __u16 type)
{
	int state = __atomic_load_n(&g.ring_state, __ATOMIC_ACQUIRE);

	if (state < 0 || (state == 0 && !make_ring()))
		return NULL;
	return shmring_reserve(&g.ring, size, type);
}

void gs_emit_commit(void *rec)
{
	shmring_commit(&g.ring, rec);
}

void gs_fill_hdr(struct gs_hdr *h, __u16 type, __u32 size, __u64 ts)
{
	if (!tl_tid)
		tl_tid = (__u32)syscall(SYS_gettid);
	h->type = type;
	h->source = GS_SRC_INJECT;
	h->flags = 0;
	h->size = size;
	h->ts = ts;
	h->pid = g.pid;
	h->tid = tl_tid;
}

void gs_count_gate_forced(void)
{
	if (__atomic_load_n(&g.ring_state, __ATOMIC_ACQUIRE) == 1)
		__atomic_fetch_add(&g.ring.h->gates_forced, 1, __ATOMIC_RELAXED);
}

void gs_count_unwrapped(void)
{
	if (gs_active && (__atomic_load_n(&g.ring_state, __ATOMIC_ACQUIRE) == 1 || make_ring()))
		__atomic_fetch_add(&g.ring.h->unwrapped, 1, __ATOMIC_RELAXED);
}
