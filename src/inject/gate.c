// SPDX-License-Identifier: MIT
/* Gates that hold a stream's work back until it is all queued (see gate.h). */
#include <linux/futex.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inject/gate.h"

#define CU_MEMHOSTREGISTER_PORTABLE  0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define CU_STREAM_WAIT_VALUE_GEQ     0x0

typedef int (*host_register_fn)(void *, size_t, unsigned int);
typedef int (*dev_ptr_fn)(__u64 *, void *, unsigned int);
typedef int (*wait32_fn)(__u64, __u64, __u32, unsigned int);
typedef int (*wait64_fn)(__u64, __u64, __u64, unsigned int);

#define MAX_GATES     16
#define WATCHDOG_NS   1000000ULL /* between passes over every gate */
#define WATCH_POLL_NS 10000ULL	 /* while a watched gate is closed */

static struct {
	wait32_fn wait32, wait32_ptsz;
	wait64_fn wait64, wait64_ptsz;
	/* The watcher's: every gate set up, and a word it sleeps on. */
	struct gs_gate *gates[MAX_GATES];
	int ngates;
	__u32 wake;
	int asleep; /* (atomic) the watcher sleeps with no held gate's deadline to wake it */
	bool watcher;
	pthread_mutex_t lock;
} G = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void *watch(void *arg);

static void start_watcher(void)
{
	if (gs_thread(watch))
		G.watcher = true;
}

static void *first(const char *a, const char *b)
{
	void *p = gs_real_by_name(a);

	return p ? p : gs_real_by_name(b);
}

