// SPDX-License-Identifier: MIT
/*
 * The wrappers, one per driver function of the API table, generated below.
 *
 * Every wrapped function takes only integer and pointer arguments, at most eleven. A
 * wrapper therefore takes eleven 64-bit arguments and passes the same eleven on: under the
 * x86-64 SysV convention the caller cleans the stack, so the arguments a function does not
 * have are ignored by it, and those the wrapper reads beyond the caller's are only the
 * caller's own frame. This is what lets one call path (gs_call) and one decoder
 * (gpuscope/decode.h, shared with the kernel probes) serve every function.
 *
 * A call made while this thread is already inside a wrapper is either the driver calling
 * its own entry points (forwarded without a record: the outer call is the one the program
 * made) or a signal handler that interrupted us (recorded, untimed: emitting is lock-free,
 * timing is not). The driver's own calls come from its code, or, when it tail-calls a
 * sibling entry point (cuLaunchKernel_ptsz jumping to cuLaunchKernel), seem to come from
 * our caller but are a variant of the same function; anything else is a signal handler.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "inject/gputime.h"
#include "inject/inject.h"

/* (The launch path's code from a page boundary: inject.h, GS_HOT_FN.) */
__asm__(".pushsection .text.sorted.gs_hot_0,\"ax\",@progbits\n\t.p2align 12\n\t.popsection");

/* Descriptors are read only after the driver accepted the call: then they were valid. */
static __thread unsigned int tl_outer_api __attribute__((tls_model("initial-exec")));
static __thread int tl_read_ok __attribute__((tls_model("initial-exec")));

static inline int inproc_read(void *dst, __u64 n, __u64 addr)
{
	if (!tl_read_ok || addr < 4096)
		return -1;
	memcpy(dst, (const void *)(unsigned long)addr, n);
	return 0;
}

#define GS_INLINE		 inline __attribute__((always_inline))
#define GS_READ(dst, size, addr) inproc_read((dst), (size), (addr))
#include "gpuscope/decode.h"

#define CUDA_ERROR_NOT_INITIALIZED 3
/* A branch the common call (an untimed launch) does not take: its code laid out of the way,
 * so that a launch reads fewer lines of code (cachegrind: bench/launch_lines.sh). */
#define RARE(x) __builtin_expect(!!(x), 0)

/* errno's place for this thread: the C library's lookup once a thread, not its page of code
 * at every launch (inject.h, GS_HOT_FN). */
static __thread int *tl_errno __attribute__((tls_model("initial-exec")));

static inline int *errno_at(void)
{
	if (RARE(!tl_errno))
		tl_errno = &errno;
	return tl_errno;
}

/* Reserve a record of a call and fill its header and call part. */
static void *call_record(__u32 size, __u16 type, unsigned int api, void *caller, int r, __u64 t0,
			 __u64 t1)
{
	struct gs_hdr *h = gs_emit_reserve(size, type);
	struct gs_call *c;

	if (!h)
		return NULL;
	gs_fill_hdr(h, type, size, t0);
	c = (struct gs_call *)(h + 1);
	c->dur_ns = t1 - t0;
	c->caller = (__u64)(unsigned long)caller;
	c->api = (__u16)api;
	c->pad = 0;
	c->result = r;
	return h;
}

/*
 * cuDNN asks cuKernelGetFunction before each launch (131 calls a ResNet-50 step), nearly
 * always for a pair already given. Each thread keeps the pairs it has recorded, direct
 * mapped by function; an unload (which may give the same handles to another kernel) or a
 * fork (a new ring) makes them all new again.
 */
#define ALIAS_SLOTS 256
static __u32 alias_gen GS_HOT = 1;

static bool alias_recorded(__u64 func, __u64 kernel, bool set)
{
	/* (A pointer only in thread storage, as name_at_launch's.) */
	static __thread struct alias_seen {
		__u64 func, kernel;
		__u32 gen;
	} * seen;
	struct alias_seen *s;

	if (!seen && !(seen = calloc(ALIAS_SLOTS, sizeof(*seen))))
		return false;
	s = &seen[(__u32)((func >> 4) * 0x9E3779B1u) % ALIAS_SLOTS];
	if (!set)
		return s->func == func && s->kernel == kernel &&
		       s->gen == __atomic_load_n(&alias_gen, __ATOMIC_RELAXED);
	*s = (struct alias_seen){ func, kernel, __atomic_load_n(&alias_gen, __ATOMIC_RELAXED) };
	return true;
}

