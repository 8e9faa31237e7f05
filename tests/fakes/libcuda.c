// SPDX-License-Identifier: MIT
/*
 * libcuda.so.1 test double.
 *
 * Exports the real driver entry points gpuscope probes, with the real signatures, and
 * simulates what the tracer observes:
 *   - a device address space per device: allocations really back memory (an anonymous,
 *     lazily committed arena), so copies move real bytes and bad pointers are rejected;
 *   - a capacity per device (FAKECUDA_MEM, bytes, default 4 GiB) and a first-fit allocator,
 *     so exhaustion and fragmentation fail the way a GPU does (CUDA_ERROR_OUT_OF_MEMORY);
 *     FAKECUDA_FAIL_ALLOC=N makes the Nth allocation call fail regardless;
 *   - streams with a simulated clock: a launch occupies its stream for
 *     FAKECUDA_KERNEL_NS + threads/16 ns, a copy for bytes / FAKECUDA_GBPS; synchronisation
 *     sleeps until the stream is idle, queries say CUDA_ERROR_NOT_READY until then, and
 *     events carry the simulated time;
 *   - modules and libraries from PTX text: kernel names come from `.entry` lines; with
 *     FAKECUDA_LAZY_LOAD_NS set, a kernel is loaded lazily, as CUDA 12+ does by default: its
 *     first launch spends that long loading it inside the call (host time, the GPU is not
 *     involved), unless cuFuncLoad loaded it before (cuFuncIsLoaded and cuFuncLoad take
 *     function handles only, not kernel handles); cuKernelGetFunction gives a kernel's one
 *     function, or with FAKECUDA_FUNC_PER_CONTEXT=1 one in device 0's primary context and
 *     another in any other, as the driver gives one per context;
 *   - FAKECUDA_ENGINE_SWITCH_NS: a kernel queued right after a copy or set on its stream
 *     starts that much later than the work before it ends (an event between them is not
 *     delayed), as kernels on an H200 often do (bench/gate_release.cu);
 *   - stream memory operations: a wait on a value in host memory (cuStreamWaitValue32/64)
 *     holds the stream's later work until the host writes the value, noticed at the next
 *     driver call (FAKECUDA_NO_STREAM_MEMOPS=1: not supported); FAKECUDA_LAUNCH_WAITS=1
 *     makes a launch wait until its stream has nothing held or running, as a launch into
 *     a full push buffer does on a GPU;
 *   - stream capture into graphs and graph launches (FAKECUDA_GRAPH_START_NS: a launch's first
 *     work starts that much later, event nodes before it not; FAKECUDA_GRAPH_CALL_NS: a
 *     launch's call takes that long, other threads' calls going on); an event recorded into a capturing
 *     stream becomes a node of the graph, as in the driver (so a tracer that records its
 *     own events there changes the program's graphs, and cuGraphGetNodes shows it);
 *   - FAKECUDA_EVENT_CALL_NS: an event's recording call takes that long;
 *   - FAKECUDA_SLOW_KERNEL=name:ns: launches of that kernel run ns longer (its runs told
 *     apart from another kernel's of the same shape);
 *   - FAKECUDA_RUN_CALIBRATION=1: gpuscope's calibration kernel writes its span (see launch);
 *   - FAKECUDA_EXEC_SET_STRICT, FAKECUDA_EXEC_SET_REFUSE: kernel nodes set at an exec
 *     refused (see cuGraphExecKernelNodeSetParams_v2);
 *   - FAKECUDA_STATS=path: counts written there at exit (event record nodes run by graph
 *     launches, graph uploads, exec kernel nodes set to another kernel or grid: with
 *     FAKECUDA_NODE_SWITCH_NS, such a node's next run is that much longer);
 *   - cuGetProcAddress handing out these same entry points (with FAKECUDA_GPA_PRIVATE set,
 *     cuCtxSynchronize comes out as a function that is not exported, as real drivers may
 *     do for some entry points: nothing outside can know it).
 * Every exported function is its own code (built with -fno-ipa-icf), except
 * cuLaunchKernel_ptsz and cuMemsetD32Async_ptsz, which tail-call cuLaunchKernel and
 * cuMemsetD32Async through the PLT on purpose: real driver wrappers do this, and the tracer
 * must count such a call once.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "fake_cuda.h"

#define EXPORT	    __attribute__((visibility("default")))
#define MAX_DEVICES 4
#define ALIGN	    512ULL
#define VMM_GRAN    (2ULL << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- configuration -------------------------------------------------------------------- */

static struct {
	int ndev;
	unsigned long long mem;
	long fail_alloc_at; /* 1-based index of the allocation call that fails; 0: never */
	unsigned long long kernel_ns;
	double gbps;
	unsigned long long switch_ns;	   /* FAKECUDA_ENGINE_SWITCH_NS */
	unsigned long long graph_start_ns; /* FAKECUDA_GRAPH_START_NS */
	bool run_calibration;		   /* FAKECUDA_RUN_CALIBRATION */
	bool launch_waits;		   /* FAKECUDA_LAUNCH_WAITS */
	unsigned long long node_switch_ns; /* FAKECUDA_NODE_SWITCH_NS */
	char slow_kernel[64];		   /* FAKECUDA_SLOW_KERNEL=name:ns ... */
	unsigned long long slow_ns;	   /* ... launches of that kernel run ns longer */
	const char *driver_names;	   /* FAKECUDA_DRIVER_NAMES (see struct CUkern_st) */
} cfg; /* (read once, at cuInit: not at every launch, whose cost the benches count) */

static unsigned long long env_ull(const char *name, unsigned long long def)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 0) : def;
}

