// SPDX-License-Identifier: MIT
/* The live one-line status on stderr: overwritten in place on a terminal, a line a second
 * otherwise (logs). */
#include <stdio.h>

#include "core/util.h"
#include "sink/sinks.h"

void status__line(struct status *s, FILE *f, const struct analyses *a, __u64 drops, __u64 now)
{
	char rate[32], mem[32], bytes[32], peak[32];
	double dt = s->ts ? (double)(now - s->ts) / 1e9 : 0;
	struct model_counters c;
	__u64 leak_sites, ooms;
	unsigned int last_cause;

	model__counters(a->model, &c);
	if (dt <= 0) {
		s->ts = now;
		s->launches = c.launches;
		return;
	}
	memsites__status(a->memsites, &leak_sites, &ooms, &last_cause);
	fmt_count(rate, sizeof(rate), (double)(c.launches - s->launches) / dt);
	fmt_bytes(mem, sizeof(mem), (double)c.in_use[MK_DEVICE]);
	fmt_bytes(peak, sizeof(peak), (double)c.peak[MK_DEVICE]);
	fmt_bytes(bytes, sizeof(bytes), (double)c.copy_bytes);
	fprintf(f,
		"%sgpuscope: %s launches/s | %llu launches | device mem %s (peak %s) | "
		"copied %s | %llu procs | drops %llu",
		s->tty ? "\r\033[K" : "", rate, (unsigned long long)c.launches, mem, peak, bytes,
		(unsigned long long)c.procs, (unsigned long long)drops);
	/* The memory analyses' findings, once there are any. */
	if (leak_sites)
		fprintf(f, " | LEAK suspected at %llu site%s", (unsigned long long)leak_sites,
			leak_sites == 1 ? "" : "s");
	if (ooms)
		fprintf(f, " | OOM %llu (last: %s)", (unsigned long long)ooms,
			oom_cause_name(last_cause));
	fputs(s->tty ? "" : "\n", f);
	fflush(f);
	s->printed = true;
	s->ts = now;
	s->launches = c.launches;
	s->copy_bytes = c.copy_bytes;
	s->events = c.events;
	s->drops = drops;
}

void status__clear(struct status *s, FILE *f)
{
	if (s->tty && s->printed) {
		fputs("\r\033[K", f);
		fflush(f);
	}
	s->printed = false;
}