void gs_wrap_after_fork(void)
{
	__atomic_add_fetch(&alias_gen, 1, __ATOMIC_RELAXED);
}

static void emit_name(unsigned int api, const __u64 *a, __u64 t0)
{
	const struct gs_api_desc *d = &gs_descs[api];
	struct gs_ev_kalias *al;

	if (d->shape == GS_SH_N_KFUNC) {
		__u64 func = *(const __u64 *)(unsigned long)a[0];

		if (alias_recorded(func, a[1], false))
			return;
		al = gs_emit_reserve(sizeof(*al), GS_EV_KALIAS);
		if (!al)
			return;
		gs_fill_hdr(&al->h, GS_EV_KALIAS, sizeof(*al), t0);
		al->handle = func;
		al->target = a[1];
		al->api = (__u16)api;
		al->target_ns = GS_NS_DRIVER;
		memset(al->pad, 0, sizeof(al->pad));
		gs_emit_commit(al);
		alias_recorded(func, a[1], true);
		return;
	}
	/* cuLibraryGetKernel, cuModuleGetFunction: (handle *out, scope, const char *name) */
	gs_emit_kname(*(const __u64 *)(unsigned long)a[0], a[1], (const char *)(unsigned long)a[2],
		      api, t0);
}

/*
 * GPUSCOPE_NAME_AT_LAUNCH=1 (to check the names gpuscope gives launches where handles are
 * given out again): the name of each launched function asked of the driver before the
 * launch (cuFuncGetName, or cuKernelGetName for a CUkernel), and a name record made when
 * it is not the one this thread last saw for the handle (each thread's table kept to its
 * end).
 */
static bool name_check_on(void)
{
	static int on GS_HOT = -1;

	if (on < 0)
		on = getenv("GPUSCOPE_NAME_AT_LAUNCH") != NULL;
	return on;
}

static void name_at_launch(unsigned int api, __u64 func)
{
	typedef int (*name_fn)(const char **, void *);
	/* (A pointer only in thread storage: a library loaded by dlopen gets little of it.) */
	static __thread struct seen {
		__u64 handle, hash; /* (of the name: the driver's string goes with its module) */
	} * seen;
	static name_fn fn, kn;
	unsigned int i = (unsigned int)((func >> 4) * 0x9E3779B1u) % 256;
	const char *name = NULL;
	__u64 hash = 1469598103934665603ULL;

	if (!fn && !kn) {
		fn = (name_fn)gs_real_by_name("cuFuncGetName");
		kn = (name_fn)gs_real_by_name("cuKernelGetName");
	}
	if (!seen && !(seen = calloc(256, sizeof(*seen))))
		return;
	if ((!fn || fn(&name, (void *)(unsigned long)func) || !name) &&
	    (!kn || kn(&name, (void *)(unsigned long)func) || !name))
		return;
	for (const char *c = name; *c; c++)
		hash = (hash ^ (unsigned char)*c) * 1099511628211ULL;
	if (seen[i].handle == func && seen[i].hash == hash)
		return;
	seen[i].handle = func;
	seen[i].hash = hash;
	gs_emit_kname(func, 0, name, api, gs_clock());
}

/* Reserve, fill, decode, publish: one record of type T for the call. */
#define EMIT(T, TYPE, DECODE)                                                \
	do {                                                                 \
		T *e = call_record(sizeof(T), TYPE, api, caller, r, t0, t1); \
		if (!e)                                                      \
			return;                                              \
		DECODE;                                                      \
		gs_emit_commit(e);                                           \
	} while (0)

