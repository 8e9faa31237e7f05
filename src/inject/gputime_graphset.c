// SPDX-License-Identifier: MIT
/*
 * A twin follows the program's sets of its exec's kernel nodes (gputime_twin.h): XLA sets
 * every kernel node of a command buffer again before a launch whose buffers moved. The
 * driver takes the parameters' values at the call, so they are copied then (their sizes
 * from cuFuncGetParamInfo, or the `extra` buffer's), and the last set of each node is
 * applied to the twin (cuGraphExecKernelNodeSetParams) before its next run only: a set
 * costs the program a copy, not a second set, and a twin that runs every 16th launch
 * takes one set of each node at most.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject/gputime_twin.h"

/* What the program set a kernel node of the exec to: the parameters' values copied. */
struct kset {
	struct gs_cu_kernel_node p; /* .params points at argv, .extra at extra */
	void *extra[5];
	size_t bytes;
	void *argv[]; /* (then the values) */
};

/* A kernel's parameters, as the driver says (cuFuncGetParamInfo): kept for the next set. */
struct layout {
	__u64 handle;
	size_t n, bytes;
	size_t at[][2]; /* offset, size */
};

typedef int (*g_name_fn)(const char **, void *);
typedef int (*g_pinfo_fn)(void *, size_t, size_t *, size_t *);
typedef int (*g_kset_fn)(void *, void *, const struct gs_cu_kernel_node *);

static struct {
	g_name_fn func_name, kernel_name;      /* (CUDA 12.3 and later) */
	g_pinfo_fn func_params, kernel_params; /* (CUDA 12.4 and later) */
	g_kset_fn exec_kset;
} S;

static void load_now(void)
{
	S.func_name = (g_name_fn)gs_real_by_name("cuFuncGetName");
	S.kernel_name = (g_name_fn)gs_real_by_name("cuKernelGetName");
	S.func_params = (g_pinfo_fn)gs_real_by_name("cuFuncGetParamInfo");
	S.kernel_params = (g_pinfo_fn)gs_real_by_name("cuKernelGetParamInfo");
	S.exec_kset = (g_kset_fn)gs_real_by_name("cuGraphExecKernelNodeSetParams_v2");
}

static void load(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, load_now);
}

bool gt_twin_fail(const char *step, int r)
{
	if (getenv("GPUSCOPE_INJECT_DEBUG"))
		fprintf(stderr, "gpuscope-inject: graph twin: %s: %d\n", step, r);
	return false;
}

/*
 * The name of a kernel node's kernel. A node keeps the function the driver resolved for
 * the graph's context, which is not the handle the program launched while capturing (a
 * CUkernel, or a function of its own module): its name comes from the driver, as the
 * name record of the handle, so that its times go to the kernel of that name.
 */
void gt_name_kernel(__u64 handle, bool is_function)
{
	g_name_fn get;
	const char *name = NULL;
	struct gs_ev_kname *e;
	size_t len;
	__u32 size;

	load();
	get = is_function ? S.func_name : S.kernel_name;
	if (!get || get(&name, (void *)(unsigned long)handle) || !name)
		return;
	len = strnlen(name, GS_NAME_MAX - 1);
	size = (__u32)((offsetof(struct gs_ev_kname, name) + len + 1 + 7) & ~(size_t)7);
	if (!(e = gs_emit_reserve(size, GS_EV_KNAME)))
		return;
	gs_fill_hdr(&e->h, GS_EV_KNAME, size, gs_clock());
	e->handle = handle;
	e->scope = 0;
	e->name_addr = (__u64)(unsigned long)name;
	e->api = GS_API_CU_GRAPH_INSTANTIATE;
	e->len = (__u16)len;
	e->ns = GS_NS_DRIVER;
	e->truncated = name[len] != 0;
	e->pad = 0;
	memcpy(e->name, name, len);
	e->name[len] = 0;
	gs_emit_commit(e);
}

