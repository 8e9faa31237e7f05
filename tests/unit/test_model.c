// SPDX-License-Identifier: MIT
/*
 * The model and the report built from it, fed records by hand: allocation bookkeeping
 * (including VMM lifetimes and frees never seen), names through aliases, graphs, copy
 * directions from pointers, NCCL byte counts, merging and ordering in the report.
 */
#include "unit.h"
#include "analysis/analyses.h"
#include "analysis/memsites_int.h"
#include "analysis/model_int.h"
#include "core/stream.h"
#include "sink/sinks.h"
#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ULL << 20)

static __u64 now = 1000;

/* The model and its analyses on a stream, as a session builds them (white box: this test
 * sees the model's and the memory analyses' state). */
static struct stream *S;
static struct analyses A;

static struct model *setup(void)
{
	struct analyses_opts o = { .findings = true };

	S = stream__new();
	analyses__attach(&A, S, &o);
	return A.model;
}

static void teardown(void)
{
	analyses__free(&A);
	stream__free(S);
	S = NULL;
}

static void push(struct model *m, const struct gs_hdr *h)
{
	(void)m;
	stream__push(S, h);
}

static void mem(struct model *m, __u32 pid, __u16 api, __u32 op, __u64 addr, __u64 size, __u64 aux,
		__s32 result)
{
	struct gs_ev_mem e;

	hdr(&e, GS_EV_MEM, sizeof(e), pid, now++);
	e.c.api = api;
	e.c.result = result;
	e.op = op;
	e.addr = addr;
	e.size = size;
	e.aux = aux;
	e.device = -1;
	push(m, &e.h);
}

static void launch(struct model *m, __u32 pid, __u16 api, __u64 func, __u64 stream, __u32 gx,
		   __u32 flags)
{
	struct gs_ev_launch e;

	hdr(&e, GS_EV_LAUNCH, sizeof(e), pid, now++);
	e.c.api = api;
	e.func = func;
	e.stream = stream;
	e.grid[0] = gx;
	e.grid[1] = e.grid[2] = 1;
	e.block[0] = 128;
	e.block[1] = e.block[2] = 1;
	e.flags = flags;
	push(m, &e.h);
}

static void kname(struct model *m, __u32 pid, __u64 handle, __u8 ns, const char *name)
{
	struct gs_ev_kname e;
	size_t n = strlen(name);

	hdr(&e, GS_EV_KNAME, (__u32)(offsetof(struct gs_ev_kname, name) + n + 1), pid, now++);
	e.handle = handle;
	e.ns = ns;
	e.len = (__u16)n;
	memcpy(e.name, name, n + 1);
	push(m, &e.h);
}

static void kalias(struct model *m, __u32 pid, __u64 handle, __u64 target, __u8 ns)
{
	struct gs_ev_kalias e;

	hdr(&e, GS_EV_KALIAS, sizeof(e), pid, now++);
	e.handle = handle;
	e.target = target;
	e.target_ns = ns;
	push(m, &e.h);
}

static void api(struct model *m, __u32 pid, __u16 id, __u64 arg0, __u64 arg1, __u64 out,
		__s32 result)
{
	struct gs_ev_api e;

	hdr(&e, GS_EV_API, sizeof(e), pid, now++);
	e.c.api = id;
	e.c.result = result;
	e.arg0 = arg0;
	e.arg1 = arg1;
	e.out = out;
	push(m, &e.h);
}

/* A copy or set (stream and flags: an asynchronous one's). */
static void copy_on(struct model *m, __u32 pid, __u16 id, __u32 kind, __u64 dst, __u64 src,
		    __u64 bytes, __u64 dur, __u64 stream, __u32 flags)
{
	struct gs_ev_copy e;

	hdr(&e, GS_EV_COPY, sizeof(e), pid, now++);
	e.c.api = id;
	e.c.dur_ns = dur;
	e.kind = kind;
	e.dst = dst;
	e.src = src;
	e.bytes = bytes;
	e.stream = stream;
	e.flags = flags;
	push(m, &e.h);
}

static void copy(struct model *m, __u32 pid, __u16 id, __u32 kind, __u64 dst, __u64 src,
		 __u64 bytes, __u64 dur)
{
	copy_on(m, pid, id, kind, dst, src, bytes, dur, 0, 0);
}

static void session_start(struct model *m, __u32 mode, __u32 pid)
{
	struct gs_ev_session s;

	hdr(&s, GS_EV_SESSION, sizeof(s), pid, now++);
	s.h.source = GS_SRC_GPUSCOPE;
	s.kind = GS_SESSION_START;
	s.mode = mode;
	s.target_pid = (__s32)pid;
	push(m, &s.h);
}

static void linear_alloc_free(void **state)
{
	struct model *m = setup();
	struct proc *p;

	(void)state;
	mem(m, 1, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0x1000000, MIB, 0, 0);
	mem(m, 1, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0x2000000, 2 * MIB, 0, 0);
	mem(m, 1, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0, 1ULL << 40, 0, 2); /* OOM */
	mem(m, 1, GS_API_CU_MEM_FREE, GS_MEM_FREE, 0x1000000, 0, 0, 0);
	mem(m, 1, GS_API_CU_MEM_FREE, GS_MEM_FREE, 0x1000010, 0, 0, 0); /* inside, not start */
	mem(m, 1, GS_API_CU_MEM_FREE, GS_MEM_FREE, 0, 0, 0, 0);		/* cuMemFree(0) */
	p = model__proc(m, 1);
	assert_int_equal(p->s.in_use[MK_DEVICE], 2 * MIB);
	assert_int_equal(p->s.peak[MK_DEVICE], 3 * MIB);
	assert_int_equal(p->s.allocs, 2);
	assert_int_equal(p->s.frees, 1);
	assert_int_equal(p->s.failed_allocs, 1);
	assert_int_equal(p->s.untracked_frees, 1);
	assert_int_equal(m->alloc_calls[GS_API_CU_MEM_ALLOC], 2);
	teardown();
}