/* Every call's record but a launch's (emit). */
static __attribute__((noinline)) void emit_family(const struct gs_api_desc *d, unsigned int api,
						  void *caller, const __u64 *a, int r, __u64 t0,
						  __u64 t1)
{
	switch (d->family) {
	case GS_FAM_MEM:
		EMIT(struct gs_ev_mem, GS_EV_MEM, gs_decode_mem(d, a, r == 0, e));
		break;
	case GS_FAM_COPY:
		EMIT(struct gs_ev_copy, GS_EV_COPY, gs_decode_copy(d, a, e));
		break;
	case GS_FAM_SYNC:
		EMIT(struct gs_ev_sync, GS_EV_SYNC, gs_decode_sync(d, a, e));
		break;
	case GS_FAM_KNAME:
		if (r == 0) {
			emit_name(api, a, t0);
			break;
		}
		/* A failed lookup is an API record, as in the kernel plane. */
		EMIT(struct gs_ev_api, GS_EV_API, gs_decode_api(d, a, 0, e));
		break;
	case GS_FAM_API:
		if (r == 0 && !(d->flags & GS_AF_ALWAYS))
			break;
		EMIT(struct gs_ev_api, GS_EV_API, gs_decode_api(d, a, r == 0, e));
		break;
	}
}

static GS_HOT_FN void emit(unsigned int api, void *caller, const __u64 *a, int r, __u64 t0,
			   __u64 t1)
{
	const struct gs_api_desc *d = &gs_descs[api];
	int saved_read_ok = tl_read_ok; /* a signal handler's call may run inside ours */

	tl_read_ok = r == 0;
	/* (A launch's first, by a branch, not the switch's table: one line fewer to read.) */
	if (d->family == GS_FAM_LAUNCH) {
		struct gs_ev_launch *e =
			call_record(sizeof(*e), GS_EV_LAUNCH, api, caller, r, t0, t1);

		if (e) {
			gs_decode_launch(d, a, e);
			gs_emit_commit(e);
		}
	} else {
		emit_family(d, api, caller, a, r, t0, t1);
	}
	tl_read_ok = saved_read_ok;
}

/* The program changes an instantiated graph: its twin is not used from now on. */
static bool changes_exec(unsigned int api)
{
	switch (api) {
	case GS_API_CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V1:
	case GS_API_CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS:
	case GS_API_CU_GRAPH_EXEC_NODE_SET_PARAMS:
	case GS_API_CU_GRAPH_EXEC_CHILD_GRAPH_NODE_SET_PARAMS:
	case GS_API_CU_GRAPH_EXEC_UPDATE:
	case GS_API_CU_GRAPH_EXEC_UPDATE_V1:
	case GS_API_CU_GRAPH_EXEC_MEMCPY_NODE_SET_PARAMS:
	case GS_API_CU_GRAPH_EXEC_MEMSET_NODE_SET_PARAMS:
	case GS_API_CU_GRAPH_EXEC_HOST_NODE_SET_PARAMS:
	case GS_API_CU_GRAPH_EXEC_EVENT_RECORD_NODE_SET_EVENT:
	case GS_API_CU_GRAPH_EXEC_EVENT_WAIT_NODE_SET_EVENT:
	case GS_API_CU_GRAPH_EXEC_EXT_SEM_SIGNAL_NODE_SET_PARAMS:
	case GS_API_CU_GRAPH_EXEC_EXT_SEM_WAIT_NODE_SET_PARAMS:
	case GS_API_CU_GRAPH_EXEC_BATCH_MEM_OP_NODE_SET_PARAMS:
	case GS_API_CU_GRAPH_NODE_SET_ENABLED:
		return true;
	default:
		return false;
	}
}

/* The exec setters of a kernel node, which a twin follows (after the driver's call, which
 * read their parameters), as it follows those of a child node. */
static bool sets_kernel_node(unsigned int api)
{
	return api == GS_API_CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V1 ||
	       api == GS_API_CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS ||
	       api == GS_API_CU_GRAPH_EXEC_NODE_SET_PARAMS;
}

/* The exec setters of a copy, set, host, event or memory operation node, which a twin
 * follows at once (their parameters are values). */
static bool sets_node(unsigned int api)
{
	return api == GS_API_CU_GRAPH_EXEC_MEMCPY_NODE_SET_PARAMS ||
	       api == GS_API_CU_GRAPH_EXEC_MEMSET_NODE_SET_PARAMS ||
	       api == GS_API_CU_GRAPH_EXEC_HOST_NODE_SET_PARAMS ||
	       api == GS_API_CU_GRAPH_EXEC_EVENT_RECORD_NODE_SET_EVENT ||
	       api == GS_API_CU_GRAPH_EXEC_EVENT_WAIT_NODE_SET_EVENT ||
	       api == GS_API_CU_GRAPH_EXEC_BATCH_MEM_OP_NODE_SET_PARAMS;
}

