// SPDX-License-Identifier: MIT
/*
 * GPU timing workload: operations whose GPU durations the CUDA test double fixes
 * (FAKECUDA_KERNEL_NS plus threads/16 ns per kernel, bytes/FAKECUDA_GBPS + 2 us per copy),
 * in the situations GPU timing must get right. Ground truth (truth.h) holds what each
 * kernel's GPU time must be.
 *
 *   busy   20 launches of `busy` back to back on one stream: each starts when the one
 *          before ends (the start event measures it exactly)
 *   idle   10 launches of `idle`, each on an idle stream after a 1 ms pause (the start
 *          event completes before the launch is even made)
 *   copy   one 1 MiB asynchronous host-to-device copy
 *   graph  3 launches of `busy` captured into a graph on another stream (the capture
 *          must hold exactly the program's 3 nodes), then 2 graph launches (the second
 *          runs gpuscope's twin of the graph, which times its kernels)
 *   ptsz   5 launches of `idle` on this thread's default stream (cuLaunchKernel_ptsz)
 *   dev1   with --devices 2: 4 launches of `busy` in device 1's context
 *
 * With --graphs, only this instead (the twins of src/inject/gputime_graph.c): `busy`, a
 * 64 KiB set, `idle` and `busy` captured on s2 (each after the one before), launched 10
 * times: 6 times on s2 (each waited for), the 7th on s2 and at once the 8th on s (after the
 * 7th: CUDA orders the launches of an exec whatever their streams), then the exec's first
 * kernel node is set to run `other` (2 blocks of 64 threads, its argument 3000: with
 * FAKECUDA_NODE_ARG_NS=other, 3 us longer), as XLA sets its nodes, the argument's variable
 * overwritten right after, and the exec runs twice on s2; then the same set through
 * cuGraphExecNodeSetParams (the argument in an `extra` buffer), and the memset node's
 * value set to 7, and it runs twice again
 * (the memory must then hold 7s). Truth: the kernels' and the graph's
 * durations, and how long after the 7th ended on s2 the 8th ended on s.
 *
 * With --children, only this instead (a child graph in a twin, set as XLA sets its traced
 * command buffers): a graph of a child graph node of one `idle` (4 x 256), then `busy`
 * twice, built with the graph API and launched 13 times on s2, each waited for; before
 * the 7th to the 10th, the child node is set at the exec to a new graph of one `other`
 * (2 x 64, its argument 3000), destroyed right after. Truth as with --graphs. With
 * --update, the same, but the whole exec updated (cuGraphExecUpdate, as llama.cpp does)
 * from a new graph of the same shape, its child's kernel `other`.
 *
 * With --replays N [D], only this instead: a graph of `busy` then `idle` (built with the
 * graph API) launched N times on s2, each waited for; with D, `idle` disabled
 * (cuGraphNodeSetEnabled) at launches D to D + 3.
 *
 * With --graph-bursts R G, only this instead: R rounds of `busy` launched on s and a 4 KiB
 * set on s (cuMemsetD32Async), then a graph of one `idle` (built with the graph API)
 * launched G times on s, the round waited for.
 *
 * With --follow, only this instead (follows, src/inject/gputime_chain.c): see follows().
 *
 * With --shapes N, only this instead (carriers, src/inject/gputime_carry.c): see shapes().
 *
 * With --ab FILE, only this instead (GPUSCOPE_AB_FILE, src/inject/ab.c): FILE made to say
 * "off", then "2", "pairs+stacks=1+rate=0", "pass", "off+norecord" and "pairs+carry+nopf", the
 * plane given 100 ms after each (with GPUSCOPE_AB_PHASES, until it says it took it), then 6
 * launches of `busy`, `idle`, `other`, `busy` again,
 * `idle` again and `other` again, each 1 ms after the one before ended.
 *
 * With --cupti N [client], only this instead (--gpu-time=cupti, src/inject/gputime_cupti.c):
 * see cupti_rounds(). With --cupti-threads N: see cupti_threads(). With --graph-threads N:
 * see graph_threads().
 *
 * With --after-copy, only this instead: `idle` launched right after an asynchronous copy
 * on its stream, then on the legacy stream after a synchronous copy, 3 times each
 * (FAKECUDA_ENGINE_SWITCH_NS delays such a kernel's start, as a GPU does).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "truth.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
			  ".visible .entry busy(\n.param .u64 a)\n{ ret; }\n"
			  ".visible .entry idle(\n.param .u64 a)\n{ ret; }\n"
			  ".visible .entry other(\n.param .u64 a)\n{ ret; }\n";

static unsigned long long kernel_ns(unsigned grid, unsigned block)
{
	const char *k = getenv("FAKECUDA_KERNEL_NS");

	return (k ? strtoull(k, NULL, 0) : 5000) + (unsigned long long)grid * block / 16;
}

static void pause_ms(int ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* A kernel node's parameters: k on grid x 1 x 1 blocks of block x 1 x 1 threads. */
static CUDA_KERNEL_NODE_PARAMS kparams(CUkernel k, unsigned grid, unsigned block, void **args)
{
	CUDA_KERNEL_NODE_PARAMS p = { .kern = k,
				      .gridDimX = grid,
				      .gridDimY = 1,
				      .gridDimZ = 1,
				      .blockDimX = block,
				      .blockDimY = 1,
				      .blockDimZ = 1,
				      .kernelParams = args };

	return p;
}