static void vmm_lifetime(void **state)
{
	struct model *m = setup();
	struct proc *p;

	(void)state;
	mem(m, 1, GS_API_CU_MEM_ADDRESS_RESERVE, GS_MEM_VA_RESERVE, 0x40000000, 8 * MIB, 0, 0);
	mem(m, 1, GS_API_CU_MEM_CREATE, GS_MEM_VMM_CREATE, 0xaa, 2 * MIB, 0, 0);
	mem(m, 1, GS_API_CU_MEM_CREATE, GS_MEM_VMM_CREATE, 0xbb, 2 * MIB, 0, 0);
	mem(m, 1, GS_API_CU_MEM_MAP, GS_MEM_VMM_MAP, 0x40000000, 2 * MIB, 0xaa, 0);
	mem(m, 1, GS_API_CU_MEM_MAP, GS_MEM_VMM_MAP, 0x40200000, 2 * MIB, 0xbb, 0);
	p = model__proc(m, 1);
	assert_int_equal(p->s.in_use[MK_DEVICE], 4 * MIB);
	assert_int_equal(p->s.reserved, 8 * MIB);
	/* Released while mapped: the driver keeps it until the unmap. */
	mem(m, 1, GS_API_CU_MEM_RELEASE, GS_MEM_VMM_RELEASE, 0xaa, 0, 0, 0);
	assert_int_equal(p->s.in_use[MK_DEVICE], 4 * MIB);
	/* One unmap covering both mappings. */
	mem(m, 1, GS_API_CU_MEM_UNMAP, GS_MEM_VMM_UNMAP, 0x40000000, 4 * MIB, 0, 0);
	assert_int_equal(p->s.in_use[MK_DEVICE], 2 * MIB);
	mem(m, 1, GS_API_CU_MEM_RELEASE, GS_MEM_VMM_RELEASE, 0xbb, 0, 0, 0);
	assert_int_equal(p->s.in_use[MK_DEVICE], 0);
	assert_int_equal(p->s.frees, 2);
	mem(m, 1, GS_API_CU_MEM_RELEASE, GS_MEM_VMM_RELEASE, 0xcc, 0, 0, 0);
	assert_int_equal(p->s.untracked_frees, 1);
	mem(m, 1, GS_API_CU_MEM_ADDRESS_FREE, GS_MEM_VA_FREE, 0x40000000, 8 * MIB, 0, 0);
	assert_int_equal(p->s.reserved, 0);
	teardown();
}

static void overlap_replaces_stale_range(void **state)
{
	struct model *m = setup();
	struct proc *p;

	(void)state;
	/* Attached late: a range we never saw freed is reused by a new allocation. */
	mem(m, 1, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0x1000000, 4 * MIB, 0, 0);
	mem(m, 1, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0x1100000, MIB, 0, 0);
	p = model__proc(m, 1);
	assert_int_equal(p->s.in_use[MK_DEVICE], MIB);
	assert_int_equal(p->s.nranges, 1);
	/* A range that would wrap around the address space is clamped, not looped on. */
	mem(m, 1, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, ~0ULL - 10, 100, 0, 0);
	assert_int_equal(p->s.nranges, 2);
	teardown();
}

static void names_through_aliases(void **state)
{
	struct model *m = setup();

	(void)state;
	kname(m, 1, 0x100, GS_NS_DRIVER, "_Z6vecAddPKfS0_Pfi");
	kalias(m, 1, 0x200, 0x100, GS_NS_DRIVER); /* cuKernelGetFunction */
	kname(m, 1, 0x4000, GS_NS_HOSTFN, "_Z4axpyfPKfPf");
	kalias(m, 1, 0x300, 0x4000, GS_NS_HOSTFN); /* __cudaGetKernel */
	assert_string_equal(model__kernel_name(m, 1, 0x100), "_Z6vecAddPKfS0_Pfi");
	assert_string_equal(model__kernel_name(m, 1, 0x200), "_Z6vecAddPKfS0_Pfi");
	assert_string_equal(model__kernel_name(m, 1, 0x300), "_Z4axpyfPKfPf");
	assert_null(model__kernel_name(m, 1, 0x4000)); /* host stubs are not launch handles */
	assert_null(model__kernel_name(m, 2, 0x100));  /* handles are per process */
	/* An alias loop ends. */
	kalias(m, 1, 0x500, 0x600, GS_NS_DRIVER);
	kalias(m, 1, 0x600, 0x500, GS_NS_DRIVER);
	assert_null(model__kernel_name(m, 1, 0x500));
	teardown();
}

static void graphs_count_runs(void **state)
{
	struct model *m = setup();
	struct report *r;

	(void)state;
	kname(m, 1, 0x100, GS_NS_DRIVER, "_Z5scalePfif");
	api(m, 1, GS_API_CU_STREAM_BEGIN_CAPTURE, 0x77, 0, 0, 0);
	launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x100, 0x77, 8, 0);
	launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x100, 0x77, 8, 0);
	launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x100, 0x88, 8, 0); /* other stream: runs */
	api(m, 1, GS_API_CU_STREAM_END_CAPTURE, 0x77, 0, 0x9000, 0);
	api(m, 1, GS_API_CU_GRAPH_INSTANTIATE, 0, 0x9000, 0xe000, 0);
	for (int i = 0; i < 5; i++)
		launch(m, 1, GS_API_CU_GRAPH_LAUNCH, 0xe000, 0x88, 0, GS_LAUNCH_GRAPH);
	r = analyses__report(&A);
	assert_int_equal(r->nkernels, 1);
	assert_int_equal(r->kernels[0].launches, 3);
	assert_int_equal(r->kernels[0].captured, 2);
	assert_int_equal(r->kernels[0].graph_runs, 10);
	assert_int_equal(r->graph_launches, 5);
	assert_int_equal(r->launches, 3);
	report__free(r);
	teardown();
}

/* A graph API record of a child graph node (added, or set on an instantiated graph). */
static void child_api(struct model *m, __u16 id, __u64 arg0, __u64 arg1, __u64 out)
{
	struct gs_ev_api e;

	hdr(&e, GS_EV_API, sizeof(e), 1, now++);
	e.h.flags = GS_HDR_GNODE_CHILD;
	e.c.api = id;
	e.arg0 = arg0;
	e.arg1 = arg1;
	e.out = out;
	push(m, &e.h);
}

static void set_captured(struct model *m, __u64 stream, __u64 bytes)
{
	copy_on(m, 1, GS_API_CU_MEMSET_D32_ASYNC, GS_COPY_MEMSET, 0x7000000, 0, bytes, 0, stream,
		GS_COPY_ASYNC);
}

/* The report's kernel of that name (mangled). */
static const struct rep_kernel *kernel_named(const struct report *r, const char *name)
{
	for (size_t i = 0; i < r->nkernels; i++)
		if (r->kernels[i].mangled && !strcmp(r->kernels[i].mangled, name))
			return &r->kernels[i];
	fail_msg("no kernel %s in the report", name);
	return NULL;
}