/* The exec setters of a child node or of the whole exec (from a graph), which a twin
 * follows too. */
static bool sets_graph(unsigned int api)
{
	return api == GS_API_CU_GRAPH_EXEC_CHILD_GRAPH_NODE_SET_PARAMS ||
	       api == GS_API_CU_GRAPH_EXEC_UPDATE || api == GS_API_CU_GRAPH_EXEC_UPDATE_V1;
}

/* Graph calls the twins of gputime_graph.c follow (before the driver's call: a twin must
 * not run after a change, nor an exec's handle be taken again while its twin is known). */
static void graph_call_before(unsigned int api, __u64 a0)
{
	if ((changes_exec(api) && !sets_kernel_node(api) && !sets_graph(api) && !sets_node(api) &&
	     api != GS_API_CU_GRAPH_NODE_SET_ENABLED) ||
	    api == GS_API_CU_GRAPH_EXEC_DESTROY)
		gs_graphtime_changed(a0, api);
}

static void graph_instantiated(unsigned int api, const __u64 *a)
{
	unsigned long long flags = 0;

	if (api == GS_API_CU_GRAPH_INSTANTIATE)
		flags = a[2];
	else if (a[2]) /* CUDA_GRAPH_INSTANTIATE_PARAMS: flags first */
		memcpy(&flags, (const void *)(unsigned long)a[2], sizeof(flags));
	gs_graphtime_instantiated(*(const __u64 *)(unsigned long)a[0], a[1], flags);
}

/*
 * What GPU timing needs to know of a launch or an asynchronous copy before the call: its
 * stream and kernel. False for calls that are not timed.
 */
static bool timed_call(const struct gs_api_desc *d, const __u64 *a, __u64 *stream, __u64 *func,
		       __u8 *kind)
{
	*func = 0;
	if (d->family == GS_FAM_LAUNCH) {
		*kind = GS_GPU_KERNEL;
		switch (d->shape) {
		case GS_SH_L_STD:
			*func = a[0];
			*stream = a[8];
			break;
		case GS_SH_L_EX:
			/* The driver rejects a NULL configuration; anything else it reads too. */
			if (a[0] < 4096)
				return false;
			*func = a[1];
			memcpy(stream, (const void *)(unsigned long)(a[0] + GS_LAUNCHCFG_STREAM),
			       sizeof(*stream));
			break;
		default: /* GS_SH_L_GRAPH */
			*func = a[0];
			*stream = a[1];
			*kind = GS_GPU_GRAPH;
			break;
		}
		return true;
	}
	if (d->family != GS_FAM_COPY || !(d->flags & GS_AF_ASYNC))
		return false;
	*kind = GS_GPU_COPY;
	switch (d->shape) {
	case GS_SH_C_1D:
		*stream = a[3];
		break;
	case GS_SH_C_PEER:
		*stream = a[5];
		break;
	case GS_SH_C_2D:
	case GS_SH_C_3D:
		*stream = a[1];
		break;
	case GS_SH_C_SET1D:
		*stream = a[3];
		*kind = GS_GPU_MEMSET;
		break;
	default: /* GS_SH_C_SET2D */
		*stream = a[5];
		*kind = GS_GPU_MEMSET;
		break;
	}
	return true;
}

/* A kernel launch queued for its record of the driver's (gputime_cupti.c): its grid and
 * block, from the arguments or the launch configuration (read by timed_call already). */
static void cupti_before(struct gs_cupti_launch *cl, const struct gs_api_desc *d, const __u64 *a,
			 unsigned int api, __u64 stream, __u64 func)
{
	__u32 dims[6];

	if (d->shape == GS_SH_L_EX)
		memcpy(dims, (const void *)(unsigned long)a[0], sizeof(dims));
	else if (d->shape == GS_SH_L_STD)
		for (int i = 0; i < 6; i++)
			dims[i] = (__u32)a[1 + i];
	else
		return;
	gs_cupti_before(cl, stream, d->flags & GS_AF_PTSZ, func, dims, api, gs_clock());
}

