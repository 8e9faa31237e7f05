// SPDX-License-Identifier: MIT
/* The live one-line status on stderr: overwritten in place on a terminal, a line a second
 * otherwise (logs). */
#include <stdio.h>

#include "analysis/report.h"
#include "core/util.h"
#include "sink/sinks.h"

void status__line(struct status *s, FILE *f, const struct model *m, __u64 drops, __u64 now)
{
	char rate[32], mem[32], bytes[32], peak[32];
	double dt = s->ts ? (double)(now - s->ts) / 1e9 : 0;

	if (dt <= 0) {
		s->ts = now;
		s->launches = m->launches;
		return;
	}
	fmt_count(rate, sizeof(rate), (double)(m->launches - s->launches) / dt);
	fmt_bytes(mem, sizeof(mem), (double)m->in_use[MK_DEVICE]);
	fmt_bytes(peak, sizeof(peak), (double)m->peak[MK_DEVICE]);
	fmt_bytes(bytes, sizeof(bytes), (double)m->copy_bytes);
	fprintf(f,
		"%sgpuscope: %s launches/s | %llu launches | device mem %s (peak %s) | "
		"copied %s | %llu procs | drops %llu",
		s->tty ? "\r\033[K" : "", rate, (unsigned long long)m->launches, mem, peak, bytes,
		(unsigned long long)m->procs.len, (unsigned long long)drops);
	/* The memory analyses' findings, once there are any. */
	if (m->leak_sites)
		fprintf(f, " | LEAK suspected at %llu site%s", (unsigned long long)m->leak_sites,
			m->leak_sites == 1 ? "" : "s");
	if (m->ooms_total)
		fprintf(f, " | OOM %llu (last: %s)", (unsigned long long)m->ooms_total,
			oom_cause_name(m->last_oom.cause));
	fputs(s->tty ? "" : "\n", f);
	fflush(f);
	s->printed = true;
	s->ts = now;
	s->launches = m->launches;
	s->copy_bytes = m->copy_bytes;
	s->events = m->events;
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