/* The truth of the graph workloads: each kernel's duration. */
static void truth_kernels(unsigned long long busy_ns, unsigned long long idle_ns,
			  unsigned long long other_ns)
{
	truth_add((long long)busy_ns, "gpu:busy:ns");
	truth_add((long long)idle_ns, "gpu:idle:ns");
	truth_add((long long)other_ns, "gpu:other:ns");
}

/* The exec's first kernel node set to run other, as XLA sets one (by the generic setter if
 * generic); the argument's variable is gone after the call. */
static void set_node(CUgraphExec exec, CUgraph graph, CUkernel other, int generic)
{
	unsigned long long arg = 3000;
	size_t size = sizeof(arg);
	void *args[] = { &arg }, *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &arg,
					      CU_LAUNCH_PARAM_BUFFER_SIZE, &size, NULL };
	CUgraphNodeParams gp = { .type = 0 };
	CUDA_KERNEL_NODE_PARAMS *p = &gp.kernel;
	CUgraphNode nodes[8];
	size_t n = 8;

	/* (The generic setter's parameters by the `extra` buffer.) */
	*p = kparams(other, 2, 64, generic ? NULL : args);
	p->extra = generic ? extra : NULL;
	CHECK(cuGraphGetNodes(graph, nodes, &n), 0);
	CHECK(n, 4);
	CHECK(generic ? cuGraphExecNodeSetParams(exec, nodes[0], &gp)
		      : cuGraphExecKernelNodeSetParams_v2(exec, nodes[0], p),
	      0);
	arg = 999999999;
	__asm__ volatile("" : : "r"(&arg) : "memory");
}

/* The exec's memset node set to value (cuGraphExecMemsetNodeSetParams), as XLA sets one
 * whose buffer moved. */