/* A 1-D copy or set queued for its record of the driver's: its size and pointers from the
 * arguments (no memory read), as a pair would have them. A synchronous one (on its thread's
 * default stream or the legacy one) only so that its record is not taken for an
 * asynchronous one's there: not timed. */
static void cupti_copy_before(struct gs_cupti_launch *cl, const struct gs_api_desc *d,
			      const __u64 *a, unsigned int api)
{
	struct gs_ev_copy c;

	gs_decode_copy(d, a, &c);
	gs_cupti_copy_before(cl, c.stream, d->flags & GS_AF_PTSZ,
			     &(struct gs_cupti_copy){ .bytes = c.bytes,
						      .dst = c.dst,
						      .src = c.src,
						      .copy_kind = c.kind,
						      .kind = d->shape == GS_SH_C_SET1D
								      ? GS_GPU_MEMSET
								      : GS_GPU_COPY,
						      .silent = !(d->flags & GS_AF_ASYNC) },
			     api, gs_clock());
}

/* A plain launch's kernel and shape (grid, block, shared memory), never 0. */
static __u64 carry_key(const __u64 *a)
{
	__u64 h = a[0] * 0x9E3779B97F4A7C15ULL;

	for (int i = 1; i <= 7; i++)
		h = (h ^ (__u32)a[i]) * 0x100000001B3ULL;
	return h | 1;
}

/* A stream capture's beginning (gs_capture_begun). */
static bool begins_capture(unsigned int api)
{
	return api == GS_API_CU_STREAM_BEGIN_CAPTURE_V1 ||
	       api == GS_API_CU_STREAM_BEGIN_CAPTURE_V1_PTSZ ||
	       api == GS_API_CU_STREAM_BEGIN_CAPTURE ||
	       api == GS_API_CU_STREAM_BEGIN_CAPTURE_PTSZ ||
	       api == GS_API_CU_STREAM_BEGIN_CAPTURE_TO_GRAPH ||
	       api == GS_API_CU_STREAM_BEGIN_CAPTURE_TO_GRAPH_PTSZ;
}

/* Synchronisation that returns only once GPU work is done (not queries, not waits queued
 * on the GPU). */
static bool waits_for_gpu(unsigned int api, const struct gs_api_desc *d)
{
	return d->family == GS_FAM_SYNC && d->shape != GS_SH_S_WAIT &&
	       api != GS_API_CU_STREAM_QUERY && api != GS_API_CU_STREAM_QUERY_PTSZ &&
	       api != GS_API_CU_EVENT_QUERY;
}

/* A launch under device-side probes: maybe routed to the instrumented kernel (b). (Not
 * inline: its state, 900 bytes, would make every call's frame that much larger.) */
static __attribute__((noinline)) int probed_call(gs_fn real, unsigned int api, const __u64 *a,
						 int saved_errno, __u64 *t0)
{
	__u64 b[GS_ARGS];
	struct gs_probe_launch pl;
	bool routed = gs_probe_launch(api, a, b, &pl);
	int r;

	errno = saved_errno;
	*t0 = gs_clock();
	r = real(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10]);
	if (routed && gs_probe_launched(&pl, r))
		r = real(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]);
	gs_probe_returned(&pl, r);
	return r;
}

/* What a call other than a launch tells the plane once it has returned (not inline: a
 * launch, the call made most often, passes by it in one branch, and its code stays out of
 * the lines a launch reads). */
