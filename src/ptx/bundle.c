// SPDX-License-Identifier: MIT
/* Probe bundles and snapshots (see bundle.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/util.h"
#include "ptx/bundle.h"
#include "ptx/translate.h"

#define MAX_BYTES (1ULL << 30) /* of one map */

bool bundle_ring_ok(unsigned int bytes)
{
	return bytes >= GS_RING_MIN && bytes <= GS_RING_MAX && !(bytes & (bytes - 1));
}

size_t bundle_map_bytes(const struct bundle_map *m)
{
	unsigned long long n;

	if (m->kind == GS_MAP_RING)
		n = GS_RING_CTL;
	else if (m->kind == GS_MAP_HASH)
		n = (unsigned long long)bpf_hash_slot(m->key_size, m->value_size) * m->max_entries;
	else if (m->kind == GS_MAP_PER_THREAD)
		n = (unsigned long long)m->value_size * m->max_entries * m->threads;
	else
		n = (unsigned long long)m->value_size * m->max_entries;
	return n > MAX_BYTES ? 0 : (size_t)n;
}

int bundle_write(const struct bundle *b, FILE *f)
{
	size_t n = strlen(b->funcs);

	fprintf(f, "gpuscope-probes 1\n");
	for (size_t i = 0; i < b->nmaps; i++) {
		const struct bundle_map *m = &b->maps[i];

		fprintf(f, "map %s %u %u %u %u %u %u\n", m->name, m->kind, m->key_size,
			m->value_size, m->max_entries, m->threads, m->shared);
	}
	for (size_t i = 0; i < b->nprobes; i++)
		fprintf(f, "probe %d %s %s\n", (int)b->probes[i].point, b->probes[i].kernel,
			b->probes[i].func);
	for (size_t i = 0; i < b->nhosts; i++) {
		const struct bundle_host *h = &b->hosts[i];

		fprintf(f, "host %d %s %zu\n", h->when, h->name, h->n);
		fwrite(h->insns, sizeof(*h->insns), h->n, f);
		fputc('\n', f);
	}
	if (b->rodata_len) {
		fprintf(f, "rodata %zu\n", b->rodata_len);
		fwrite(b->rodata, 1, b->rodata_len, f);
		fputc('\n', f);
	}
	fprintf(f, "funcs %zu\n", n);
	fwrite(b->funcs, 1, n, f);
	return ferror(f) ? -1 : 0;
}

/* The next line of [*p, end): NUL-terminated in a copy (at most cap bytes), or -1. */
static int next_line(const char **p, const char *end, char *line, size_t cap)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n;

	if (!nl)
		return -1;
	n = (size_t)(nl - *p);
	if (n >= cap)
		return -1;
	memcpy(line, *p, n);
	line[n] = 0;
	*p = nl + 1;
	return 0;
}

static bool name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 127)
			return false;
	return true;
}

