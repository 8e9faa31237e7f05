// SPDX-License-Identifier: MIT
/* Gates that hold a stream's work back until it is all queued (see gate.h). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "inject/gate.h"

#define CU_MEMHOSTREGISTER_PORTABLE  0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define CU_STREAM_WAIT_VALUE_GEQ     0x0

typedef int (*host_register_fn)(void *, size_t, unsigned int);
typedef int (*dev_ptr_fn)(__u64 *, void *, unsigned int);
typedef int (*wait32_fn)(__u64, __u64, __u32, unsigned int);
typedef int (*wait64_fn)(__u64, __u64, __u64, unsigned int);

static struct {
	wait32_fn wait32, wait32_ptsz;
	wait64_fn wait64, wait64_ptsz;
} G;

static void *first(const char *a, const char *b)
{
	void *p = gs_real_by_name(a);

	return p ? p : gs_real_by_name(b);
}

bool gs_gate_init(struct gs_gate *g)
{
	host_register_fn host_register =
		(host_register_fn)first("cuMemHostRegister_v2", "cuMemHostRegister");
	dev_ptr_fn dev_ptr =
		(dev_ptr_fn)first("cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer");
	void *mem = NULL;

	g->host = NULL;
	G.wait32 = (wait32_fn)first("cuStreamWaitValue32_v2", "cuStreamWaitValue32");
	G.wait32_ptsz = (wait32_fn)first("cuStreamWaitValue32_v2_ptsz", "cuStreamWaitValue32_ptsz");
	G.wait64 = (wait64_fn)first("cuStreamWaitValue64_v2", "cuStreamWaitValue64");
	G.wait64_ptsz = (wait64_fn)first("cuStreamWaitValue64_v2_ptsz", "cuStreamWaitValue64_ptsz");
	if (!G.wait32_ptsz)
		G.wait32_ptsz = G.wait32;
	if (!G.wait64_ptsz)
		G.wait64_ptsz = G.wait64;
	if (!host_register || !dev_ptr || (!G.wait32 && !G.wait64))
		return false;
	/* A page of our own, registered: not an allocation the program would see. It stays
	 * for the life of the process (a late gate may still read it). */
	if (posix_memalign(&mem, 4096, 4096))
		return false;
	memset(mem, 0, 4096);
	if (host_register(mem, 4096, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP)) {
		free(mem);
		return false;
	}
	if (dev_ptr(&g->dev, mem, 0))
		return false; /* (registered: it stays) */
	*(volatile __u64 *)mem = 0;
	g->host = mem;
	g->wide = G.wait64 != NULL;
	return true;
}

void gs_gate_close(struct gs_gate *g, __u64 stream, bool ptsz, __u64 *seq)
{
	__u64 s;
	int r;

	*seq = 0;
	/* Always, not only when the stream looks idle: a busy stream often drains before the
	 * start event is reached (measured on an H200: 4 of 5 launches of a 2 us kernel
	 * looked busy, and were then timed 2 us too long). On a stream that is really busy
	 * the gate is open long before the GPU gets to it. */
	if (!g->host)
		return;
	s = __atomic_add_fetch(&g->issued, 1, __ATOMIC_ACQ_REL);
	if (g->wide)
		r = (ptsz ? G.wait64_ptsz : G.wait64)(stream, g->dev, s, CU_STREAM_WAIT_VALUE_GEQ);
	else
		r = (ptsz ? G.wait32_ptsz : G.wait32)(stream, g->dev, (__u32)s,
						      CU_STREAM_WAIT_VALUE_GEQ);
	if (r == 0) {
		*seq = s;
		return;
	}
	gs_gate_open(g, s); /* nobody waits on it: keep the value level with what was issued */
	/* This one goes ungated; where the operation is not supported, so will the rest. */
	if (r == 801 /* CUDA_ERROR_NOT_SUPPORTED */ && g->wide && G.wait32)
		g->wide = false;
	else if (r == 801)
		g->host = NULL;
}

void gs_gate_open(struct gs_gate *g, __u64 seq)
{
	__u64 cur;

	if (!seq)
		return;
	cur = __atomic_load_n(g->host, __ATOMIC_ACQUIRE);
	/* Raise only: another thread may have opened a later gate already. With 32-bit
	 * gates the device compares the low half, which is what a 64-bit store raises too. */
	while (cur < seq && !__atomic_compare_exchange_n(g->host, &cur, seq, true, __ATOMIC_RELEASE,
							 __ATOMIC_ACQUIRE))
		;
}

void gs_gate_watchdog(struct gs_gate *g)
{
	__u64 issued, cur;

	if (!g->host)
		return;
	issued = __atomic_load_n(&g->issued, __ATOMIC_ACQUIRE);
	cur = __atomic_load_n(g->host, __ATOMIC_ACQUIRE);
	if (cur >= issued) {
		g->stuck_seen = 0;
		return;
	}
	/* Closed now and already on the previous pass, at the same value: open them all. */
	if (g->stuck_seen == cur + 1) {
		gs_gate_open(g, issued);
		g->forced++;
		gs_count_gate_forced();
		g->stuck_seen = 0;
		return;
	}
	g->stuck_seen = cur + 1;
}