static __attribute__((noinline)) void after_call(unsigned int api, const struct gs_api_desc *d,
						 const __u64 *a, int r, __u64 t1)
{
	__u64 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];

	if (r == 0 &&
	    (api == GS_API_CU_MODULE_LOAD_DATA || api == GS_API_CU_MODULE_LOAD_DATA_EX ||
	     api == GS_API_CU_MODULE_LOAD_FAT_BINARY || api == GS_API_CU_LIBRARY_LOAD_DATA)) {
		gs_devcode_loaded(api, a[0], a[1], t1);
		gs_probe_loaded(api, a[0], a[1]);
	} else if (r == 0 &&
		   (api == GS_API_CU_MODULE_LOAD || api == GS_API_CU_LIBRARY_LOAD_FROM_FILE)) {
		/* (the file as read now: the driver read it in the call) */
		void *file = gs_devcode_read_file(a[1]);

		if (file) {
			gs_devcode_loaded(api, a[0], (__u64)(unsigned long)file, t1);
			gs_probe_loaded(api, a[0], (__u64)(unsigned long)file);
			free(file);
		}
	}
	if (r == 0 &&
	    (api == GS_API_CU_GRAPH_INSTANTIATE || api == GS_API_CU_GRAPH_INSTANTIATE_PARAMS ||
	     api == GS_API_CU_GRAPH_INSTANTIATE_PARAMS_PTSZ))
		graph_instantiated(api, a);
	else if (sets_kernel_node(api))
		gs_graphtime_kernel_set(api, a0, a1, a2, r);
	else if (api == GS_API_CU_GRAPH_EXEC_CHILD_GRAPH_NODE_SET_PARAMS)
		gs_graphtime_graph_set(a0, a1, a2, r);
	else if (api == GS_API_CU_GRAPH_EXEC_UPDATE || api == GS_API_CU_GRAPH_EXEC_UPDATE_V1)
		gs_graphtime_graph_set(a0, 0, a1, r);
	else if (sets_node(api))
		gs_graphtime_node_set(api, a0, a1, a2, a3, r);
	else if (api == GS_API_CU_GRAPH_NODE_SET_ENABLED)
		gs_graphtime_enabled(a0, a1, (unsigned int)a2, r);
	if (r == 0 && (api == GS_API_CU_STREAM_CREATE || api == GS_API_CU_STREAM_CREATE_PRIO) &&
	    a0 >= 4096 && gs_cupti_wanted())
		gs_cupti_stream_made(*(const __u64 *)(unsigned long)a0);
	if (r == 0 && d->family == GS_FAM_KNAME && gs_probe_on)
		gs_probe_named(api, a);
	if (r == 0 && gs_probe_on &&
	    (api == GS_API_CU_MODULE_UNLOAD || api == GS_API_CU_LIBRARY_UNLOAD))
		gs_probe_unloaded(a[0]);
	if (r == 0 && (api == GS_API_CU_MODULE_UNLOAD || api == GS_API_CU_LIBRARY_UNLOAD)) {
		gs_cupti_unloaded();
		__atomic_add_fetch(&alias_gen, 1, __ATOMIC_RELAXED);
	}
	if (r == 0 && waits_for_gpu(api, d))
		gs_timing_synced();
}

