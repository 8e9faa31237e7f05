// SPDX-License-Identifier: MIT
/*
 * Activation: the library's constructor, and what a fork resets.
 *
 * The library acts only if a gpuscope session is really there. Two kinds:
 *   - `gpuscope run --inject`: the session directory named by GPUSCOPE_INJECT_DIR exists and
 *     belongs to this user, and the gpuscope process named by GPUSCOPE_PID is alive;
 *   - the node agent (`gpuscope exporter --inject-dir DIR`, no GPUSCOPE_PID): DIR belongs to
 *     root or to this user (sticky if others may write it) and the agent holds the lock on
 *     DIR/agent.lock. A lock rather than a pid: the agent's pid means nothing in a
 *     container's pid namespace, and a lock dies with its holder.
 * It never acts in a setuid or otherwise secure-execution program. Inactive, every wrapper
 * only forwards to the driver. The ring (ring.c) is made at the first wrapped call.
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
#include <sys/stat.h>
#include <unistd.h>

#include "inject/gputime.h"
#include "inject/inject.h"

/* The agent holds an exclusive lock on DIR/agent.lock for as long as it runs. */
static bool agent_alive(const char *dir, const struct stat *st)
{
	if (st->st_uid != 0 && st->st_uid != geteuid())
		return false;
	if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX))
		return false;
	return gs_agent_locked(dir);
}

/* The session's directory, if one is really there; agent: the node agent's. */
static bool session_alive(char *out, size_t size, bool *agent)
{
	const char *dir = getenv("GPUSCOPE_INJECT_DIR");
	const char *pid = getenv("GPUSCOPE_PID");
	struct stat st;
	long gs_pid;

	if (!dir || strlen(dir) >= size - 64)
		return false;
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return false;
	if (!pid || !*pid) {
		if (!agent_alive(dir, &st))
			return false;
		strcpy(out, dir);
		*agent = true;
		return true;
	}
	if (st.st_uid != geteuid())
		return false;
	gs_pid = strtol(pid, NULL, 10);
	if (gs_pid <= 0 || (kill((pid_t)gs_pid, 0) && errno != EPERM))
		return false;
	strcpy(out, dir);
	*agent = false;
	return true;
}

static void after_fork_child(void)
{
	gs_ring_after_fork();
	gs_timing_after_fork();
	gs_probe_after_fork();
	gs_py_after_fork();
	gs_stacks_after_fork();
	gs_wrap_after_fork();
}

__attribute__((constructor)) static void gs_inject_init(void)
{
	const char *bytes = getenv("GPUSCOPE_RING_BYTES");
	char dir[PATH_MAX];
	bool agent;

	if (getauxval(AT_SECURE) || gs_resolve_other_copy() ||
	    !session_alive(dir, sizeof(dir), &agent))
		return;
	gs_clock_init();
	gs_ring_init(dir, agent, bytes ? strtoull(bytes, NULL, 10) : 16ULL << 20);
	gs_resolve_init();
	gs_timing_init(getenv("GPUSCOPE_GPU_TIME"));
	gs_stacks_init(getenv("GPUSCOPE_STACKS"), getenv("GPUSCOPE_STACK_RATE"));
	gs_probe_init();
	pthread_atfork(NULL, NULL, after_fork_child);
	gs_active = true;
	gs_ab_init();
}