/* XLA's traced command buffer: launches and a set captured into a graph the program made,
 * that graph a child node, the instantiated graph's child node set to a new trace. */
static void graphs_traced_into_children(void **state)
{
	struct model *m = setup();
	struct report *r;

	(void)state;
	kname(m, 1, 0x100, GS_NS_DRIVER, "kC");
	kname(m, 1, 0x200, GS_NS_DRIVER, "kD");
	api(m, 1, GS_API_CU_STREAM_BEGIN_CAPTURE_TO_GRAPH, 0x77, 0xa1, 0, 0);
	launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x100, 0x77, 8, 0);
	set_captured(m, 0x77, 4096);
	api(m, 1, GS_API_CU_STREAM_END_CAPTURE, 0x77, 0, 0xa1, 0);
	child_api(m, GS_API_CU_GRAPH_ADD_CHILD_GRAPH_NODE, 0xb0, 0xa1, 0xc0);
	api(m, 1, GS_API_CU_GRAPH_INSTANTIATE, 0, 0xb0, 0xe0, 0);
	for (int i = 0; i < 2; i++)
		launch(m, 1, GS_API_CU_GRAPH_LAUNCH, 0xe0, 0x88, 0, GS_LAUNCH_GRAPH);
	api(m, 1, GS_API_CU_STREAM_BEGIN_CAPTURE_TO_GRAPH, 0x77, 0xa2, 0, 0);
	launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x200, 0x77, 8, 0);
	launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x200, 0x77, 8, 0);
	api(m, 1, GS_API_CU_STREAM_END_CAPTURE, 0x77, 0, 0xa2, 0);
	child_api(m, GS_API_CU_GRAPH_EXEC_CHILD_GRAPH_NODE_SET_PARAMS, 0xe0, 0xa2, 0xc0);
	for (int i = 0; i < 3; i++)
		launch(m, 1, GS_API_CU_GRAPH_LAUNCH, 0xe0, 0x88, 0, GS_LAUNCH_GRAPH);
	r = analyses__report(&A);
	assert_int_equal(kernel_named(r, "kC")->graph_runs, 2); /* the first trace's 2 replays */
	assert_int_equal(kernel_named(r, "kD")->graph_runs, 6); /* twice in the new, 3 replays */
	assert_int_equal(r->copies[GS_COPY_MEMSET].count, 1);
	assert_int_equal(r->copies[GS_COPY_MEMSET].captured, 1);
	assert_int_equal(r->copies[GS_COPY_MEMSET].graph_runs, 2);
	assert_int_equal(r->copies[GS_COPY_MEMSET].graph_bytes, 2 * 4096);
	report__free(r);
	teardown();
}

/* A handle named again (its module unloaded, the handle given to another function): the
 * launches before keep the old name. */
static void renamed_handle_keeps_launches(void **state)
{
	struct model *m = setup();
	struct report *r;

	(void)state;
	kname(m, 1, 0x100, GS_NS_DRIVER, "kOld");
	for (int i = 0; i < 3; i++)
		launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x100, 0x88, 8, 0);
	kname(m, 1, 0x100, GS_NS_DRIVER, "kOld"); /* (the same name again: nothing changes) */
	kname(m, 1, 0x100, GS_NS_DRIVER, "kNew");
	for (int i = 0; i < 5; i++)
		launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x100, 0x88, 8, 0);
	r = analyses__report(&A);
	assert_int_equal(r->nkernels, 2);
	assert_int_equal(kernel_named(r, "kOld")->launches, 3);
	assert_int_equal(kernel_named(r, "kNew")->launches, 5);
	assert_int_equal(r->launches, 8);
	report__free(r);
	/* kOld loaded again into the handle, launched, renamed again: one entry of 4. */
	kname(m, 1, 0x100, GS_NS_DRIVER, "kOld");
	launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x100, 0x88, 8, 0);
	kname(m, 1, 0x100, GS_NS_DRIVER, "kNew");
	assert_int_equal(A.model->renamed_kernels.len, 2);
	r = analyses__report(&A);
	assert_int_equal(r->nkernels, 2);
	assert_int_equal(kernel_named(r, "kOld")->launches, 4);
	assert_int_equal(kernel_named(r, "kNew")->launches, 5);
	assert_int_equal(r->launches, 9);
	report__free(r);
	teardown();
}

static void copy_direction_from_pointers(void **state)
{
	struct model *m = setup();

	(void)state;
	session_start(m, GS_MODE_RUN, 1); /* traced from the start: unknown pointers are host */
	mem(m, 1, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0x1000000, MIB, 0, 0);
	mem(m, 1, GS_API_CU_MEM_HOST_ALLOC, GS_MEM_ALLOC_HOST, 0x7f0000000000, MIB, 0, 0);
	copy(m, 1, GS_API_CU_MEMCPY, GS_COPY_DEFAULT, 0x1000100, 0x5000, 4096, 1000);
	copy(m, 1, GS_API_CU_MEMCPY, GS_COPY_DEFAULT, 0x7f0000000000, 0x1000000, 100, 1000);
	copy(m, 1, GS_API_CU_MEMCPY, GS_COPY_DEFAULT, 0x1000000, 0x1000010, 10, 1000);
	copy(m, 1, GS_API_CU_MEMCPY, GS_COPY_DEFAULT, 0x6000, 0x5000, 7, 1000);
	/* Process 2 was never seen starting: its unknown pointers stay unknown. */
	copy(m, 2, GS_API_CU_MEMCPY, GS_COPY_DEFAULT, 0x6000, 0x5000, 5, 1000);
	copy(m, 1, GS_API_CU_MEMCPY_HTOD, GS_COPY_HTOD, 0x1, 0x2, 3, 1000);
	assert_int_equal(m->copies[GS_COPY_HTOD].count, 2);
	assert_int_equal(m->copies[GS_COPY_HTOD].bytes, 4099);
	assert_int_equal(m->copies[GS_COPY_DTOH].bytes, 100);
	assert_int_equal(m->copies[GS_COPY_DTOD].bytes, 10);
	assert_int_equal(m->copies[GS_COPY_HTOH].bytes, 7);
	assert_int_equal(m->copies[GS_COPY_UNKNOWN].bytes, 5);
	assert_int_equal(m->copies[GS_COPY_HTOD].sync_ns, 2000);
	teardown();
}

