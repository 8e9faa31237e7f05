// SPDX-License-Identifier: MIT
/*
 * What writing a launch's record into the in-process ring costs the launching thread, on
 * the machine it runs on (issue 22: the wrapper with timing off adds 0.2-0.7 us a launch on
 * the GPU guests against 0.1 us on the CPU machine, and giving every record up before the
 * ring (`+norecord`) took 0.1-0.3 us of it off, in windows too noisy to say which).
 *
 * A loop stands in for a launch: it reads and writes WORK_KIB of its own memory (a
 * driver's launch path touches a few dozen KiB) and runs SPIN dependent multiplications
 * (about a nanosecond each: 3000 make a launch's 3-4 us, so records come at a launch loop's
 * rate). Each variant adds one 96-byte launch
 * record a loop to it, written one way; rounds of one window per variant, the order turned
 * each round; per variant the median ns an iteration over the rounds and its excess over
 * "none":
 *   none        no record
 *   private64k  the record copied into a private 64 KiB buffer, round and round (in cache)
 *   private16m  the same into a private 16 MiB buffer (a stream through memory, no reader)
 *   ring16m     src/core/shmring.c's producer into a 16 MiB ring in /dev/shm, drained by a
 *               second process every 10 ms with shmring_drain (as `gpuscope run` does)
 *   ring1m      the same with a 1 MiB ring drained every 1 ms
 *   ring16m-1ms the 16 MiB ring drained every 1 ms
 *   ring16m-nopf  ring16m without the producer's prefetch of its next record's lines
 *   ring1m-nopf   ring1m without it
 *
 *   cc -O2 -Iinclude -Isrc bench/ring_cost.c src/core/shmring.c src/core/shmring_read.c \
 *      src/core/event.c -o ring_cost -lpthread && ./ring_cost [ROUNDS [ITERS [WORK_KIB [SPIN]]]]
 * Prints one JSON object.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/shmring.h"

enum {
	NONE,
	PRIV64K,
	PRIV16M,
	RING16M,
	RING1M,
	RING16M_1MS,
	RING16M_NOPF,
	RING1M_NOPF,
	NV
};
static const char *names[NV] = { "none",   "private64k",  "private16m",	  "ring16m",
				 "ring1m", "ring16m-1ms", "ring16m-nopf", "ring1m-nopf" };

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void drained(void *ctx, const struct gs_hdr *ev)
{
	(void)ev;
	++*(long *)ctx;
}

/* The reader: drains the ring every every_ms until its pipe closes, then once more. */
static void reader(const char *path, int every_ms, int fd)
{
	struct shmring r;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char err[160];
	long n = 0;
	bool busy;

	if (shmring_open(&r, path, err, sizeof(err)))
		_exit(2);
	for (;;) {
		int stop = poll(&p, 1, every_ms) > 0;

		if (shmring_drain(&r, drained, &n, &busy, err, sizeof(err)) < 0)
			_exit(3);
		if (stop)
			break;
	}
	_exit(0);
}

static void fill(struct gs_ev_launch *e, long i)
{
	memset(e, 0, sizeof(*e));
	e->h.type = GS_EV_LAUNCH;
	e->h.source = GS_SRC_INJECT;
	e->h.size = sizeof(*e);
	e->h.ts = (__u64)i;
	e->c.api = 1;
	e->func = 0x7f0000001000ULL;
	e->grid[0] = e->block[0] = 1;
}

static long spin;