int bundle_parse(const char *buf, size_t len, struct bundle *b, char *err, size_t errlen)
{
	const char *p = buf, *end = buf + len;
	const char *why = NULL; /* (NULL: a bad line) */
	char line[1200];

	memset(b, 0, sizeof(*b));
	if (next_line(&p, end, line, sizeof(line)) || strcmp(line, "gpuscope-probes 1")) {
		snprintf(err, errlen, "not a probe bundle (version 1)");
		return -1;
	}
	while (!next_line(&p, end, line, sizeof(line))) {
		char a[1024], c[256];
		unsigned long long n;
		int point;

		if (!strncmp(line, "map ", 4)) {
			struct bundle_map *m = &b->maps[b->nmaps];
			int nf;

			if (b->nmaps == BUNDLE_MAX_MAPS ||
			    (nf = sscanf(line, "map %63s %u %u %u %u %u %u", m->name, &m->kind,
					 &m->key_size, &m->value_size, &m->max_entries, &m->threads,
					 &m->shared)) < 6 ||
			    m->shared > 1 || (m->shared && m->kind != GS_MAP_ARRAY) ||
			    m->kind < GS_MAP_ARRAY || m->kind > GS_MAP_RING ||
			    (m->kind == GS_MAP_RING ? !bundle_ring_ok(m->max_entries)
						    : !m->value_size) ||
			    !m->max_entries || m->key_size > 256 || m->value_size > (1u << 20) ||
			    !bundle_map_bytes(m))
				goto fail;
			b->nmaps++;
		} else if (!strncmp(line, "probe ", 6)) {
			struct ptx_probe *pr = &b->probes[b->nprobes];

			if (b->nprobes == BUNDLE_MAX_PROBES ||
			    sscanf(line, "probe %d %1023s %255s", &point, a, c) != 3 ||
			    point < PTX_ENTRY || point > PTX_MEM || !name_ok(a) || !name_ok(c))
				goto fail;
			pr->point = (enum ptx_point)point;
			pr->kernel = gs_strdup(a);
			pr->func = gs_strdup(c);
			b->nprobes++;
			if (!pr->kernel || !pr->func)
				goto oom;
		} else if (!strncmp(line, "host ", 5)) {
			struct bundle_host *h = &b->hosts[b->nhosts];

			if (b->nhosts == BUNDLE_MAX_HOST ||
			    sscanf(line, "host %d %63s %llu", &h->when, h->name, &n) != 3 ||
			    h->when < 1 || h->when > 2 || !n || n > BUNDLE_HOST_INSNS ||
			    n * sizeof(*h->insns) + 1 > (size_t)(end - p) ||
			    p[n * sizeof(*h->insns)] != '\n')
				goto fail;
			h->insns = gs_malloc(n * sizeof(*h->insns));
			if (!h->insns)
				goto oom;
			memcpy(h->insns, p, n * sizeof(*h->insns));
			h->n = n;
			b->nhosts++;
			p += n * sizeof(*h->insns) + 1;
		} else if (sscanf(line, "rodata %llu", &n) == 1) {
			if (b->rodata || !n || n > GS_RODATA_MAX || n + 1 > (size_t)(end - p) ||
			    p[n] != '\n')
				goto fail;
			b->rodata = gs_malloc(n);
			if (!b->rodata)
				goto oom;
			memcpy(b->rodata, p, n);
			b->rodata_len = n;
			p += n + 1;
		} else if (sscanf(line, "funcs %llu", &n) == 1) {
			if (n > (size_t)(end - p))
				goto fail;
			b->funcs = gs_strndup(p, n);
			if (!b->funcs)
				goto oom;
			if (strlen(b->funcs) != n)
				goto fail;
			return 0;
		} else {
			goto fail;
		}
	}
oom:
	why = "out of memory";
fail:
	if (why)
		snprintf(err, errlen, "probe bundle: %s", why);
	else
		snprintf(err, errlen, "probe bundle: bad or truncated line '%.60s'", line);
	bundle_free(b);
	return -1;
}

void bundle_free(struct bundle *b)
{
	for (size_t i = 0; i < b->nprobes; i++) {
		free((char *)b->probes[i].kernel);
		free((char *)b->probes[i].func);
	}
	for (size_t i = 0; i < b->nhosts; i++)
		free(b->hosts[i].insns);
	free(b->rodata);
	free(b->funcs);
	memset(b, 0, sizeof(*b));
}

static int push_str(char ***v, size_t *n, const char *s)
{
	size_t cap = *n;
	char *c;

	if (gs_grow(v, &cap, *n + 1, sizeof(**v)) || !(c = gs_strdup(s)))
		return -ENOMEM;
	(*v)[(*n)++] = c;
	return 0;
}