bool gs_gate_init(struct gs_gate *g)
{
	host_register_fn host_register =
		(host_register_fn)first("cuMemHostRegister_v2", "cuMemHostRegister");
	dev_ptr_fn dev_ptr =
		(dev_ptr_fn)first("cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer");
	void *mem = NULL;

	g->host = NULL;
	G.wait32 = (wait32_fn)first("cuStreamWaitValue32_v2", "cuStreamWaitValue32");
	G.wait32_ptsz = (wait32_fn)first("cuStreamWaitValue32_v2_ptsz", "cuStreamWaitValue32_ptsz");
	G.wait64 = (wait64_fn)first("cuStreamWaitValue64_v2", "cuStreamWaitValue64");
	G.wait64_ptsz = (wait64_fn)first("cuStreamWaitValue64_v2_ptsz", "cuStreamWaitValue64_ptsz");
	if (!G.wait32_ptsz)
		G.wait32_ptsz = G.wait32;
	if (!G.wait64_ptsz)
		G.wait64_ptsz = G.wait64;
	if (!host_register || !dev_ptr || (!G.wait32 && !G.wait64))
		return false;
	/* A page of our own, registered: not an allocation the program would see. It stays
	 * for the life of the process (a late gate may still read it). */
	if (posix_memalign(&mem, 4096, 4096))
		return false;
	memset(mem, 0, 4096);
	if (host_register(mem, 4096, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP)) {
		free(mem);
		return false;
	}
	if (dev_ptr(&g->dev, mem, 0))
		return false; /* (registered: it stays) */
	*(volatile __u64 *)mem = 0;
	g->wide = G.wait64 != NULL;
	pthread_mutex_lock(&G.lock);
	if (!G.watcher)
		start_watcher();
	if (G.watcher && G.ngates < MAX_GATES) {
		g->host = mem;
		G.gates[G.ngates] = g;
		__atomic_store_n(&G.ngates, G.ngates + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&G.lock);
	return g->host != NULL; /* (without a watcher, no gates: the page stays registered) */
}

void gs_gate_close(struct gs_gate *g, __u64 stream, bool ptsz, __u64 *seq)
{
	__u64 s;
	int r;

	*seq = 0;
	/* Always, not only when the stream looks idle: a busy stream often drains before the
	 * start event is reached (measured on an H200: 4 of 5 launches of a 2 us kernel
	 * looked busy, and were then timed 2 us too long). On a stream that is really busy
	 * the gate is open long before the GPU gets to it. */
	if (!g->host || g->off)
		return;
	s = __atomic_add_fetch(&g->issued, 1, __ATOMIC_ACQ_REL);
	if (g->wide)
		r = (ptsz ? G.wait64_ptsz : G.wait64)(stream, g->dev, s, CU_STREAM_WAIT_VALUE_GEQ);
	else
		r = (ptsz ? G.wait32_ptsz : G.wait32)(stream, g->dev, (__u32)s,
						      CU_STREAM_WAIT_VALUE_GEQ);
	if (r == 0) {
		*seq = s;
		return;
	}
	gs_gate_open(g, s); /* nobody waits on it: keep the value level with what was issued */
	/* This one goes ungated; where the operation is not supported, so will the rest. */
	if (r == 801 /* CUDA_ERROR_NOT_SUPPORTED */ && g->wide && G.wait32)
		g->wide = false;
	else if (r == 801)
		g->off = true;
}

bool gs_gate_open(struct gs_gate *g, __u64 seq)
{
	__u64 cur;
	bool held;

	if (!seq)
		return false;
	cur = __atomic_load_n(g->host, __ATOMIC_ACQUIRE);
	held = cur < seq;
	/* Raise only: another thread may have opened a later gate already. With 32-bit
	 * gates the device compares the low half, which is what a 64-bit store raises too. */
	while (cur < seq && !__atomic_compare_exchange_n(g->host, &cur, seq, true, __ATOMIC_RELEASE,
							 __ATOMIC_ACQUIRE))
		;
	return held;
}

void gs_gate_watch(struct gs_gate *g, __u64 seq, __u64 hold_ns)
{
	if (!seq)
		return;
	pthread_mutex_lock(&G.lock);
	/* The earlier watched gate is open: this one's hold starts now (else it shares the
	 * earlier deadline, and may be opened a little early: then it is timed as ungated). */
	if (__atomic_load_n(g->host, __ATOMIC_ACQUIRE) >= g->watch_seq)
		__atomic_store_n(&g->watch_deadline, gs_clock() + hold_ns, __ATOMIC_RELAXED);
	if (seq > g->watch_seq)
		__atomic_store_n(&g->watch_seq, seq, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&G.lock);
	__atomic_add_fetch(&G.wake, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &G.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void gs_gate_hold(struct gs_gate *g, __u64 seq, __u64 deadline)
{
	__atomic_store_n(&g->hold_deadline, deadline, __ATOMIC_RELAXED);
	__atomic_store_n(&g->hold_seq, seq, __ATOMIC_RELEASE);
	/* (A watcher about to sleep sees the word changed; one asleep needs the system call,
	 * once a sleep, not once a chain.) */
	__atomic_add_fetch(&G.wake, 1, __ATOMIC_RELEASE);
	if (__atomic_exchange_n(&G.asleep, 0, __ATOMIC_ACQ_REL))
		syscall(SYS_futex, &G.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* A held gate still closed: opened at its deadline; else that deadline (0: none left). */
static __u64 held(struct gs_gate *g, __u64 now)
{
	__u64 seq = __atomic_load_n(&g->hold_seq, __ATOMIC_ACQUIRE);
	__u64 deadline = __atomic_load_n(&g->hold_deadline, __ATOMIC_RELAXED);

	if (!seq || __atomic_load_n(g->host, __ATOMIC_ACQUIRE) >= seq)
		return 0;
	if (now < deadline)
		return deadline;
	gs_gate_open(g, seq);
	return 0;
}

static void force_open(struct gs_gate *g, __u64 seq)
{
	if (gs_gate_open(g, seq)) {
		g->forced++;
		gs_count_gate_forced();
	}
}

/* Open a gate found closed at the same value as on the previous pass. */
static void watchdog(struct gs_gate *g)
{
	__u64 issued, cur;

	issued = __atomic_load_n(&g->issued, __ATOMIC_ACQUIRE);
	cur = __atomic_load_n(g->host, __ATOMIC_ACQUIRE);
	if (cur >= issued) {
		g->stuck_seen = 0;
		return;
	}
	/* Closed now and already on the previous pass, at the same value: open them all. */
	if (g->stuck_seen == cur + 1) {
		force_open(g, issued);
		g->stuck_seen = 0;
		return;
	}
	g->stuck_seen = cur + 1;
}

/* A watched gate still closed: open it when its hold is over. True while it is not. */
static bool watched(struct gs_gate *g, __u64 now)
{
	__u64 seq = __atomic_load_n(&g->watch_seq, __ATOMIC_ACQUIRE);

	if (!seq || __atomic_load_n(g->host, __ATOMIC_ACQUIRE) >= seq)
		return false;
	if (now < __atomic_load_n(&g->watch_deadline, __ATOMIC_RELAXED))
		return true;
	force_open(g, seq);
	return false;
}

/*
 * The watcher: never a driver call, never a lock a driver call could be holding up. Sleeps
 * until a watched gate is closed (then polls it every 10 us) or the next watchdog pass.
 */
static void *watch(void *arg)
{
	const char *env = getenv("GPUSCOPE_WATCHDOG_US"); /* (for tests and measurements) */
	__u64 pass_ns = env && atoi(env) >= 100 && atoi(env) <= 1000000 ? (__u64)atoi(env) * 1000
									: WATCHDOG_NS;
	__u64 last_pass = 0;

	(void)arg;
	prctl(PR_SET_NAME, GS_THREAD_PREFIX "watch"); /* (the OS plane leaves ours out) */
	prctl(PR_SET_TIMERSLACK, 1000UL); /* the 50 us default would triple a 10 us nap */
	for (;;) {
		__u32 w = __atomic_load_n(&G.wake, __ATOMIC_ACQUIRE);
		int n = __atomic_load_n(&G.ngates, __ATOMIC_ACQUIRE);
		__u64 now = gs_clock(), next = 0, d, sleep_ns = pass_ns;
		bool polling = false;
		struct timespec nap;

		for (int i = 0; i < n; i++) {
			polling |= watched(G.gates[i], now);
			d = held(G.gates[i], now);
			if (d && (!next || d < next))
				next = d;
		}
		if (now - last_pass >= pass_ns) {
			for (int i = 0; i < n; i++)
				watchdog(G.gates[i]);
			last_pass = now;
		}
		if (polling) {
			nap = (struct timespec){ 0, (long)WATCH_POLL_NS };
			nanosleep(&nap, NULL);
			continue;
		}
		/* Until the next held gate's deadline, or the next pass (then asleep: a new
		 * hold wakes it). Woken early by gs_gate_watch or gs_gate_hold; the word
		 * changed since it was read: no sleep. */
		if (next && next - now < sleep_ns)
			sleep_ns = next - now;
		else
			__atomic_store_n(&G.asleep, 1, __ATOMIC_RELEASE);
		nap = (struct timespec){ (long)(sleep_ns / 1000000000ULL),
					 (long)(sleep_ns % 1000000000ULL) };
		syscall(SYS_futex, &G.wake, FUTEX_WAIT_PRIVATE, w, &nap, NULL, 0);
		__atomic_store_n(&G.asleep, 0, __ATOMIC_RELEASE);
	}
	return NULL;
}

void gs_gate_after_fork(void)
{
	pthread_mutex_init(&G.lock, NULL);
	G.ngates = 0;
	G.watcher = false;
	G.wake = 0;
	G.asleep = 0;
}