/* ---- time ----------------------------------------------------------------------------- */

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void sleep_until(unsigned long long t)
{
	unsigned long long n = now_ns();
	struct timespec ts;

	if (t <= n)
		return;
	ts.tv_sec = (t - n) / 1000000000ULL;
	ts.tv_nsec = (t - n) % 1000000000ULL;
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- device memory -------------------------------------------------------------------- */

struct block {
	unsigned long long addr, size;
	int kind; /* 0 free, 1 device, 2 managed */
};

struct device {
	unsigned long long base, size; /* linear arena (capacity bytes) */
	struct block *blocks;	       /* sorted by address, covering the arena */
	int nblocks, cap;
	unsigned long long phys_used;	    /* linear + VMM physical */
	unsigned long long va_next, va_end; /* VMM address reservations */
};

static struct device devs[MAX_DEVICES];
static int initialized;
static long alloc_calls;

static unsigned long long round_up(unsigned long long v, unsigned long long a)
{
	return (v + a - 1) / a * a;
}

static int arena_init(struct device *d)
{
	/* (2 MiB aligned, as the driver's addresses are: its pages are 2 MiB.) */
	void *p = mmap(NULL, cfg.mem * 2 + (2ULL << 20), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	d->base = round_up((unsigned long long)p, 2ULL << 20);
	d->size = cfg.mem;
	d->va_next = d->base + cfg.mem;
	d->va_end = d->base + cfg.mem * 2;
	d->cap = 64;
	d->blocks = calloc(d->cap, sizeof(*d->blocks));
	d->blocks[0] = (struct block){ d->base, d->size, 0 };
	d->nblocks = 1;
	return 0;
}

static bool alloc_should_fail(void)
{
	alloc_calls++;
	return cfg.fail_alloc_at && alloc_calls == cfg.fail_alloc_at;
}

/* First fit; splits the free block it takes. */
static CUresult arena_alloc(struct device *d, unsigned long long size, int kind, CUdeviceptr *out)
{
	size = round_up(size ? size : 1, ALIGN);
	if (d->phys_used + size > d->size)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; i < d->nblocks; i++) {
		struct block *b = &d->blocks[i];

		if (b->kind || b->size < size)
			continue;
		if (b->size > size) {
			if (d->nblocks == d->cap) {
				d->cap *= 2;
				d->blocks = realloc(d->blocks, d->cap * sizeof(*d->blocks));
				b = &d->blocks[i];
			}
			memmove(b + 2, b + 1, (d->nblocks - i - 1) * sizeof(*b));
			b[1] = (struct block){ b->addr + size, b->size - size, 0 };
			b->size = size;
			d->nblocks++;
		}
		b->kind = kind;
		d->phys_used += size;
		*out = b->addr;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_OUT_OF_MEMORY; /* enough bytes free, but not contiguous */
}

static struct block *find_block(CUdeviceptr p, struct device **dev)
{
	for (int d = 0; d < cfg.ndev; d++)
		for (int i = 0; i < devs[d].nblocks; i++) {
			struct block *b = &devs[d].blocks[i];

			if (b->kind && p >= b->addr && p < b->addr + b->size) {
				if (dev)
					*dev = &devs[d];
				return b;
			}
		}
	return NULL;
}

static CUresult arena_free(CUdeviceptr p)
{
	struct device *d;
	struct block *b = find_block(p, &d);
	int i;

	if (!b || b->addr != p)
		return CUDA_ERROR_INVALID_VALUE;
	b->kind = 0;
	d->phys_used -= b->size;
	i = (int)(b - d->blocks);
	/* Merge with free neighbours. */
	if (i + 1 < d->nblocks && !d->blocks[i + 1].kind) {
		b->size += d->blocks[i + 1].size;
		memmove(&d->blocks[i + 1], &d->blocks[i + 2], (d->nblocks - i - 2) * sizeof(*b));
		d->nblocks--;
	}
	if (i > 0 && !d->blocks[i - 1].kind) {
		d->blocks[i - 1].size += b->size;
		memmove(&d->blocks[i], &d->blocks[i + 1], (d->nblocks - i - 1) * sizeof(*b));
		d->nblocks--;
	}
	return CUDA_SUCCESS;
}

/* VMM: physical handles, reservations and mappings. */
struct phys {
	unsigned long long size;
	int dev, mapped;
	struct phys *next;
};
struct mapping {
	unsigned long long va, size;
	struct phys *ph;
	struct mapping *next;
};
struct reservation {
	unsigned long long va, size;
	struct reservation *next;
};
static struct phys *phys_list;
static struct mapping *map_list;
static struct reservation *resv_list;

static bool in_mapping(CUdeviceptr p, unsigned long long n)
{
	for (struct mapping *m = map_list; m; m = m->next)
		if (p >= m->va && p + n <= m->va + m->size)
			return true;
	return false;
}

/* Host allocations (page-locked in the real driver). */
struct host_alloc {
	void *p;
	size_t size;
	struct host_alloc *next;
};
static struct host_alloc *host_list;

static bool is_device_range(CUdeviceptr p, unsigned long long n)
{
	struct block *b = find_block(p, NULL);

	if (b)
		return p + n <= b->addr + b->size;
	return in_mapping(p, n);
}

static bool is_device_ptr(CUdeviceptr p)
{
	for (int d = 0; d < cfg.ndev; d++)
		if (p >= devs[d].base && p < devs[d].va_end)
			return true;
	return false;
}

/* ---- contexts, modules, kernels -------------------------------------------------------- */

struct CUctx_st {
	int dev;
};
static struct CUctx_st primary[MAX_DEVICES];
static __thread CUcontext current;

#define KERNEL_MAGIC   0x4b45524eU
#define FUNCTION_MAGIC 0x46554e43U
#define MAX_KERNELS    64

/* (Both as driver 580 keeps them in one respect: the name's address 8 bytes in, which
 * gpuscope reads for kernels looked up before it attached. FAKECUDA_DRIVER_NAMES=none: text
 * that is no symbol there; =other: another kernel's name.) */
struct CUkern_st {
	unsigned magic;
	const char *driver_name;
	char name[256];
	bool loaded;		/* (FAKECUDA_LAZY_LOAD_NS) */
	bool probed;		/* in a module gpuscope instrumented */
	int nparams;		/* its PTX parameters */
	struct CUfunc_st *func; /* its function: the handle cuKernelGetFunction gives */
	struct CUlib_st *lib;	/* its module or library */
};
struct CUfunc_st {
	unsigned magic;
	const char *driver_name;
	struct CUkern_st *kernel;
};
struct CUlib_st {
	bool probed;	  /* PTX gpuscope rewrote: "// gpuscope probes" */
	CUdeviceptr maps; /* its gs_maps table */
	size_t maps_bytes;
	CUdeviceptr env;  /* its gs_env (pid_tgid, device), if declared */
	CUdeviceptr vars; /* its __gs_vars table (probed), nvars slots */
	int nvars;
	struct fake_var *var; /* the module's variables (not probed: PTX) */
	int nkernels;
	struct CUkern_st kernels[MAX_KERNELS];
	struct CUfunc_st funcs[MAX_KERNELS];
	struct CUfunc_st funcs_other[MAX_KERNELS]; /* (FAKECUDA_FUNC_PER_CONTEXT) */
};
struct CUmod_st {
	struct CUlib_st lib;
};

/* A module's variable, its storage taken at its first lookup (cuModuleGetGlobal). */
struct fake_var {
	char name[64];
	CUdeviceptr addr;
};
static struct fake_var all_vars[256]; /* every module's, looked up: to name a pointer */
static int nall_vars;

/* The variables a PTX module declares: the name before `[`, `=` or `;` on each line that
 * opens with .global or .const. */
static void parse_vars(const char *ptx, struct CUlib_st *lib)
{
	for (const char *ln = ptx; ln && *ln; ln = strchr(ln, '\n'), ln = ln ? ln + 1 : NULL) {
		const char *p = ln, *end;
		size_t n = 0;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!strncmp(p, ".visible ", 9))
			p += 9;
		if (strncmp(p, ".global ", 8) && strncmp(p, ".const ", 7))
			continue;
		end = p + strcspn(p, "[=;\n");
		while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		while (end - n > p && (isalnum((unsigned char)end[-1 - (long)n]) ||
				       strchr("_$", end[-1 - (long)n])))
			n++;
		if (!n || n > 63 ||
		    !(lib->var = realloc(lib->var, (lib->nvars + 1) * sizeof(*lib->var))))
			continue;
		memset(&lib->var[lib->nvars], 0, sizeof(*lib->var));
		memcpy(lib->var[lib->nvars++].name, end - n, n);
	}
}

/* Kernel names are the identifiers after `.entry` in the PTX text. */
/* What a kernel's and its function's object say its name is (see struct CUkern_st). */
static const char *driver_name_of(const struct CUkern_st *k)
{
	if (cfg.driver_names && !strcmp(cfg.driver_names, "none"))
		return "(not a name)";
	if (cfg.driver_names && !strcmp(cfg.driver_names, "other"))
		return "_Z12other_kernelv";
	return k->name;
}

static CUresult parse_ptx(const char *ptx, struct CUlib_st *lib)
{
	const char *p = ptx;

	if (!ptx || !strstr(ptx, ".version"))
		return CUDA_ERROR_INVALID_IMAGE;
	lib->nkernels = 0;
	lib->probed = strstr(ptx, "// gpuscope probes") != NULL;
	if (!lib->probed)
		parse_vars(ptx, lib);
	while ((p = strstr(p, ".entry")) && lib->nkernels < MAX_KERNELS) {
		struct CUkern_st *k = &lib->kernels[lib->nkernels];
		size_t n = 0;

		p += 6;
		while (*p == ' ' || *p == '\t')
			p++;
		while (p[n] && p[n] != '(' && p[n] != ' ' && p[n] != '\n' && n < 255)
			n++;
		memcpy(k->name, p, n);
		k->name[n] = 0;
		k->magic = KERNEL_MAGIC;
		k->probed = lib->probed;
		k->lib = lib;
		k->nparams = 0;
		if (p[n] == '(') {
			const char *close = strchr(p + n, ')'), *q = p + n;

			while (close && (q = strstr(q, ".param")) && q < close) {
				k->nparams++;
				q += 6;
			}
		}
		k->driver_name = driver_name_of(k);
		lib->funcs[lib->nkernels] = (struct CUfunc_st){ FUNCTION_MAGIC, k->driver_name, k };
		lib->funcs_other[lib->nkernels] = lib->funcs[lib->nkernels];
		k->func = &lib->funcs[lib->nkernels];
		lib->nkernels++;
		p += n;
	}
	return CUDA_SUCCESS;
}

static void add_fake_kernel(struct CUlib_st *lib, const char *name, size_t n)
{
	struct CUkern_st *k;

	for (int i = 0; i < lib->nkernels; i++)
		if (strlen(lib->kernels[i].name) == n && !memcmp(lib->kernels[i].name, name, n))
			return;
	if (lib->nkernels == MAX_KERNELS || n == 0 || n > 255)
		return;
	k = &lib->kernels[lib->nkernels];
	memcpy(k->name, name, n);
	k->name[n] = 0;
	k->magic = KERNEL_MAGIC;
	k->driver_name = driver_name_of(k);
	lib->funcs[lib->nkernels] = (struct CUfunc_st){ FUNCTION_MAGIC, k->driver_name, k };
	lib->funcs_other[lib->nkernels] = lib->funcs[lib->nkernels];
	k->func = &lib->funcs[lib->nkernels];
	lib->nkernels++;
}

/* Fatbins (or their wrapper) and cubins, uncompressed (nvcc --compress-mode=none): kernel
 * names are what follows `.entry ` in PTX entries, and `.text.` section names of cubins. A
 * compressed image loads with no kernels. (A double: the real driver decodes them.) */
static CUresult parse_binary(const unsigned char *b, struct CUlib_st *lib)
{
	size_t n;

	if (*(const unsigned int *)b == 0x466243b1u) /* the wrapper: {magic, version, data} */
		b = *(const unsigned char *const *)(b + 8);
	if (*(const unsigned int *)b == 0xba55ed50u)
		n = *(const unsigned short *)(b + 6) + *(const unsigned long long *)(b + 8);
	else if (!memcmp(b, "\177ELF", 4))
		n = *(const unsigned long long *)(b + 0x28) +
		    (size_t) * (const unsigned short *)(b + 0x3c) * 64; /* e_shoff + shnum * 64 */
	else
		return CUDA_ERROR_INVALID_IMAGE;
	lib->nkernels = 0;
	for (size_t i = 0; i + 7 < n; i++) {
		const char *p = (const char *)b + i;
		size_t len = 0, skip = !memcmp(p, ".entry ", 7)	 ? 7
				       : !memcmp(p, ".text.", 6) ? 6
								 : 0;

		if (!skip)
			continue;
		p += skip;
		while (i + skip + len < n && p[len] && p[len] != '(' && p[len] != ' ' &&
		       p[len] != '\n')
			len++;
		add_fake_kernel(lib, p, len);
	}
	return CUDA_SUCCESS;
}

static struct CUkern_st *lookup_kernel(struct CUlib_st *lib, const char *name)
{
	for (int i = 0; i < lib->nkernels; i++)
		if (!strcmp(lib->kernels[i].name, name))
			return &lib->kernels[i];
	return NULL;
}

static struct CUkern_st *kernel_of(const void *h)
{
	const struct CUkern_st *k = h;
	const struct CUfunc_st *f = h;

	if (!h)
		return NULL;
	if (k->magic == KERNEL_MAGIC)
		return (struct CUkern_st *)k;
	if (f->magic == FUNCTION_MAGIC)
		return f->kernel;
	return NULL;
}

/* ---- streams, events, graphs ---------------------------------------------------------- */

struct node {
	unsigned long long dur;
	struct CUkern_st *kernel; /* a kernel node's (added or set by hand) */
	const void *handle;	  /* a kernel node's kernel, as the program gave it */
	int type;		  /* CUgraphNodeType */
	int seq;		  /* order added: a launch runs nodes in it, dependencies first */
	bool ran;		  /* (during a launch) */
	bool disabled;		  /* cuGraphNodeSetEnabled: runs nothing (in every exec of it) */
	struct CUevent_st *ev;	  /* an event record node's */
	struct node **deps;
	size_t ndeps;
	struct CUgraph_st *graph;
	struct node *copy;	  /* (while cloning) */
	struct node *orig;	  /* a clone's node: the node it copies */
	struct CUgraph_st *child; /* a child graph node's own copy of its graph */
	CUdeviceptr set_dst;	  /* a memset node's: what it sets at each run */
	size_t set_count;
	unsigned set_value, set_elem;
	unsigned long long *cal_out, cal_ns; /* gpuscope's calibration kernel's arguments */
	unsigned grid[3];		     /* a kernel node's */
	unsigned long long switch_ns;	     /* FAKECUDA_NODE_SWITCH_NS, for its next run */
	struct node *next;
};
struct CUgraph_st {
	struct node *nodes;
	int nnodes, seq;
	struct node *last; /* captured last: the next captured node depends on it */
};
struct CUgraphExec_st {
	struct CUgraph_st *graph;
	unsigned long long last_end; /* its latest launch's: the next one starts after it */
};
struct held_op {
	unsigned long long dur; /* work, or */
	struct CUevent_st *ev;	/* an event record */
	struct held_op *next;
};
struct CUstream_st {
	unsigned long long busy_until;
	struct CUgraph_st *capture; /* non-NULL while capturing */
	/* A wait on host memory not satisfied yet: later work is held until it is. */
	volatile unsigned long long *gate;
	unsigned long long gate_value;
	int gate_wide;
	int after_copy; /* its last work was a copy or a set */
	struct held_op *held, **held_tail;
	struct CUstream_st *next_gated;
};
struct CUevent_st {
	unsigned long long time;
	int recorded;
	int held; /* recorded behind a closed gate: happens when it opens */
};
static struct CUstream_st legacy_stream;
static __thread struct CUstream_st per_thread_stream;

static struct CUstream_st *stream_of(CUstream s, bool per_thread)
{
	if (s == NULL)
		return per_thread ? &per_thread_stream : &legacy_stream;
	if (s == CU_STREAM_LEGACY)
		return &legacy_stream;
	if (s == CU_STREAM_PER_THREAD)
		return &per_thread_stream;
	return s;
}

/* A node added to graph g after the nodes deps (a captured one: after the one captured
 * before it). */
static struct node *graph_add(struct CUgraph_st *g, int type, const CUgraphNode *deps, size_t nd,
			      bool captured)
{
	struct node *n = calloc(1, sizeof(*n));

	n->type = type;
	n->graph = g;
	n->seq = g->seq++;
	if (captured && g->last)
		deps = (const CUgraphNode *)&g->last, nd = 1;
	n->deps = nd ? calloc(nd, sizeof(*n->deps)) : NULL;
	for (size_t i = 0; i < nd; i++)
		n->deps[i] = (struct node *)deps[i];
	n->ndeps = nd;
	if (captured)
		g->last = n;
	n->next = g->nodes;
	g->nodes = n;
	g->nnodes++;
	return n;
}

/* The latest simulated time any stream is busy until: what cuCtxSynchronize waits for. */
static unsigned long long latest_busy;

static struct CUstream_st *gated; /* streams with a closed gate */

static void stream_enqueue(struct CUstream_st *s, unsigned long long dur, bool launch);

static bool gate_is_open(const struct CUstream_st *s)
{
	unsigned long long v = *s->gate;

	return s->gate_wide ? v >= s->gate_value : (unsigned)v >= (unsigned)s->gate_value;
}

static void hold(struct CUstream_st *s, unsigned long long dur, struct CUevent_st *ev)
{
	struct held_op *op = calloc(1, sizeof(*op));

	op->dur = dur;
	op->ev = ev;
	if (!s->held)
		s->held_tail = &s->held;
	*s->held_tail = op;
	s->held_tail = &op->next;
}

/* Streams whose gate the host has opened run what they held, from now. Under the lock. */
static void check_gates(void)
{
	for (struct CUstream_st **p = &gated; *p;) {
		struct CUstream_st *s = *p;

		if (!gate_is_open(s)) {
			p = &s->next_gated;
			continue;
		}
		unsigned long long n = now_ns(); /* the GPU passes the gate: all runs from now */

		*p = s->next_gated;
		s->gate = NULL;
		for (struct held_op *op = s->held, *next; op; op = next) {
			next = op->next;
			if (op->ev) {
				op->ev->time = s->busy_until > n ? s->busy_until : n;
				op->ev->recorded = 1;
				op->ev->held = 0;
			} else {
				s->busy_until = (s->busy_until > n ? s->busy_until : n) + op->dur;
				if (s->busy_until > latest_busy)
					latest_busy = s->busy_until;
			}
			free(op);
		}
		s->held = NULL;
	}
}

/* The test double of CUPTI (libcupti.c): told of every kernel that runs, ungated, as it is
 * queued: its context, stream (the double's own, a per-thread one is the thread's),
 * simulated start and end (CLOCK_MONOTONIC), grid and block, name, and the id of the
 * graph that ran it (0: a launch of its own). */
typedef void (*kernel_hook_fn)(void *ctx, void *stream, unsigned long long start,
			       unsigned long long end, const unsigned int *dims, const char *name,
			       unsigned int graph);
static kernel_hook_fn kernel_hook;

EXPORT void fakecuda_kernel_hook(kernel_hook_fn fn)
{
	pthread_mutex_lock(&lock);
	kernel_hook = fn;
	pthread_mutex_unlock(&lock);
}

/* ... and of every 1-D copy and set that runs, ungated and not in a graph: its size, and
 * whether a set (2-D and 3-D ones are rows of 1-D ones here: told of none). */
typedef void (*copy_hook_fn)(void *ctx, void *stream, unsigned long long start,
			     unsigned long long end, unsigned long long bytes, int set);
static copy_hook_fn copy_hook;
static __thread int in_rows; /* (inside a 2-D or 3-D copy or set) */

EXPORT void fakecuda_copy_hook(copy_hook_fn fn)
{
	pthread_mutex_lock(&lock);
	copy_hook = fn;
	pthread_mutex_unlock(&lock);
}

static void copy_ran(struct CUstream_st *s, unsigned long long dur, unsigned long long bytes,
		     int set)
{
	if (copy_hook && !s->gate && !in_rows)
		copy_hook(current, s, s->busy_until - dur, s->busy_until, bytes, set);
}

/* The double's stream behind a handle (for the double of CUPTI's stream ids). */
EXPORT void *fakecuda_stream_of(CUstream s, int per_thread)
{
	return stream_of(s, per_thread);
}

/* When the current call began: work it submits can start from then on. */
static __thread unsigned long long call_ns;
/* (Under the lock, in a graph launch: when it began. Its nodes run from then on, whatever
 * time the double takes to run them: a thread preempted between two nodes made a carrier's
 * run read 23 us long under the suite's load.) */
static unsigned long long graph_now;

/* Occupy a stream for `dur` ns of simulated device time: a launch from now (the end of
 * its call, when a driver submits it), a copy or set from when its call began (it runs
 * while the call stages it). */
static void stream_enqueue(struct CUstream_st *s, unsigned long long dur, bool launch)
{
	unsigned long long n = graph_now ? graph_now : !launch && call_ns ? call_ns : now_ns();

	/* A kernel after a copy waits FAKECUDA_ENGINE_SWITCH_NS to start, events before it
	 * not (as a GPU moves the stream back from a copy engine to compute). */
	if (launch && s->after_copy)
		dur += cfg.switch_ns;
	s->after_copy = !launch;
	if (s->gate) {
		hold(s, dur, NULL);
		return;
	}
	s->busy_until = (s->busy_until > n ? s->busy_until : n) + dur;
	if (s->busy_until > latest_busy)
		latest_busy = s->busy_until;
}

static unsigned long long transfer_ns(unsigned long long bytes, bool on_device)
{
	double gbps = on_device ? cfg.gbps * 50 : cfg.gbps;

	return (unsigned long long)(bytes / gbps) + 2000;
}

static CUresult check_init(void)
{
	return initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

#define LOCKED(expr)                         \
	({                                   \
		CUresult r_;                 \
		call_ns = now_ns();          \
		pthread_mutex_lock(&lock);   \
		check_gates();               \
		r_ = check_init();           \
		if (r_ == CUDA_SUCCESS)      \
			r_ = (expr);         \
		pthread_mutex_unlock(&lock); \
		r_;                          \
	})

/* ---- initialisation and devices ------------------------------------------------------- */

EXPORT CUresult cuInit(unsigned int flags)
{
	CUresult r = CUDA_SUCCESS;

	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (!initialized) {
		cfg.ndev = (int)env_ull("FAKECUDA_DEVICES", 1);
		if (cfg.ndev < 1 || cfg.ndev > MAX_DEVICES)
			cfg.ndev = 1;
		cfg.mem = env_ull("FAKECUDA_MEM", 4ULL << 30);
		cfg.fail_alloc_at = (long)env_ull("FAKECUDA_FAIL_ALLOC", 0);
		cfg.kernel_ns = env_ull("FAKECUDA_KERNEL_NS", 5000);
		cfg.gbps = (double)env_ull("FAKECUDA_GBPS", 20);
		cfg.switch_ns = env_ull("FAKECUDA_ENGINE_SWITCH_NS", 0);
		cfg.graph_start_ns = env_ull("FAKECUDA_GRAPH_START_NS", 0);
		cfg.run_calibration = getenv("FAKECUDA_RUN_CALIBRATION") != NULL;
		cfg.launch_waits = getenv("FAKECUDA_LAUNCH_WAITS") != NULL;
		cfg.node_switch_ns = env_ull("FAKECUDA_NODE_SWITCH_NS", 0);
		cfg.driver_names = getenv("FAKECUDA_DRIVER_NAMES");
		if (getenv("FAKECUDA_SLOW_KERNEL") && strchr(getenv("FAKECUDA_SLOW_KERNEL"), ':')) {
			const char *v = getenv("FAKECUDA_SLOW_KERNEL");
			size_t n = (size_t)(strchr(v, ':') - v);

			snprintf(cfg.slow_kernel, sizeof(cfg.slow_kernel), "%.*s", (int)n, v);
			cfg.slow_ns = strtoull(v + n + 1, NULL, 10);
		}
		for (int d = 0; d < cfg.ndev && r == CUDA_SUCCESS; d++) {
			primary[d].dev = d;
			if (arena_init(&devs[d]))
				r = CUDA_ERROR_OUT_OF_MEMORY;
		}
		initialized = r == CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = 13000;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *n)
{
	if (!n)
		return CUDA_ERROR_INVALID_VALUE;
	if (check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	*n = cfg.ndev;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dev || ordinal < 0 || ordinal >= cfg.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	if (!name || len <= 0 || dev < 0 || dev >= cfg.ndev)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "gpuscope CUDA test double");
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	if (!bytes || dev < 0 || dev >= cfg.ndev)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = cfg.mem;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev)
{
	if (!v || dev < 0 || dev >= cfg.ndev)
		return CUDA_ERROR_INVALID_VALUE;
	/* multiprocessor count, compute capability (FAKECUDA_CC, 90), else "supported" */
	*v = attr == 16	  ? 132
	     : attr == 75 ? (int)env_ull("FAKECUDA_CC", 90) / 10
	     : attr == 76 ? (int)env_ull("FAKECUDA_CC", 90) % 10
			  : 1;
	return CUDA_SUCCESS;
}

static CUresult ctx_for(CUcontext *out, CUdevice dev)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= cfg.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*out = &primary[dev];
	current = *out;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *out, CUdevice dev)
{
	return LOCKED(ctx_for(out, dev));
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return dev >= 0 && dev < cfg.ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *out, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return LOCKED(ctx_for(out, dev));
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *out, CUctxCreateParams *params, unsigned int flags,
			       CUdevice dev)
{
	(void)params;
	(void)flags;
	return LOCKED(ctx_for(out, dev));
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	return ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	current = ctx;
	return CUDA_SUCCESS;
}

/* The thread's context stack: `current` is its top; these are the ones under it. */
static __thread CUcontext pushed[16];
static __thread int npushed;

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (current) {
		if (npushed == 16)
			return CUDA_ERROR_INVALID_VALUE;
		pushed[npushed++] = current;
	}
	current = ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx)
{
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (ctx)
		*ctx = current;
	current = npushed ? pushed[--npushed] : NULL;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	*ctx = current;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	*dev = current->dev;
	return CUDA_SUCCESS;
}

static int cur_dev(void)
{
	return current ? current->dev : 0;
}

/* ---- modules and libraries ------------------------------------------------------------ */

/* The last module unloaded: the next one loaded takes its place, so its functions get the
 * handles the unloaded module's had (the real driver reuses them too). */
static struct CUlib_st *spare_module;

static CUresult load_library(CUlibrary *out, const void *code)
{
	struct CUlib_st *lib;
	CUresult r;

	if (!out || !code)
		return CUDA_ERROR_INVALID_VALUE;
	lib = spare_module ? memset(spare_module, 0, sizeof(*lib)) : calloc(1, sizeof(*lib));
	spare_module = NULL;
	r = parse_binary(code, lib);
	if (r)
		r = parse_ptx(code, lib);
	if (r) {
		free(lib);
		return r;
	}
	if (lib->probed) {
		const char *m = strstr(code, "gs_maps[");
		static int dumped;

		if (getenv("FAKECUDA_JIT_FAIL")) {
			free(lib);
			return CUDA_ERROR_INVALID_PTX;
		}
		lib->maps_bytes = m ? strtoull(m + 8, NULL, 10) : 0;
		if ((lib->maps_bytes && arena_alloc(&devs[cur_dev()], lib->maps_bytes, 1,
						    &lib->maps) != CUDA_SUCCESS) ||
		    (strstr(code, " gs_env[2];") &&
		     arena_alloc(&devs[cur_dev()], 16, 1, &lib->env) != CUDA_SUCCESS) ||
		    ((m = strstr(code, " __gs_vars[")) && (lib->nvars = atoi(m + 11)) > 0 &&
		     arena_alloc(&devs[cur_dev()], lib->nvars * 8ULL, 1, &lib->vars) !=
			     CUDA_SUCCESS)) {
			free(lib);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		if (getenv("FAKECUDA_DUMP_PTX")) {
			char path[4096];
			FILE *f;

			snprintf(path, sizeof(path), "%s/probed-%d.ptx",
				 getenv("FAKECUDA_DUMP_PTX"), dumped++);
			if ((f = fopen(path, "w"))) {
				fputs(code, f);
				fclose(f);
			}
		}
	}
	*out = lib;
	return CUDA_SUCCESS;
}

/* gpuscope's instrumented modules: their map table, gs_env and __gs_vars; the program's:
 * their variables (FAKECUDA_GLOBAL_MISSING names one not found). */
static CUresult module_get_global(CUdeviceptr *dptr, size_t *bytes, struct CUlib_st *lib,
				  const char *name)
{
	CUdeviceptr a = 0;
	size_t n = 0;

	if (!lib || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!strcmp(name, "gs_env") && lib->env)
		a = lib->env, n = 16;
	else if (!strcmp(name, "gs_maps") && lib->maps)
		a = lib->maps, n = lib->maps_bytes;
	else if (!strcmp(name, "__gs_vars") && lib->vars)
		a = lib->vars, n = lib->nvars * 8ULL;
	for (int i = 0; !a && i < lib->nvars && lib->var; i++) {
		struct fake_var *v = &lib->var[i];
		const char *missing = getenv("FAKECUDA_GLOBAL_MISSING");

		if (strcmp(v->name, name) || (missing && !strcmp(missing, name)))
			continue;
		if (!v->addr) {
			if (nall_vars == 256 ||
			    arena_alloc(&devs[cur_dev()], 64, 1, &v->addr) != CUDA_SUCCESS)
				return CUDA_ERROR_OUT_OF_MEMORY;
			all_vars[nall_vars++] = *v;
		}
		a = v->addr, n = 64;
	}
	if (!a)
		return CUDA_ERROR_NOT_FOUND;
	if (dptr)
		*dptr = a;
	if (bytes)
		*bytes = n;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule mod,
				     const char *name)
{
	return LOCKED(module_get_global(dptr, bytes, mod ? &mod->lib : NULL, name));
}

EXPORT CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary lib,
				   const char *name)
{
	return LOCKED(module_get_global(dptr, bytes, (struct CUlib_st *)lib, name));
}

static CUresult func_get_attribute(int *v, int attrib, CUfunction f)
{
	struct CUkern_st *k = kernel_of(f);

	if (!v || !k)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	case 0: /* max threads per block */
		*v = k->probed ? (int)env_ull("FAKECUDA_PROBED_MAX_THREADS", 1024) : 1024;
		break;
	case 3: /* local bytes */
		*v = k->probed ? 48 : 0;
		break;
	case 4: /* registers */
		*v = k->probed ? 40 : 32;
		break;
	default:
		*v = 0;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetAttribute(int *v, int attrib, CUfunction f)
{
	return LOCKED(func_get_attribute(v, attrib, f));
}

EXPORT CUresult cuFuncSetAttribute(CUfunction f, int attrib, int v)
{
	(void)attrib, (void)v;
	return kernel_of(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* gpuscope's clock kernel, played by a thread: each request written to the mapped word is
 * answered with the "global timer" (this clock plus FAKECUDA_GLOBALTIMER_OFFSET). */
static void *clock_kernel(void *arg)
{
	volatile unsigned long long *h = arg;
	unsigned long long last = 0, start = now_ns();

	while (now_ns() - start < 2000000000ULL) {
		unsigned long long req = __atomic_load_n(&h[0], __ATOMIC_SEQ_CST);

		if (req == ~0ULL)
			break;
		if (req != last) {
			__atomic_store_n(&h[2],
					 now_ns() + env_ull("FAKECUDA_GLOBALTIMER_OFFSET", 0),
					 __ATOMIC_SEQ_CST);
			__atomic_store_n(&h[1], req, __ATOMIC_SEQ_CST);
			last = req;
		}
	}
	return NULL;
}

/*
 * What a probe that writes into a ring buffer would write: FAKECUDA_RING_RECORDS records
 * {u64 launch sequence number, u64 i} into each ring of the module's map table, as the
 * translated bpf_ringbuf_output does (src/ptx/translate.h: reserved against the host's
 * consumer position, dropped and counted when full, published last).
 */
static void ring_records(struct CUlib_st *lib, unsigned long long seq)
{
	unsigned long long n = env_ull("FAKECUDA_RING_RECORDS", 0);

	for (size_t d = 0; n && lib->maps && d + 24 <= lib->maps_bytes; d += 24) {
		const unsigned char *desc = (const unsigned char *)lib->maps + d;
		unsigned long long *ctl, cap, mask;
		unsigned kind, extra;

		memcpy(&kind, desc + 16, 4);
		memcpy(&extra, desc + 20, 4);
		if (kind != 4)
			continue;
		memcpy(&ctl, desc, 8);
		cap = extra;
		mask = cap - 1;
		for (unsigned long long i = 0; i < n; i++) {
			unsigned char *ring = (unsigned char *)(unsigned long)ctl[2];
			unsigned long long tail = __atomic_load_n((unsigned long long *)ctl[3],
								  __ATOMIC_ACQUIRE),
					   pos = ctl[0], w[2] = { seq, i }, h;

			if (pos + 32 - tail > cap) {
				ctl[1]++;
				continue;
			}
			ctl[0] += 32;
			h = now_ns() + env_ull("FAKECUDA_GLOBALTIMER_OFFSET", 0);
			memcpy(ring + ((pos + 8) & mask), &h, 8);
			memcpy(ring + ((pos + 16) & mask), &w[0], 8);
			memcpy(ring + ((pos + 24) & mask), &w[1], 8);
			__atomic_store_n((unsigned long long *)(ring + (pos & mask)),
					 16ULL | 1ULL << 32, __ATOMIC_RELEASE);
		}
	}
}

/* What an instrumented module's __gs_vars point at: the program's variables' names, 0 for
 * a slot not set, ? for an address of no variable; "-" with no table. */
static void log_vars(FILE *f, const struct CUlib_st *lib)
{
	const CUdeviceptr *slot = (const CUdeviceptr *)(unsigned long)lib->vars;

	for (int i = 0; lib->vars && i < lib->nvars; i++) {
		const char *name = slot[i] ? "?" : "0";

		for (int j = 0; j < nall_vars; j++)
			if (slot[i] && all_vars[j].addr == slot[i])
				name = all_vars[j].name;
		fprintf(f, "%s%s", i ? "," : "", name);
	}
	fprintf(f, "%s", lib->vars ? "" : "-");
}

/* FAKECUDA_PROBE_MAP=i: the first 8 bytes of map i as the kernel would find them through
 * its gs_maps table at the launch ("-" without one). */
static void log_map(FILE *f, const struct CUlib_st *lib)
{
	const char *e = getenv("FAKECUDA_PROBE_MAP");
	unsigned long long d = 0, v = 0;

	if (!e)
		return;
	if (lib->maps && 24ULL * (unsigned)atoi(e) + 8 <= lib->maps_bytes)
		memcpy(&d, (char *)(unsigned long)lib->maps + 24 * atoi(e), 8);
	if (d)
		memcpy(&v, (void *)(unsigned long)d, 8);
	fprintf(f, d ? " %llu" : " -", v);
}

/* A launch of an instrumented kernel: its last parameter (__gs_launch) must be there, with
 * a sequence number; logged to FAKECUDA_PROBE_LOG. */
static CUresult probed_launch(struct CUkern_st *k, void **params, void **extra)
{
	unsigned long long v[2];
	const char *log = getenv("FAKECUDA_PROBE_LOG");

	if (!strcmp(k->name, "gs_clock")) {
		pthread_t t;

		if (!params || !params[0])
			return CUDA_ERROR_INVALID_VALUE;
		pthread_create(&t, NULL, clock_kernel,
			       (void *)(unsigned long)*(unsigned long long *)params[0]);
		pthread_detach(t);
		return CUDA_SUCCESS;
	}
	if (!k->probed)
		return CUDA_SUCCESS;
	if (getenv("FAKECUDA_PROBED_FAIL_LAUNCH"))
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	if (params && k->nparams > 0) {
		memcpy(v, params[k->nparams - 1], sizeof(v));
	} else if (extra && extra[0] == CU_LAUNCH_PARAM_BUFFER_POINTER &&
		   extra[2] == CU_LAUNCH_PARAM_BUFFER_SIZE && *(size_t *)extra[3] >= 16) {
		memcpy(v, (char *)extra[1] + *(size_t *)extra[3] - 16, sizeof(v));
	} else {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!v[0])
		return CUDA_ERROR_INVALID_VALUE;
	ring_records(k->lib, v[0]);
	if (log) {
		FILE *f = fopen(log, "a");

		if (f) {
			unsigned long long env[2] = { 0, 0 };

			if (k->lib->env)
				memcpy(env, (void *)(unsigned long)k->lib->env, sizeof(env));
			fprintf(f, "launch %s %d %llu %llu %llu %llx %llu ", k->name, k->nparams,
				v[0], v[1], now_ns() + env_ull("FAKECUDA_GLOBALTIMER_OFFSET", 0),
				env[0], env[1]);
			log_vars(f, k->lib);
			log_map(f, k->lib);
			fputc('\n', f);
			fclose(f);
		}
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, void *jitOptions,
				  void **jitOptionsValues, unsigned int numJitOptions,
				  void *libraryOptions, void **libraryOptionValues,
				  unsigned int numLibraryOptions)
{
	(void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
	(void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
	return LOCKED(load_library(lib, code));
}

/* (Its memory is the next library's or module's, as a module's is: the driver gives
 * handles out again.) */
EXPORT CUresult cuLibraryUnload(CUlibrary lib)
{
	if (!lib)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	free(((struct CUlib_st *)lib)->var);
	free(spare_module);
	spare_module = (struct CUlib_st *)lib;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

static CUresult library_get_kernel(CUkernel *out, CUlibrary lib, const char *name)
{
	struct CUkern_st *k;

	if (!out || !lib || !name)
		return CUDA_ERROR_INVALID_VALUE;
	k = lookup_kernel(lib, name);
	if (!k)
		return CUDA_ERROR_NOT_FOUND;
	*out = k;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *out, CUlibrary lib, const char *name)
{
	return LOCKED(library_get_kernel(out, lib, name));
}

static CUresult kernel_get_function(CUfunction *out, CUkernel kernel)
{
	struct CUkern_st *k = kernel_of(kernel);

	if (!out || !k || kernel != (CUkernel)k)
		return CUDA_ERROR_INVALID_HANDLE;
	/* The function handle is the kernel's twin in the library: a distinct value. With
	 * FAKECUDA_FUNC_PER_CONTEXT=1, as the driver's, one per context: another twin in any
	 * context but device 0's primary one. */
	*out = getenv("FAKECUDA_FUNC_PER_CONTEXT") && current && current != &primary[0]
		       ? &k->lib->funcs_other[k - k->lib->kernels]
		       : k->func;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetFunction(CUfunction *out, CUkernel kernel)
{
	return LOCKED(kernel_get_function(out, kernel));
}

static CUresult func_is_loaded(CUfunctionLoadingState *state, CUfunction f)
{
	const struct CUfunc_st *fn = (const struct CUfunc_st *)f;

	if (!state)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f || fn->magic != FUNCTION_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	*state = fn->kernel->loaded || !getenv("FAKECUDA_LAZY_LOAD_NS")
			 ? CU_FUNCTION_LOADING_STATE_LOADED
			 : CU_FUNCTION_LOADING_STATE_UNLOADED;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction f)
{
	return LOCKED(func_is_loaded(state, f));
}

static CUresult func_load(CUfunction f)
{
	const struct CUfunc_st *fn = (const struct CUfunc_st *)f;

	if (!f || fn->magic != FUNCTION_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	fn->kernel->loaded = true;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncLoad(CUfunction f)
{
	return LOCKED(func_load(f));
}

static CUresult module_load(CUmodule *out, const void *image)
{
	CUlibrary lib;
	CUresult r = load_library(&lib, image);

	if (r == CUDA_SUCCESS)
		*out = (CUmodule)lib;
	return r;
}

EXPORT CUresult cuModuleLoadData(CUmodule *mod, const void *image)
{
	return LOCKED(module_load(mod, image));
}

EXPORT CUresult cuModuleLoadFatBinary(CUmodule *mod, const void *fatbin)
{
	return LOCKED(module_load(mod, fatbin));
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned int n, void *opts,
				   void **vals)
{
	(void)n, (void)opts, (void)vals;
	return LOCKED(module_load(mod, image));
}

/* A file's bytes, NUL-terminated (kept: a module's names may point into them). */
static void *read_file(const char *path)
{
	FILE *f = path ? fopen(path, "rb") : NULL;
	char *b = NULL;
	long n;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
	    (b = calloc(1, (size_t)n + 1)) && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

EXPORT CUresult cuModuleLoad(CUmodule *mod, const char *path)
{
	void *b = read_file(path);

	return b ? LOCKED(module_load(mod, b)) : CUDA_ERROR_FILE_NOT_FOUND;
}

EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *lib, const char *path, void *jitOptions,
				      void **jitOptionsValues, unsigned int numJitOptions,
				      void *libraryOptions, void **libraryOptionValues,
				      unsigned int numLibraryOptions)
{
	void *b = read_file(path);

	(void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
	(void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
	return b ? LOCKED(load_library(lib, b)) : CUDA_ERROR_FILE_NOT_FOUND;
}

EXPORT CUresult cuModuleUnload(CUmodule mod)
{
	if (!mod)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	free(mod->lib.var);
	free(spare_module);
	spare_module = &mod->lib;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

static CUresult module_get_function(CUfunction *out, CUmodule mod, const char *name)
{
	struct CUkern_st *k;

	if (!out || !mod || !name)
		return CUDA_ERROR_INVALID_VALUE;
	k = lookup_kernel(&mod->lib, name);
	if (!k)
		return CUDA_ERROR_NOT_FOUND;
	*out = &mod->lib.funcs[k - mod->lib.kernels];
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *out, CUmodule mod, const char *name)
{
	return LOCKED(module_get_function(out, mod, name));
}

/* ---- launches ------------------------------------------------------------------------- */

static unsigned long long kernel_ns(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
				    unsigned bz)
{
	unsigned long long threads = (unsigned long long)gx * gy * gz * bx * by * bz;

	return cfg.kernel_ns + threads / 16;
}

static bool is_calibration(const struct CUkern_st *k)
{
	return k && !strcmp(k->name, "gpuscope_calibrate");
}

static CUresult launch(const void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
		       unsigned by, unsigned bz, unsigned smem, CUstream hs, bool per_thread,
		       void **params, void **extra)
{
	struct CUstream_st *s;
	unsigned long long dur;
	CUresult r;

	if (!kernel_of(f))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!gx || !gy || !gz || !bx || !by || !bz || (unsigned long long)bx * by * bz > 1024 ||
	    smem > 228 * 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (kernel_of(f)->probed &&
	    (unsigned long long)bx * by * bz > env_ull("FAKECUDA_PROBED_MAX_THREADS", 1024))
		return CUDA_ERROR_INVALID_VALUE;
	r = probed_launch(kernel_of(f), params, extra);
	if (r)
		return r;
	s = stream_of(hs, per_thread);
	dur = kernel_ns(gx, gy, gz, bx, by, bz);
	if (cfg.slow_ns && !strcmp(kernel_of(f)->name, cfg.slow_kernel))
		dur += cfg.slow_ns;
	/* FAKECUDA_RUN_CALIBRATION: gpuscope's calibration kernel (out, ns) writes a span of its
	 * ns, and runs FAKECUDA_KERNEL_NS as any kernel of one thread: its pair reads longer
	 * than its span by the difference, all of it unseen by the span. */
	if (cfg.run_calibration && params && is_calibration(kernel_of(f))) {
		unsigned long long *out = (unsigned long long *)*(unsigned long long *)params[0];
		unsigned long long ns = *(unsigned long long *)params[1];

		out[0] = now_ns();
		out[1] = out[0] + (ns < dur ? ns : dur);
	}
	if (!kernel_of(f)->loaded && getenv("FAKECUDA_LAZY_LOAD_NS")) {
		kernel_of(f)->loaded = true;
		pthread_mutex_unlock(&lock);
		sleep_until(now_ns() + strtoull(getenv("FAKECUDA_LAZY_LOAD_NS"), NULL, 10));
		pthread_mutex_lock(&lock);
		check_gates();
		call_ns = now_ns(); /* submitted only now */
	}
	/* A full push buffer: the launch waits for the stream to drain, gates included. */
	while (cfg.launch_waits && !s->capture && (s->gate || s->busy_until > now_ns())) {
		pthread_mutex_unlock(&lock);
		sleep_until(now_ns() + 20000);
		pthread_mutex_lock(&lock);
		check_gates();
		call_ns = now_ns(); /* submitted only now */
	}
	if (s->capture) {
		struct node *n = graph_add(s->capture, 0, NULL, 0, true);

		n->dur = dur;
		n->kernel = kernel_of(f);
		n->handle = f;
		return CUDA_SUCCESS;
	}
	stream_enqueue(s, dur, true);
	if (kernel_hook && !s->gate) {
		unsigned int dims[6] = { gx, gy, gz, bx, by, bz };

		kernel_hook(current, s, s->busy_until - dur, s->busy_until, dims,
			    kernel_of(f)->name, 0);
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			       unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
			       void **extra)
{
	return LOCKED(launch(f, gx, gy, gz, bx, by, bz, smem, s, false, params, extra));
}

/* A wrapper that jumps into another exported entry point (see the file comment). */
EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
				    unsigned bx, unsigned by, unsigned bz, unsigned smem,
				    CUstream s, void **params, void **extra)
{
	if (s == NULL)
		s = CU_STREAM_PER_THREAD;
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
					  unsigned bx, unsigned by, unsigned bz, unsigned smem,
					  CUstream s, void **params)
{
	return LOCKED(launch(f, gx, gy, gz, bx, by, bz, smem, s, false, params, NULL));
}

EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
					       unsigned bx, unsigned by, unsigned bz, unsigned smem,
					       CUstream s, void **params)
{
	return LOCKED(launch(f, gx, gy, gz, bx, by, bz, smem, s, true, params, NULL));
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, bool per_thread, void **params,
			  void **extra)
{
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
		      c->blockDimZ, c->sharedMemBytes, c->hStream, per_thread, params, extra);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	return LOCKED(launch_ex(c, f, false, params, extra));
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params,
				      void **extra)
{
	return LOCKED(launch_ex(c, f, true, params, extra));
}

/* A node of a launched graph runs: its work, or its event's record. The launch's first work
 * starts *delay later (FAKECUDA_GRAPH_START_NS), an event node before it not, as on a GPU:
 * an event first in a graph is recorded as the launch starts. */
static void run_nodes(struct CUstream_st *s, struct CUgraph_st *g, unsigned long long *delay);

static unsigned long long event_nodes_run; /* of graph launches, for FAKECUDA_STATS */
static unsigned long long graph_uploads;   /* (the same) */
static unsigned long long node_switches;   /* (the same: exec kernel nodes set to another) */

/* FAKECUDA_STATS=path: what the GPU ran that a test cannot see otherwise, written at exit. */
__attribute__((destructor)) static void write_stats(void)
{
	const char *path = getenv("FAKECUDA_STATS");
	FILE *f = path ? fopen(path, "w") : NULL;

	if (!f)
		return;
	fprintf(f, "graph_event_nodes_run %llu\ngraph_uploads %llu\nkernel_node_switches %llu\n",
		event_nodes_run, graph_uploads, node_switches);
	fclose(f);
}

static unsigned int running_graph; /* (under lock: the id of the exec a launch runs) */

static void node_run(struct CUstream_st *s, struct node *n, unsigned long long *delay)
{
	unsigned long long now = graph_now;

	n->ran = true;
	event_nodes_run += n->type == 7 && n->ev;
	if (__atomic_load_n(&n->disabled, __ATOMIC_RELAXED))
		return;
	/* (A memset node sets its bytes as it is run: the runs are in order here. Word by
	 * word: a launch call of the double stays short, as a driver's is.) */
	for (size_t i = 0; n->type == 2 && n->set_elem == 4 && i < n->set_count; i++)
		((unsigned *)n->set_dst)[i] = (unsigned)n->set_value;
	for (size_t i = 0; n->type == 2 && n->set_elem != 4 && i < n->set_count; i++)
		memcpy((char *)n->set_dst + i * n->set_elem, &n->set_value, n->set_elem);
	/* (Our calibration kernel in a node: its span written as a launch writes it.) */
	if (cfg.run_calibration && n->cal_out) {
		n->cal_out[0] = (s->busy_until > now ? s->busy_until : now) + *delay;
		n->cal_out[1] = n->cal_out[0] + (n->cal_ns < n->dur ? n->cal_ns : n->dur);
	}
	if (n->child) {
		run_nodes(s, n->child, delay);
	} else if (n->type != 7 || !n->ev) {
		stream_enqueue(s, n->dur + n->switch_ns + *delay, true);
		*delay = 0;
		n->switch_ns = 0;
		if (kernel_hook && !s->gate && n->type == 0 && n->kernel) {
			unsigned int dims[6] = { n->grid[0], n->grid[1], n->grid[2], 1, 1, 1 };

			kernel_hook(current, s, s->busy_until - n->dur, s->busy_until, dims,
				    n->kernel->name, running_graph);
		}
	} else if (s->gate) {
		n->ev->recorded = 0;
		n->ev->held = 1;
		hold(s, 0, n->ev);
	} else {
		n->ev->time = s->busy_until > now ? s->busy_until : now;
		n->ev->recorded = 1;
	}
}

static bool node_ready(const struct node *n)
{
	for (size_t i = 0; i < n->ndeps; i++)
		if (n->deps[i] && !n->deps[i]->ran)
			return false;
	return !n->ran;
}

/* A graph's nodes one after the other on the stream, each after what it depends on (of
 * those ready, event records first, then the one added first); a child's in its place. */
static void run_nodes(struct CUstream_st *s, struct CUgraph_st *g, unsigned long long *delay)
{
	bool progress = true;

	for (struct node *n = g->nodes; n; n = n->next)
		n->ran = false;
	/* (A graph too big for this search, 2^20 nodes: one after the other, as listed.) */
	for (struct node *n = g->nodes; g->nnodes > 4096 && n; n = n->next)
		node_run(s, n, delay);
	while (g->nnodes <= 4096 && progress) {
		struct node *first = NULL;

		/* (An event record takes no time: it happens as soon as it can.) */
		for (struct node *n = g->nodes; n; n = n->next)
			if (node_ready(n) &&
			    (!first || (n->type == 7) > (first->type == 7) ||
			     ((n->type == 7) == (first->type == 7) && n->seq < first->seq)))
				first = n;
		if ((progress = first != NULL))
			node_run(s, first, delay);
	}
}

static CUresult graph_launch(CUgraphExec g, CUstream hs, bool per_thread)
{
	struct CUstream_st *s = stream_of(hs, per_thread);
	unsigned long long delay = cfg.graph_start_ns;

	if (!g || !g->graph)
		return CUDA_ERROR_INVALID_HANDLE;
	if (g->last_end > s->busy_until)
		s->busy_until = g->last_end;
	running_graph = (unsigned int)((uintptr_t)g >> 4) | 1;
	graph_now = now_ns();
	run_nodes(s, g->graph, &delay);
	graph_now = 0;
	running_graph = 0;
	g->last_end = s->busy_until;
	return CUDA_SUCCESS;
}

/* (Nothing to upload here: counted.) */
EXPORT CUresult cuGraphUpload(CUgraphExec g, CUstream s)
{
	(void)s;
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	__atomic_add_fetch(&graph_uploads, 1, __ATOMIC_RELAXED);
	return CUDA_SUCCESS;
}

/* A call taking the ns that variable env says first, outside the double's lock (read once
 * into *ns, -1 before): other threads' calls go on meanwhile. */
static void call_wait(const char *env, long long *ns)
{
	if (*ns < 0)
		*ns = (long long)env_ull(env, 0);
	if (*ns)
		sleep_until(now_ns() + (unsigned long long)*ns);
}

/* (FAKECUDA_GRAPH_CALL_NS: as a large graph's launch takes the driver a while.) */
static void graph_call_wait(void)
{
	static long long ns = -1;

	call_wait("FAKECUDA_GRAPH_CALL_NS", &ns);
}

EXPORT CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
	graph_call_wait();
	return LOCKED(graph_launch(g, s, false));
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
	graph_call_wait();
	return LOCKED(graph_launch(g, s, true));
}

/* Into a new graph, or (CUDA 12.3's cuStreamBeginCaptureToGraph, XLA's) into `into`. */
static CUresult begin_capture(CUstream hs, int mode, CUgraph into)
{
	struct CUstream_st *s = stream_of(hs, false);

	(void)mode;
	if (s == &legacy_stream || s->capture)
		return CUDA_ERROR_INVALID_VALUE;
	s->capture = into ? into : calloc(1, sizeof(*s->capture));
	return CUDA_SUCCESS;
}

static CUresult begin_capture_to(CUstream s, CUgraph g, int mode)
{
	return g ? begin_capture(s, mode, g) : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
					    const void *edges, size_t nd, int mode)
{
	(void)deps, (void)edges, (void)nd;
	return LOCKED(begin_capture_to(s, g, mode));
}

EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps,
						 const void *edges, size_t nd, int mode)
{
	(void)deps, (void)edges, (void)nd;
	return LOCKED(begin_capture_to(s, g, mode));
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, int mode)
{
	return LOCKED(begin_capture(s, mode, NULL));
}

EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, int mode)
{
	return LOCKED(begin_capture(s, mode, NULL));
}

static CUresult end_capture(CUstream hs, CUgraph *out)
{
	struct CUstream_st *s = stream_of(hs, false);

	if (!out || !s->capture)
		return CUDA_ERROR_INVALID_VALUE;
	*out = s->capture;
	s->capture = NULL;
	return CUDA_SUCCESS;
}

static CUresult is_capturing(CUstream hs, bool per_thread, CUstreamCaptureStatus *status)
{
	if (!status)
		return CUDA_ERROR_INVALID_VALUE;
	*status = stream_of(hs, per_thread)->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE
						     : CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
	return LOCKED(is_capturing(s, false, status));
}

EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status)
{
	return LOCKED(is_capturing(s, true, status));
}

EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n)
{
	if (!g || !n)
		return CUDA_ERROR_INVALID_VALUE;
	if (nodes) {
		size_t i = 0;

		for (struct node *nd = g->nodes; nd && i < *n; nd = nd->next)
			nodes[i++] = (CUgraphNode)nd;
		*n = i;
	} else {
		*n = (size_t)g->nnodes;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *out)
{
	return LOCKED(end_capture(s, out));
}

EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *out)
{
	return LOCKED(end_capture(s, out));
}

static CUresult instantiate(CUgraphExec *out, CUgraph g)
{
	if (!out || !g)
		return CUDA_ERROR_INVALID_VALUE;
	*out = calloc(1, sizeof(**out));
	(*out)->graph = g;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g, unsigned long long fl)
{
	(void)fl;
	return LOCKED(instantiate(out, g));
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec g)
{
	free(g);
	return CUDA_SUCCESS;
}

static void graph_free(struct CUgraph_st *g)
{
	while (g->nodes) {
		struct node *n = g->nodes;

		g->nodes = n->next;
		if (n->child)
			graph_free(n->child);
		free(n->deps);
		free(n);
	}
	free(g);
}

EXPORT CUresult cuGraphDestroy(CUgraph g)
{
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	graph_free(g);
	return CUDA_SUCCESS;
}

/* Graphs built by hand: kernel nodes take their parameters' values as they are added or set
 * (a probed kernel's launch parameter is read then, as at a launch). */
EXPORT CUresult cuGraphCreate(CUgraph *out, unsigned int flags)
{
	(void)flags;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	*out = calloc(1, sizeof(**out));
	return CUDA_SUCCESS;
}

static CUresult kernel_node_check(const CUDA_KERNEL_NODE_PARAMS *p, bool v2, struct CUkern_st **k)
{
	const void *h = p ? (p->func ? (const void *)p->func
			     : v2    ? (const void *)p->kern
				     : NULL)
			  : NULL;

	if (!p || !(*k = kernel_of(h)) || !p->gridDimX || !p->gridDimY || !p->gridDimZ ||
	    !p->blockDimX || !p->blockDimY || !p->blockDimZ ||
	    (unsigned long long)p->blockDimX * p->blockDimY * p->blockDimZ > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	return probed_launch(*k, p->kernelParams, p->extra);
}

/* A kernel node's time: as a launch's, and for the kernel FAKECUDA_NODE_ARG_NS names, as
 * many ns more as its first argument says, in kernelParams or the `extra` buffer (its value
 * taken when the node is added or set, as a driver takes it: tests see whether what set a
 * twin's node was that value). */
static unsigned long long node_ns(const CUDA_KERNEL_NODE_PARAMS *p, const struct CUkern_st *k)
{
	const char *name = getenv("FAKECUDA_NODE_ARG_NS");
	unsigned long long arg = 0;

	if (name && !strcmp(name, k->name) && p->kernelParams && k->nparams > 0)
		memcpy(&arg, p->kernelParams[0], sizeof(arg));
	else if (name && !strcmp(name, k->name) && p->extra &&
		 p->extra[0] == CU_LAUNCH_PARAM_BUFFER_POINTER &&
		 p->extra[2] == CU_LAUNCH_PARAM_BUFFER_SIZE && *(size_t *)p->extra[3] >= 8)
		memcpy(&arg, p->extra[1], sizeof(arg));
	return kernel_ns(p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
			 p->blockDimZ) +
	       arg;
}

/* A node of gpuscope's calibration kernel (out, ns): its arguments' values kept. */
static void node_calibration(struct node *n, const CUDA_KERNEL_NODE_PARAMS *p)
{
	n->cal_out = NULL;
	if (is_calibration(n->kernel) && p->kernelParams) {
		n->cal_out = *(unsigned long long **)p->kernelParams[0];
		n->cal_ns = *(unsigned long long *)p->kernelParams[1];
	}
}

static CUresult add_kernel_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
				const CUDA_KERNEL_NODE_PARAMS *p, bool v2)
{
	struct CUkern_st *k;
	struct node *n;
	CUresult r;

	if (!out || !g)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = kernel_node_check(p, v2, &k)))
		return r;
	n = graph_add(g, 0, deps, nd, false);
	n->handle = p->func ? (const void *)p->func : v2 ? (const void *)p->kern : NULL;
	n->dur = node_ns(p, k);
	n->kernel = k;
	memcpy(n->grid, (unsigned[]){ p->gridDimX, p->gridDimY, p->gridDimZ }, sizeof(n->grid));
	node_calibration(n, p);
	*out = (CUgraphNode)n;
	return CUDA_SUCCESS;
}

static CUresult set_kernel_node(CUgraphNode hn, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct node *n = (struct node *)hn;
	struct CUkern_st *k;
	CUresult r;

	if (!n || !n->kernel)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = kernel_node_check(p, true, &k)))
		return r;
	n->kernel = k;
	n->handle = p->func ? (const void *)p->func : (const void *)p->kern;
	n->dur = node_ns(p, k);
	memcpy(n->grid, (unsigned[]){ p->gridDimX, p->gridDimY, p->gridDimZ }, sizeof(n->grid));
	node_calibration(n, p);
	return CUDA_SUCCESS;
}

/* An exec's kernel node set: one set to another kernel or grid than it had counts as a
 * switch, and with FAKECUDA_NODE_SWITCH_NS its next run is that much longer (as an H200's
 * reads 0.5-2.5 us longer: bench/carry_bias.cu). */
static CUresult exec_set_kernel_node(CUgraphNode hn, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct node *n = (struct node *)hn;
	struct CUkern_st *was = n ? n->kernel : NULL;
	unsigned grid[3];
	CUresult r;

	if (n)
		memcpy(grid, n->grid, sizeof(grid));
	if ((r = set_kernel_node(hn, p)))
		return r;
	if (n->kernel != was || memcmp(grid, n->grid, sizeof(grid))) {
		node_switches++;
		n->switch_ns = cfg.node_switch_ns;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
				     size_t nd, const CUDA_KERNEL_NODE_PARAMS *p)
{
	return LOCKED(add_kernel_node(out, g, deps, nd, p, false));
}

EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
					size_t nd, const CUDA_KERNEL_NODE_PARAMS *p)
{
	return LOCKED(add_kernel_node(out, g, deps, nd, p, true));
}

EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p)
{
	return LOCKED(set_kernel_node(node, p));
}

/* FAKECUDA_EXEC_SET_STRICT=1: a CUkernel as the function refused (the driver documents
 * func as a CUfunction, a CUkernel going in kern with its context); FAKECUDA_EXEC_SET_REFUSE
 * names a kernel refused either way (as a driver refuses one using dynamic parallelism in a
 * node whose kernel did not). */
static bool exec_set_refused(const CUDA_KERNEL_NODE_PARAMS *p)
{
	const char *name = getenv("FAKECUDA_EXEC_SET_REFUSE");
	const struct CUkern_st *k = p ? kernel_of(p->func ? (const void *)p->func : p->kern) : NULL;

	if (p && p->func && getenv("FAKECUDA_EXEC_SET_STRICT") &&
	    ((const struct CUkern_st *)p->func)->magic == KERNEL_MAGIC)
		return true;
	return k && name && !strcmp(name, k->name);
}

EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode node,
						  const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (!e)
		return CUDA_ERROR_INVALID_VALUE;
	if (exec_set_refused(p))
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(exec_set_kernel_node(node, p));
}

static struct CUgraph_st *graph_copy(struct CUgraph_st *from);

/* A node that runs a copy of the child graph (its nodes, at each launch), or, child NULL,
 * none (a conditional node: its bodies are run by no one here). */
static CUresult add_work_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
			      CUgraph child)
{
	struct node *n;

	if (!out || !g)
		return CUDA_ERROR_INVALID_VALUE;
	n = graph_add(g, child ? 4 : 13, deps, nd, false);
	n->child = child ? graph_copy(child) : NULL;
	*out = (CUgraphNode)n;
	return CUDA_SUCCESS;
}