GS_HOT_FN_LAST int gs_call(unsigned int api, void *caller, __u64 a0, __u64 a1, __u64 a2, __u64 a3,
			   __u64 a4, __u64 a5, __u64 a6, __u64 a7, __u64 a8, __u64 a9, __u64 a10)
{
	gs_fn real = gs_real(api);
	const struct gs_api_desc *d = &gs_descs[api];
	__u64 t0, t1, stream = 0, func = 0, ph0, ph,
		      a[GS_ARGS] = { a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10 };
	struct gs_timing tm; /* (only its start and carrier read here unless timed: the rest is
			      * gs_timing_begin's; not cleared at every call) */
	struct gs_graph_launch gl = { .twin = NULL };
	struct gs_cupti_launch cl = { .qi = 0 };
	__u64 launch_exec;
	__u8 kind = 0;
	int r, saved_errno, *err;
	bool timed;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	tm.start = NULL;
	tm.carrier = 0;
	if (__builtin_expect(begins_capture(api), 0))
		__atomic_store_n(&gs_capture_begun, true, __ATOMIC_RELEASE);
	if (!gs_active)
		return real(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10);
	gs_ring_prepare();
	err = errno_at();
	if (RARE(gs_depth)) {
		/* The driver calling itself, or tail-calling a variant of the same function
		 * from the real function our wrapper called (so returning into our code). The
		 * same function from anywhere else is a new call: a signal handler that
		 * interrupted the outer one. */
		if (gs_called_from_driver(caller) ||
		    (gs_same_function(api, tl_outer_api) && gs_called_from_self(caller)))
			return real(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10);
		gs_depth++;
		t0 = gs_clock();
		r = real(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10);
		t1 = gs_clock();
		saved_errno = *err;
		emit(api, caller, a, r, t0, t1);
		*err = saved_errno;
		gs_depth--;
		return r;
	}
	gs_depth++;
	tl_outer_api = api;
	saved_errno = *err;
	if (d->family == GS_FAM_LAUNCH)
		gs_ring_warm();
	ph0 = d->family == GS_FAM_LAUNCH ? gs_phase_t0() : 0; /* (measurements: ab.c) */
	if (RARE(d->family == GS_FAM_LAUNCH && d->shape != GS_SH_L_GRAPH && name_check_on()))
		name_at_launch(api, d->shape == GS_SH_L_EX ? a1 : a0);
	if (d->family != GS_FAM_LAUNCH)
		graph_call_before(api, a0);
	/* A sampled graph launch runs its twin instead, which times its kernels (and not the
	 * graph as a whole). */
	launch_exec = RARE(d->shape == GS_SH_L_GRAPH) && !gs_probe_on
			      ? gs_graphtime_launch(&gl, a0, a1, d->flags & GS_AF_PTSZ)
			      : a0;
	timed = !RARE(gl.twin) && timed_call(d, a, &stream, &func, &kind);
	/* (--gpu-time=all: kernels, and asynchronous 1-D copies and sets, timed by the driver,
	 * gputime_cupti.c; with pairs where CUPTI is missing, the program's profiler took it,
	 * or it cannot place the call.) */
	if (timed && kind == GS_GPU_KERNEL && gs_cupti_wanted() && !gs_probe_on) {
		cupti_before(&cl, d, a, api, stream, func);
		timed = !cl.qi;
	} else if (RARE(d->shape == GS_SH_C_1D || d->shape == GS_SH_C_SET1D) &&
		   (timed || !(d->flags & GS_AF_ASYNC)) && !gl.twin && gs_cupti_wanted() &&
		   !gs_probe_on) {
		cupti_copy_before(&cl, d, a, api);
		timed = timed && !cl.qi;
	}
	/* (A graph launch under --gpu-time=cupti: its kernels have the driver's records; no
	 * pair for the whole.) */
	if (timed && RARE(kind == GS_GPU_GRAPH) && !gs_probe_on && gs_cupti_times_graphs())
		timed = false;
	timed = timed && (RARE(kind == GS_GPU_GRAPH) && gs_cupti_wanted() && !gs_probe_on
				  ? gs_timing_graph_wanted(func)
				  : gs_timing_wanted(func));
	/* Launches held in a chain are let go before anything that may wait for them or
	 * depend on them (a name lookup cannot). */
	if (RARE(gs_timing_chained()) && !(timed && kind == GS_GPU_KERNEL) &&
	    d->family != GS_FAM_KNAME)
		gs_timing_unchain();
	if (RARE(timed)) {
		ph = gs_phase_t0();
		/* (A plain launch may be run by a carrier of ours: gputime_carry.c. Its key: the
		 * kernel and its grid, block and shared memory.) */
		gs_timing_begin(&tm, stream, d->flags & GS_AF_PTSZ, kind, func,
				d->shape == GS_SH_L_STD && !a10 && !gs_probe_on ? carry_key(a) : 0);
		gs_phase_add(GS_PH_BEGIN, ph);
	}
	if (RARE(gs_probe_on) && api == GS_API_CU_CTX_DESTROY)
		gs_probe_ctx_destroy(a0); /* (its maps go with it) */
	if (RARE(gs_probe_on) && (d->family == GS_FAM_LAUNCH || gs_probe_graph_call(api))) {
		r = probed_call(real, api, a, saved_errno, &t0);
	} else {
		*err = saved_errno;
		t0 = gs_clock();
		/* (--gpu-time=all: CUPTI's kind off while a graph is launched.) */
		bool graph = RARE(d->shape == GS_SH_L_GRAPH) && gs_cupti_wanted() &&
			     gs_cupti_graph_pause();

		if (!RARE(tm.carrier) || (r = gs_timing_carry(&tm, a)) != 0) {
			*err = saved_errno;
			r = real(launch_exec, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10);
		}
		if (RARE(graph))
			gs_cupti_graph_resume();
	}
	t1 = gs_clock();
	if (cl.held || cl.qi)
		gs_cupti_after(&cl, r, t0, t1);
	if (RARE(ph0))
		gs_phase_add(timed ? GS_PH_REAL : GS_PH_REAL_UNT, t0);
	if (RARE(gl.twin)) {
		struct gs_timed_call tc = { .call_ts = t0, .call_end = t1, .api = (__u16)api };

		if (gs_graphtime_launched(&gl, r, a1, d->flags & GS_AF_PTSZ, &tc))
			r = real(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10);
	}
	saved_errno = *err;
	/* The end event first: whatever our own work takes (a stack's unwinding may fault in
	 * a library's unwind tables from disk: 20 ms seen) must not come between. */
	if (RARE(tm.start)) {
		struct gs_ev_copy c = { .bytes = 0, .kind = 0 };
		struct gs_timed_call tc;

		if (d->family == GS_FAM_COPY) {
			tl_read_ok = r == 0;
			gs_decode_copy(d, a, &c);
		}
		tc = (struct gs_timed_call){ .call_ts = t0,
					     .call_end = t1,
					     .func = func,
					     .bytes = c.bytes,
					     .dst = c.dst,
					     .src = c.src,
					     .copy_kind = c.kind,
					     .api = (__u16)api,
					     .kind = kind };
		ph = gs_phase_t0();
		gs_timing_end(&tm, r, &tc);
		gs_phase_add(GS_PH_END, ph);
	}
	if (r == 0 && RARE(d->family == GS_FAM_COPY))
		gs_timing_copied(stream, d->flags & GS_AF_PTSZ); /* (sync: 0, set above) */
	ph = ph0 ? gs_phase_t0() : 0;
	gs_stack_maybe(api, t0, r, func);
	gs_phase_add(GS_PH_STACK, ph);
	ph = ph0 ? gs_phase_t0() : 0;
	emit(api, caller, a, r, t0, t1);
	gs_phase_add(GS_PH_EMIT, ph);
	if (d->family != GS_FAM_LAUNCH)
		after_call(api, d, a, r, t1);
	gs_phase_add(timed ? GS_PH_TIMED : GS_PH_UNTIMED, ph0);
	*err = saved_errno;
	gs_depth--;
	return r;
}

