// SPDX-License-Identifier: MIT
/*
 * GPU times (gputime_int.h): carriers, with GPUSCOPE_CARRY=1 only. A timed launch on an idle
 * stream otherwise takes a gate and a pair of events, three driver calls besides the
 * launch: on the H200 guests
 * 5-6 us of the 7-9 us a timed launch adds (bench/results/cost-2026-11-27b-h200.md). A
 * carrier is a graph of ours, [event record node, kernel node, event record node], made
 * ahead with its own two events. A timed plain launch (cuLaunchKernel or its _ptsz, no
 * `extra`) on a stream judged idle sets the carrier's kernel node to the launch
 * (cuGraphExecKernelNodeSetParams) and launches the carrier on the launch's stream in its
 * place: two driver calls, about what the launch alone costs (3.2-3.5 us against 3.4-4.0,
 * paced, bench/timing_cost.cu). The GPU runs the three nodes one after the other, so the
 * events bracket the kernel as a gated pair does, without a gate.
 *
 * A carrier is used again only once its events are read (the harvester gives it back):
 * then its last run is over, and its next launch waits for nothing. A launch takes the
 * free carrier last set to its kernel and launch shape where there is one (below). Where
 * none is free the launch takes the pair; the harvester makes more (CARRY_GROW at a time, up
 * to CARRY_MAX a context), also where no free one was last set to the launch's shape. The
 * kernel's handle may be a function or a CUkernel (CUDA 13's runtime
 * launches those): how the driver took it is kept per kernel; one it refuses both ways is
 * never carried again, and that launch is made as the program made it, untimed (counted
 * as lost). Whatever fails, the program's own launch call is made, and its result is the
 * program's.
 *
 * Why not by default (measured on an H200, bench/results/carry-2026-11-27-h200.md): every
 * launch timed cost the tiny-op loop 1.27-1.43x with carriers against 1.53-1.60x with pairs
 * (the profiler 1.23-1.28x), the C loop +1.9-3.9 us a launch against +4.3-6.0; but
 * PyTorch's short kernels, 40 launches of each, read 0.8-1.8 us longer between a carrier's
 * events than between a gated pair, and 3-4 us longer under the PyTorch profiler, whose
 * CUPTI also sees each carried kernel run in a graph. Our calibration kernel reads only
 * 0.2-0.5 us more, and so does a test kernel of any parameter size, grid or length
 * (bench/carry_bias.cu), but for a node set to another kernel (+1-2.5 us) or grid (+0.5-1
 * us) than it ran last: each carrier's first runs of a launch shape read long.
 * Corrected by their pairs (below), 400 launches of each read as pairs at the median, but
 * only 44-65% within 0.5 us of CUPTI, against 100% for pairs. Kept per shape, with shapes
 * in turn (bench/results/carry-keep-2026-11-27-h200.md): short kernels +0.25-0.30 us over
 * CUPTI, 42-54% within 0.5 us (taken oldest first +1.4-1.5 us, 14-18%), and CUPTI sees
 * them run 0.2-0.3 us longer than when paired.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inject/gputime_twin.h"

#define HOW_FUNC 1ULL /* set as the node's function */
#define HOW_KERN 2ULL /* as a CUkernel, with the context */
#define HOW_NONE 3ULL /* refused both ways: never carried */

/* How the driver takes handle in a node (0: not known yet). */
static __u64 *how_slot(struct ctx_slot *c, __u64 handle)
{
	return &c->carry_how[gt_slot_hash(handle, CARRY_HOW)];
}

/*
 * The free carriers, in two lists of 1 + index: all of them in the order they were freed,
 * and those of each key slot. A launch takes the one last set to its kernel and shape
 * where one is free, else the one freed longest ago (and more are wanted, till CARRY_MAX):
 * a node set to another kernel than it ran last reads 1-2.5 us longer, to another grid
 * 0.5-1 us (bench/results/carry-2026-11-27-h200.md).
 */
static int *same_head(struct ctx_slot *c, __u64 key)
{
	return &c->carry_same[gt_slot_hash(key, CARRY_SAME)];
}

static void unfree(struct ctx_slot *c, int i)
{
	struct carrier *k = &c->carry[i];

	*(k->older ? &c->carry[k->older - 1].newer : &c->carry_oldest) = k->newer;
	*(k->newer ? &c->carry[k->newer - 1].older : &c->carry_newest) = k->older;
	*(k->prev_same ? &c->carry[k->prev_same - 1].next_same : same_head(c, k->key)) =
		k->next_same;
	if (k->next_same)
		c->carry[k->next_same - 1].prev_same = k->prev_same;
	k->older = k->newer = k->prev_same = k->next_same = 0;
	c->ncarry_free--;
}