static void nccl_bytes_use_comm_size(void **state)
{
	struct model *m = setup();
	struct gs_ev_nccl e;

	(void)state;
	hdr(&e, GS_EV_NCCL, sizeof(e), 1, now++);
	e.c.api = GS_API_NCCL_COMM_INIT_RANK;
	e.op = GS_NCCL_COMM_INIT;
	e.comm = 0xc0;
	e.nranks = 8;
	e.rank = 3;
	push(m, &e.h);
	e.c.api = GS_API_NCCL_ALL_GATHER;
	e.op = GS_NCCL_ALL_GATHER;
	e.count = 1000;
	e.datatype = 9; /* bfloat16 */
	push(m, &e.h);
	e.comm = 0xc1; /* never initialised while traced */
	push(m, &e.h);
	e.c.api = GS_API_NCCL_ALL_REDUCE;
	e.op = GS_NCCL_ALL_REDUCE;
	e.comm = 0xc0;
	e.datatype = 7; /* float32 */
	push(m, &e.h);
	e.c.result = 4;
	push(m, &e.h);
	assert_int_equal(m->nccl[GS_NCCL_ALL_GATHER].bytes, 1000 * 2 * 8 + 1000 * 2);
	assert_int_equal(m->nccl[GS_NCCL_ALL_GATHER].unknown_size, 1);
	assert_int_equal(m->nccl[GS_NCCL_ALL_REDUCE].bytes, 4000);
	assert_int_equal(m->nccl[GS_NCCL_ALL_REDUCE].calls, 2);
	assert_int_equal(m->nccl[GS_NCCL_ALL_REDUCE].errors, 1);
	teardown();
}

static void report_merges_and_orders(void **state)
{
	struct model *m = setup();
	struct report *r;

	(void)state;
	kname(m, 1, 0x100, GS_NS_DRIVER, "_Z1av");
	kname(m, 2, 0x900, GS_NS_DRIVER, "_Z1av"); /* same kernel in another process */
	kname(m, 1, 0x200, GS_NS_DRIVER, "_Z1bv");
	for (int i = 0; i < 3; i++)
		launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x100, 0, 10, 0);
	for (int i = 0; i < 4; i++)
		launch(m, 2, GS_API_CU_LAUNCH_KERNEL, 0x900, 0, 20, 0);
	for (int i = 0; i < 5; i++)
		launch(m, 1, GS_API_CU_LAUNCH_KERNEL_EX, 0x200, 0, 10, 0);
	launch(m, 1, GS_API_CU_LAUNCH_KERNEL, 0x555, 0, 10, 0); /* never named */
	mem(m, 1, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0x1000000, MIB, 0, 0);
	mem(m, 1, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0x2000000, MIB, 0, 0);
	mem(m, 2, GS_API_CU_MEM_CREATE, GS_MEM_VMM_CREATE, 0xaa, 2 * MIB, 0, 0);
	r = analyses__report(&A);
	assert_int_equal(r->nkernels, 3);
	assert_string_equal(r->kernels[0].display, "a()");
	assert_int_equal(r->kernels[0].launches, 7);
	assert_int_equal(r->kernels[0].nprocs, 2);
	assert_int_equal(r->kernels[0].shapes[0].count, 3);
	assert_int_equal(r->kernels[0].shapes[1].count, 4);
	assert_string_equal(r->kernels[1].display, "b()");
	assert_null(r->kernels[2].mangled);
	assert_string_equal(r->kernels[2].display, "unknown kernel 0x555 (pid 1)");
	assert_int_equal(r->unknown_kernels, 1);
	assert_int_equal(r->noutstanding, 2);
	/* 2 x 1 MiB and 1 x 2 MiB: equal bytes, the lower API id first. */
	assert_int_equal(r->outstanding[0].api, GS_API_CU_MEM_ALLOC);
	assert_int_equal(r->outstanding[0].count, 2);
	assert_int_equal(r->outstanding_bytes[MK_DEVICE], 4 * MIB);
	assert_int_equal(r->largest[0].size, 2 * MIB);
	assert_int_equal(r->nprocs, 2);
	report__free(r);
	teardown();
}

static void errors_exclude_polling(void **state)
{
	struct model *m = setup();
	struct gs_ev_sync s;
	struct report *r;

	(void)state;
	hdr(&s, GS_EV_SYNC, sizeof(s), 1, now++);
	s.c.api = GS_API_CU_STREAM_QUERY;
	s.c.result = 600;
	push(m, &s.h);
	s.c.api = GS_API_CU_STREAM_SYNCHRONIZE;
	s.c.result = 700;
	push(m, &s.h);
	r = analyses__report(&A);
	assert_int_equal(r->nerrors, 1);
	assert_int_equal(r->errors[0].api, GS_API_CU_STREAM_SYNCHRONIZE);
	assert_int_equal(r->errors[0].result, 700);
	assert_int_equal(m->syncs[GS_API_CU_STREAM_QUERY].not_ready, 1);
	report__free(r);
	teardown();
}

/* A GPU record of the in-process plane (its call at t), pushed. */
static void push_gpu(struct model *m, __u64 t, __u64 call_end, __u64 start, __u64 end, __u64 func,
		     __u8 kind, __u8 flags)
{
	struct gs_ev_gpu e;

	hdr(&e, GS_EV_GPU, sizeof(e), 1, t);
	e.h.source = GS_SRC_INJECT;
	e.call_end_ns = call_end;
	e.start_ns = start;
	e.end_ns = end;
	e.func = func;
	e.kind = kind;
	e.flags = flags;
	push(m, &e.h);
}

/*
 * GPU records at 200k launches a second: more of them within the watermark than the flush
 * threshold. Device busy time is still exact, and the pending intervals are sorted a
 * logarithmic number of times, not once per record (that took minutes for 300k records).
 */
static void gpu_records_flush_amortised(void **state)
{
	struct model *m = setup();
	struct dev_stat *d;
	__u64 t0 = 3000000000ULL, n = 300000;
	struct report *r;

	(void)state;
	for (__u64 i = 0; i < n; i++) {
		__u64 t = t0 + i * 5000;

		push_gpu(m, t, t + 2000, t + 3000, t + 4000, 0x1234, GS_GPU_KERNEL, GS_GPU_GATED);
	}
	d = hmap_get(&m->devices, 1, 0);
	assert_non_null(d);
	assert_true(d->b.flushes > 0 && d->b.flushes <= 8);
	r = analyses__report(&A);
	assert_int_equal(r->ndevices, 1);
	assert_int_equal(r->devices[0].ops, n);
	assert_int_equal(r->devices[0].busy_ns, n * 1000);
	assert_int_equal(r->devices[0].gaps, n - 1);
	report__free(r);
	teardown();
}

