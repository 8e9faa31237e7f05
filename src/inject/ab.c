// SPDX-License-Identifier: MIT
/*
 * Measurements only (bench/inject_ab.sh): modes compared inside one process, since
 * between processes the GPU machines vary 10-35% and a launch's cost is a few percent.
 * GPUSCOPE_AB_FILE names a file whose first word says what the plane does from now on:
 *   pass      every wrapper only forwards to the driver, as when no session is there;
 *   pass2     the same: a second control, whose windows against pass's say how far two
 *             windows of one mode differ on the machine (the noise a cost is read against);
 *   off       records, no GPU time (--gpu-time=off);
 *   N         every Nth launch of each kernel timed (--gpu-time=N);
 *   all       every kernel timed by CUPTI's records (--gpu-time's default), CUPTI's kind
 *             enabled only in such windows (cupti: the same);
 *   pairs     every launch timed by events, none by a carrier (--gpu-time=pairs; as
 *             without GPUSCOPE_CARRY=1);
 *   nofollow  every launch timed, a pair each on busy streams too (GPUSCOPE_NO_FOLLOW);
 *   carry     every launch timed, by carriers where they can (GPUSCOPE_CARRY=1);
 * any of the last four followed by "+stacks=N" (a stack every Nth launch, --stacks; 0 none)
 * or "+rate=N" (at most N launches' stacks a second a thread, GPUSCOPE_STACK_RATE; 0 no
 * limit) or "+trate=N" (with N, at most N launches timed a second a thread,
 * GPUSCOPE_TIME_RATE; 0 no limit) or "+budget=PPM" (with N, timed launches may cost the
 * process at most PPM millionths of its time, GPUSCOPE_TIME_BUDGET; 0 no limit) or
 * "+norecord" (every record given up before the ring: what writing them costs) or "+nopf"
 * (the ring's writer prefetches nothing at a record) or "+nowarm" (nor at a launch's start,
 * gs_ring_warm) or "+take=N" (CUPTI's records matched N at a time
 * under the queues' lock, 0 a buffer's) or "+gpause=N" (what graph launches switch off of
 * CUPTI's kinds: 1 kernels', 3 also copies' and sets' (the default), 0 none) or "+gevery" (under all,
 * every graph launch timed as a whole, not within the rate and budget) or "+resume" (what
 * graph launches switch off on again as each ends, not left off for the next) or "+nopool"
 * (CUPTI's buffers allocated and cleared in the program's threads, not from a pool) or
 * "+ask=MS" (our thread asks CUPTI for its completed records every MS ms) or "+libgcc"
 * (stacks unwound by glibc's backtrace(), not by unwind.c's kept rules) or "+pylist" (a
 * borrowed Python stack's thread looked up in the interpreter's list each time, the C frame
 * read by a call, no walk begun by reading the last one's windows again: the Python walk as
 * before 2026-11-29, but for its six windows, not two) or "+nomemo" (no thread's memo of its
 * last stacks: every frame's rule and every Python frame's name looked up in the tables, as
 * before 2026-11-29's memo) or "+carry" / "+pairs" (timed launches on idle
 * streams run by carriers, or gated pairs: N's sampled ones too), in any number; what is
 * not given is as at the start (or as the word says).
 * A thread of ours reads the file every millisecond. A file that is missing or says anything
 * else changes nothing. The benchmark writes the file (by rename, whole) and waits a few
 * milliseconds before it times a window.
 * With GPUSCOPE_AB_PHASES set, the parts of the launches' calls are timed (inject.h's
 * enum gs_phase), and at each switch, once the new mode holds, one line goes to FILE.phases:
 * the mode that ran, then per part how many and the ns they took.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "inject/gputime.h"
#include "inject/inject.h"

static const char *ab_file;
static __u32 trate_start, budget_start, take_start, ask_start;
static int gpause_start;
static bool gevery_start, resume_start, pool_start;

/* The parts' sums since the last switch, as one line after the mode they ran in. */
static void phases_write(const char *mode)
{
	char line[1024], path[4096];
	int n, fd;

	n = snprintf(line, sizeof(line), "%s", mode);
	for (int i = 0; i < GS_PH_N && n > 0 && n < (int)sizeof(line); i++) {
		__u64 count, ns;

		gs_phase_take((enum gs_phase)i, &count, &ns);
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %llu:%llu",
			      (unsigned long long)count, (unsigned long long)ns);
	}
	if (n <= 0 || n >= (int)sizeof(line) - 1 ||
	    snprintf(path, sizeof(path), "%s.phases", ab_file) >= (int)sizeof(path))
		return;
	line[n++] = '\n';
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) != n) {
		/* (a measurement's file: a short line is seen as one) */
	}
	close(fd);
}

struct num_opt {
	const char *name;
	long *v;
};

struct flag_opt {
	const char *name;
	bool *v, set;
};

