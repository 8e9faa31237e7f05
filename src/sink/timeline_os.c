// SPDX-License-Identifier: MIT
/* Timeline: the OS plane (off-CPU, system calls, block I/O in lanes, faults, sockets) and
 * NVML's device counters on the GPU tracks (see timeline_int.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/demangle.h"
#include "core/names.h"
#include "core/util.h"
#include "gpuscope/cuda_abi.h"
#include "sink/sinks.h"
#include "sink/timeline_int.h"

static void gpu_counter(struct timeline *tl, const struct gs_ev_nvml *n, unsigned int which,
			const char *what, bool bytes, double v)
{
	__u64 uuid = UUID(U_GPU_COUNTER, (__u32)n->gpu, which);
	char name[64];

	if (!tl_declared(tl, uuid)) {
		snprintf(name, sizeof(name), "GPU %d %s", n->gpu, what);
		tl->ops->track(tl->w, &(struct tl_track){ .uuid = uuid,
							  .parent = tl_gpu_track(tl, n->gpu),
							  .kind = TL_COUNTER,
							  .pid = (__u32)n->gpu,
							  .device = n->gpu,
							  .name = name,
							  .bytes = bytes });
	}
	tl->ops->counter(tl->w, uuid, n->h.ts, v);
}

void tl_nvml_sample(struct timeline *tl, const struct gs_ev_nvml *n)
{
	if (n->gpu < 0 || (n->have & GS_NVML_LOST))
		return;
	if (n->have & GS_NVML_UTIL)
		gpu_counter(tl, n, 0, "utilization %", false, n->util_gpu);
	if (n->have & GS_NVML_MEMORY)
		gpu_counter(tl, n, 1, "memory used", true, (double)n->mem_used);
	if (n->have & GS_NVML_POWER)
		gpu_counter(tl, n, 2, "power W", false, n->power_mw / 1000.0);
	if (n->have & GS_NVML_TEMP)
		gpu_counter(tl, n, 3, "temperature C", false, n->temp_c);
	if (n->have & GS_NVML_CLOCK)
		gpu_counter(tl, n, 4, "SM clock MHz", false, n->clock_sm_mhz);
	if (n->have & GS_NVML_GPM) {
		gpu_counter(tl, n, 5, "SM active", false, n->sm_active);
		gpu_counter(tl, n, 6, "tensor active", false, n->tensor_active);
		gpu_counter(tl, n, 7, "DRAM active", false, n->dram_active);
	}
}

/* ---- the OS plane ------------------------------------------------------------------------ */

static __u64 os_track(struct timeline *tl, const struct model *m, __u32 pid, __u32 tid)
{
	char name[48];

	snprintf(name, sizeof(name), "thread %u (OS)", tid);
	return tl_child_track(tl, m, pid, U_OS, tid, name);
}

static void offcpu(struct timeline *tl, const struct model *m, const struct gs_ev_offcpu *o)
{
	struct tl_event e = { .track = os_track(tl, m, o->h.pid, o->h.tid),
			      .ts = o->h.ts,
			      .dur = o->dur_ns,
			      .cat = "off_cpu" };
	char name[48];

	snprintf(name, sizeof(name), "off CPU: %s", offcpu_reason_name(o->reason));
	e.name = name;
	if (o->syscall >= 0)
		tl_arg_str(&e, "in system call", syscall_name((unsigned int)o->syscall));
	tl_arg_u64(&e, "runnable, waiting ns", o->runq_ns);
	if (o->major_faults)
		tl_arg_u64(&e, "major page faults", o->major_faults);
	tl_arg_u64(&e, "cpu before", o->cpu);
	tl->ops->slice(tl->w, &e);
}

static void syscall_slice(struct timeline *tl, const struct model *m,
			  const struct gs_ev_syscall *sc)
{
	struct tl_event e = { .track = os_track(tl, m, sc->h.pid, sc->h.tid),
			      .ts = sc->h.ts,
			      .dur = sc->dur_ns,
			      .name = syscall_name(sc->nr),
			      .cat = "syscall" };

	if (e.nargs < TL_MAX_ARGS)
		e.args[e.nargs++] =
			(struct tl_arg){ .key = "return", .type = TL_I64, .i = sc->ret };
	tl_arg_hex(&e, "arg0", sc->arg0);
	tl_arg_u64(&e, "arg1", sc->arg1);
	tl->ops->slice(tl->w, &e);
}

static void cumulative(struct timeline *tl, const struct model *m, __u32 pid, int kind,
		       const char *name, __u64 *total, __u64 add, __u64 ts, bool bytes)
{
	*total += add;
	tl->ops->counter(tl->w, tl_counter_track(tl, m, pid, (enum counter_kind)kind, name, bytes),
			 ts, (double)*total);
}