/*
 * Ungated launches on an idle stream: the kernel started between its start event and the
 * end of its call. A call that ends 5 us after its start event gives the kernel's time
 * from the call's end; one that ends 199 us after it (the thread descheduled inside the
 * driver) does not count in the kernel's figures, and the report says why.
 */
static void gpu_idle_start_after_a_long_call(void **state)
{
	struct model *m = setup();
	struct gs_ev_gpu e;
	struct report *r;
	const struct gpu_stat *g;

	(void)state;
	for (int i = 0; i < 4; i++) {
		__u64 t = 1000000000ULL + (__u64)i * 1000000, late = i == 3 ? 199000 : 5000;

		hdr(&e, GS_EV_GPU, sizeof(e), 1, t);
		e.h.source = GS_SRC_INJECT;
		e.start_ns = t + 1000;
		e.call_end_ns = e.start_ns + late;
		e.end_ns = e.start_ns + 200000;
		e.func = 0x1234;
		e.kind = GS_GPU_KERNEL;
		e.flags = GS_GPU_IDLE_STREAM;
		push(m, &e.h);
	}
	r = analyses__report(&A);
	assert_int_equal(r->gpu_start_unknown, 1);
	assert_int_equal(r->gpu_start_late, 1);
	assert_int_equal(r->nkernels, 1);
	g = r->kernels[0].gpu;
	assert_non_null(g);
	assert_int_equal(g->count, 3);
	assert_int_equal(g->idle_starts, 3);
	assert_int_equal(g->start_unknown, 1);
	assert_int_equal(g->min_ns, 195000);
	assert_int_equal(g->max_ns, 195000);
	report__free(r);
	teardown();
}

/*
 * Work whose end event was recorded late and completed soon after (GS_GPU_END_LATE): a
 * launch and a copy, left out of the figures and counted; the launch beside them that
 * has no flag is counted as it is.
 */
static void gpu_end_recorded_late(void **state)
{
	struct model *m = setup();
	struct gs_ev_gpu e;
	struct report *r;
	const struct gpu_stat *g;

	(void)state;
	for (int i = 0; i < 3; i++) {
		__u64 t = 1000000000ULL + (__u64)i * 1000000;

		hdr(&e, GS_EV_GPU, sizeof(e), 1, t);
		e.h.source = GS_SRC_INJECT;
		e.call_end_ns = t + 5000;
		e.start_ns = t + 100000; /* queued behind other work */
		e.end_ns = e.start_ns + (i == 1 ? 2000000 : 300000);
		e.func = i == 2 ? 0 : 0x1234;
		e.kind = i == 2 ? GS_GPU_COPY : GS_GPU_KERNEL;
		e.copy_kind = i == 2 ? GS_COPY_HTOD : 0;
		e.bytes = i == 2 ? 4096 : 0;
		e.flags = i ? GS_GPU_END_LATE : 0;
		push(m, &e.h);
	}
	r = analyses__report(&A);
	assert_int_equal(r->gpu_start_unknown, 1);
	assert_int_equal(r->gpu_end_late, 1);
	assert_int_equal(r->gpu_start_late, 0);
	assert_int_equal(r->gpu_copy_end_late, 1);
	g = r->kernels[0].gpu;
	assert_int_equal(g->count, 1);
	assert_int_equal(g->start_unknown, 1);
	assert_int_equal(g->max_ns, 300000);
	assert_int_equal(m->copies[GS_COPY_HTOD].gpu_count, 0);
	report__free(r);
	teardown();
}

/*
 * What an event pair adds: the midpoint of the calibration kernel's pair less its span
 * (3328 ns) and the empty pair (1279 ns), medians of the device's records (the span's
 * records are not used): a gated kernel whose pair measured 3520 ns ran 1217 ns (CUPTI
 * said 1152 on the H100 these figures come from; O alone would say 192).
 */
static void gpu_event_pair_overhead(void **state)
{
	static const __u64 cal[][2] = { { GS_CAL_OVERHEAD, 3328 }, { GS_CAL_EMPTY, 1279 },
					{ GS_CAL_SPAN, 2016 },	   { GS_CAL_OVERHEAD, 3711 },
					{ GS_CAL_EMPTY, 1311 },	   { GS_CAL_OVERHEAD, 3200 },
					{ GS_CAL_EMPTY, 1279 } };
	struct model *m = setup();
	struct report *r;
	__u64 t = 1000000000ULL;

	(void)state;
	for (size_t i = 0; i < sizeof(cal) / sizeof(cal[0]); i++, t += 1000)
		push_gpu(m, t, t, t, t + cal[i][1], cal[i][0], GS_GPU_CALIBRATION, GS_GPU_GATED);
	t += 1000000;
	push_gpu(m, t, t + 2000, t + 3000, t + 3000 + 3520, 0x1234, GS_GPU_KERNEL, GS_GPU_GATED);
	r = analyses__report(&A);
	assert_int_equal(r->devices[0].overhead_ns, (3328 + 1279) / 2);
	assert_int_equal(r->kernels[0].gpu->min_ns, 3520 - (3328 + 1279) / 2);
	/* Without a chained calibration, a chained launch's is the pair's. */
	assert_int_equal(r->devices[0].chained_overhead_ns, (3328 + 1279) / 2);
	report__free(r);
	teardown();
}

/* A launch timed from the end event before it (a chain) takes off the pair's estimate; the
 * chained calibration (GS_CAL_CHAINED) is kept, not used (model_gpu.c says why). */
static void gpu_chained_overhead(void **state)
{
	static const __u64 cal[][2] = { { GS_CAL_OVERHEAD, 3328 }, { GS_CAL_EMPTY, 1279 },
					{ GS_CAL_CHAINED, 3600 },  { GS_CAL_OVERHEAD, 3330 },
					{ GS_CAL_CHAINED, 3590 },  { GS_CAL_CHAINED, 3900 } };
	struct model *m = setup();
	struct report *r;
	__u64 t = 1000000000ULL, pair = (3330 + 1279) / 2, chained = pair;

	(void)state;
	for (size_t i = 0; i < sizeof(cal) / sizeof(cal[0]); i++, t += 1000)
		push_gpu(m, t, t, t, t + cal[i][1], cal[i][0], GS_GPU_CALIBRATION, GS_GPU_GATED);
	t += 1000000;
	push_gpu(m, t, t + 2000, t + 3000, t + 3000 + 3520, 0x1234, GS_GPU_KERNEL,
		 GS_GPU_GATED | GS_GPU_CHAINED);
	push_gpu(m, t + 10, t + 2010, t + 6520, t + 6520 + 3900, 0x1234, GS_GPU_KERNEL,
		 GS_GPU_GATED | GS_GPU_CHAINED | GS_GPU_FROM_PREV);
	r = analyses__report(&A);
	assert_int_equal(r->devices[0].overhead_ns, pair);
	assert_int_equal(r->devices[0].chained_overhead_ns, chained);
	assert_int_equal(r->kernels[0].gpu->min_ns, 3520 - pair);
	assert_int_equal(r->kernels[0].gpu->max_ns, 3900 - chained);
	assert_int_equal(r->kernels[0].gpu->chained, 2);
	report__free(r);
	teardown();
}