static int by_node(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

/* The clone's kernel nodes sorted, to find a node's kernel; room for the program's sets. */
bool gt_twin_index(struct twin *t)
{
	t->byclone = calloc((size_t)t->nk, sizeof(*t->byclone));
	t->pend = calloc((size_t)t->nk, sizeof(*t->pend));
	t->lay = calloc((size_t)t->nk, sizeof(*t->lay));
	if (!t->byclone || !t->pend || !t->lay) {
		free(t->pend);
		free(t->lay);
		return false;
	}
	for (int k = 0; k < t->nk; k++) {
		t->byclone[k][0] = (__u64)(unsigned long)t->knode[k];
		t->byclone[k][1] = (__u64)k;
	}
	qsort(t->byclone, (size_t)t->nk, sizeof(*t->byclone), by_node);
	return true;
}

/* A kernel's parameters (handle: a function, or with kernel a CUkernel), as the driver
 * gives them: NULL if it cannot. */
static struct layout *layout_of(__u64 handle, bool kernel)
{
	g_pinfo_fn info = kernel ? S.kernel_params : S.func_params;
	size_t off, size, n = 0, bytes = 0;
	struct layout *l;

	/* (The driver takes at most 32764 bytes of parameters.) */
	while (info && n < 8192 && !info((void *)(unsigned long)handle, n, &off, &size))
		n++;
	if (!info || n == 8192 || !(l = malloc(sizeof(*l) + n * sizeof(l->at[0]))))
		return NULL;
	l->handle = handle;
	l->n = n;
	for (size_t i = 0; i < n; i++) {
		if (info((void *)(unsigned long)handle, i, &l->at[i][0], &l->at[i][1]) ||
		    l->at[i][0] + l->at[i][1] > 32768) {
			free(l);
			return NULL;
		}
		if (l->at[i][0] + l->at[i][1] > bytes)
			bytes = l->at[i][0] + l->at[i][1];
	}
	l->bytes = bytes;
	return l;
}

/* Under tw_lock: the values of the program's parameters p for kernel k (read while the
 * driver's call that took them returns), or NULL. Parameters by the `extra` buffer: only
 * its one documented form. */
static struct kset *copy_set(struct twin *t, int k, const struct gs_cu_kernel_node *p)
{
	__u64 h = p->func ? p->func : p->kern;
	void *const *x = (void *const *)(unsigned long)p->extra;
	struct layout *l = t->lay[k];
	struct kset *ks;
	size_t n = 0, bytes;

	if (x) {
		if (x[0] != (void *)1 || x[2] != (void *)2 || x[4] || !x[3])
			return NULL;
		bytes = *(const size_t *)x[3];
	} else if (p->params) {
		if (!l || l->handle != h) {
			free(l);
			l = t->lay[k] = layout_of(h, !p->func);
		}
		if (!l)
			return NULL;
		n = l->n;
		bytes = l->bytes;
	} else {
		bytes = 0;
	}
	if (bytes > 32768 || !(ks = calloc(1, sizeof(*ks) + n * sizeof(void *) + bytes)))
		return NULL;
	ks->p = *p;
	ks->bytes = bytes;
	if (x) {
		char *data = (char *)&ks->argv[0];

		memcpy(data, x[1], bytes);
		ks->extra[0] = (void *)1;
		ks->extra[1] = data;
		ks->extra[2] = (void *)2;
		ks->extra[3] = &ks->bytes;
		ks->p.extra = (__u64)(unsigned long)ks->extra;
	} else if (p->params) {
		char *data = (char *)&ks->argv[n];
		void *const *argv = (void *const *)(unsigned long)p->params;

		for (size_t i = 0; i < n; i++) {
			ks->argv[i] = data + l->at[i][0];
			memcpy(ks->argv[i], argv[i], l->at[i][1]);
		}
		ks->p.params = (__u64)(unsigned long)ks->argv;
	}
	return ks;
}

bool gt_twin_keep_set(struct twin *t, void *node, const struct gs_cu_kernel_node *p)
{
	__u64 key[2] = { (__u64)(unsigned long)node, 0 }, (*at)[2];
	struct kset *ks;
	int k;

	load();
	if (!S.exec_kset ||
	    !(at = bsearch(key, t->byclone, (size_t)t->nk, sizeof(*t->byclone), by_node)))
		return false;
	k = (int)at[0][1];
	if (!(ks = copy_set(t, k, p)))
		return false;
	t->npend += !t->pend[k];
	free(t->pend[k]);
	t->pend[k] = ks;
	return true;
}

bool gt_twin_apply_sets(struct twin *t)
{
	int r;

	for (int k = 0; k < t->nk && t->npend; k++) {
		struct kset *ks = t->pend[k];
		__u64 h;

		if (!ks)
			continue;
		if ((r = S.exec_kset(t->twin_exec, t->knode[k], &ks->p)))
			return gt_twin_fail("set", r);
		h = ks->p.func ? ks->p.func : ks->p.kern;
		if (h != t->func[k])
			gt_name_kernel(h, ks->p.func != 0);
		t->func[k] = h;
		free(ks);
		t->pend[k] = NULL;
		t->npend--;
	}
	return true;
}

void gt_twin_drop_sets(struct twin *t)
{
	for (int k = 0; k < t->nk; k++) {
		free(t->pend[k]);
		t->pend[k] = NULL;
	}
	t->npend = 0;
}

void gt_twin_free_sets(struct twin *t)
{
	for (int k = 0; k < t->nk; k++) {
		free(t->pend ? t->pend[k] : NULL);
		free(t->lay ? t->lay[k] : NULL);
	}
	free(t->pend);
	free(t->lay);
}