static CUresult add_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
			 CUgraphNodeParams *p)
{
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	switch (p->type) {
	case 0:
		return add_kernel_node(out, g, deps, nd, &p->kernel, true);
	case 4: /* CU_GRAPH_NODE_TYPE_GRAPH */
		return p->graph.graph ? add_work_node(out, g, deps, nd, p->graph.graph)
				      : CUDA_ERROR_INVALID_VALUE;
	case 13: /* its bodies: empty graphs the program fills */
		if (!p->conditional.phGraph_out || p->conditional.size < 1)
			return CUDA_ERROR_INVALID_VALUE;
		if ((r = add_work_node(out, g, deps, nd, NULL)))
			return r;
		for (unsigned int i = 0; i < p->conditional.size; i++)
			p->conditional.phGraph_out[i] = calloc(1, sizeof(struct CUgraph_st));
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
				  const void *edges, size_t nd, CUgraphNodeParams *p)
{
	(void)edges;
	return LOCKED(add_node(out, g, deps, nd, p));
}

EXPORT CUresult cuGraphAddChildGraphNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
					 size_t nd, CUgraph child)
{
	return child ? LOCKED(add_work_node(out, g, deps, nd, child)) : CUDA_ERROR_INVALID_VALUE;
}

/* An instantiated graph's child node set to run another graph's work (XLA's update of a
 * traced command buffer). */
