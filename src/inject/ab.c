// SPDX-License-Identifier: MIT
/*
 * Measurements only (bench/inject_ab.sh): modes compared inside one process, since
 * between processes the GPU machines vary 10-35% and a launch's cost is a few percent.
 * GPUSCOPE_AB_FILE names a file whose first word says what the plane does from now on:
 *   pass      every wrapper only forwards to the driver, as when no session is there;
 *   off       records, no GPU time (--gpu-time=off);
 *   N         every Nth launch of each kernel timed (--gpu-time=N);
 *   all       every launch timed (--gpu-time's default);
 *   nofollow  every launch timed, a pair each on busy streams too (GPUSCOPE_NO_FOLLOW);
 * any of the last four followed by "+stacks=N" (a stack every Nth launch, --stacks; 0 none)
 * or "+rate=N" (at most N launches' stacks a second a thread, GPUSCOPE_STACK_RATE; 0 no
 * limit) or "+norecord" (every record given up before the ring: what writing them costs),
 * in any number; what is not given is as at the start.
 * A thread of ours reads the file every millisecond. A file that is missing or says anything
 * else changes nothing. The benchmark writes the file (by rename, whole) and waits a few
 * milliseconds before it times a window.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "inject/gputime.h"
#include "inject/inject.h"

static const char *ab_file;

static void apply(char *word)
{
	__u32 every = gs_stacks_start.every, rate = gs_stacks_start.rate;
	char *opt = strchr(word, '+');
	bool norecord = false;

	if (!strcmp(word, "pass")) {
		__atomic_store_n(&gs_active, false, __ATOMIC_RELAXED);
		return;
	}
	for (char *next; opt; opt = next) {
		*opt++ = 0;
		next = strchr(opt, '+');
		if (!strncmp(opt, "stacks=", 7))
			every = (__u32)strtoul(opt + 7, NULL, 10);
		else if (!strncmp(opt, "rate=", 5))
			rate = (__u32)strtoul(opt + 5, NULL, 10);
		else if (!strcmp(opt, "norecord"))
			norecord = true;
		else
			return;
	}
	if (!gs_timing_switch(word))
		return;
	gs_stacks_set(every, rate);
	__atomic_store_n(&gs_ab_norecord, norecord, __ATOMIC_RELAXED);
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
				apply(buf);
				memcpy(last, buf, sizeof(last));
			}
		}
		nanosleep(&nap, NULL);
	}
	return NULL;
}

void gs_ab_init(void)
{
	ab_file = getenv("GPUSCOPE_AB_FILE");
	if (ab_file && *ab_file)
		gs_thread(ab_thread);
}
