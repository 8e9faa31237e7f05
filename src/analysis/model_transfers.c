// SPDX-License-Identifier: MIT
/*
 * Copies (direction from the API, or for unified-addressing copies from what the pointers
 * are in the allocation model), synchronisation, and NCCL traffic. NCCL byte counts follow
 * nccl-tests' "size": the bytes of the buffer the operation produces, so all-gather and
 * reduce-scatter count the per-rank count times the communicator's size.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/model_int.h"
#include "core/names.h"
#include "core/util.h"

void model__copy_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_copy *e = (const void *)ev;
	unsigned int dir = model__copy_direction(m, e->h.pid, e->kind, e->dst, e->src);
	struct copy_stat *s = &m->copies[dir];
	struct proc *p;

	if (e->c.result) {
		s->errors++;
		return;
	}
	s->count++;
	s->empty += !e->bytes;
	s->bytes += e->bytes;
	p = model__proc(m, e->h.pid);
	if ((e->flags & GS_COPY_ASYNC) && model__graph_op_captured(p, e->stream, dir, e->bytes)) {
		s->captured++; /* (run, and its bytes copied, at each launch of the graph) */
		s->captured_bytes += e->bytes;
	} else {
		m->copy_bytes += e->bytes;
		p->s.copy_bytes += e->bytes;
	}
	if (e->flags & GS_COPY_ASYNC) {
		s->async_count++;
		s->async_bytes += e->bytes;
		s->results_unread += !!(e->flags & GS_COPY_NO_RETURN);
	} else {
		s->sync_count++;
		s->sync_bytes += e->bytes;
		s->sync_ns += e->c.dur_ns;
	}
}

const __u64 nccl_bucket_ns[NCCL_BUCKETS] = { 10000ULL,	    100000ULL,	  1000000ULL,
					     10000000ULL,   100000000ULL, 1000000000ULL,
					     10000000000ULL };

void model__sync_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_sync *e = (const void *)ev;
	struct sync_stat *s = &m->syncs[e->c.api];

	s->calls++;
	s->total_ns += e->c.dur_ns;
	model__proc(m, e->h.pid)->s.sync_ns += e->c.dur_ns;
	if (e->c.dur_ns > s->max_ns)
		s->max_ns = e->c.dur_ns;
	if (result_is_status(e->c.api, e->c.result))
		s->not_ready++;
}

static struct comm_entry *comm_get(struct model *m, __u32 pid, __u64 comm)
{
	struct comm_entry *c = hmap_get(&m->comms, pid, comm);

	if (!c) {
		c = xcalloc(1, sizeof(*c));
		c->pid = pid;
		c->comm = comm;
		c->rank = c->nranks = -1;
		hmap_put(&m->comms, pid, comm, c);
	}
	return c;
}

void model__nccl_add(struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_nccl *e = (const void *)ev;
	struct nccl_stat *s;
	struct comm_entry *c;
	__u64 bytes;

	if (e->op >= NCCL_OPS)
		return;
	s = &m->nccl[e->op];
	s->calls++;
	s->total_ns += e->c.dur_ns;
	{
		int b = 0;

		while (b < NCCL_BUCKETS && e->c.dur_ns > nccl_bucket_ns[b])
			b++;
		s->buckets[b]++;
	}
	if (e->c.dur_ns > s->max_ns)
		s->max_ns = e->c.dur_ns;
	if (e->c.result) {
		s->errors++;
		return;
	}
	switch (e->op) {
	case GS_NCCL_COMM_INIT:
		if (!e->comm)
			return;
		c = comm_get(m, e->h.pid, e->comm);
		c->rank = e->rank;
		c->nranks = e->nranks;
		c->destroyed = false;
		return;
	case GS_NCCL_COMM_DESTROY:
		comm_get(m, e->h.pid, e->comm)->destroyed = true;
		return;
	case GS_NCCL_GROUP_START:
	case GS_NCCL_GROUP_END:
		return;
	}
	c = comm_get(m, e->h.pid, e->comm);
	c->calls++;
	bytes = e->count * (__u64)nccl_type_size(e->datatype);
	if (e->op == GS_NCCL_ALL_GATHER || e->op == GS_NCCL_REDUCE_SCATTER) {
		if (c->nranks > 0)
			bytes *= (__u64)c->nranks;
		else
			s->unknown_size++;
	}
	s->bytes += bytes;
}

void model__copies(const struct model *m, struct copy_stat out[GS_COPY_KIND_MAX])
{
	memcpy(out, m->copies, sizeof(m->copies));
}

const struct sync_stat *model__sync(const struct model *m, unsigned int api)
{
	return api < GS_API_MAX ? &m->syncs[api] : NULL;
}

const struct nccl_stat *model__nccl(const struct model *m, unsigned int op)
{
	return op < NCCL_OPS ? &m->nccl[op] : NULL;
}

void model__each_error(const struct model *m, void (*fn)(void *ctx, const struct err_stat *e),
		       void *ctx)
{
	const struct hmap_slot *s;

	hmap_for_each (&m->errors, s)
		fn(ctx, s->val);
}