static CUresult set_work_node(CUgraphNode hn, CUgraph child)
{
	struct node *n = (struct node *)hn;

	if (!n || !n->child || !child)
		return CUDA_ERROR_INVALID_VALUE;
	graph_free(n->child);
	n->child = graph_copy(child);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec e, CUgraphNode node, CUgraph child)
{
	return e ? LOCKED(set_work_node(node, child)) : CUDA_ERROR_INVALID_VALUE;
}

/* A copy of each node, its dependencies the copies of its own (a child node's graph
 * copied too). */
static struct CUgraph_st *graph_copy(struct CUgraph_st *from)
{
	struct CUgraph_st *out = calloc(1, sizeof(*out));
	struct node **tail = &out->nodes, *n, *c;

	for (n = from->nodes; n; n = n->next) {
		*tail = malloc(sizeof(**tail));
		**tail = *n;
		(*tail)->next = NULL;
		(*tail)->orig = n;
		n->copy = *tail;
		tail = &(*tail)->next;
	}
	out->nnodes = from->nnodes;
	out->seq = from->seq;
	for (c = out->nodes; c; c = c->next) {
		struct node **deps = c->ndeps ? calloc(c->ndeps, sizeof(*deps)) : NULL;

		for (size_t i = 0; i < c->ndeps; i++)
			deps[i] = c->deps[i]->copy;
		c->deps = deps;
		c->graph = out;
		if (c->child)
			c->child = graph_copy(c->child);
	}
	return out;
}