static void set_memset(CUgraphExec exec, CUgraph graph, CUdeviceptr d, unsigned value)
{
	CUDA_MEMSET_NODE_PARAMS p = {
		.dst = d, .value = value, .elementSize = 4, .width = 16 << 10, .height = 1
	};
	CUgraphNode nodes[8];
	size_t n = 8;
	int type = -1;

	CHECK(cuGraphGetNodes(graph, nodes, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (!cuGraphNodeGetType(nodes[i], &type) && type == 2) {
			CHECK(cuGraphExecMemsetNodeSetParams(exec, nodes[i], &p, NULL), 0);
			return;
		}
	CHECK(type, 2);
}

static CUgraph one_kernel_graph(CUkernel k, unsigned grid, unsigned block, void **args)
{
	CUDA_KERNEL_NODE_PARAMS p = kparams(k, grid, block, args);
	CUgraphNode n;
	CUgraph g;

	CHECK(cuGraphCreate(&g, 0), 0);
	CHECK(cuGraphAddKernelNode_v2(&n, g, NULL, 0, &p), 0);
	return g;
}

/* A graph of a child graph node of one k (grid x block, args), then busy twice; *c its
 * child node. */
static CUgraph child_first(CUkernel k, unsigned grid, unsigned block, void **args, CUkernel busy,
			   CUgraphNode *c)
{
	CUDA_KERNEL_NODE_PARAMS p = kparams(busy, 1, 32, NULL);
	CUgraph graph, child = one_kernel_graph(k, grid, block, args);
	CUgraphNode a, b;

	CHECK(cuGraphCreate(&graph, 0), 0);
	CHECK(cuGraphAddChildGraphNode(c, graph, NULL, 0, child), 0);
	CHECK(cuGraphAddKernelNode_v2(&a, graph, c, 1, &p), 0);
	CHECK(cuGraphAddKernelNode_v2(&b, graph, &a, 1, &p), 0);
	CHECK(cuGraphDestroy(child), 0);
	return graph;
}

/* --follow: on s, busy, idle twice, busy on the legacy stream, idle three times, back to
 * back (each but the legacy one's queued behind the one before on a busy stream), an event
 * recorded on s (a call of the program's between), idle once more; 3 times, each waited
 * for, after a first launch of each. */
static int follows(CUkernel busy, CUkernel idle, CUstream s, unsigned long long busy_ns,
		   unsigned long long idle_ns)
{
	CUfunction b = (CUfunction)busy, i = (CUfunction)idle;
	CUevent ev;

	CHECK(cuEventCreate(&ev, 0), 0);
	CHECK(cuLaunchKernel(b, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), 0);
	CHECK(cuLaunchKernel(i, 4, 1, 1, 256, 1, 1, 0, s, NULL, NULL), 0);
	CHECK(cuStreamSynchronize(s), 0);
	for (int r = 0; r < 3; r++) {
		CHECK(cuLaunchKernel(b, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), 0);
		for (int k = 0; k < 5; k++) {
			if (k == 2)
				CHECK(cuLaunchKernel(b, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), 0);
			CHECK(cuLaunchKernel(i, 4, 1, 1, 256, 1, 1, 0, s, NULL, NULL), 0);
		}
		CHECK(cuEventRecord(ev, s), 0);
		CHECK(cuLaunchKernel(i, 4, 1, 1, 256, 1, 1, 0, s, NULL, NULL), 0);
		CHECK(cuCtxSynchronize(), 0);
	}
	truth_add(7, "gpu:busy:timed");
	truth_add(19, "gpu:idle:timed");
	/* (each round's first two idle after busy, and the last two of the three after the
	 * legacy stream's launch) */
	truth_add(12, "gpu:idle:followed");
	truth_kernels(busy_ns, idle_ns, 0);
	truth_write();
	return 0;
}

/* Whether the plane took the mode written (within 30 s): with GPUSCOPE_AB_PHASES, once FILE's
 * phases file has `lines` lines (each written when a mode holds); without, after 100 ms (a
 * loaded machine may take longer: a mode then runs late). */
static bool ab_switched(const char *file, int lines)
{
	char path[4096];

	if (!getenv("GPUSCOPE_AB_PHASES")) {
		pause_ms(100);
		return true;
	}
	snprintf(path, sizeof(path), "%s.phases", file);
	for (int ms = 0; ms < 30000; ms++) {
		FILE *f = fopen(path, "r");
		int c, n = 0;

		while (f && (c = getc(f)) != EOF)
			n += c == '\n';
		if (f)
			fclose(f);
		if (n >= lines)
			return true;
		pause_ms(1);
	}
	fprintf(stderr, "wl_gputime: %s: the plane did not take mode %d\n", path, lines);
	return false;
}

/* --ab FILE: the modes switched in phases (see the top). */
static int ab_phases(const char *file, CUkernel busy, CUkernel idle, CUkernel other, CUstream s)
{
	static const char *const mode[] = {
		"off", "2", "pairs+stacks=1+rate=0", "pass", "off+norecord", "pairs+carry+nopf"
	};
	CUkernel k[] = { busy, idle, other, busy, idle, other };

	for (int p = 0; p < 6; p++) {
		FILE *f = fopen(file, "w");

		if (!f || fputs(mode[p], f) < 0 || fclose(f) || !ab_switched(file, p + 1))
			return 1;
		for (int i = 0; i < 6; i++) {
			pause_ms(1); /* (an idle stream: carriers made meanwhile) */
			CHECK(cuLaunchKernel((CUfunction)k[p], 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL),
			      0);
			CHECK(cuStreamSynchronize(s), 0);
		}
	}
	truth_write();
	return 0;
}

/* --shapes N: N rounds of busy (1 x 32), idle (4 x 256) and idle (2 x 256), each launched
 * alone on s 1 ms after the one before ended. */
/*
 * --copies N: N rounds on stream s of an asynchronous HtoD copy of 1-8 KiB, an asynchronous
 * set of four times as many bytes and a launch of idle; then a synchronous copy (not timed).
 * Truth: the copies' and the sets' GPU time, summed, as the double runs them (bytes /
 * FAKECUDA_GBPS + 2 us; a set at 50 times that rate, on the device).
 */
static int copies(CUkernel idle, CUstream s, int n)
{
	const char *g = getenv("FAKECUDA_GBPS");
	double gbps = g ? atof(g) : 20;
	unsigned long long copy_ns = 0, set_ns = 0;
	CUdeviceptr d;
	void *host;

	CHECK(cuMemAlloc_v2(&d, 1 << 20), 0);
	CHECK(cuMemHostAlloc(&host, 1 << 20, 0), 0);
	for (int i = 0; i < n; i++) {
		size_t b = (size_t)(i % 8 + 1) << 10;

		CHECK(cuMemcpyHtoDAsync_v2(d, host, b, s), 0);
		CHECK(cuMemsetD32Async(d, (unsigned)i, b, s), 0);
		CHECK(cuLaunchKernel((CUfunction)idle, 4, 1, 1, 256, 1, 1, 0, s, NULL, NULL), 0);
		copy_ns += (unsigned long long)((double)b / gbps) + 2000;
		set_ns += (unsigned long long)((double)(4 * b) / (gbps * 50)) + 2000;
	}
	CHECK(cuStreamSynchronize(s), 0);
	CHECK(cuMemcpyHtoD_v2(d, host, 4096), 0);
	truth_add((long long)copy_ns, "gpu:copies:ns");
	truth_add((long long)set_ns, "gpu:sets:ns");
	truth_write();
	return 0;
}

static int shapes(CUkernel busy, CUkernel idle, CUstream s, int n)
{
	const struct {
		CUkernel k;
		unsigned grid, block;
	} sh[] = { { busy, 1, 32 }, { idle, 4, 256 }, { idle, 2, 256 } };

	for (int i = 0; i < n; i++)
		for (int j = 0; j < 3; j++) {
			pause_ms(1);
			CHECK(cuLaunchKernel((CUfunction)sh[j].k, sh[j].grid, 1, 1, sh[j].block, 1,
					     1, 0, s, NULL, NULL),
			      0);
			CHECK(cuStreamSynchronize(s), 0);
		}
	truth_add((long long)kernel_ns(1, 32), "gpu:busy:ns");
	truth_add((long long)kernel_ns(4, 256), "gpu:idle:ns");
	truth_add((long long)kernel_ns(2, 256), "gpu:idle2:ns");
	truth_write();
	return 0;
}

/* The directory of this program. */
static const char *exe_dir(void)
{
	static char d[4096];
	ssize_t n = readlink("/proc/self/exe", d, sizeof(d) - 1);

	d[n > 0 ? n : 0] = 0;
	if (strrchr(d, '/'))
		*strrchr(d, '/') = 0;
	return d;
}

/* --cupti N [client]: N rounds of busy (1 x 32) on s, idle (4 x 256) on this thread's
 * default stream (cuLaunchKernel_ptsz) and idle (2 x 256) on s2 by cuLaunchKernelEx, each
 * round waited for; in round N / 2, busy also captured 3 times on s2 into a graph launched
 * once (a captured launch has no kernel record of its own: s2's queue must not keep it).
 * With client, after round N / 2 the program starts a CUPTI client of its own, as a
 * profiler does: libwl_cuptiuser.so, linked against libcupti and loaded with RTLD_LOCAL as
 * Python loads libtorch, registers its callbacks and enables kernel records (its calls
 * bound by the loader: to gpuscope's, which come first). The rounds after go untimed, and
 * the program's calls must reach CUPTI and succeed. WL_CLIENT_AFTER_MS=N: the client
 * started N ms after that round. Truth: each kernel's duration, and how many of each were
 * timed. */
static int cupti_rounds(CUkernel busy, CUkernel idle, CUstream s, CUstream s2, int n, bool client)
{
	CUlaunchConfig cfg = { .gridDimX = 2,
			       .gridDimY = 1,
			       .gridDimZ = 1,
			       .blockDimX = 256,
			       .blockDimY = 1,
			       .blockDimZ = 1,
			       .hStream = s2 };
	int timed = n;

	for (int i = 0; i < n; i++) {
		CHECK(cuLaunchKernel((CUfunction)busy, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), 0);
		CHECK(cuLaunchKernel_ptsz((CUfunction)idle, 4, 1, 1, 256, 1, 1, 0, NULL, NULL,
					  NULL),
		      0);
		CHECK(cuLaunchKernelEx(&cfg, (CUfunction)idle, NULL, NULL), 0);
		if (i == n / 2) {
			CUgraph g;
			CUgraphExec e;

			CHECK(cuStreamBeginCapture_v2(s2, 0), 0);
			for (int k = 0; k < 3; k++)
				CHECK(cuLaunchKernel((CUfunction)busy, 1, 1, 1, 32, 1, 1, 0, s2,
						     NULL, NULL),
				      0);
			CHECK(cuStreamEndCapture(s2, &g), 0);
			CHECK(cuGraphInstantiateWithFlags(&e, g, 0), 0);
			CHECK(cuGraphLaunch(e, s2), 0);
		}
		CHECK(cuCtxSynchronize(), 0);
		if (i == n / 2 && client) {
			const char *wait_ms = getenv("WL_CLIENT_AFTER_MS");
			char path[4200];
			void *h;
			int (*start)(void);

			if (wait_ms) /* (a delivery of the tracer's under way meanwhile) */
				usleep((useconds_t)atoi(wait_ms) * 1000);

			snprintf(path, sizeof(path), "%s/libwl_cuptiuser.so", exe_dir());
			h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
			start = h ? (int (*)(void))dlsym(h, "wl_cupti_start") : NULL;
			CHECK(start != NULL, 1);
			CHECK(start(), 0);
			timed = i + 1;
		}
	}
	truth_add((long long)kernel_ns(1, 32), "gpu:busy:ns");
	truth_add((long long)kernel_ns(4, 256), "gpu:idle:ns");
	truth_add((long long)kernel_ns(2, 256), "gpu:idle2:ns");
	truth_add(timed, "gpu:busy:timed");
	truth_write();
	return 0;
}

struct launcher {
	CUcontext ctx;
	CUkernel k;
	CUstream s;
	unsigned grid, block;
	int n;
};

static void *launch_n(void *arg)
{
	struct launcher *l = arg;

	CHECK(cuCtxSetCurrent(l->ctx), 0);
	for (int i = 0; i < l->n; i++)
		CHECK(cuLaunchKernel((CUfunction)l->k, l->grid, 1, 1, l->block, 1, 1, 0, l->s, NULL,
				     NULL),
		      0);
	return NULL;
}

/* --cupti-threads N: two threads launch N kernels each on one stream at once, busy and idle,
 * both 1 x 32 (two kernels of one shape, as PyTorch's elementwise kernels often are), as
 * PyTorch's main and autograd threads do on the default stream (after one launch of busy,
 * 2 x 32, on s2 first: CUPTI started by then). */
static int cupti_threads(CUcontext ctx, CUkernel busy, CUkernel idle, CUstream s, CUstream s2,
			 int n)
{
	struct launcher l[2] = { { ctx, busy, s, 1, 32, n }, { ctx, idle, s, 1, 32, n } };
	pthread_t t[2];

	CHECK(cuLaunchKernel((CUfunction)busy, 2, 1, 1, 32, 1, 1, 0, s2, NULL, NULL), 0);
	CHECK(cuCtxSynchronize(), 0);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, launch_n, &l[i]), 0);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_join(t[i], NULL), 0);
	CHECK(cuCtxSynchronize(), 0);
	truth_add((long long)kernel_ns(1, 32), "gpu:busy:ns");
	truth_write();
	return 0;
}