/*
 * A kernel inside a graph (a twin's event nodes): what the graph's calibration says its
 * nodes add is taken off (the midpoint of 2600 and 1400, not the pair's), its start is the
 * event's even though the graph launch's call ended later (no idle-stream start), it has
 * no queue wait, counts as in_graph, and goes to the device's busy time, not its stream's.
 */
static void gpu_kernel_inside_graph(void **state)
{
	static const __u64 cal[][2] = { { GS_CAL_OVERHEAD, 3328 },
					{ GS_CAL_EMPTY, 1279 },
					{ GS_CAL_GRAPH, 2600 },
					{ GS_CAL_GRAPH_EMPTY, 1400 } };
	struct model *m = setup();
	struct report *r;
	__u64 t = 1000000000ULL;
	const struct gpu_stat *g;

	(void)state;
	for (size_t i = 0; i < sizeof(cal) / sizeof(cal[0]); i++, t += 1000)
		push_gpu(m, t, t, t, t + cal[i][1], cal[i][0], GS_GPU_CALIBRATION, GS_GPU_GATED);
	t += 1000000;
	push_gpu(m, t, t + 50000, t + 1000, t + 1000 + 5000, 0x1234, GS_GPU_KERNEL,
		 GS_GPU_IN_GRAPH);
	r = analyses__report(&A);
	assert_int_equal(r->devices[0].overhead_ns, (3328 + 1279) / 2);
	assert_int_equal(r->devices[0].graph_overhead_ns, (2600 + 1400) / 2);
	g = r->kernels[0].gpu;
	assert_int_equal(g->count, 1);
	assert_int_equal(g->in_graph, 1);
	assert_int_equal(g->min_ns, 5000 - 2000);
	assert_int_equal(g->queue_ns, 0);
	assert_int_equal(g->idle_starts, 0);
	assert_int_equal(r->devices[0].busy_ns, 5000 - 2000);
	assert_int_equal(r->nstreams, 0);
	report__free(r);
	teardown();
}

/* A site with samples every_ns apart (20 ms unless set): bytes(i) for i in [0, n). */
static __u64 every_ns = 20000000ULL;

static void site_of(struct mem_site *s, unsigned int n, __u64 (*bytes)(unsigned int))
{
	memset(s, 0, sizeof(*s));
	s->kind = MK_DEVICE;
	s->first_ts = 1000000000ULL;
	for (unsigned int i = 0; i < n; i++) {
		s->samples[i].ts = s->first_ts + (__u64)i * every_ns;
		s->samples[i].bytes = bytes(i);
	}
	s->nsamples = n;
	s->live_bytes = bytes(n - 1);
}

static __u64 growing(unsigned int i)
{
	return (__u64)(i + 1) * 65536;
}

static __u64 noisy_growth(unsigned int i)
{
	return (__u64)(i + 1) * 65536 + (i % 3) * 100000;
}

static __u64 trickle(unsigned int i)
{
	return (__u64)(i + 1) * 4096;
}

static __u64 steady(unsigned int i)
{
	return i % 2 ? 512 << 10 : 256 << 10;
}

static __u64 warm_then_flat(unsigned int i)
{
	return (__u64)GS_MIN(i, 10u) * MIB;
}

static __u64 one_step(unsigned int i)
{
	return i < 45 ? MIB : 3 * MIB;
}

static __u64 three_steps(unsigned int i)
{
	return MIB * (1 + (i >= 35) + (i >= 45) + (i >= 55));
}

static void leak_trend(void **state)
{
	struct mem_site *s = calloc(1, sizeof(*s));
	struct leak_test t;
	__u64 end;

	(void)state;
	/* Rising all along: suspected, at its rate (64 KiB per 20 ms). */
	site_of(s, 60, growing);
	end = s->samples[59].ts;
	memsites__trend(s, end, &t);
	assert_true(t.suspected);
	assert_true(t.confidence > 0.9999);
	assert_true(t.slope_bps > 3.2e6 && t.slope_bps < 3.3e6);
	assert_int_equal(t.growth, 29 * 65536);
	assert_int_equal(t.n, 30); /* the later half */
	site_of(s, 60, noisy_growth);
	memsites__trend(s, end, &t);
	assert_true(t.suspected);
	/* Going up and down, a cache that grew early then stayed, a single step: no. */
	site_of(s, 60, steady);
	memsites__trend(s, end, &t);
	assert_false(t.suspected);
	assert_true(t.confidence < 0.9);
	site_of(s, 60, warm_then_flat);
	memsites__trend(s, end, &t);
	assert_false(t.suspected);
	site_of(s, 60, one_step);
	memsites__trend(s, end, &t);
	assert_false(t.suspected);
	assert_true(t.confidence > 0.999); /* (a trend to Mann-Kendall, not a leak) */
	/* Steps in each third of the window: a leak in bursts. */
	site_of(s, 60, three_steps);
	memsites__trend(s, end, &t);
	assert_true(t.suspected);
	/* A steady trend of 4 KiB a sample: under 1 MiB over the window, not worth a finding
	 * (a short-lived site's noise on a GPU looked like this). */
	site_of(s, 60, trickle);
	memsites__trend(s, end, &t);
	assert_false(t.suspected);
	assert_true(t.confidence > 0.9999);
	/* The same rise over 0.6 s: too young to judge (a first forward pass looks like
	 * this); a window under half a second is not enough. */
	every_ns = 10000000ULL;
	site_of(s, 60, growing);
	memsites__trend(s, s->samples[59].ts, &t);
	assert_false(t.suspected);
	assert_true(t.confidence > 0.9999);
	every_ns = 20000000ULL;
	/* Too few samples to say; page-locked host memory is not the GPU's. */
	site_of(s, 12, growing);
	memsites__trend(s, s->samples[11].ts, &t);
	assert_false(t.suspected);
	site_of(s, 60, growing);
	s->kind = MK_HOST;
	memsites__trend(s, end, &t);
	assert_false(t.suspected);
	/* Idle since: as of much later, the window holds the flat present. */
	site_of(s, 60, growing);
	memsites__trend(s, end + 10ULL * 1000000000ULL, &t);
	assert_false(t.suspected);
	free(s);
}