/*
 * The wrappers: a hidden function per driver function of the table, exported under the
 * driver's name with an assembler alias (the names are strings in the table). A launch's
 * goes with gs_call in the launch path's pages (GS_HOT_FN).
 */
#define GS_WRAP_IN_LAUNCH GS_HOT_FN
#define GS_WRAP_IN_KNAME
#define GS_WRAP_IN_MEM
#define GS_WRAP_IN_COPY
#define GS_WRAP_IN_SYNC
#define GS_WRAP_IN_API
#define GS_WRAP_IN_NCCL
#define GS_WRAP_CUDA(id_, sym_, fam_)                                                             \
	GS_HIDDEN GS_WRAP_IN_##fam_ int gs_wrap_##id_(__u64 a0, __u64 a1, __u64 a2, __u64 a3,     \
						      __u64 a4, __u64 a5, __u64 a6, __u64 a7,     \
						      __u64 a8, __u64 a9, __u64 a10)              \
	{                                                                                         \
		return gs_call(GS_API_##id_, __builtin_return_address(0), a0, a1, a2, a3, a4, a5, \
			       a6, a7, a8, a9, a10);                                              \
	}                                                                                         \
	__asm__(".globl " sym_ "\n\t.type " sym_ ", @function\n\t.set " sym_ ", gs_wrap_" #id_);
#define GS_WRAP_CUDART(id_, sym_, fam_)
#define GS_WRAP_NCCL(id_, sym_, fam_)
#define GS_WRAP(id_, sym_, lib_, fam_, shape_, arg_, fl_) GS_WRAP_##lib_(id_, sym_, fam_)
GS_API_LIST(GS_WRAP)

#define GS_WRAP_ENTRY_CUDA(id_) [GS_API_##id_] = (void *)gs_wrap_##id_,
#define GS_WRAP_ENTRY_CUDART(id_)
#define GS_WRAP_ENTRY_NCCL(id_)
#define GS_WRAP_ENTRY(id_, sym_, lib_, fam_, shape_, arg_, fl_) GS_WRAP_ENTRY_##lib_(id_)
void *const gs_wrappers[GS_API_MAX] = { GS_API_LIST(GS_WRAP_ENTRY) };
