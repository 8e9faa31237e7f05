// SPDX-License-Identifier: MIT
#include <math.h>
#include <string.h>

#include "core/event.h"
#include "core/util.h"
#include "gpuscope/api.h"

/* The schema is shared with BPF: pin the layout so neither side can drift. */
_Static_assert(sizeof(struct gs_hdr) == 24, "gs_hdr");
_Static_assert(sizeof(struct gs_call) == 24, "gs_call");
_Static_assert(sizeof(struct gs_ev_launch) == 96, "gs_ev_launch");
_Static_assert(offsetof(struct gs_ev_kname, name) == 56, "gs_ev_kname");
_Static_assert(sizeof(struct gs_ev_kname) == 56 + GS_NAME_MAX, "gs_ev_kname size");
_Static_assert(sizeof(struct gs_ev_kalias) == 48, "gs_ev_kalias");
_Static_assert(sizeof(struct gs_ev_mem) == 88, "gs_ev_mem");
_Static_assert(sizeof(struct gs_ev_copy) == 88, "gs_ev_copy");
_Static_assert(sizeof(struct gs_ev_sync) == 64, "gs_ev_sync");
_Static_assert(sizeof(struct gs_ev_api) == 72, "gs_ev_api");
_Static_assert(sizeof(struct gs_ev_nccl) == 112, "gs_ev_nccl");
_Static_assert(sizeof(struct gs_ev_proc) == 312, "gs_ev_proc");
_Static_assert(sizeof(struct gs_ev_lib) == 288, "gs_ev_lib");
_Static_assert(sizeof(struct gs_ev_session) == 576, "gs_ev_session");
_Static_assert(sizeof(struct gs_ev_attach) == 312, "gs_ev_attach");
_Static_assert(sizeof(struct gs_ev_drops) == 24 + 8 * GS_EV_MAX + 48, "gs_ev_drops");
_Static_assert(sizeof(struct gs_ev_gpu) == 24 + 72 + 16, "gs_ev_gpu");
_Static_assert(sizeof(struct gs_ev_offcpu) == 56, "gs_ev_offcpu");
_Static_assert(sizeof(struct gs_ev_faults) == 64, "gs_ev_faults");
_Static_assert(sizeof(struct gs_ev_block) == 56, "gs_ev_block");
_Static_assert(sizeof(struct gs_ev_net) == 40, "gs_ev_net");
_Static_assert(sizeof(struct gs_ev_syscall) == 64, "gs_ev_syscall");
_Static_assert(sizeof(struct gs_ev_stack) == 40 + 8 * GS_STACK_MAX, "gs_ev_stack");
_Static_assert(sizeof(struct gs_ev_host) == 24 + 16 + 64 + 64 + 16 + 2 * GS_HOST_STR + 32 + 32 + 40,
	       "gs_ev_host");
_Static_assert(sizeof(struct gs_ev_gpu_info) == 24 + 16 + GS_HOST_STR + 64 + 40 + 32,
	       "gs_ev_gpu_info");
_Static_assert(sizeof(struct gs_ev_proc_info) == 24 + 8 + GS_CGROUP_MAX + GS_CMDLINE_MAX,
	       "gs_ev_proc_info");
_Static_assert(sizeof(struct gs_ev_blockdev) == 24 + 8 + 32, "gs_ev_blockdev");
_Static_assert(offsetof(struct gs_ev_devcode, name) == 64, "gs_ev_devcode");
_Static_assert(offsetof(struct gs_ev_symbol, name) == 40, "gs_ev_symbol");
_Static_assert(offsetof(struct gs_ev_pystack, frames) == 40, "gs_ev_pystack");
_Static_assert(sizeof(struct gs_ev_python) == 32, "gs_ev_python");
_Static_assert(sizeof(struct gs_py_cfg) == 40, "gs_py_cfg");
_Static_assert(offsetof(struct gs_ev_probe_out, data) == 40, "gs_ev_probe_out");
_Static_assert(GS_API_MAX < 65536, "api ids fit gs_call.api");