static void oom_causes(void **state)
{
	struct model *m = setup();
	__u64 base = 0x100000000ULL;
	struct ms_proc *msp;
	struct proc *p;

	(void)state;
	/* Six blocks of 1 MiB; the second and fourth freed: 2 MiB free between the live ones,
	 * in two pieces. */
	for (int i = 0; i < 6; i++)
		mem(m, 7, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, base + i * MIB, MIB, 0, 0);
	mem(m, 7, GS_API_CU_MEM_FREE, GS_MEM_FREE, base + MIB, 0, 0, 0);
	mem(m, 7, GS_API_CU_MEM_FREE, GS_MEM_FREE, base + 3 * MIB, 0, 0, 0);
	mem(m, 7, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0, 2 * MIB, 0, 2);
	assert_int_equal(A.memsites->ooms_total, 1);
	assert_int_equal(A.memsites->ooms[0].o.cause, OOM_FRAGMENTATION);
	assert_int_equal(A.memsites->ooms[0].o.holes, 2 * MIB);
	assert_int_equal(A.memsites->ooms[0].o.largest_hole, MIB);
	assert_int_equal(A.memsites->ooms[0].o.live_all, 4 * MIB);
	assert_int_equal(A.memsites->ooms[0].o.span, 6 * MIB);
	assert_int_equal(A.memsites->ooms[0].o.requested, 2 * MIB);
	/* More than is free between them at all: exhaustion. */
	mem(m, 7, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0, 3 * MIB, 0, 2);
	assert_int_equal(A.memsites->ooms[1].o.cause, OOM_EXHAUSTION);
	/* 3 MiB free in one piece, 3 MiB asked: not fragmentation either. */
	mem(m, 7, GS_API_CU_MEM_FREE, GS_MEM_FREE, base + 2 * MIB, 0, 0, 0);
	mem(m, 7, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0, 3 * MIB, 0, 2);
	assert_int_equal(A.memsites->ooms[2].o.cause, OOM_EXHAUSTION);
	assert_int_equal(A.memsites->ooms[2].o.largest_hole, 3 * MIB);
	p = hmap_get(&m->procs, 7, 0);
	msp = hmap_get(&A.memsites->procs, 7, 0);
	assert_int_equal(msp->ooms[OOM_EXHAUSTION], 2);
	assert_int_equal(msp->ooms[OOM_FRAGMENTATION], 1);
	/* Any other failure is not an OOM. */
	mem(m, 7, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0, 2 * MIB, 0, 1);
	assert_int_equal(A.memsites->ooms_total, 3);
	assert_int_equal(p->s.failed_allocs, 4);
	teardown();
}

/* Whole free 2 MiB pages are memory the driver can place anywhere: holes of them are not
 * fragmentation, however many; only the free part of partly used pages is. */
static void oom_pages(void **state)
{
	struct model *m = setup();
	__u64 base = 0x200000000ULL;
	struct frag_sample f;
	struct proc *p;

	(void)state;
	for (int i = 0; i < 6; i++)
		mem(m, 8, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, base + i * 4 * MIB, 4 * MIB, 0, 0);
	mem(m, 8, GS_API_CU_MEM_FREE, GS_MEM_FREE, base + 4 * MIB, 0, 0, 0);
	mem(m, 8, GS_API_CU_MEM_FREE, GS_MEM_FREE, base + 12 * MIB, 0, 0, 0);
	mem(m, 8, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0, 8 * MIB, 0, 2);
	assert_int_equal(A.memsites->ooms[0].o.cause, OOM_EXHAUSTION);
	assert_int_equal(A.memsites->ooms[0].o.holes, 8 * MIB);
	assert_int_equal(A.memsites->ooms[0].o.stranded, 0);
	p = hmap_get(&m->procs, 8, 0);
	assert_non_null(p);
	memsites__frag_now(A.memsites, 8, model__mem_slot(-1), 1, &f);
	assert_true(frag_score(&f) == 0.0);
	/* A 3 MiB allocation leaves 1 MiB of its second page; a 512 KiB one 1.5 MiB of its
	 * page: 2.5 MiB stranded, the largest piece 1.5 MiB. 2 MiB asked: fragmentation. */
	mem(m, 8, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, base + 24 * MIB, 3 * MIB, 0, 0);
	mem(m, 8, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, base + 28 * MIB, MIB / 2, 0, 0);
	mem(m, 8, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, base + 32 * MIB, 2 * MIB, 0, 0);
	mem(m, 8, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0, 2 * MIB, 0, 2);
	assert_int_equal(A.memsites->ooms[1].o.stranded, 5 * MIB / 2);
	assert_int_equal(A.memsites->ooms[1].o.largest_stranded, 3 * MIB / 2);
	assert_int_equal(A.memsites->ooms[1].o.cause, OOM_FRAGMENTATION);
	/* 1 MiB would fit in a piece: not fragmentation. */
	mem(m, 8, GS_API_CU_MEM_ALLOC, GS_MEM_ALLOC, 0, MIB, 0, 2);
	assert_int_equal(A.memsites->ooms[2].o.cause, OOM_EXHAUSTION);
	memsites__frag_now(A.memsites, 8, model__mem_slot(-1), 2, &f);
	assert_int_equal(f.live, 16 * MIB + 3 * MIB + MIB / 2 + 2 * MIB);
	assert_true(fabs(frag_score(&f) - 2.5 / (2.5 + 21.5)) < 1e-9);
	teardown();
}