void gt_carry_put(struct ctx_slot *c, int i)
{
	struct carrier *k = &c->carry[i];
	int *head = same_head(c, k->key);

	k->older = c->carry_newest;
	k->newer = 0;
	*(c->carry_newest ? &c->carry[c->carry_newest - 1].newer : &c->carry_oldest) = i + 1;
	c->carry_newest = i + 1;
	k->prev_same = 0;
	k->next_same = *head;
	if (*head)
		c->carry[*head - 1].prev_same = i + 1;
	*head = i + 1;
	c->ncarry_free++;
}

bool gt_carry_take(struct ctx_slot *c, struct gs_timing *t, __u64 func)
{
	struct carrier *k;
	int i = 0;

	if (c->carry_off || T.no_carry ||
	    (c->carry_how &&
	     __atomic_load_n(how_slot(c, func), __ATOMIC_RELAXED) == (func | HOW_NONE)))
		return false;
	if (!c->ncarry_free) {
		/* (the harvester makes more: gt_carry_grow) */
		c->carry_want = c->ncarry < CARRY_MAX;
		return false;
	}
	/* (a slot's list: its newest few looked at) */
	for (int n = 0, j = T.carry_any ? 0 : *same_head(c, t->key); j && n < 4 && !i;
	     j = c->carry[j - 1].next_same, n++)
		if (c->carry[j - 1].key == t->key)
			i = j;
	if (!i) {
		i = c->carry_oldest;
		c->carry_want = !T.carry_any && c->ncarry < CARRY_MAX;
	}
	unfree(c, i - 1);
	k = &c->carry[i - 1];
	t->carrier = i;
	t->start = k->ev[0];
	t->end = k->ev[1];
	return true;
}

/* One carrier made (c's context current): false, and nothing kept, if it cannot be. */
static bool make(struct ctx_slot *c, struct carrier *k)
{
	const struct gt_graph_fns *K = gt_graph_fns();
	__u64 out = c->gate.dev + 96, ns = 0;
	void *params[] = { &out, &ns }, *first, *node;
	/* (What the node runs until a launch sets it: our calibration kernel, never run.) */
	struct gs_cu_kernel_node p = { .func = (__u64)(unsigned long)c->cal,
				       .grid = { 1, 1, 1 },
				       .block = { 1, 1, 1 },
				       .params = (__u64)(unsigned long)params };

	memset(k, 0, sizeof(*k));
	if (T.cu.ev_create(&k->ev[0], 0))
		return false;
	if (T.cu.ev_create(&k->ev[1], 0)) {
		K->ev_destroy(k->ev[0]);
		return false;
	}
	if (!K->create(&k->graph, 0) && !K->add_record(&first, k->graph, NULL, 0, k->ev[0]) &&
	    !K->add_kernel(&k->node, k->graph, &first, 1, &p) &&
	    !K->add_record(&node, k->graph, &k->node, 1, k->ev[1]) &&
	    !K->instantiate(&k->exec, k->graph, 0)) {
		/* (Its first launch would upload it: done now, on our stream.) */
		if (K->upload)
			K->upload(k->exec, c->stream);
		return true;
	}
	if (k->graph)
		K->graph_destroy(k->graph);
	K->ev_destroy(k->ev[0]);
	K->ev_destroy(k->ev[1]);
	return false;
}

void gt_carry_grow(struct ctx_slot *c)
{
	struct carrier made[CARRY_GROW];
	int n = 0, want;

	const struct gt_graph_fns *g = gt_graph_fns();
	bool ok = g->set && g->launch && g->create && g->add_record && g->add_kernel &&
		  g->instantiate && g->graph_destroy && g->ev_destroy;

	pthread_mutex_lock(&T.lock);
	want = c->carry_want && !c->carry_off ? CARRY_MAX - c->ncarry : 0;
	c->carry_want = false;
	if (want > 0 && !c->carry) {
		c->carry = calloc(CARRY_MAX, sizeof(*c->carry));
		c->carry_same = calloc(CARRY_SAME, sizeof(*c->carry_same));
		c->carry_how = calloc(CARRY_HOW, sizeof(*c->carry_how));
	}
	if (!ok || !c->cal || !c->carry || !c->carry_same || !c->carry_how)
		c->carry_off = true;
	want = c->carry_off ? 0 : want < CARRY_GROW ? want : CARRY_GROW;
	pthread_mutex_unlock(&T.lock);
	if (want <= 0)
		return;
	while (n < want && make(c, &made[n]))
		n++;
	if (n && !c->carry_cal) {
		c->carry_cal = true;
		gt_carry_calibrate(c, &made[0]);
	}
	pthread_mutex_lock(&T.lock);
	for (int i = 0; i < n; i++) {
		c->carry[c->ncarry] = made[i];
		gt_carry_put(c, c->ncarry++);
	}
	/* (None could be made in this context: the pairs it is.) */
	if (!n && !c->ncarry)
		c->carry_off = true;
	pthread_mutex_unlock(&T.lock);
}