struct grapher {
	CUcontext ctx;
	CUgraphExec exec;
	CUkernel idle;
	CUstream s, s2;
	int n, go, done, during;
};

static void *graph_n(void *arg)
{
	struct grapher *g = arg;

	CHECK(cuCtxSetCurrent(g->ctx), 0);
	while (!__atomic_load_n(&g->go, __ATOMIC_ACQUIRE))
		pause_ms(1);
	for (int i = 0; i < g->n || __atomic_load_n(&g->during, __ATOMIC_ACQUIRE) < 50; i++)
		CHECK(cuGraphLaunch(g->exec, g->s2), 0);
	__atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *idle_n(void *arg)
{
	struct grapher *g = arg;
	int n = 0;

	CHECK(cuCtxSetCurrent(g->ctx), 0);
	for (int phase = 0; phase < 3; phase++) {
		if (phase == 1)
			__atomic_store_n(&g->go, 1, __ATOMIC_RELEASE);
		for (int i = 0; phase == 1 ? !__atomic_load_n(&g->done, __ATOMIC_ACQUIRE) : i < 10;
		     i++, n++) {
			CHECK(cuLaunchKernel((CUfunction)g->idle, 4, 1, 1, 256, 1, 1, 0, g->s, NULL,
					     NULL),
			      0);
			if (phase == 1) {
				__atomic_fetch_add(&g->during, 1, __ATOMIC_RELEASE);
				nanosleep(&(struct timespec){ 0, 50000 }, NULL);
			}
		}
	}
	truth_add(n, "idle:launches");
	return NULL;
}

/* --graph-threads N: one thread launches a graph of one busy (1 x 32) on s2, N times and
 * until the other has launched 50 kernels meanwhile, while the other launches idle
 * (4 x 256) on s all along (50 us apart), 10 times before and 10 after (FAKECUDA_GRAPH_CALL_NS: each graph
 * launch's call that long, the other thread's launches falling into it); after one launch
 * of busy, 2 x 32, on s first (CUPTI started by then). */
static int graph_threads(CUcontext ctx, CUkernel busy, CUkernel idle, CUstream s, CUstream s2,
			 int n)
{
	CUDA_KERNEL_NODE_PARAMS a = kparams(busy, 1, 32, NULL);
	struct grapher g = { .ctx = ctx, .idle = idle, .s = s, .s2 = s2, .n = n };
	CUgraphNode node;
	CUgraph graph;
	pthread_t t[2];

	CHECK(cuLaunchKernel((CUfunction)busy, 2, 1, 1, 32, 1, 1, 0, s, NULL, NULL), 0);
	CHECK(cuCtxSynchronize(), 0);
	CHECK(cuGraphCreate(&graph, 0), 0);
	CHECK(cuGraphAddKernelNode_v2(&node, graph, NULL, 0, &a), 0);
	CHECK(cuGraphInstantiateWithFlags(&g.exec, graph, 0), 0);
	CHECK(pthread_create(&t[0], NULL, graph_n, &g), 0);
	CHECK(pthread_create(&t[1], NULL, idle_n, &g), 0);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_join(t[i], NULL), 0);
	CHECK(cuCtxSynchronize(), 0);
	truth_add((long long)kernel_ns(4, 256), "gpu:idle:ns");
	truth_write();
	return 0;
}