static CUresult clone_graph(CUgraph *out, CUgraph from)
{
	if (!out || !from)
		return CUDA_ERROR_INVALID_VALUE;
	*out = graph_copy(from);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphClone(CUgraph *out, CUgraph original)
{
	return LOCKED(clone_graph(out, original));
}

static CUresult find_in_clone(CUgraphNode *out, CUgraphNode original, CUgraph clone)
{
	if (!out || !original || !clone)
		return CUDA_ERROR_INVALID_VALUE;
	for (struct node *n = clone->nodes; n; n = n->next)
		if (n->orig == (struct node *)original) {
			*out = (CUgraphNode)n;
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGraphNodeFindInClone(CUgraphNode *out, CUgraphNode original, CUgraph clone)
{
	return LOCKED(find_in_clone(out, original, clone));
}

/* A kernel's parameters as its PTX declares them: 8 bytes each (.u64). */
static CUresult param_info(const void *h, size_t i, size_t *off, size_t *size)
{
	const struct CUkern_st *k = kernel_of(h);

	if (!k || !off || !size || i >= (size_t)k->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	*off = 8 * i;
	*size = 8;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size)
{
	return param_info(f, i, off, size);
}

EXPORT CUresult cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size)
{
	return param_info(k, i, off, size);
}

/* (An instantiated graph here is its graph: an update takes the parameters of the other
 * graph's nodes, node for node, into it.) */
static CUresult update_graph(struct CUgraph_st *to, const struct CUgraph_st *from)
{
	const struct node *f = from->nodes;
	struct node *n;

	if (to == from)
		return CUDA_SUCCESS;
	if (to->nnodes != from->nnodes)
		return 910; /* CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE */
	for (n = to->nodes; n && f; n = n->next, f = f->next)
		if (n->type != f->type || !n->child != !f->child)
			return 910;
	for (n = to->nodes, f = from->nodes; n && f; n = n->next, f = f->next) {
		n->dur = f->dur;
		n->kernel = f->kernel;
		n->handle = f->handle;
		n->ev = f->ev;
		if (n->child) {
			graph_free(n->child);
			n->child = graph_copy(f->child);
		}
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g, void *result_info)
{
	(void)result_info;
	if (!e || !g)
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(update_graph(e->graph, g));
}

/* (Here a node of an exec is the graph's own: disabling it disables it in every exec of
 * that graph. Only kernel, memset and copy nodes, as in the driver.) */
EXPORT CUresult cuGraphNodeSetEnabled(CUgraphExec e, CUgraphNode node, unsigned int on)
{
	struct node *n = (struct node *)node;

	if (!e || !n || (n->type != 0 && n->type != 1 && n->type != 2))
		return CUDA_ERROR_INVALID_VALUE;
	__atomic_store_n(&n->disabled, !on, __ATOMIC_RELAXED);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams *p)
{
	if (!p || p->type != 0)
		return CUDA_ERROR_NOT_SUPPORTED;
	return LOCKED(set_kernel_node(node, &p->kernel));
}

EXPORT CUresult cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode node, CUgraphNodeParams *p)
{
	if (!e || !p || p->type != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(set_kernel_node(node, &p->kernel));
}

/* What gpuscope's twins of graphs read and add (src/inject/gputime_graph.c). */
EXPORT CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *out)
{
	const struct node *n = (const struct node *)node;

	if (!n || !out || !n->child)
		return CUDA_ERROR_INVALID_VALUE;
	*out = n->child;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphNodeGetType(CUgraphNode node, int *type)
{
	if (!node || !type)
		return CUDA_ERROR_INVALID_VALUE;
	*type = ((struct node *)node)->type;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p)
{
	const struct node *n = (const struct node *)node;

	if (!n || !p || n->type != 0)
		return CUDA_ERROR_INVALID_VALUE;
	memset(p, 0, sizeof(*p));
	/* The function of its kernel, as a driver keeps it: not what the program launched. */
	p->func =
		n->kernel && n->kernel->func ? (CUfunction)n->kernel->func : (CUfunction)n->handle;
	p->gridDimX = p->gridDimY = p->gridDimZ = 1;
	p->blockDimX = p->blockDimY = p->blockDimZ = 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetName(const char **name, CUfunction f)
{
	const struct CUfunc_st *fn = (const struct CUfunc_st *)f;

	if (!name || !fn || fn->magic != FUNCTION_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = fn->kernel->name;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetName(const char **name, CUkernel k)
{
	const struct CUkern_st *kn = (const struct CUkern_st *)k;

	if (!name || !kn || kn->magic != KERNEL_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = kn->name;
	return CUDA_SUCCESS;
}

/* (A kernel node the device may update: FAKECUDA_DEVICE_UPDATABLE=1 says every one is.) */
EXPORT CUresult cuGraphKernelNodeGetAttribute(CUgraphNode node, int attr, void *value)
{
	const struct node *n = (const struct node *)node;

	if (!n || !value || n->type != 0)
		return CUDA_ERROR_INVALID_VALUE;
	memset(value, 0, 64);
	if (attr == 13)
		*(int *)value = (int)env_ull("FAKECUDA_DEVICE_UPDATABLE", 0);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode *deps, void *edges,
					      size_t *nd)
{
	const struct node *n = (const struct node *)node;
	size_t i;

	if (!n || !nd)
		return CUDA_ERROR_INVALID_VALUE;
	if (!deps) {
		*nd = n->ndeps;
		return CUDA_SUCCESS;
	}
	for (i = 0; i < *nd && i < n->ndeps; i++) {
		deps[i] = (CUgraphNode)n->deps[i];
		if (edges)
			memset((char *)edges + 8 * i, 0, 8);
	}
	*nd = i;
	return CUDA_SUCCESS;
}

static CUresult add_record_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
				CUevent ev)
{
	if (!out || !g || !ev)
		return CUDA_ERROR_INVALID_VALUE;
	*out = (CUgraphNode)graph_add(g, 7, deps, nd, false);
	((struct node *)*out)->ev = ev;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddEventRecordNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
					  size_t nd, CUevent ev)
{
	return LOCKED(add_record_node(out, g, deps, nd, ev));
}

static CUresult add_deps(const CUgraphNode *from, const CUgraphNode *to, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct node *t = (struct node *)to[i];

		if (!t || !from[i])
			return CUDA_ERROR_INVALID_VALUE;
		t->deps = realloc(t->deps, (t->ndeps + 1) * sizeof(*t->deps));
		t->deps[t->ndeps++] = (struct node *)from[i];
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode *out, void *edges,
						size_t *n)
{
	const struct node *me = (const struct node *)node;
	size_t k = 0;

	if (!me || !n)
		return CUDA_ERROR_INVALID_VALUE;
	for (struct node *o = me->graph->nodes; o; o = o->next)
		for (size_t i = 0; i < o->ndeps; i++) {
			if (o->deps[i] != me)
				continue;
			if (out && k < *n) {
				out[k] = (CUgraphNode)o;
				if (edges)
					memset((char *)edges + 8 * k, 0, 8);
			}
			k++;
		}
	*n = out && k > *n ? *n : k;
	return CUDA_SUCCESS;
}

static CUresult remove_deps(const CUgraphNode *from, const CUgraphNode *to, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct node *t = (struct node *)to[i];
		size_t j = 0;

		while (t && j < t->ndeps && t->deps[j] != (struct node *)from[i])
			j++;
		if (!t || j == t->ndeps)
			return CUDA_ERROR_INVALID_VALUE;
		t->deps[j] = t->deps[--t->ndeps];
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphRemoveDependencies_v2(CUgraph g, const CUgraphNode *from,
					     const CUgraphNode *to, const void *edges, size_t n)
{
	(void)edges;
	return g && from && to ? LOCKED(remove_deps(from, to, n)) : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
					  const void *edges, size_t n)
{
	(void)edges;
	return g && from && to ? LOCKED(add_deps(from, to, n)) : CUDA_ERROR_INVALID_VALUE;
}

/* ---- memory --------------------------------------------------------------------------- */

static CUresult mem_alloc(CUdeviceptr *out, size_t size, int kind)
{
	if (!out || !size)
		return CUDA_ERROR_INVALID_VALUE;
	if (alloc_should_fail())
		return CUDA_ERROR_OUT_OF_MEMORY;
	return arena_alloc(&devs[cur_dev()], size, kind, out);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t size)
{
	return LOCKED(mem_alloc(out, size, 1));
}

static CUresult mem_alloc_pitch(CUdeviceptr *out, size_t *pitch, size_t w, size_t h, unsigned elem)
{
	size_t p;
	CUresult r;

	if (!out || !pitch || !w || !h || (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	p = round_up(w, ALIGN);
	r = mem_alloc(out, p * h, 1);
	if (r == CUDA_SUCCESS)
		*pitch = p;
	return r;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *out, size_t *pitch, size_t w, size_t h,
				   unsigned elem)
{
	return LOCKED(mem_alloc_pitch(out, pitch, w, h, elem));
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *out, size_t size, unsigned int flags)
{
	(void)flags;
	return LOCKED(mem_alloc(out, size, 2));
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	return LOCKED(p ? arena_free(p) : CUDA_SUCCESS);
}

static CUresult host_alloc(void **out, size_t size)
{
	struct host_alloc *h;

	if (!out || !size)
		return CUDA_ERROR_INVALID_VALUE;
	if (alloc_should_fail())
		return CUDA_ERROR_OUT_OF_MEMORY;
	h = calloc(1, sizeof(*h));
	if (posix_memalign(&h->p, 4096, size)) {
		free(h);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	h->size = size;
	h->next = host_list;
	host_list = h;
	*out = h->p;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostAlloc(void **out, size_t size, unsigned int flags)
{
	(void)flags;
	return LOCKED(host_alloc(out, size));
}

EXPORT CUresult cuMemAllocHost_v2(void **out, size_t size)
{
	return LOCKED(host_alloc(out, size));
}

static CUresult host_free(void *p)
{
	for (struct host_alloc **pp = &host_list; *pp; pp = &(*pp)->next) {
		struct host_alloc *h = *pp;

		if (h->p == p) {
			*pp = h->next;
			free(h->p);
			free(h);
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemFreeHost(void *p)
{
	return LOCKED(host_free(p));
}

/* Stream-ordered allocation: the pool is bookkeeping; memory comes from the arena. */
struct CUmemPoolHandle_st {
	int dev;
};
static struct CUmemPoolHandle_st default_pool[MAX_DEVICES];

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
	if (!pool || dev < 0 || dev >= MAX_DEVICES)
		return CUDA_ERROR_INVALID_VALUE;
	*pool = &default_pool[dev];
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	if (!pool || !props)
		return CUDA_ERROR_INVALID_VALUE;
	*pool = calloc(1, sizeof(**pool));
	(*pool)->dev = props->location.id;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	if (pool < &default_pool[0] || pool >= &default_pool[MAX_DEVICES])
		free(pool);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *out, size_t size, CUstream s)
{
	(void)s;
	return LOCKED(mem_alloc(out, size, 1));
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *out, size_t size, CUstream s)
{
	(void)s;
	return LOCKED(mem_alloc(out, size, 1));
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *out, size_t size, CUmemoryPool pool,
					CUstream s)
{
	(void)s;
	return LOCKED(pool ? mem_alloc(out, size, 1) : CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *out, size_t size, CUmemoryPool pool,
					     CUstream s)
{
	(void)s;
	return LOCKED(pool ? mem_alloc(out, size, 1) : CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	(void)s;
	return LOCKED(arena_free(p));
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
	(void)s;
	return LOCKED(arena_free(p));
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
	if (!free_b || !total)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	*total = cfg.mem;
	*free_b = cfg.mem - devs[cur_dev()].phys_used;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
					      int option)
{
	(void)option;
	if (!g || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	*g = VMM_GRAN;
	return CUDA_SUCCESS;
}

static CUresult vmm_create(CUmemGenericAllocationHandle *out, size_t size,
			   const CUmemAllocationProp *prop)
{
	struct device *d;
	struct phys *ph;

	if (!out || !prop || !size || size % VMM_GRAN ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
	    prop->location.id >= cfg.ndev)
		return CUDA_ERROR_INVALID_VALUE;
	if (alloc_should_fail())
		return CUDA_ERROR_OUT_OF_MEMORY;
	d = &devs[prop->location.id];
	if (d->phys_used + size > d->size)
		return CUDA_ERROR_OUT_OF_MEMORY;
	d->phys_used += size;
	ph = calloc(1, sizeof(*ph));
	ph->size = size;
	ph->dev = prop->location.id;
	ph->next = phys_list;
	phys_list = ph;
	*out = (CUmemGenericAllocationHandle)ph;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *out, size_t size,
			    const CUmemAllocationProp *prop, unsigned long long flags)
{
	(void)flags;
	return LOCKED(vmm_create(out, size, prop));
}

static struct phys *phys_of(CUmemGenericAllocationHandle h)
{
	for (struct phys *p = phys_list; p; p = p->next)
		if ((CUmemGenericAllocationHandle)p == h)
			return p;
	return NULL;
}

static CUresult vmm_release(CUmemGenericAllocationHandle h)
{
	struct phys *ph = phys_of(h);

	if (!ph)
		return CUDA_ERROR_INVALID_VALUE;
	for (struct phys **pp = &phys_list; *pp; pp = &(*pp)->next)
		if (*pp == ph) {
			*pp = ph->next;
			break;
		}
	devs[ph->dev].phys_used -= ph->size;
	/* The real driver keeps the memory until the last mapping goes; so do we. */
	if (!ph->mapped)
		free(ph);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	return LOCKED(vmm_release(h));
}

static CUresult va_reserve(CUdeviceptr *out, size_t size, size_t align)
{
	struct device *d = &devs[cur_dev()];
	struct reservation *r;
	unsigned long long va;

	if (!out || !size || size % VMM_GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	va = round_up(d->va_next, align > VMM_GRAN ? align : VMM_GRAN);
	if (va + size > d->va_end)
		return CUDA_ERROR_OUT_OF_MEMORY;
	d->va_next = va + size;
	r = calloc(1, sizeof(*r));
	r->va = va;
	r->size = size;
	r->next = resv_list;
	resv_list = r;
	*out = va;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *out, size_t size, size_t align, CUdeviceptr addr,
				    unsigned long long flags)
{
	(void)addr, (void)flags;
	return LOCKED(va_reserve(out, size, align));
}

static CUresult va_free(CUdeviceptr va, size_t size)
{
	for (struct reservation **pp = &resv_list; *pp; pp = &(*pp)->next) {
		struct reservation *r = *pp;

		if (r->va == va && r->size == size) {
			*pp = r->next;
			free(r);
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr va, size_t size)
{
	return LOCKED(va_free(va, size));
}

static CUresult vmm_map(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle h)
{
	struct phys *ph = phys_of(h);
	struct mapping *m;
	bool reserved = false;

	for (struct reservation *r = resv_list; r; r = r->next)
		if (va >= r->va && va + size <= r->va + r->size)
			reserved = true;
	if (!ph || !reserved || offset + size > ph->size || in_mapping(va, 1))
		return CUDA_ERROR_INVALID_VALUE;
	m = calloc(1, sizeof(*m));
	m->va = va;
	m->size = size;
	m->ph = ph;
	m->next = map_list;
	map_list = m;
	ph->mapped++;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemMap(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle h,
			 unsigned long long flags)
{
	(void)flags;
	return LOCKED(vmm_map(va, size, offset, h));
}

static CUresult vmm_unmap(CUdeviceptr va, size_t size)
{
	for (struct mapping **pp = &map_list; *pp; pp = &(*pp)->next) {
		struct mapping *m = *pp;

		if (m->va == va && m->size == size) {
			*pp = m->next;
			if (--m->ph->mapped == 0 && !phys_of((CUmemGenericAllocationHandle)m->ph))
				free(m->ph);
			free(m);
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr va, size_t size)
{
	return LOCKED(vmm_unmap(va, size));
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr va, size_t size, const void *desc, size_t count)
{
	(void)desc;
	return LOCKED(in_mapping(va, size) && count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* ---- copies and sets ------------------------------------------------------------------ */

enum side {
	HOST,
	DEVICE,
	ANY
};

/* Page-locked host memory: the device reaches it by the same address (unified addressing). */
static bool is_pinned_range(unsigned long long p, unsigned long long n)
{
	for (const struct host_alloc *h = host_list; h; h = h->next)
		if (p >= (unsigned long long)h->p && p + n <= (unsigned long long)h->p + h->size)
			return true;
	return false;
}

static bool side_ok(unsigned long long p, unsigned long long n, enum side s)
{
	if (!p)
		return false;
	if (s == DEVICE || (s == ANY && is_device_ptr(p)))
		return is_device_range(p, n) || is_pinned_range(p, n);
	return true;
}

/* Synchronous operations wait for the stream, then take their own transfer time. */
static CUresult copy(unsigned long long dst, enum side ds, unsigned long long src, enum side ss,
		     size_t n, CUstream hs, bool async, bool per_thread)
{
	struct CUstream_st *s = stream_of(hs, per_thread);
	bool on_device;
	unsigned long long t;

	if (!side_ok(dst, n, ds) || !side_ok(src, n, ss))
		return CUDA_ERROR_INVALID_VALUE;
	memmove((void *)dst, (const void *)src, n);
	on_device = is_device_ptr(dst) && is_device_ptr(src);
	t = transfer_ns(n, on_device);
	stream_enqueue(s, t, false);
	copy_ran(s, t, n, 0);
	if (async)
		return CUDA_SUCCESS;
	t = s->busy_until;
	pthread_mutex_unlock(&lock);
	sleep_until(t);
	pthread_mutex_lock(&lock);
	return CUDA_SUCCESS;
}

static CUresult set(CUdeviceptr dst, unsigned value, size_t count, unsigned elem, CUstream hs,
		    bool async, bool per_thread)
{
	struct CUstream_st *s = stream_of(hs, per_thread);
	unsigned long long t;
	size_t bytes = count * elem;

	if (!side_ok(dst, bytes, DEVICE))
		return CUDA_ERROR_INVALID_VALUE;
	if (s->capture) { /* a node of the graph (its bytes are not set at its runs here) */
		if (!async)
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		struct node *n = graph_add(s->capture, 2, NULL, 0, true);

		n->dur = transfer_ns(bytes, true);
		n->set_dst = dst;
		n->set_count = count;
		n->set_value = value;
		n->set_elem = elem;
		return CUDA_SUCCESS;
	}
	for (size_t i = 0; i < count; i++)
		memcpy((char *)dst + i * elem, &value, elem);
	stream_enqueue(s, transfer_ns(bytes, true), false);
	copy_ran(s, transfer_ns(bytes, true), bytes, 1);
	if (async)
		return CUDA_SUCCESS;
	t = s->busy_until;
	pthread_mutex_unlock(&lock);
	sleep_until(t);
	pthread_mutex_lock(&lock);
	return CUDA_SUCCESS;
}

/* A memset node (captured) set again: 1-D sets only. */
static CUresult set_memset_node(CUgraphNode hn, const CUDA_MEMSET_NODE_PARAMS *p)
{
	struct node *n = (struct node *)hn;

	if (!n || n->type != 2 || !p || p->height != 1 ||
	    (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) ||
	    !side_ok(p->dst, p->width * p->elementSize, DEVICE))
		return CUDA_ERROR_INVALID_VALUE;
	n->set_dst = p->dst;
	n->set_count = p->width;
	n->set_value = p->value;
	n->set_elem = p->elementSize;
	n->dur = transfer_ns(p->width * p->elementSize, true);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphMemsetNodeSetParams(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p)
{
	return LOCKED(set_memset_node(node, p));
}

EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec e, CUgraphNode node,
					       const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
	(void)ctx;
	return e ? LOCKED(set_memset_node(node, p)) : CUDA_ERROR_INVALID_VALUE;
}

#define COPY_FN(name, dtype, ds, stype, ss, async, pt)                                          \
	EXPORT CUresult name(dtype dst, stype src, size_t n)                                    \
	{                                                                                       \
		return LOCKED(copy((unsigned long long)dst, ds, (unsigned long long)src, ss, n, \
				   NULL, async, pt));                                           \
	}
#define COPY_ASYNC_FN(name, dtype, ds, stype, ss, pt)                                              \
	EXPORT CUresult name(dtype dst, stype src, size_t n, CUstream s)                           \
	{                                                                                          \
		return LOCKED(copy((unsigned long long)dst, ds, (unsigned long long)src, ss, n, s, \
				   true, pt));                                                     \
	}

COPY_FN(cuMemcpy, CUdeviceptr, ANY, CUdeviceptr, ANY, false, false)
COPY_FN(cuMemcpy_ptds, CUdeviceptr, ANY, CUdeviceptr, ANY, false, true)
COPY_FN(cuMemcpyHtoD_v2, CUdeviceptr, DEVICE, const void *, HOST, false, false)
COPY_FN(cuMemcpyHtoD_v2_ptds, CUdeviceptr, DEVICE, const void *, HOST, false, true)
COPY_FN(cuMemcpyDtoH_v2, void *, HOST, CUdeviceptr, DEVICE, false, false)
COPY_FN(cuMemcpyDtoH_v2_ptds, void *, HOST, CUdeviceptr, DEVICE, false, true)
COPY_FN(cuMemcpyDtoD_v2, CUdeviceptr, DEVICE, CUdeviceptr, DEVICE, false, false)
COPY_FN(cuMemcpyDtoD_v2_ptds, CUdeviceptr, DEVICE, CUdeviceptr, DEVICE, false, true)
COPY_ASYNC_FN(cuMemcpyAsync, CUdeviceptr, ANY, CUdeviceptr, ANY, false)
COPY_ASYNC_FN(cuMemcpyAsync_ptsz, CUdeviceptr, ANY, CUdeviceptr, ANY, true)
COPY_ASYNC_FN(cuMemcpyHtoDAsync_v2, CUdeviceptr, DEVICE, const void *, HOST, false)
COPY_ASYNC_FN(cuMemcpyHtoDAsync_v2_ptsz, CUdeviceptr, DEVICE, const void *, HOST, true)
COPY_ASYNC_FN(cuMemcpyDtoHAsync_v2, void *, HOST, CUdeviceptr, DEVICE, false)
COPY_ASYNC_FN(cuMemcpyDtoHAsync_v2_ptsz, void *, HOST, CUdeviceptr, DEVICE, true)
COPY_ASYNC_FN(cuMemcpyDtoDAsync_v2, CUdeviceptr, DEVICE, CUdeviceptr, DEVICE, false)
COPY_ASYNC_FN(cuMemcpyDtoDAsync_v2_ptsz, CUdeviceptr, DEVICE, CUdeviceptr, DEVICE, true)

EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
			     size_t n)
{
	if (!dctx || !sctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	return LOCKED(copy(dst, DEVICE, src, DEVICE, n, NULL, false, false));
}

EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
				  size_t n, CUstream s)
{
	if (!dctx || !sctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	return LOCKED(copy(dst, DEVICE, src, DEVICE, n, s, true, false));
}

static enum side side_of(CUmemorytype t)
{
	return t == CU_MEMORYTYPE_HOST ? HOST : t == CU_MEMORYTYPE_DEVICE ? DEVICE : ANY;
}

static CUresult copy_2d(const CUDA_MEMCPY2D *c, CUstream s, bool async)
{
	unsigned long long src, dst;
	CUresult r = CUDA_SUCCESS;

	if (!c || c->srcMemoryType == CU_MEMORYTYPE_ARRAY ||
	    c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
		return CUDA_ERROR_INVALID_VALUE;
	src = c->srcMemoryType == CU_MEMORYTYPE_HOST ? (unsigned long long)c->srcHost
						     : c->srcDevice;
	dst = c->dstMemoryType == CU_MEMORYTYPE_HOST ? (unsigned long long)c->dstHost
						     : c->dstDevice;
	/* One transfer per row; the simulated time is that of the whole rectangle. */
	in_rows++;
	for (size_t y = 0; y < c->Height && r == CUDA_SUCCESS; y++)
		r = copy(dst + (c->dstY + y) * c->dstPitch + c->dstXInBytes,
			 side_of(c->dstMemoryType),
			 src + (c->srcY + y) * c->srcPitch + c->srcXInBytes,
			 side_of(c->srcMemoryType), c->WidthInBytes, s, true, false);
	if (r == CUDA_SUCCESS && !async)
		r = copy(dst, side_of(c->dstMemoryType), src, side_of(c->srcMemoryType), 0, s,
			 false, false);
	in_rows--;
	return r;
}

EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *c)
{
	return LOCKED(copy_2d(c, NULL, false));
}

EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *c)
{
	return LOCKED(copy_2d(c, NULL, false));
}

EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream s)
{
	return LOCKED(copy_2d(c, s, true));
}

static CUresult copy_3d(const CUDA_MEMCPY3D *c, CUstream s, bool async)
{
	CUDA_MEMCPY2D plane;
	CUresult r = CUDA_SUCCESS;

	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t z = 0; z < c->Depth && r == CUDA_SUCCESS; z++) {
		plane = (CUDA_MEMCPY2D){
			.srcXInBytes = c->srcXInBytes,
			.srcY = c->srcY + (c->srcZ + z) * c->srcHeight,
			.srcMemoryType = c->srcMemoryType,
			.srcHost = c->srcHost,
			.srcDevice = c->srcDevice,
			.srcPitch = c->srcPitch,
			.dstXInBytes = c->dstXInBytes,
			.dstY = c->dstY + (c->dstZ + z) * c->dstHeight,
			.dstMemoryType = c->dstMemoryType,
			.dstHost = c->dstHost,
			.dstDevice = c->dstDevice,
			.dstPitch = c->dstPitch,
			.WidthInBytes = c->WidthInBytes,
			.Height = c->Height,
		};
		r = copy_2d(&plane, s, async);
	}
	return r;
}

EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *c)
{
	return LOCKED(copy_3d(c, NULL, false));
}

EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *c, CUstream s)
{
	return LOCKED(copy_3d(c, s, true));
}

#define SET_FN(name, vtype, elem, async, pt)                          \
	EXPORT CUresult name(CUdeviceptr dst, vtype v, size_t n)      \
	{                                                             \
		return LOCKED(set(dst, v, n, elem, NULL, async, pt)); \
	}
#define SET_ASYNC_FN(name, vtype, elem, pt)                                  \
	EXPORT CUresult name(CUdeviceptr dst, vtype v, size_t n, CUstream s) \
	{                                                                    \
		return LOCKED(set(dst, v, n, elem, s, true, pt));            \
	}

SET_FN(cuMemsetD8_v2, unsigned char, 1, false, false)
SET_FN(cuMemsetD8_v2_ptds, unsigned char, 1, false, true)
SET_FN(cuMemsetD16_v2, unsigned short, 2, false, false)
SET_FN(cuMemsetD32_v2, unsigned int, 4, false, false)
SET_ASYNC_FN(cuMemsetD8Async, unsigned char, 1, false)
SET_ASYNC_FN(cuMemsetD32Async, unsigned int, 4, false)

/* A wrapper that jumps into another exported entry point, as cuLaunchKernel_ptsz. */
EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n, CUstream s)
{
	if (s == NULL)
		s = CU_STREAM_PER_THREAD;
	return cuMemsetD32Async(dst, v, n, s);
}

static CUresult set_2d(CUdeviceptr dst, size_t pitch, unsigned v, size_t w, size_t h, unsigned elem,
		       CUstream s, bool async)
{
	CUresult r = CUDA_SUCCESS;

	in_rows++;
	for (size_t y = 0; y < h && r == CUDA_SUCCESS; y++)
		r = set(dst + y * pitch, v, w, elem, s, true, false);
	if (r == CUDA_SUCCESS && !async)
		r = set(dst, v, 0, elem, s, false, false);
	in_rows--;
	return r;
}

EXPORT CUresult cuMemsetD2D8_v2(CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h)
{
	return LOCKED(set_2d(dst, pitch, v, w, h, 1, NULL, false));
}

EXPORT CUresult cuMemsetD2D32Async(CUdeviceptr dst, size_t pitch, unsigned int v, size_t w,
				   size_t h, CUstream s)
{
	return LOCKED(set_2d(dst, pitch, v, w, h, 4, s, true));
}

/* ---- streams, events, synchronisation ------------------------------------------------- */

EXPORT CUresult cuStreamCreate(CUstream *out, unsigned int flags)
{
	(void)flags;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	*out = calloc(1, sizeof(**out));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *out, unsigned int flags, int prio)
{
	(void)flags, (void)prio;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	*out = calloc(1, sizeof(**out));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return CUDA_ERROR_INVALID_HANDLE;
	free(s);
	return CUDA_SUCCESS;
}

/* Wait until a stream (or every stream) holds nothing behind a gate: as on a GPU, forever
 * if nobody opens it. */
static void wait_ungated(struct CUstream_st *only)
{
	for (;;) {
		bool held;

		pthread_mutex_lock(&lock);
		check_gates();
		held = only ? only->gate != NULL : gated != NULL;
		pthread_mutex_unlock(&lock);
		if (!held)
			return;
		sleep_until(now_ns() + 20000);
	}
}

static CUresult stream_sync(CUstream hs, bool per_thread)
{
	unsigned long long t;

	wait_ungated(stream_of(hs, per_thread));
	pthread_mutex_lock(&lock);
	t = stream_of(hs, per_thread)->busy_until;
	pthread_mutex_unlock(&lock);
	sleep_until(t);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream s)
{
	return check_init() ? CUDA_ERROR_NOT_INITIALIZED : stream_sync(s, false);
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
	return check_init() ? CUDA_ERROR_NOT_INITIALIZED : stream_sync(s, true);
}

static CUresult stream_query(CUstream hs, bool per_thread)
{
	struct CUstream_st *s = stream_of(hs, per_thread);

	return !s->gate && now_ns() >= s->busy_until ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuStreamQuery(CUstream s)
{
	return LOCKED(stream_query(s, false));
}

EXPORT CUresult cuStreamQuery_ptsz(CUstream s)
{
	return LOCKED(stream_query(s, true));
}

static CUresult ctx_synchronize(void)
{
	unsigned long long t;

	if (check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	wait_ungated(NULL);
	pthread_mutex_lock(&lock);
	t = latest_busy;
	pthread_mutex_unlock(&lock);
	sleep_until(t);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void)
{
	return ctx_synchronize();
}

/* CUDA 13: the context to wait for is an argument (NULL: the current one). */
EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	unsigned long long t;

	(void)ctx;
	if (check_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	wait_ungated(NULL);
	pthread_mutex_lock(&lock);
	t = latest_busy;
	pthread_mutex_unlock(&lock);
	sleep_until(t);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent *out, unsigned int flags)
{
	(void)flags;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	*out = calloc(1, sizeof(**out));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	free(e);
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent e, CUstream hs, bool per_thread)
{
	struct CUstream_st *s = stream_of(hs, per_thread);
	unsigned long long n = call_ns ? call_ns : now_ns();

	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (s->gate) {
		e->recorded = 0;
		e->held = 1;
		hold(s, 0, e);
		return CUDA_SUCCESS;
	}
	if (s->capture) {
		graph_add(s->capture, 7, NULL, 0, true)->ev = e;
		e->recorded = 0; /* it happens when the graph runs, not now */
		return CUDA_SUCCESS;
	}
	e->time = s->busy_until > n ? s->busy_until : n;
	e->recorded = 1;
	return CUDA_SUCCESS;
}

/* (FAKECUDA_EVENT_CALL_NS: as recording an event takes the driver 1-3 us on the GPU
 * machines.) */
static void event_call_wait(void)
{
	static long long ns = -1;

	call_wait("FAKECUDA_EVENT_CALL_NS", &ns);
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s)
{
	event_call_wait();
	return LOCKED(event_record(e, s, false));
}

EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s)
{
	event_call_wait();
	return LOCKED(event_record(e, s, true));
}

static CUresult event_query(CUevent e)
{
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	/* Lock-free when it must be (a call from a signal handler may interrupt a holder). */
	if (e->held && pthread_mutex_trylock(&lock) == 0) {
		check_gates();
		pthread_mutex_unlock(&lock);
	}
	return !e->held && now_ns() >= e->time ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventQuery(CUevent e)
{
	return event_query(e);
}

EXPORT CUresult cuEventSynchronize(CUevent e)
{
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	while (e->held) {
		pthread_mutex_lock(&lock);
		check_gates();
		pthread_mutex_unlock(&lock);
		if (e->held)
			sleep_until(now_ns() + 20000);
	}
	sleep_until(e->time);
	return CUDA_SUCCESS;
}

/* ---- stream memory operations ---------------------------------------------------------- */

static CUresult wait_value(CUstream hs, CUdeviceptr addr, unsigned long long v, unsigned flags,
			   bool wide, bool per_thread)
{
	struct CUstream_st *s = stream_of(hs, per_thread);

	if (getenv("FAKECUDA_NO_STREAM_MEMOPS"))
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!addr || flags != 0 /* CU_STREAM_WAIT_VALUE_GEQ only */)
		return CUDA_ERROR_INVALID_VALUE;
	if (s->capture)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (s->gate) { /* a second gate: the later value holds both */
		if (v > s->gate_value)
			s->gate_value = v;
		return CUDA_SUCCESS;
	}
	s->gate = (volatile unsigned long long *)addr;
	s->gate_value = v;
	s->gate_wide = wide;
	if (gate_is_open(s)) {
		s->gate = NULL;
		return CUDA_SUCCESS;
	}
	s->next_gated = gated;
	gated = s;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned flags)
{
	return LOCKED(wait_value(s, addr, v, flags, false, false));
}

EXPORT CUresult cuStreamWaitValue32_v2_ptsz(CUstream s, CUdeviceptr addr, cuuint32_t v,
					    unsigned flags)
{
	return LOCKED(wait_value(s, addr, v, flags, false, true));
}

EXPORT CUresult cuStreamWaitValue64_v2(CUstream s, CUdeviceptr addr, cuuint64_t v, unsigned flags)
{
	return LOCKED(wait_value(s, addr, v, flags, true, false));
}

EXPORT CUresult cuStreamWaitValue64_v2_ptsz(CUstream s, CUdeviceptr addr, cuuint64_t v,
					    unsigned flags)
{
	return LOCKED(wait_value(s, addr, v, flags, true, true));
}

/* Host memory is device memory's address space here: registering only checks. */
EXPORT CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
	(void)flags;
	return p && size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *out, void *p, unsigned int flags)
{
	if (!out || !p || flags)
		return CUDA_ERROR_INVALID_VALUE;
	*out = (CUdeviceptr)p;
	return CUDA_SUCCESS;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b)
{
	if (!ms || !a || !b)
		return CUDA_ERROR_INVALID_HANDLE;
	/* As the driver: not ready until both are done, and one held behind a gate is not
	 * done yet (it is recorded: not an error). */
	if (a->held || b->held)
		return CUDA_ERROR_NOT_READY;
	if (!a->recorded || !b->recorded)
		return CUDA_ERROR_INVALID_VALUE;
	if (event_query(a) || event_query(b))
		return CUDA_ERROR_NOT_READY;
	*ms = (float)((double)(b->time - a->time) / 1e6);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	return LOCKED(elapsed(ms, a, b));
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b)
{
	return LOCKED(elapsed(ms, a, b));
}

static CUresult wait_event(CUstream hs, CUevent e, bool per_thread)
{
	struct CUstream_st *s = stream_of(hs, per_thread);

	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (e->time > s->busy_until)
		s->busy_until = e->time;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
	(void)flags;
	return LOCKED(wait_event(s, e, false));
}

EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags)
{
	(void)flags;
	return LOCKED(wait_event(s, e, true));
}

/* ---- errors and entry points ---------------------------------------------------------- */

static const struct {
	CUresult code;
	const char *name, *text;
} errors[] = {
	{ CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
	{ CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
	{ CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
	{ CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
	{ CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
	{ CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
	{ CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
};

EXPORT CUresult cuGetErrorName(CUresult e, const char **s)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == e) {
			*s = errors[i].name;
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult e, const char **s)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == e) {
			*s = errors[i].text;
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

/* Like the driver: base names resolve to the current versioned entry point, and the
 * per-thread flag selects the _ptsz/_ptds variant where there is one. */
static CUresult private_ctx_synchronize(void)
{
	return ctx_synchronize();
}

static CUresult get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
			 CUdriverProcAddressQueryResult *status)
{
	static const char *suffixes[] = { "_v2_ptds", "_v2_ptsz", "_ptds", "_ptsz", "_v2", "" };
	Dl_info info;
	void *self;
	char name[256];

	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	if (getenv("FAKECUDA_GPA_PRIVATE") && !strcmp(symbol, "cuCtxSynchronize") &&
	    version < 13000) {
		*pfn = (void *)private_ctx_synchronize;
		if (status)
			*status = 0;
		return CUDA_SUCCESS;
	}
	if (!dladdr((void *)&cfg, &info) ||
	    !(self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)))
		return CUDA_ERROR_NOT_FOUND;
	*pfn = NULL;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]) && !*pfn; i++) {
		bool pt = strstr(suffixes[i], "_pt") != NULL;

		if (pt && !(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
			continue;
		/* cuCtxSynchronize_v2 is the CUDA 13 version of the function. */
		if (!strcmp(symbol, "cuCtxSynchronize") && !strcmp(suffixes[i], "_v2") &&
		    version < 13000)
			continue;
		snprintf(name, sizeof(name), "%s%s", symbol, suffixes[i]);
		*pfn = dlsym(self, name);
	}
	dlclose(self);
	if (status)
		*status = *pfn ? 0 : 1;
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	return get_proc(symbol, pfn, version, flags, status);
}

/* The CUDA 11 entry point, still exported (cuda.h maps the name to _v2 since 12.0). */
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return get_proc(symbol, pfn, version, flags, NULL);
}
