// SPDX-License-Identifier: MIT
/*
 * Host programs of a probe object, run in the program (bpfobj.h says which and when): at
 * each kernel launch call, before it (uprobe) or after it (uretprobe), on the launching
 * thread, by the reference interpreter (ptx/interp.c: every memory access checked, the
 * steps bounded). They share array maps with the device programs: such a map lives in host
 * memory of ours, registered with each context that probes run in, so that the device
 * programs of every context and the host programs read and write the same bytes (as
 * bpftime's GPU_KERNEL_SHARED_ARRAY_MAP, 1504). Their prints go to a ring of host memory,
 * drained with the GPU's (device -1). A program that fails (a bad access, too many steps)
 * is not run again, with a note; the launch goes on as the program made it.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/util.h"
#include "gpuscope/cuda_abi.h"
#include "inject/probe_int.h"
#include "ptx/bpfobj.h"
#include "ptx/translate.h"

#define HOST_STEPS (1u << 20)

/* pid << 32 | tid of the thread, set at its first run (getpid is a system call) */
static __thread __u64 tl_pid_tgid __attribute__((tls_model("initial-exec")));

void pr_host_after_fork(void)
{
	tl_pid_tgid = 0;
}

/* The maps as a host program sees them: the shared ones and the printing ring; the others
 * are the GPU's (no memory: any access to them fails). */
static size_t host_maps(struct bpf_map_mem *mm)
{
	for (size_t i = 0; i < P.b.nmaps; i++) {
		const struct bundle_map *m = &P.b.maps[i];

		memset(&mm[i], 0, sizeof(mm[i]));
		mm[i].value_size = m->value_size;
		mm[i].max_entries = m->max_entries;
		mm[i].kind = m->kind;
		mm[i].extra = 1;
		if (m->shared) {
			mm[i].data = P.shared[i];
		} else if (m->kind == GS_MAP_RING && !strcmp(m->name, GS_PRINT_MAP)) {
			if (!P.print_ring && !P.print_dead)
				P.print_ring = gs_calloc(1, PR_PRINT_RING);
			mm[i].value_size = mm[i].max_entries = 0;
			mm[i].extra = PR_PRINT_RING;
			mm[i].data = P.print_ring ? P.print_ctl : NULL;
			mm[i].ring = P.print_ring;
			mm[i].tail = &P.print_tail;
		}
	}
	return P.b.nmaps;
}

static __u64 realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

/*
 * The host programs of `when` for a launch call (api; its arguments a) that returned r (for
 * uretprobe). The context: struct pt_regs (x86-64) with the launch as cudaLaunchKernel's
 * registers would have it, and rax r.
 */
void pr_host_run(int when, unsigned int api, const __u64 *a, int r)
{
	bool ex = api == GS_API_CU_LAUNCH_KERNEL_EX || api == GS_API_CU_LAUNCH_KERNEL_EX_PTSZ;
	fn1 getctx = (fn1)pr_real("cuCtxGetCurrent");
	__u64 regs[21] = { 0 }, ctx = 0, ret;
	struct bpf_map_mem mm[BUNDLE_MAX_MAPS];
	struct bpf_gpu_env env = { .host = true };
	unsigned int g[3], bl[3];
	struct pctx *c;
	char err[200];
	size_t n;

	if (ex) {
		const unsigned char *cfg = (const unsigned char *)(unsigned long)a[0];

		if (!cfg)
			return;
		memcpy(g, cfg, sizeof(g));
		memcpy(bl, cfg + 12, sizeof(bl));
	} else {
		for (int i = 0; i < 3; i++) {
			g[i] = (unsigned int)a[1 + i];
			bl[i] = (unsigned int)a[4 + i];
		}
	}
	regs[14] = ex ? a[1] : a[0];	     /* di: the function */
	regs[13] = g[0] | (__u64)g[1] << 32; /* si, dx: the grid */
	regs[12] = g[2];
	regs[11] = bl[0] | (__u64)bl[1] << 32; /* cx, r8: the block */
	regs[9] = bl[2];
	regs[8] = ex ? a[2] : a[9]; /* r9: the arguments */
	regs[10] = (__u64)(long)r;  /* ax */
	if (!tl_pid_tgid)
		tl_pid_tgid = (__u64)getpid() << 32 | (__u32)syscall(SYS_gettid);
	env.pid_tgid = tl_pid_tgid;
	if (!getctx || getctx((__u64)(unsigned long)&ctx) || !ctx)
		return;
	pthread_mutex_lock(&P.lock);
	/* (the shared maps are made with the context's state, and the clock compared) */
	if (!(c = pr_ctx_get(ctx))) {
		pthread_mutex_unlock(&P.lock);
		return;
	}
	env.globaltimer = c->clock_ok ? pr_gpu_time(c) : realtime_ns();
	env.rodata = P.b.rodata;
	env.rodata_len = P.b.rodata_len;
	n = host_maps(mm);
	for (size_t h = 0; h < P.b.nhosts; h++) {
		const struct bundle_host *hp = &P.b.hosts[h];

		if (hp->when != when || P.host_failed[h])
			continue;
		P.host_runs[h]++;
		if (bpf_interp(hp->insns, hp->n, regs, sizeof(regs), &env, mm, n, HOST_STEPS, &ret,
			       err, sizeof(err))) {
			P.host_failed[h] = true;
			pr_note("host program %s: %s: not run from then on", hp->name, err);
		}
	}
	pthread_mutex_unlock(&P.lock);
}