/* --replays N [D]: a graph of busy, then idle after it, launched N times on s2, each
 * waited for (idle disabled at launches D to D + 3). */
static int replays(CUkernel busy, CUkernel idle, CUstream s2, int n, int d,
		   unsigned long long busy_ns, unsigned long long idle_ns)
{
	CUDA_KERNEL_NODE_PARAMS a = kparams(busy, 1, 32, NULL), b = kparams(idle, 4, 256, NULL);
	CUgraphNode first, second;
	CUgraphExec exec;
	CUgraph graph;

	CHECK(cuGraphCreate(&graph, 0), 0);
	CHECK(cuGraphAddKernelNode_v2(&first, graph, NULL, 0, &a), 0);
	CHECK(cuGraphAddKernelNode_v2(&second, graph, &first, 1, &b), 0);
	CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0), 0);
	for (int i = 0; i < n; i++) {
		if (d >= 0 && (i == d || i == d + 4))
			CHECK(cuGraphNodeSetEnabled(exec, second, i != d), 0);
		CHECK(cuGraphLaunch(exec, s2), 0);
		CHECK(cuStreamSynchronize(s2), 0);
	}
	CHECK(cuGraphExecDestroy(exec), 0);
	CHECK(cuGraphDestroy(graph), 0);
	truth_kernels(busy_ns, idle_ns, 0);
	truth_write();
	return 0;
}