static const size_t sizes[GS_EV_MAX] = {
	[GS_EV_LAUNCH] = sizeof(struct gs_ev_launch),
	[GS_EV_KNAME] = sizeof(struct gs_ev_kname),
	[GS_EV_KALIAS] = sizeof(struct gs_ev_kalias),
	[GS_EV_MEM] = sizeof(struct gs_ev_mem),
	[GS_EV_COPY] = sizeof(struct gs_ev_copy),
	[GS_EV_SYNC] = sizeof(struct gs_ev_sync),
	[GS_EV_API] = sizeof(struct gs_ev_api),
	[GS_EV_NCCL] = sizeof(struct gs_ev_nccl),
	[GS_EV_PROC] = sizeof(struct gs_ev_proc),
	[GS_EV_LIB] = sizeof(struct gs_ev_lib),
	[GS_EV_SESSION] = sizeof(struct gs_ev_session),
	[GS_EV_ATTACH] = sizeof(struct gs_ev_attach),
	[GS_EV_DROPS] = sizeof(struct gs_ev_drops),
	[GS_EV_GPU] = sizeof(struct gs_ev_gpu),
	[GS_EV_OFFCPU] = sizeof(struct gs_ev_offcpu),
	[GS_EV_FAULTS] = sizeof(struct gs_ev_faults),
	[GS_EV_BLOCK] = sizeof(struct gs_ev_block),
	[GS_EV_NET] = sizeof(struct gs_ev_net),
	[GS_EV_SYSCALL] = sizeof(struct gs_ev_syscall),
	[GS_EV_STACK] = sizeof(struct gs_ev_stack),
	[GS_EV_SYMBOL] = sizeof(struct gs_ev_symbol),
	[GS_EV_NVML] = sizeof(struct gs_ev_nvml),
	[GS_EV_DEVCODE] = sizeof(struct gs_ev_devcode),
	[GS_EV_PROBE_OUT] = sizeof(struct gs_ev_probe_out),
	[GS_EV_HOST] = sizeof(struct gs_ev_host),
	[GS_EV_GPU_INFO] = sizeof(struct gs_ev_gpu_info),
	[GS_EV_PROC_INFO] = sizeof(struct gs_ev_proc_info),
	[GS_EV_BLOCKDEV] = sizeof(struct gs_ev_blockdev),
	[GS_EV_RETIRE] = sizeof(struct gs_ev_retire),
	[GS_EV_PYTHON] = sizeof(struct gs_ev_python),
	[GS_EV_PYSTACK] = sizeof(struct gs_ev_pystack),
	[GS_EV_PYEXC] = sizeof(struct gs_ev_pyexc),
};

/* Which family of API a record type may carry. */
static int family_of(unsigned int type)
{
	switch (type) {
	case GS_EV_LAUNCH:
		return GS_FAM_LAUNCH;
	case GS_EV_MEM:
		return GS_FAM_MEM;
	case GS_EV_COPY:
		return GS_FAM_COPY;
	case GS_EV_SYNC:
		return GS_FAM_SYNC;
	case GS_EV_NCCL:
		return GS_FAM_NCCL;
	default:
		return 0;
	}
}

#define FAIL(msg)             \
	do {                  \
		*why = (msg); \
		return -1;    \
	} while (0)

static int check_call(const struct gs_hdr *h, const char **why)
{
	const struct gs_call *c = (const void *)(h + 1);
	static const struct gs_api_desc descs[GS_API_MAX] = { GS_API_LIST(GS_API_DESC) };
	int fam = family_of(h->type);

	if (c->api == 0 || c->api >= GS_API_MAX)
		FAIL("API id out of range");
	/* API records carry failures of any family; the others only their own. */
	if (fam && descs[c->api].family != fam)
		FAIL("API id does not belong to the record type");
	return 0;
}

static bool terminated(const char *s, size_t n)
{
	return memchr(s, 0, n) != NULL;
}

/* Whether a record of len bytes (at most want) is its nframes 8-byte frames from off on. */
static bool frames_fit(size_t len, size_t want, size_t off, unsigned int nframes)
{
	return len >= off && len <= want && (len - off) % 8 == 0 && (len - off) / 8 == nframes;
}

