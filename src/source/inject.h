/* SPDX-License-Identifier: MIT */
/*
 * gpuscope's side of the in-process plane, a source of the session (the library that runs
 * inside the traced program is src/inject/).
 *
 * A session directory holds the library, written out from the copy gpuscope carries, and
 * one ring per traced process (<pid>.ring, see core/shmring.h). The traced command gets
 * LD_PRELOAD and the variables that tell the library where the session is; the source finds
 * the rings as they appear and drains them into the stream. A process is held in the stream
 * (core/stream.h) until its ring is read to the end, or until it exited with none, so that
 * nothing of it is retired before its last records are in.
 */
#ifndef GS_SOURCE_INJECT_H
#define GS_SOURCE_INJECT_H

#include <stdbool.h>
#include <sys/types.h>
#include "core/session.h"
#include "gpuscope/event.h"

struct inject;

struct inject_opts {
	__u32 gpu_time;	 /* 0 off, 1 every launch, N every Nth launch of a kernel */
	bool gpu_chains; /* with 1: consecutive launches chained (GPUSCOPE_GPU_TIME=chained) */
	bool gpu_cupti;	 /* with 1: kernels timed by CUPTI (GPUSCOPE_GPU_TIME=all) */
	bool gpu_cupti_graphs; /* ... graphs' too (GPUSCOPE_GPU_TIME=cupti) */
	bool device_code;      /* read the device code modules are loaded from (GPUSCOPE_DEVCODE) */
	/* device-side probes: the bundle (GPUSCOPE_PROBE) and where snapshots go
	 * (GPUSCOPE_PROBE_OUT), see ptx/bundle.h */
	const char *probe_bundle, *probe_out;
	__u64 ring_bytes;  /* per process */
	__u32 stack_every; /* call stacks: 0 none, else every Nth launch, allocations, failures */
	__u32 stack_rate;  /* at most this many launches' stacks a second a thread
			    * (GPUSCOPE_STACK_RATE, inject/stacks.c); 0 no limit */
	void *ctx;	   /* (for on_ring and traced) */
	/* The node agent's side (inject__open_agent). A ring is read once the process that
	 * maps it is found (its pid on this side of any pid namespace: its records get that
	 * pid); on_ring says when (created: when the ring appeared, on the process's clock)
	 * and when its reading ends. */
	void (*on_ring)(void *ctx, __u32 pid, __u64 created_ns, bool open);
	/* Records of calls made before the ring existed are left out (the kernel's probes,
	 * which the agent also has, saw those). */
	bool skip_before_ring;
	/* A ring is attributed only with proof of its owner: its file belongs to the user the
	 * process runs as, and the process maps it; a `run` session also takes a ring of a
	 * process that is gone if the file belongs to the user it runs the command as (uid; 0
	 * with root) and `traced` says the pid was one of its processes (NULL: none). A
	 * session's directories are that user's (uid, gid), for it to make its rings there. */
	uid_t uid;
	gid_t gid;
	bool (*traced)(void *ctx, __u32 pid);
};

/* Create the session directory and write the library into it; a source of s. 0, or -1
 * with a message. */
int inject__open(struct session *s, const struct inject_opts *o, struct inject **out);
/*
 * The node agent's directory (gpuscope exporter --inject-dir): created if missing (mode
 * 1777, as /tmp: processes of any user put their rings there), the library written into
 * it for programs to preload, and DIR/agent.lock held while the agent runs (the library
 * acts only then). Rings of processes that are gone are read out and removed. 0, or -1
 * with a message.
 */
int inject__open_agent(struct session *s, const char *dir, const struct inject_opts *o,
		       struct inject **out);
/* The library's path (in the session or agent directory). */
const char *inject__library(const struct inject *in);
/* Rings being read now. */
size_t inject__rings(const struct inject *in);
/* (The session closes it: the session's rings and library removed; the agent's lock.) */
/* The environment for the traced command: `env` with LD_PRELOAD and the session's
 * variables set (NULL-terminated, allocated; free with inject__free_env). */
char **inject__env(const struct inject *in, char *const *env);
void inject__free_env(char **env);
/*
 * Deliver what the rings hold. With `scan`, look for new rings first. With `final`, the
 * processes are gone: a ring whose last record was never finished is counted lost.
 * Returns the number of records delivered.
 */
int inject__poll(struct inject *in, bool scan, bool final);
/* Wait up to timeout_ms for a ring to appear in the agent's directory: 1 if one may have. */
int inject__wait(struct inject *in, int timeout_ms);
/* Add the rings' drop counters to d (their drops, unwrapped entry points, lost rings). The
 * producers' counters are taken as the agent accepts them: never less than before, never
 * more than a process could have counted in the ring's life (RING_MAX_RATE a second). A
 * ring that was refused (no proof of its owner, over its user's share) counts as lost. */
void inject__drops(const struct inject *in, struct gs_ev_drops *d);

#endif
