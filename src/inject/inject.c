// SPDX-License-Identifier: MIT
/*
 * Activation and the process's ring.
 *
 * The library acts only if a gpuscope session is really there. Two kinds:
 *   - `gpuscope run --inject`: the session directory named by GPUSCOPE_INJECT_DIR exists and
 *     belongs to this user, and the gpuscope process named by GPUSCOPE_PID is alive;
 *   - the node agent (`gpuscope exporter --inject-dir DIR`, no GPUSCOPE_PID): DIR belongs to
 *     root or to this user (sticky if others may write it) and the agent holds the lock on
 *     DIR/agent.lock. A lock rather than a pid: the agent's pid means nothing in a
 *     container's pid namespace, and a lock dies with its holder.
 * It never acts in a setuid or otherwise secure-execution program. Inactive, every wrapper
 * only forwards to the driver.
 *
 * The ring is created at the first wrapped call, before the driver is called, so a process
 * that never uses CUDA (a shell the program starts, say) costs nothing, and the ring is
 * there before the driver sees the call (the agent, which also probes libcuda from the
 * kernel, knows from it which calls the ring has). A forked child creates its own. Rings
 * are found by their names in the directory: <pid>.ring, or with the agent, where
 * processes of several pid namespaces meet, <pid>-<random>.ring.
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
#include <sys/file.h>
#include <sys/random.h>
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
	bool agent; /* the node agent's directory, not a gpuscope run's session */
	struct shmring ring;
	int ring_state; /* 0 none yet, 1 ready, -1 failed; atomic */
	pthread_mutex_t lock;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread __u32 tl_tid __attribute__((tls_model("initial-exec")));

/* The agent holds an exclusive lock on DIR/agent.lock for as long as it runs. */
static bool agent_alive(const char *dir, const struct stat *st)
{
	char path[PATH_MAX];
	bool alive;
	int fd;

	if (st->st_uid != 0 && st->st_uid != geteuid())
		return false;
	if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX))
		return false;
	snprintf(path, sizeof(path), "%s/agent.lock", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	alive = flock(fd, LOCK_SH | LOCK_NB) && errno == EWOULDBLOCK;
	close(fd); /* (drops the lock if we got it: then nobody is there) */
	return alive;
}

static bool session_alive(void)
{
	const char *dir = getenv("GPUSCOPE_INJECT_DIR");
	const char *pid = getenv("GPUSCOPE_PID");
	struct stat st;
	long gs_pid;

	if (!dir || strlen(dir) >= sizeof(g.dir) - 64)
		return false;
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return false;
	if (!pid || !*pid) {
		if (!agent_alive(dir, &st))
			return false;
		strcpy(g.dir, dir);
		g.agent = true;
		return true;
	}
	if (st.st_uid != geteuid())
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
	gs_probe_after_fork();
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
	gs_probe_init();
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

		if (g.agent) {
			__u64 nonce = 0;

			if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce))
				nonce = gs_clock() ^ ((__u64)g.pid << 40);
			snprintf(path, sizeof(path), "%s/%u-%016llx.ring", g.dir, g.pid,
				 (unsigned long long)nonce);
		} else {
			snprintf(path, sizeof(path), "%s/%u.ring", g.dir, g.pid);
		}
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

void gs_ring_prepare(void)
{
	if (__atomic_load_n(&g.ring_state, __ATOMIC_ACQUIRE) == 0)
		make_ring();
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