int gs_event_check(const void *buf, size_t len, const char **why)
{
	const struct gs_hdr *h = buf;
	size_t want;

	if (len < sizeof(*h))
		FAIL("record shorter than its header");
	if (h->size != len)
		FAIL("record size field disagrees with its length");
	if (h->type == GS_EV_NONE || h->type >= GS_EV_MAX)
		FAIL("unknown record type");
	if (h->source < GS_SRC_UPROBE || h->source > GS_SRC_GPUSCOPE)
		FAIL("unknown record source");
	want = sizes[h->type];
	if (h->type == GS_EV_KNAME) {
		const struct gs_ev_kname *k = buf;
		size_t room;

		if (len < offsetof(struct gs_ev_kname, name) + 1 || len > want)
			FAIL("kernel name record of impossible size");
		room = len - offsetof(struct gs_ev_kname, name);
		if (k->len >= room || k->name[k->len] != 0)
			FAIL("kernel name not terminated within its record");
		if (k->ns > GS_NS_HOSTFN)
			FAIL("kernel name space out of range");
		return 0;
	}
	if (h->type == GS_EV_STACK) {
		const struct gs_ev_stack *s = buf;

		if (len < offsetof(struct gs_ev_stack, ip) ||
		    !frames_fit(len, want, offsetof(struct gs_ev_stack, ip), s->nframes))
			FAIL("stack record's frame count disagrees with its size");
		if (s->api == 0 || s->api >= GS_API_MAX)
			FAIL("API id out of range");
		return 0;
	}
	if (h->type == GS_EV_PYSTACK) {
		const struct gs_ev_pystack *y = buf;

		if (len < offsetof(struct gs_ev_pystack, frames) ||
		    !frames_fit(len, want, offsetof(struct gs_ev_pystack, frames), y->nframes))
			FAIL("Python stack record's frame count disagrees with its size");
		return 0;
	}
	if (h->type == GS_EV_PYEXC) {
		const struct gs_ev_pyexc *y = buf;

		if (len < offsetof(struct gs_ev_pyexc, frames) ||
		    !frames_fit(len, want, offsetof(struct gs_ev_pyexc, frames), y->nframes))
			FAIL("Python exception record's frame count disagrees with its size");
		if (!terminated(y->type, sizeof(y->type)) || !terminated(y->text, sizeof(y->text)))
			FAIL("Python exception's type or text not terminated");
		if (y->kind < GS_PYEXC_RAISED || y->kind > GS_PYEXC_COUNT || y->outer_first > 1)
			FAIL("Python exception record kind out of range");
		return 0;
	}
	if (h->type == GS_EV_DEVCODE) {
		const struct gs_ev_devcode *d = buf;

		if (len < offsetof(struct gs_ev_devcode, name) + 1 || len > want)
			FAIL("device code record of impossible size");
		if (d->len >= len - offsetof(struct gs_ev_devcode, name) || d->name[d->len] != 0)
			FAIL("device code name not terminated within its record");
		if (d->kind < GS_CODE_PTX || d->kind >= GS_CODE_KIND_MAX || d->kernel > 1 ||
		    d->has_ptx > 1)
			FAIL("device code record field out of range");
		if (d->api == 0 || d->api >= GS_API_MAX)
			FAIL("API id out of range");
		return 0;
	}
	if (h->type == GS_EV_PROBE_OUT) {
		const struct gs_ev_probe_out *o = buf;

		if (len < offsetof(struct gs_ev_probe_out, data) || len > want || len % 8)
			FAIL("device probe record of impossible size");
		if (o->len > len - offsetof(struct gs_ev_probe_out, data) ||
		    len - offsetof(struct gs_ev_probe_out, data) - o->len >= 8)
			FAIL("device probe record's length disagrees with its size");
		return 0;
	}
	if (h->type == GS_EV_SYMBOL) {
		const struct gs_ev_symbol *y = buf;

		if (len < offsetof(struct gs_ev_symbol, name) + 1 || len > want)
			FAIL("symbol record of impossible size");
		if (y->len >= len - offsetof(struct gs_ev_symbol, name) || y->name[y->len] != 0)
			FAIL("symbol name not terminated within its record");
		return 0;
	}
	if (h->type == GS_EV_PROC_INFO) {
		const struct gs_ev_proc_info *i = buf;

		if (len < offsetof(struct gs_ev_proc_info, cmdline) + 1 || len > want)
			FAIL("process record of impossible size");
		if (i->cmdline_len >= len - offsetof(struct gs_ev_proc_info, cmdline) ||
		    i->cmdline[i->cmdline_len] != 0 || i->cmdline_truncated > 1 ||
		    !terminated(i->cgroup, sizeof(i->cgroup)))
			FAIL("process record's strings not terminated within it");
		return 0;
	}
	if (len != want)
		FAIL("record size wrong for its type");
	switch (h->type) {
	case GS_EV_HOST: {
		const struct gs_ev_host *x = buf;

		if (!terminated(x->hostname, sizeof(x->hostname)) ||
		    !terminated(x->kernel, sizeof(x->kernel)) ||
		    !terminated(x->arch, sizeof(x->arch)) || !terminated(x->os, sizeof(x->os)) ||
		    !terminated(x->cpu, sizeof(x->cpu)) ||
		    !terminated(x->driver, sizeof(x->driver)) ||
		    !terminated(x->gpuscope, sizeof(x->gpuscope)) ||
		    !terminated(x->boot_id, sizeof(x->boot_id)))
			FAIL("host record's strings not terminated within it");
		return 0;
	}
	case GS_EV_GPU_INFO: {
		const struct gs_ev_gpu_info *g = buf;

		if (g->gpu < 0 || g->gpu >= GS_GPUS_MAX)
			FAIL("GPU index out of range");
		if (!terminated(g->name, sizeof(g->name)) ||
		    !terminated(g->uuid, sizeof(g->uuid)) ||
		    !terminated(g->pci_bus_id, sizeof(g->pci_bus_id)) ||
		    !terminated(g->driver, sizeof(g->driver)))
			FAIL("GPU record's strings not terminated within it");
		return 0;
	}
	case GS_EV_BLOCKDEV: {
		const struct gs_ev_blockdev *b = buf;

		if (!terminated(b->name, sizeof(b->name)))
			FAIL("block device record's name not terminated within it");
		return 0;
	}
	case GS_EV_NVML: {
		const struct gs_ev_nvml *n = buf;

		/* (Written into traces as numbers: NaN and infinities have no spelling there.) */
		if (!isfinite(n->sm_active) || !isfinite(n->tensor_active) ||
		    !isfinite(n->dram_active))
			FAIL("NVML activity ratio not a finite number");
		return 0;
	}
	case GS_EV_LAUNCH:
	case GS_EV_MEM:
	case GS_EV_SYNC:
	case GS_EV_API:
	case GS_EV_NCCL:
		return check_call(h, why);
	case GS_EV_COPY:
		if (((const struct gs_ev_copy *)buf)->kind >= GS_COPY_KIND_MAX)
			FAIL("copy direction out of range");
		return check_call(h, why);
	case GS_EV_KALIAS:
		if (((const struct gs_ev_kalias *)buf)->target_ns > GS_NS_HOSTFN)
			FAIL("kernel alias name space out of range");
		return 0;
	case GS_EV_PROC: {
		const struct gs_ev_proc *p = buf;

		if (p->kind < GS_PROC_FORK || p->kind > GS_PROC_OOM_KILL)
			FAIL("process record kind out of range");
		return 0;
	}
	case GS_EV_PYTHON: {
		const struct gs_ev_python *y = buf;

		if (y->status < GS_PY_FRAMES || y->status > GS_PY_NO_STATE || y->mixed > 1)
			FAIL("Python record field out of range");
		return 0;
	}
	case GS_EV_LIB:
		if (((const struct gs_ev_lib *)buf)->kind >= GS_LIB_KIND_MAX)
			FAIL("library kind out of range");
		return 0;
	case GS_EV_ATTACH:
		if (((const struct gs_ev_attach *)buf)->kind >= GS_LIB_KIND_MAX)
			FAIL("library kind out of range");
		return 0;
	case GS_EV_GPU: {
		const struct gs_ev_gpu *g = buf;

		if (g->api == 0 || g->api >= GS_API_MAX)
			FAIL("API id out of range");
		if (g->kind < GS_GPU_KERNEL || g->kind > GS_GPU_CALIBRATION)
			FAIL("GPU record kind out of range");
		if (g->copy_kind >= GS_COPY_KIND_MAX)
			FAIL("copy direction out of range");
		if (g->end_ns < g->start_ns)
			FAIL("GPU record ends before it starts");
		if (g->call_end_ns < g->h.ts)
			FAIL("GPU record's call ends before it begins");
		if (g->flags &
		    ~(GS_GPU_IDLE_STREAM | GS_GPU_GATED | GS_GPU_START_UNKNOWN | GS_GPU_END_LATE |
		      GS_GPU_CHAINED | GS_GPU_FROM_PREV | GS_GPU_IN_GRAPH | GS_GPU_CARRIED))
			FAIL("unknown GPU record flags");
		if (g->flags2 & ~GS_GPU_BY_DRIVER)
			FAIL("unknown GPU record flags");
		return 0;
	}
	case GS_EV_OFFCPU: {
		const struct gs_ev_offcpu *o = buf;

		if (o->reason < GS_OFFCPU_PREEMPTED || o->reason > GS_OFFCPU_OTHER)
			FAIL("off-CPU reason out of range");
		if (o->runq_ns > o->dur_ns)
			FAIL("off-CPU record waits longer than it lasts");
		return 0;
	}
	case GS_EV_FAULTS: {
		const struct gs_ev_faults *f = buf;

		if (!f->count || f->major > f->count || f->last_ts < f->h.ts)
			FAIL("page fault record inconsistent");
		return 0;
	}
	case GS_EV_BLOCK:
		if (((const struct gs_ev_block *)buf)->op > GS_BLOCK_OTHER)
			FAIL("block I/O operation out of range");
		return 0;
	case GS_EV_NET:
		if (((const struct gs_ev_net *)buf)->dir > GS_NET_RECV)
			FAIL("network direction out of range");
		return 0;
	case GS_EV_SESSION: {
		const struct gs_ev_session *s = buf;

		if (s->kind != GS_SESSION_START && s->kind != GS_SESSION_END)
			FAIL("session record kind out of range");
		if (s->mode != GS_MODE_RUN && s->mode != GS_MODE_ATTACH)
			FAIL("session mode out of range");
		return 0;
	}
	default:
		return 0;
	}
}