static int set_node(struct ctx_slot *c, struct carrier *k, __u64 handle, __u64 how,
		    struct gs_cu_kernel_node *p)
{
	p->func = how == HOW_FUNC ? handle : 0;
	p->kern = how == HOW_KERN ? handle : 0;
	p->ctx = how == HOW_KERN ? (__u64)(unsigned long)c->ctx : 0;
	return gt_graph_fns()->set(k->exec, k->node, p);
}

int gs_timing_carry(struct gs_timing *t, const __u64 *a)
{
	struct ctx_slot *c = &T.ctx[t->ci];
	struct carrier *k = &c->carry[t->carrier - 1];
	struct gs_cu_kernel_node p = { .grid = { (__u32)a[1], (__u32)a[2], (__u32)a[3] },
				       .block = { (__u32)a[4], (__u32)a[5], (__u32)a[6] },
				       .shared_mem = (__u32)a[7],
				       .params = a[9] };
	__u64 *slot = how_slot(c, a[0]), seen = __atomic_load_n(slot, __ATOMIC_RELAXED);
	__u64 how = (seen & ~3ULL) == a[0] ? seen & 3 : 0;
	int r = -1;

	if (how == HOW_FUNC || how == HOW_KERN) {
		r = set_node(c, k, a[0], how, &p);
	} else if (!how) {
		/* First carried: as a function, else as a CUkernel; kept whichever took. */
		how = HOW_FUNC;
		if ((r = set_node(c, k, a[0], how, &p)))
			r = set_node(c, k, a[0], how = HOW_KERN, &p);
		__atomic_store_n(slot, a[0] | (r ? HOW_NONE : how), __ATOMIC_RELAXED);
	}
	/* (Its node now the launch's, or not known: the key it is kept under.) */
	k->key = r ? 0 : t->key;
	if (!r)
		r = (t->ptsz ? gt_graph_fns()->launch_ptsz : gt_graph_fns()->launch)(k->exec, a[8]);
	if (!r)
		return 0;
	/* Not carried: the carrier back, the launch untimed (the caller makes it). */
	pthread_mutex_lock(&T.lock);
	gt_carry_put(c, t->carrier - 1);
	pthread_mutex_unlock(&T.lock);
	t->carrier = 0;
	t->start = t->end = NULL;
	gs_count_time_lost();
	return r;
}

/*
 * Correcting carried runs. On an H200 PyTorch's short kernels read 0.8-1.8 us longer in a
 * carrier than between a gated pair, 3-4 us under the PyTorch profiler, where the
 * calibration sees 0.2-0.5 us (bench/results/carry-2026-11-27-h200.md). So every
 * CARRY_REF-th carriable launch of a kernel and launch shape (its key) takes a gated pair
 * instead, and once CARRY_MIN of each are read, a carried run of the key has the difference
 * of the two medians of the latest CARRY_RING taken off: it reads as its pairs do
 * (GS_GPU_CARRIED with GS_GPU_GATED). Before that it is left as read, for the calibration
 * (GS_GPU_CARRIED alone).
 */
static struct carry_ref *ref_of(__u64 key)
{
	return &T.refs[gt_slot_hash(key, CARRY_KEYS)];
}

bool gt_carry_ref(__u64 key)
{
	struct carry_ref *r = ref_of(key);

	if (r->key != key) {
		/* (another's slot: taken over; a harvest in flight may add one of the other
		 * key's readings, a medians' worth of noise) */
		r->key = key;
		r->launches = 0;
		r->nc = r->np = 0;
	}
	return r->launches++ % (T.carry_ref ? T.carry_ref : CARRY_REF) == 0;
}

static __u32 median_of(const __u32 *v, int n)
{
	__u32 s[CARRY_RING];

	memcpy(s, v, (size_t)n * sizeof(*s));
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
			__u32 x = s[j];

			s[j] = s[j - 1];
			s[j - 1] = x;
		}
	return s[n / 2];
}

bool gt_carry_shift(const struct pending *p, __u64 raw, __u64 *shift)
{
	struct carry_ref *r = ref_of(p->key);
	__u32 v = raw > UINT32_MAX ? UINT32_MAX : (__u32)raw, mc, mp;
	bool carried = p->carrier != 0;

	*shift = 0;
	/* (A pair counts only where gated: its start exact, as a carrier's.) */
	if (r->key != p->key || (!carried && (!p->gated || p->forced || p->from_prev)))
		return false;
	if (carried)
		r->carried[r->nc++ % CARRY_RING] = v;
	else
		r->paired[r->np++ % CARRY_RING] = v;
	if (r->nc >= 2 * CARRY_RING)
		r->nc -= CARRY_RING;
	if (r->np >= 2 * CARRY_RING)
		r->np -= CARRY_RING;
	if (!carried || r->nc < CARRY_MIN || r->np < CARRY_MIN)
		return false;
	mc = median_of(r->carried, r->nc < CARRY_RING ? r->nc : CARRY_RING);
	mp = median_of(r->paired, r->np < CARRY_RING ? r->np : CARRY_RING);
	*shift = mc <= mp ? 0 : mc - mp < raw ? mc - mp : raw;
	return true;
}