/* --graph-bursts R G: see the top. */
static int graph_bursts(CUkernel busy, CUkernel idle, CUstream s, int rounds, int g,
			unsigned long long busy_ns, unsigned long long idle_ns)
{
	CUDA_KERNEL_NODE_PARAMS a = kparams(idle, 4, 256, NULL);
	CUgraphNode node;
	CUgraphExec exec;
	CUgraph graph;
	CUdeviceptr d;

	CHECK(cuMemAlloc_v2(&d, 4096), 0);
	CHECK(cuGraphCreate(&graph, 0), 0);
	CHECK(cuGraphAddKernelNode_v2(&node, graph, NULL, 0, &a), 0);
	CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0), 0);
	for (int r = 0; r < rounds; r++) {
		CHECK(cuLaunchKernel((CUfunction)busy, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), 0);
		CHECK(cuMemsetD32Async(d, 0, 1024, s), 0);
		for (int i = 0; i < g; i++)
			CHECK(cuGraphLaunch(exec, s), 0);
		CHECK(cuStreamSynchronize(s), 0);
	}
	CHECK(cuGraphExecDestroy(exec), 0);
	CHECK(cuGraphDestroy(graph), 0);
	CHECK(cuMemFree_v2(d), 0);
	truth_kernels(busy_ns, idle_ns, 0);
	truth_write();
	return 0;
}

static int children(CUkernel busy, CUkernel idle, CUkernel other, CUstream s2,
		    unsigned long long busy_ns, unsigned long long idle_ns, int update)
{
	unsigned long long other_ns =
		kernel_ns(2, 64) + (getenv("FAKECUDA_NODE_ARG_NS") ? 3000 : 0);
	CUgraphNode c, c2;
	CUgraph graph = child_first(idle, 4, 256, NULL, busy, &c), g2;
	CUgraphExec exec;

	CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0), 0);
	for (int i = 0; i < 13; i++) {
		if (i >= 6 && i < 10) {
			unsigned long long arg = 3000;
			void *args[] = { &arg };

			if (update) {
				g2 = child_first(other, 2, 64, args, busy, &c2);
				CHECK(cuGraphExecUpdate_v2(exec, g2, NULL), 0);
			} else {
				g2 = one_kernel_graph(other, 2, 64, args);
				CHECK(cuGraphExecChildGraphNodeSetParams(exec, c, g2), 0);
			}
			CHECK(cuGraphDestroy(g2), 0);
		}
		CHECK(cuGraphLaunch(exec, s2), 0);
		CHECK(cuStreamSynchronize(s2), 0);
	}
	CHECK(cuGraphExecDestroy(exec), 0);
	truth_kernels(busy_ns, idle_ns, other_ns);
	truth_write();
	return 0;
}