/* One "+word" of a mode: a number's (NAME=N) or a switch's; false for anything else. */
static bool option(const char *opt, const struct num_opt *nums, size_t nn,
		   const struct flag_opt *flags, size_t nf)
{
	size_t len;

	for (size_t i = 0; i < nn; i++)
		if (!strncmp(opt, nums[i].name, len = strlen(nums[i].name)) && opt[len] == '=') {
			*nums[i].v = strtol(opt + len + 1, NULL, 10);
			return true;
		}
	for (size_t i = 0; i < nf; i++)
		if (!strcmp(opt, flags[i].name)) {
			*flags[i].v = flags[i].set;
			return true;
		}
	return false;
}

static void apply(char *word)
{
	long every = gs_stacks_start.every, rate = gs_stacks_start.rate, trate = trate_start;
	long budget = budget_start, take = take_start, ask = ask_start, gpause = gpause_start;
	bool gevery = gevery_start, resume = resume_start, pool = pool_start;
	char *opt = strchr(word, '+');
	bool norecord = false, nopf = false, libgcc = false, pylist = false, nomemo = false,
	     nowarm = false;
	int carriers = -1;
	const struct num_opt nums[] = { { "stacks", &every }, { "rate", &rate },
					{ "trate", &trate },  { "budget", &budget },
					{ "take", &take },    { "ask", &ask },
					{ "gpause", &gpause } };
	const struct flag_opt flags[] = {
		{ "gevery", &gevery, true }, { "resume", &resume, true },
		{ "nopool", &pool, false },  { "libgcc", &libgcc, true },
		{ "pylist", &pylist, true }, { "nomemo", &nomemo, true },
		{ "nowarm", &nowarm, true }, { "norecord", &norecord, true },
		{ "nopf", &nopf, true },
	};

	if (!strcmp(word, "pass") || !strcmp(word, "pass2")) {
		__atomic_store_n(&gs_active, false, __ATOMIC_RELAXED);
		gs_cupti_want(false); /* (CUPTI's records cost the driver's calls too) */
		return;
	}
	for (char *next; opt; opt = next) {
		*opt++ = 0;
		/* (Each word read whole: until 2026-11-29 a word followed by another was read
		 * with it, not known, and the mode ignored.) */
		if ((next = strchr(opt, '+')))
			*next = 0;
		if (!strcmp(opt, "carry") || !strcmp(opt, "pairs"))
			carriers = !strcmp(opt, "carry");
		else if (!option(opt, nums, sizeof(nums) / sizeof(nums[0]), flags,
				 sizeof(flags) / sizeof(flags[0])))
			return;
	}
	if (!gs_timing_switch(word))
		return;
	if (carriers >= 0)
		gs_timing_carriers(carriers);
	gs_stacks_set((__u32)every, (__u32)rate);
	gs_timing_rate((__u32)trate);
	gs_timing_budget((__u32)budget);
	gs_cupti_take_chunk((__u32)take);
	gs_cupti_pause_what((int)gpause);
	gs_timing_graphs_every(gevery);
	gs_cupti_resume_at_once(resume);
	gs_cupti_pool(pool);
	gs_cupti_ask_ms((__u32)ask);
	__atomic_store_n(&gs_ab_norecord, norecord, __ATOMIC_RELAXED);
	__atomic_store_n(&gs_unwind_libgcc, libgcc, __ATOMIC_RELAXED);
	__atomic_store_n(&gs_py_uncached, pylist, __ATOMIC_RELAXED);
	__atomic_store_n(&gs_memo_off, nomemo, __ATOMIC_RELAXED);
	gs_ab_prefetch(!nopf, !nowarm);
	__atomic_store_n(&gs_active, true, __ATOMIC_RELAXED);
}

static void *ab_thread(void *arg)
{
	char last[48] = "";

	(void)arg;
	prctl(PR_SET_NAME, GS_THREAD_PREFIX "ab"); /* (the OS plane leaves ours out) */
	for (;;) {
		struct timespec nap = { 0, 1000000 };
		char buf[48];
		ssize_t n = -1;
		int fd = open(ab_file, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
		}
		if (n > 0) {
			buf[n] = 0;
			buf[strcspn(buf, " \t\r\n")] = 0;
			if (strcmp(buf, last) != 0) {
				char ran[sizeof(last)];

				memcpy(ran, last, sizeof(last));
				/* (before apply, which cuts the word at its options) */
				memcpy(last, buf, sizeof(last));
				apply(buf);
				/* (after: a line there says the new mode holds) */
				if (gs_phases_on)
					phases_write(ran[0] ? ran : "start");
			}
		}
		nanosleep(&nap, NULL);
	}
	return NULL;
}

void gs_ab_init(void)
{
	ab_file = getenv("GPUSCOPE_AB_FILE");
	trate_start = gs_timing_rate_now();
	budget_start = gs_timing_budget_now();
	take_start = gs_cupti_take_chunk_now();
	gpause_start = gs_cupti_pause_what_now();
	gevery_start = gs_timing_graphs_every_now();
	resume_start = gs_cupti_resume_at_once_now();
	pool_start = gs_cupti_pool_now();
	ask_start = gs_cupti_ask_ms_now();
	if (ab_file && *ab_file && gs_thread(ab_thread))
		gs_phases_on = getenv("GPUSCOPE_AB_PHASES") != NULL;
}