static double window(int v, long iters, unsigned char *work, size_t work_bytes)
{
	static unsigned char *priv;
	size_t psize = v == PRIV64K ? 64 << 10 : 16 << 20, ppos = 0;
	struct shmring ring;
	char path[64];
	int pfd[2] = { -1, -1 };
	pid_t child = -1;
	struct gs_ev_launch rec;
	volatile unsigned sink = 0;
	volatile __u64 x = 1;
	double t0, t;

	if (!priv && !(priv = calloc(1, 16 << 20)))
		exit(1);
	fill(&rec, 0);
	if (v >= RING16M) {
		snprintf(path, sizeof(path), "/dev/shm/ring_cost-%d.ring", (int)getpid());
		unlink(path);
		if (shmring_create(&ring, path,
				   v == RING1M || v == RING1M_NOPF ? 1 << 20 : 16 << 20, getpid(),
				   0) ||
		    pipe(pfd))
			exit(1);
		ring.no_prefetch = v == RING16M_NOPF || v == RING1M_NOPF;
		child = fork();
		if (child == 0) {
			close(pfd[1]);
			reader(path, v == RING16M || v == RING16M_NOPF ? 10 : 1, pfd[0]);
		}
		close(pfd[0]);
	}
	t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		/* The stand-in launch: a read and a write of every line of its memory. */
		for (size_t k = 0; k < work_bytes; k += 64)
			sink += work[k]++;
		for (long k = 0; k < spin; k++)
			x = x * 6364136223846793005ULL + 1;
		rec.h.ts = (__u64)i;
		if (v == PRIV64K || v == PRIV16M) {
			memcpy(priv + ppos, &rec, sizeof(rec));
			ppos = (ppos + sizeof(rec) + 8) & (psize - 1);
			if (ppos + sizeof(rec) > psize)
				ppos = 0;
		} else if (v >= RING16M) {
			void *e = shmring_reserve(&ring, sizeof(rec), GS_EV_LAUNCH);

			if (e) {
				memcpy(e, &rec, sizeof(rec));
				shmring_commit(&ring, e);
			}
		}
	}
	t = (now_ns() - t0) / (double)iters;
	if (child > 0) {
		int st;
		__u64 drops = 0;

		close(pfd[1]);
		waitpid(child, &st, 0);
		for (int k = 0; k < GS_EV_MAX; k++)
			drops += ring.h->drops[k];
		if (!WIFEXITED(st) || WEXITSTATUS(st) || drops) {
			fprintf(stderr, "ring_cost: %s: reader status %d, %llu drops\n", names[v],
				st, (unsigned long long)drops);
			t = -1;
		}
		munmap(ring.map, ring.map_size);
		unlink(path);
	}
	return t;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 15;
	long iters = argc > 2 ? atol(argv[2]) : 50000;
	size_t work_bytes = (size_t)(argc > 3 ? atoi(argv[3]) : 32) << 10;
	unsigned char *work = calloc(1, work_bytes + 64);

	spin = argc > 4 ? atol(argv[4]) : 3000;
	double *t[NV], med[NV];

	if (rounds < 1 || rounds > 1000 || iters < 1000 || !work)
		return 1;
	for (int v = 0; v < NV; v++)
		if (!(t[v] = calloc((size_t)rounds, sizeof(double))))
			return 1;
	window(NONE, iters / 10, work, work_bytes);
	for (int r = 0; r < rounds; r++)
		for (int j = 0; j < NV; j++) {
			int v = (r + j) % NV;

			t[v][r] = window(v, iters, work, work_bytes);
		}
	printf("{\"rounds\": %d, \"iters\": %ld, \"work_kib\": %zu", rounds, iters,
	       work_bytes >> 10);
	for (int v = 0; v < NV; v++) {
		double ex[1000];

		for (int r = 0; r < rounds; r++)
			ex[r] = t[v][r] - t[NONE][r];
		qsort(ex, (size_t)rounds, sizeof(double), cmp);
		qsort(t[v], (size_t)rounds, sizeof(double), cmp);
		med[v] = t[v][rounds / 2];
		printf(", \"%s\": {\"ns\": %.1f, \"min\": %.1f, \"max\": %.1f, \"excess_ns\": "
		       "%.1f, "
		       "\"excess_min\": %.1f, \"excess_max\": %.1f}",
		       names[v], med[v], t[v][0], t[v][rounds - 1], ex[rounds / 2], ex[0],
		       ex[rounds - 1]);
	}
	printf("}\n");
	return 0;
}