/* An OOM that came through a caching allocator says what the driver level cannot see. */
static void oom_through_a_cache(void **state)
{
	struct rep_oom ro = { .o = { .requested = 64 * MIB, .cause = OOM_EXHAUSTION } };
	char text[1536];

	(void)state;
	strcpy(ro.site, "cudaMalloc < c10::cuda::CUDACachingAllocator::Native::"
			"DeviceCachingAllocator::alloc_block");
	report__oom_text(&ro, text, sizeof(text));
	assert_non_null(strstr(text, "failed: exhaustion."));
	assert_non_null(strstr(text, "The call came from PyTorch's caching allocator: the "
				     "driver sees its segments"));
	assert_non_null(strstr(text, "torch.cuda.memory_summary()"));
	strcpy(ro.site, "big_site < fragment < main");
	report__oom_text(&ro, text, sizeof(text));
	assert_null(strstr(text, "caching allocator"));
	/* Truncated, never overrun. */
	strcpy(ro.site, "cudaMalloc < c10::cuda::CUDACachingAllocator::alloc");
	report__oom_text(&ro, text, 100);
	assert_int_equal(strlen(text), 99);
}

/* A site's label starts at its first named frame: frames the symboliser could only place
 * in a stripped library (cudart under cudaMalloc) are skipped. */
static void site_labels(void **state)
{
	struct model *m = setup();
	struct stack_entry *st = calloc(1, sizeof(*st));
	struct mem_site *s = calloc(1, sizeof(*s));
	char buf[256];

	(void)state;
	st->pid = 9;
	st->nframes = 5;
	for (unsigned int i = 0; i < 5; i++)
		st->ip[i] = 0x1000 + i;
	hmap_put(&m->symbols, 9, 0x1000, strdup("libcudart.so.13+0x41b5e"));
	hmap_put(&m->symbols, 9, 0x1001, strdup("libcudart.so.13+0x146f3"));
	hmap_put(&m->symbols, 9, 0x1002, strdup("cudaMalloc"));
	hmap_put(&m->symbols, 9, 0x1003, strdup("_ZN3c104cuda5allocEm"));
	hmap_put(&m->symbols, 9, 0x1004, strdup("main"));
	s->pid = 9;
	s->stack = st;
	memsites__label(A.memsites, s, 2, buf, sizeof(buf));
	assert_string_equal(buf, "cudaMalloc < c10::cuda::alloc");
	memsites__label(A.memsites, s, 4, buf, sizeof(buf));
	assert_string_equal(buf, "cudaMalloc < c10::cuda::alloc < main");
	/* Nothing named at all: the placed frames it has. */
	st->nframes = 2;
	memsites__label(A.memsites, s, 4, buf, sizeof(buf));
	assert_string_equal(buf, "libcudart.so.13+0x41b5e < libcudart.so.13+0x146f3");
	teardown();
	free(s);
	free(st);
}

/* A launch 50 ms late, its thread on the CPU most of the time with its own read in flight
 * (a fast virtual disk taking small requests as fast as they are sent): the disk is the
 * cause, and the text says the thread was on the CPU issuing it. */
static void finding_on_cpu_issuing_io(void **state)
{
	struct model *m = setup();
	const __u64 ms = 1000000, t0 = 10 * ms;
	struct gs_ev_session s;
	struct gs_ev_block b;
	struct gs_ev_offcpu o;
	const struct finding *fl;
	char text[512];
	size_t nf;

	(void)state;
	hdr(&s, GS_EV_SESSION, sizeof(s), 7, t0);
	s.h.source = GS_SRC_GPUSCOPE;
	s.kind = GS_SESSION_START;
	s.mode = GS_MODE_RUN;
	s.flags = GS_SESSION_OS;
	s.target_pid = 7;
	push(m, &s.h);
	now = t0 + ms;
	launch(m, 7, GS_API_CU_LAUNCH_KERNEL, 0x10, 0x20, 1, 0);
	/* 800 requests of 64 KiB, 60 us apart, 50 us each; off the CPU once, 2 ms. */
	for (int i = 0; i < 800; i++) {
		hdr(&b, GS_EV_BLOCK, sizeof(b), 7, t0 + 2 * ms + (__u64)i * 60000);
		b.h.source = GS_SRC_TRACEPOINT;
		b.dur_ns = 50000;
		b.bytes = 64 << 10;
		b.dev = 254 << 20;
		b.op = GS_BLOCK_READ;
		push(m, &b.h);
	}
	hdr(&o, GS_EV_OFFCPU, sizeof(o), 7, t0 + 20 * ms);
	o.h.source = GS_SRC_TRACEPOINT;
	o.dur_ns = 2 * ms;
	o.reason = GS_OFFCPU_DISK;
	o.syscall = 17; /* pread64 */
	push(m, &o.h);
	now = t0 + 52 * ms;
	launch(m, 7, GS_API_CU_LAUNCH_KERNEL, 0x10, 0x20, 1, 0);
	findings__settle(A.findings);
	fl = findings__list(A.findings, &nf);
	assert_int_equal(nf, 1);
	assert_int_equal(fl[0].cause, CAUSE_DISK);
	assert_int_equal(fl[0].io_count, 800);
	assert_int_equal(fl[0].io_bytes, 800ULL << 16);
	assert_true(fl[0].io_ns > 45 * ms && fl[0].io_ns < 50 * ms);
	assert_int_equal(fl[0].off_ns, 2 * ms);
	finding_describe(&fl[0], t0, text, sizeof(text));
	assert_non_null(
		strstr(text, "launching thread 7 was on the CPU issuing I/O in pread64() on "));
	assert_non_null(strstr(text, "(800 requests, 50.0 MiB; off the CPU only 2.0 ms)"));
	teardown();
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(finding_on_cpu_issuing_io),
	cmocka_unit_test(leak_trend),
	cmocka_unit_test(oom_causes),
	cmocka_unit_test(oom_pages),
	cmocka_unit_test(site_labels),
	cmocka_unit_test(oom_through_a_cache),
	cmocka_unit_test(gpu_records_flush_amortised),
	cmocka_unit_test(gpu_kernel_inside_graph),
	cmocka_unit_test(gpu_idle_start_after_a_long_call),
	cmocka_unit_test(gpu_end_recorded_late),
	cmocka_unit_test(gpu_event_pair_overhead),
	cmocka_unit_test(gpu_chained_overhead),
	cmocka_unit_test(linear_alloc_free),
	cmocka_unit_test(vmm_lifetime),
	cmocka_unit_test(overlap_replaces_stale_range),
	cmocka_unit_test(names_through_aliases),
	cmocka_unit_test(graphs_count_runs),
	cmocka_unit_test(graphs_traced_into_children),
	cmocka_unit_test(renamed_handle_keeps_launches),
	cmocka_unit_test(copy_direction_from_pointers),
	cmocka_unit_test(nccl_bytes_use_comm_size),
	cmocka_unit_test(report_merges_and_orders),
	cmocka_unit_test(errors_exclude_polling),
};
UNIT_MAIN(tests)