int snapshot_parse(const unsigned char *buf, size_t len, size_t nmaps, struct snapshot *s,
		   char *err, size_t errlen)
{
	const char *p = (const char *)buf, *end = p + len;
	const char *why = NULL; /* (NULL: a bad line) */
	size_t kcap = 0, ccap = 0;
	char line[1200];

	memset(s, 0, sizeof(*s));
	s->nmaps = nmaps;
	if (next_line(&p, end, line, sizeof(line)) || strcmp(line, "gpuscope-probe-snapshot 1")) {
		snprintf(err, errlen, "not a probe snapshot (version 1)");
		return -1;
	}
	while (!next_line(&p, end, line, sizeof(line))) {
		struct snap_kernel k;
		unsigned long long n;
		unsigned int m;
		int off = 0;

		if (!strcmp(line, "end"))
			return 0;
		if (sscanf(line, "pid %d", &s->pid) == 1) {
			continue;
		} else if (sscanf(line, "kernel %u %d %llu %llu %n", &k.id, &k.instrumented,
				  &k.routed, &k.fallback, &off) == 4 &&
			   off && name_ok(line + off)) {
			if (gs_grow(&s->k, &kcap, s->nk + 1, sizeof(*s->k)) ||
			    !(k.name = gs_strdup(line + off)))
				goto oom;
			s->k[s->nk++] = k;
		} else if (!strncmp(line, "note ", 5)) {
			if (push_str(&s->notes, &s->nnotes, line + 5))
				goto oom;
		} else if (!strncmp(line, "stat ", 5)) {
			if (push_str(&s->stats, &s->nstats, line + 5))
				goto oom;
		} else if (!strncmp(line, "ctx ", 4)) {
			struct snap_ctx *c;

			if (gs_grow(&s->ctx, &ccap, s->nctx + 1, sizeof(*s->ctx)))
				goto oom;
			c = &s->ctx[s->nctx++];
			memset(c, 0, sizeof(*c));
			c->data = gs_calloc(nmaps ? nmaps : 1, sizeof(*c->data));
			c->bytes = gs_calloc(nmaps ? nmaps : 1, sizeof(*c->bytes));
			if (!c->data || !c->bytes)
				goto oom;
			if (sscanf(line, "ctx %d %u", &c->device, &c->sm) != 2)
				goto fail;
		} else if (sscanf(line, "data %u %llu", &m, &n) == 2) {
			struct snap_ctx *c = s->nctx ? &s->ctx[s->nctx - 1] : NULL;

			if (!c || m >= nmaps || c->data[m] || n > (size_t)(end - p) || !n)
				goto fail;
			c->data[m] = gs_malloc(n);
			if (!c->data[m])
				goto oom;
			memcpy(c->data[m], p, n);
			c->bytes[m] = n;
			p += n;
		} else {
			goto fail;
		}
	}
	why = "cut short (no end line)";
	goto fail;
oom:
	why = "out of memory";
fail:
	if (why)
		snprintf(err, errlen, "probe snapshot: %s", why);
	else
		snprintf(err, errlen, "probe snapshot: bad line '%.60s'", line);
	snapshot_free(s);
	return -1;
}

void snapshot_free(struct snapshot *s)
{
	for (size_t i = 0; i < s->nk; i++)
		free(s->k[i].name);
	free(s->k);
	for (size_t i = 0; i < s->nnotes; i++)
		free(s->notes[i]);
	free(s->notes);
	for (size_t i = 0; i < s->nstats; i++)
		free(s->stats[i]);
	free(s->stats);
	for (size_t i = 0; i < s->nctx; i++) {
		for (size_t m = 0; m < s->nmaps && s->ctx[i].data; m++)
			free(s->ctx[i].data[m]);
		free(s->ctx[i].data);
		free(s->ctx[i].bytes);
	}
	free(s->ctx);
	memset(s, 0, sizeof(*s));
}

const char *snapshot_kernel_name(const struct snapshot *s, unsigned int id)
{
	for (size_t i = 0; i < s->nk; i++)
		if (s->k[i].id == id)
			return s->k[i].name;
	return NULL;
}
