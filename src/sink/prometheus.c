// SPDX-License-Identifier: MIT
/* Prometheus text exposition (see prometheus.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sink/prometheus.h"

void prom_labels_add(struct prom_labels *ls, const char *name, const char *value)
{
	if (ls->n < PROM_MAX_LABELS && value)
		ls->l[ls->n++] = (struct prom_label){ name, value };
}

/* HELP text: backslash and newline escaped; a label value (quoted): double quotes too. */
static void escaped(struct strbuf *sb, const char *s, bool quoted)
{
	for (; *s; s++) {
		if (*s == '\\')
			sb_puts(sb, "\\\\");
		else if (*s == '"' && quoted)
			sb_puts(sb, "\\\"");
		else if (*s == '\n')
			sb_puts(sb, "\\n");
		else
			sb_putc(sb, *s);
	}
}

void prom_family(struct strbuf *sb, const char *name, const char *type, const char *help)
{
	sb_printf(sb, "# HELP %s ", name);
	escaped(sb, help, false);
	sb_printf(sb, "\n# TYPE %s %s\n", name, type);
}

/* %.17g always reads back exactly; shorter when a shorter form does ("0.5", not
 * "0.50000000000000000"). The C locale is the program's (it never calls setlocale). */
void prom_value(struct strbuf *sb, double v)
{
	char buf[40];

	if (isnan(v)) {
		sb_puts(sb, "NaN");
		return;
	}
	if (isinf(v)) {
		sb_puts(sb, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	/* Whole numbers as such (power in mW, bytes, counts): "81920", not "8.192e+04". */
	if (v == (double)(long long)v && fabs(v) < 9007199254740992.0) {
		sb_printf(sb, "%lld", (long long)v);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	sb_puts(sb, buf);
}

static void labels(struct strbuf *sb, const struct prom_labels *ls, const char *extra_name,
		   const char *extra_value, const char *le)
{
	bool any = false;

	for (int i = 0; ls && i < ls->n; i++) {
		sb_printf(sb, "%s%s=\"", any ? "," : "{", ls->l[i].name);
		escaped(sb, ls->l[i].value, true);
		sb_putc(sb, '"');
		any = true;
	}
	if (extra_name && extra_value) {
		sb_printf(sb, "%s%s=\"", any ? "," : "{", extra_name);
		escaped(sb, extra_value, true);
		sb_putc(sb, '"');
		any = true;
	}
	if (le) {
		sb_printf(sb, "%sle=\"%s\"", any ? "," : "{", le);
		any = true;
	}
	if (any)
		sb_putc(sb, '}');
}

void prom_sample(struct strbuf *sb, const char *name, const struct prom_labels *ls,
		 const char *extra_name, const char *extra_value, double v)
{
	sb_puts(sb, name);
	labels(sb, ls, extra_name, extra_value, NULL);
	sb_putc(sb, ' ');
	prom_value(sb, v);
	sb_putc(sb, '\n');
}

void prom_histogram(struct strbuf *sb, const char *name, const struct prom_labels *ls,
		    const double *le, const __u64 *counts, int n, double sum)
{
	struct strbuf b = { 0 };
	__u64 total = 0;

	for (int i = 0; i <= n; i++) {
		total += counts[i];
		sb_reset(&b);
		if (i < n)
			prom_value(&b, le[i]);
		else
			sb_puts(&b, "+Inf");
		sb_printf(sb, "%s_bucket", name);
		labels(sb, ls, NULL, NULL, b.buf);
		sb_printf(sb, " %llu\n", (unsigned long long)total);
	}
	sb_printf(sb, "%s_sum", name);
	labels(sb, ls, NULL, NULL, NULL);
	sb_putc(sb, ' ');
	prom_value(sb, sum);
	sb_printf(sb, "\n%s_count", name);
	labels(sb, ls, NULL, NULL, NULL);
	sb_printf(sb, " %llu\n", (unsigned long long)total);
	sb_free(&b);
}