static void block_io(struct timeline *tl, const struct model *m, const struct gs_ev_block *b)
{
	struct io_lanes *l = hmap_get(&tl->io, b->h.pid, b->dev);
	__u64 start = b->h.ts, end = b->h.ts + b->dur_ns;
	char dev[48], name[80];
	unsigned int lane = 0;
	struct tl_event e = { .ts = start, .dur = b->dur_ns, .cat = "block_io" };

	if (!l) {
		l = xcalloc(1, sizeof(*l));
		hmap_put(&tl->io, b->h.pid, b->dev, l);
	}
	for (; lane < IO_LANES; lane++) {
		bool clear = true;

		for (int k = 0; k < IO_LANE_KEEP && clear; k++)
			clear = l->lane[lane][k].end <= start || l->lane[lane][k].start >= end;
		if (clear)
			break;
	}
	/* More in flight at once than lanes: an instant (slices on a track must nest). */
	if (lane == IO_LANES) {
		lane = IO_LANES - 1;
		e.dur = 0;
	} else {
		l->lane[lane][l->next[lane]].start = start;
		l->lane[lane][l->next[lane]].end = end;
		l->next[lane] = (l->next[lane] + 1) % IO_LANE_KEEP;
	}
	if (model__blockdev_name(m, b->dev))
		snprintf(dev, sizeof(dev), "%s", model__blockdev_name(m, b->dev));
	else
		snprintf(dev, sizeof(dev), "%u:%u", b->dev >> 20, b->dev & 0xfffff);
	snprintf(name, sizeof(name), "block I/O %s #%u", dev, lane + 1);
	e.track = tl_child_track(tl, m, b->h.pid, U_BLOCK, (__u64)b->dev << 8 | lane, name);
	e.name = block_op_name(b->op);
	tl_arg_u64(&e, "bytes", b->bytes);
	tl_arg_u64(&e, "sector", b->sector);
	tl_arg_str(&e, "device", dev);
	tl_arg_u64(&e, "issuing thread", b->h.tid);
	if (b->error)
		tl_arg_u64(&e, "error", (__u64)(__u32)b->error);
	if (b->h.flags & GS_HDR_END_UNSEEN)
		tl_arg_str(&e, "completion", "unseen: issued here, its end not known");
	if (!e.dur) {
		tl_arg_u64(&e, "duration ns", b->dur_ns);
		tl->ops->instant(tl->w, &e);
		return;
	}
	tl->ops->slice(tl->w, &e);
}

/* A thread's faults of up to a millisecond, with the first one's address. */
static void fault_batch(struct timeline *tl, const struct model *m, const struct gs_ev_faults *f)
{
	struct tl_event e = { .track = os_track(tl, m, f->h.pid, f->h.tid),
			      .ts = f->h.ts,
			      .name = f->major ? "page faults (major)" : "page faults",
			      .cat = "page_fault" };

	tl_arg_u64(&e, "count", f->count);
	tl_arg_u64(&e, "major", f->major);
	tl_arg_hex(&e, "first address", f->addr);
	tl_arg_hex(&e, "first instruction", f->ip);
	tl_arg_str(&e, "first access",
		   f->error_code & 16  ? "instruction fetch"
		   : f->error_code & 2 ? "write"
				       : "read");
	tl_arg_u64(&e, "over ns", f->last_ts - f->h.ts);
	tl->ops->instant(tl->w, &e);
}

void tl_os_event(struct timeline *tl, const struct model *m, const struct gs_hdr *ev)
{
	const struct gs_ev_faults *f = (const void *)ev;
	const struct gs_ev_net *n = (const void *)ev;
	struct proc_state *ps = tl_proc_state(tl, ev->pid);
	char name[48];
	int proto;

	switch (ev->type) {
	case GS_EV_OFFCPU:
		offcpu(tl, m, (const void *)ev);
		break;
	case GS_EV_SYSCALL:
		syscall_slice(tl, m, (const void *)ev);
		break;
	case GS_EV_BLOCK:
		block_io(tl, m, (const void *)ev);
		break;
	case GS_EV_FAULTS:
		fault_batch(tl, m, f);
		cumulative(tl, m, ev->pid, C_FAULTS, "page faults", &ps->faults, f->count,
			   f->last_ts, false);
		if (f->major)
			cumulative(tl, m, ev->pid, C_MAJOR_FAULTS, "major page faults",
				   &ps->major_faults, f->major, f->last_ts, false);
		break;
	case GS_EV_NET:
		proto = model__net_proto(n->family, n->protocol);
		snprintf(name, sizeof(name), "%s %s bytes", net_proto_name(proto),
			 n->dir == GS_NET_SEND ? "sent" : "received");
		cumulative(tl, m, ev->pid, C_NET + (int)n->dir * NET_PROTOS + proto, name,
			   &ps->net[n->dir][proto], n->bytes, ev->ts, true);
		break;
	}
}