static int graphs(CUkernel busy, CUkernel idle, CUkernel other, CUstream s, CUstream s2,
		  unsigned long long busy_ns, unsigned long long idle_ns)
{
	const char *g = getenv("FAKECUDA_GBPS");
	unsigned long long set_ns =
		(unsigned long long)((64 << 10) / ((g ? atof(g) : 20) * 50)) + 2000;
	unsigned long long other_ns =
		kernel_ns(2, 64) + (getenv("FAKECUDA_NODE_ARG_NS") ? 3000 : 0);
	static unsigned words[16 << 10];
	CUgraph graph;
	CUgraphExec exec;
	CUevent on_s2, on_s;
	CUdeviceptr d;
	float ms = 0;

	CHECK(cuMemAlloc_v2(&d, 64 << 10), 0);
	CHECK(cuEventCreate(&on_s2, 0), 0);
	CHECK(cuEventCreate(&on_s, 0), 0);
	CHECK(cuStreamBeginCapture_v2(s2, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
	CHECK(cuLaunchKernel((CUfunction)busy, 1, 1, 1, 32, 1, 1, 0, s2, NULL, NULL), 0);
	CHECK(cuMemsetD32Async(d, 0, 16 << 10, s2), 0);
	CHECK(cuLaunchKernel((CUfunction)idle, 4, 1, 1, 256, 1, 1, 0, s2, NULL, NULL), 0);
	CHECK(cuLaunchKernel((CUfunction)busy, 1, 1, 1, 32, 1, 1, 0, s2, NULL, NULL), 0);
	CHECK(cuStreamEndCapture(s2, &graph), 0);
	CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0), 0);
	for (int i = 0; i < 6; i++) {
		CHECK(cuGraphLaunch(exec, s2), 0);
		CHECK(cuStreamSynchronize(s2), 0);
	}
	CHECK(cuGraphLaunch(exec, s2), 0);
	CHECK(cuEventRecord(on_s2, s2), 0);
	CHECK(cuGraphLaunch(exec, s), 0);
	CHECK(cuEventRecord(on_s, s), 0);
	CHECK(cuCtxSynchronize(), 0);
	CHECK(cuEventElapsedTime(&ms, on_s2, on_s), 0);
	for (int i = 0; i < 4; i++) {
		if (i % 2 == 0)
			set_node(exec, graph, other, i == 2);
		if (i == 2)
			set_memset(exec, graph, d, 7);
		CHECK(cuGraphLaunch(exec, s2), 0);
		CHECK(cuStreamSynchronize(s2), 0);
	}
	/* (The set's value: what the graph's runs after it wrote, twins' included.) */
	CHECK(cuMemcpyDtoH_v2(words, d, sizeof(words)), 0);
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		CHECK(words[i], 7);
	CHECK(cuGraphExecDestroy(exec), 0);
	truth_kernels(busy_ns, idle_ns, other_ns);
	/* (A graph's first work starts FAKECUDA_GRAPH_START_NS after its launch does.) */
	truth_add((long long)(2 * busy_ns + idle_ns + set_ns) +
			  (getenv("FAKECUDA_GRAPH_START_NS")
				   ? strtoll(getenv("FAKECUDA_GRAPH_START_NS"), NULL, 0)
				   : 0),
		  "gpu:graph:ns");
	truth_add((long long)(ms * 1e6), "gpu:graph:after_ns");
	truth_write();
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long long busy_ns = kernel_ns(1, 32), idle_ns = kernel_ns(4, 256);
	const char *g = getenv("FAKECUDA_GBPS");
	unsigned long long copy_ns = (unsigned long long)((1 << 20) / (g ? atof(g) : 20)) + 2000;
	int ndev = argc > 2 && !strcmp(argv[1], "--devices") ? atoi(argv[2]) : 1;
	CUdevice dev;
	CUcontext ctx, ctx1;
	CUlibrary lib;
	CUkernel busy, idle, other;
	CUstream s, s2;
	CUgraph graph;
	CUgraphExec exec;
	CUdeviceptr d, d0, d1;
	CUcontext popped;
	void *host;
	size_t nodes = 0;

	CHECK(cuInit(0), 0);
	CHECK(cuDeviceGet(&dev, 0), 0);
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), 0);
	CHECK(cuCtxSetCurrent(ctx), 0);
	CHECK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0), 0);
	CHECK(cuLibraryGetKernel(&busy, lib, "busy"), 0);
	CHECK(cuLibraryGetKernel(&idle, lib, "idle"), 0);
	CHECK(cuStreamCreate(&s, 0), 0);
	CHECK(cuStreamCreate(&s2, 0), 0);

	if (argc > 1 && (!strcmp(argv[1], "--graphs") || !strcmp(argv[1], "--children") ||
			 !strcmp(argv[1], "--update"))) {
		CHECK(cuLibraryGetKernel(&other, lib, "other"), 0);
		return !strcmp(argv[1], "--graphs")
			       ? graphs(busy, idle, other, s, s2, busy_ns, idle_ns)
			       : children(busy, idle, other, s2, busy_ns, idle_ns,
					  !strcmp(argv[1], "--update"));
	}
	if (argc > 2 && !strcmp(argv[1], "--ab")) {
		CHECK(cuLibraryGetKernel(&other, lib, "other"), 0);
		return ab_phases(argv[2], busy, idle, other, s);
	}
	if (argc > 1 && !strcmp(argv[1], "--follow"))
		return follows(busy, idle, s, busy_ns, idle_ns);
	if (argc > 2 && !strcmp(argv[1], "--cupti-threads"))
		return cupti_threads(ctx, busy, idle, s, s2, atoi(argv[2]));
	if (argc > 2 && !strcmp(argv[1], "--graph-threads"))
		return graph_threads(ctx, busy, idle, s, s2, atoi(argv[2]));
	if (argc > 2 && !strcmp(argv[1], "--cupti"))
		return cupti_rounds(busy, idle, s, s2, atoi(argv[2]),
				    argc > 3 && !strcmp(argv[3], "client"));
	if (argc > 2 && !strcmp(argv[1], "--shapes"))
		return shapes(busy, idle, s, atoi(argv[2]));
	if (argc > 2 && !strcmp(argv[1], "--copies"))
		return copies(idle, s, atoi(argv[2]));
	if (argc > 3 && !strcmp(argv[1], "--graph-bursts"))
		return graph_bursts(busy, idle, s, atoi(argv[2]), atoi(argv[3]), busy_ns, idle_ns);
	if (argc > 2 && !strcmp(argv[1], "--replays"))
		return replays(busy, idle, s2, atoi(argv[2]), argc > 3 ? atoi(argv[3]) : -1,
			       busy_ns, idle_ns);
	if (argc > 1 && !strcmp(argv[1], "--after-copy")) {
		CHECK(cuMemAlloc_v2(&d, 1 << 20), 0);
		CHECK(cuMemHostAlloc(&host, 1 << 20, 0), 0);
		for (int i = 0; i < 3; i++) {
			pause_ms(1);
			CHECK(cuMemcpyHtoDAsync_v2(d, host, 4096, s), 0);
			CHECK(cuLaunchKernel((CUfunction)idle, 4, 1, 1, 256, 1, 1, 0, s, NULL,
					     NULL),
			      0);
			CHECK(cuStreamSynchronize(s), 0);
			CHECK(cuMemcpyHtoD_v2(d, host, 4096), 0);
			pause_ms(1);
			CHECK(cuLaunchKernel((CUfunction)idle, 4, 1, 1, 256, 1, 1, 0, NULL, NULL,
					     NULL),
			      0);
			CHECK(cuStreamSynchronize(NULL), 0);
		}
		truth_add(6, "gpu:idle:timed");
		truth_add((long long)idle_ns, "gpu:idle:ns");
		truth_write();
		return 0;
	}

	for (int i = 0; i < 20; i++)
		CHECK(cuLaunchKernel((CUfunction)busy, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), 0);
	CHECK(cuStreamSynchronize(s), 0);
	truth_add(20, "gpu:busy:timed");
	truth_add(20, "gpu:busy:ops");

	for (int i = 0; i < 10; i++) {
		pause_ms(1);
		CHECK(cuLaunchKernel((CUfunction)idle, 4, 1, 1, 256, 1, 1, 0, s, NULL, NULL), 0);
		CHECK(cuStreamSynchronize(s), 0);
	}
	truth_add(10, "gpu:idle:timed");

	CHECK(cuMemAlloc_v2(&d, 1 << 20), 0);
	CHECK(cuMemHostAlloc(&host, 1 << 20, 0), 0);
	CHECK(cuMemcpyHtoDAsync_v2(d, host, 1 << 20, s), 0);
	CHECK(cuStreamSynchronize(s), 0);

	CHECK(cuStreamBeginCapture_v2(s2, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
	for (int i = 0; i < 3; i++)
		CHECK(cuLaunchKernel((CUfunction)busy, 1, 1, 1, 32, 1, 1, 0, s2, NULL, NULL), 0);
	CHECK(cuStreamEndCapture(s2, &graph), 0);
	CHECK(cuGraphGetNodes(graph, NULL, &nodes), 0);
	CHECK(nodes, 3);
	CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0), 0);
	for (int i = 0; i < 2; i++) {
		CHECK(cuGraphLaunch(exec, s2), 0);
		CHECK(cuStreamSynchronize(s2), 0);
	}

	for (int i = 0; i < 5; i++) {
		CHECK(cuLaunchKernel_ptsz((CUfunction)idle, 4, 1, 1, 256, 1, 1, 0, NULL, NULL,
					  NULL),
		      0);
		CHECK(cuStreamSynchronize_ptsz(NULL), 0);
	}
	truth_add(5, "gpu:idle:timed");

	if (ndev > 1) {
		CHECK(cuDeviceGet(&dev, 1), 0);
		CHECK(cuDevicePrimaryCtxRetain(&ctx1, dev), 0);
		CHECK(cuCtxSetCurrent(ctx1), 0);
		for (int i = 0; i < 4; i++)
			CHECK(cuLaunchKernel((CUfunction)busy, 1, 1, 1, 32, 1, 1, 0, NULL, NULL,
					     NULL),
			      0);
		CHECK(cuCtxSynchronize(), 0);
		truth_add(4, "gpu:busy:timed");
		/* Memory on both devices, each allocation made in the context current to its
		 * thread: device 1's by cuCtxSetCurrent, device 0's by a push over it. */
		CHECK(cuMemAlloc_v2(&d1, 2 << 20), 0);
		CHECK(cuCtxPushCurrent_v2(ctx), 0);
		CHECK(cuMemAlloc_v2(&d0, 512 << 10), 0);
		CHECK(cuCtxPopCurrent_v2(&popped), 0);
		CHECK(popped == ctx, 1);
		CHECK(cuMemFree_v2(d1), 0);
		CHECK(cuCtxSetCurrent(ctx), 0);
		CHECK(cuMemFree_v2(d0), 0); /* (device 0's, whatever is current) */
		truth_add((1 << 20) + (512 << 10), "mem:dev0:peak");
		truth_add(2 << 20, "mem:dev1:peak");
		truth_add(0, "mem:dev1:end");
	} else {
		truth_add(1 << 20, "mem:dev0:peak");
	}
	truth_add(1 << 20, "mem:dev0:end");

	truth_add((long long)busy_ns, "gpu:busy:ns");
	truth_add((long long)idle_ns, "gpu:idle:ns");
	truth_add((long long)copy_ns, "gpu:copy:ns");
	truth_add((long long)(3 * busy_ns), "gpu:graph:ns");
	/* (The second launch runs the graph's twin: its kernels are timed, not the graph.) */
	truth_add(1, "gpu:graph:timed");
	truth_add(3, "gpu:busy:in_graph");
	truth_write();
	return 0;
}
