// SPDX-License-Identifier: MIT
/* The event stream as timeline tracks (see timeline.h): a converter per writer, and each
 * record to the file that renders it (timeline_int.h). */
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

struct timeline *timeline__new(const struct tl_writer_ops *ops, void *w, const char *path)
{
	struct timeline *tl = xcalloc(1, sizeof(*tl));

	(void)path;
	tl->ops = ops;
	tl->w = w;
	return tl;
}

void timeline__add(struct timeline *tl, const struct analyses *a, const struct gs_hdr *ev)
{
	const struct model *m = a->model;

	const struct gs_ev_session *s = (const void *)ev;
	const struct gs_ev_mem *mem = (const void *)ev;
	const struct gs_ev_sync *sy = (const void *)ev;
	const struct gs_ev_api *api = (const void *)ev;
	struct tl_event e = { .cat = NULL };

	switch (ev->type) {
	case GS_EV_SESSION:
		if (s->kind == GS_SESSION_START) {
			tl->gpu_time = s->gpu_time;
			tl->gpu_cupti = s->flags & GS_SESSION_GPU_CUPTI_GRAPHS;
			tl->have_session = true;
		}
		break;
	case GS_EV_PROC:
		tl_proc(tl, m, (const void *)ev);
		break;
	case GS_EV_LAUNCH:
		tl_launch(tl, m, (const void *)ev);
		break;
	case GS_EV_MEM:
		tl_arg_u64(&e, "bytes", mem->size);
		tl_arg_hex(&e, "address", mem->addr);
		tl_call_slice(tl, m, ev, &mem->c, &e);
		tl_memory_counters(tl, m, ev->pid, ev->ts + mem->c.dur_ns);
		break;
	case GS_EV_COPY:
		tl_copy(tl, m, (const void *)ev);
		break;
	case GS_EV_SYNC:
		e.cat = "cuda_sync";
		tl_arg_hex(&e, "handle", sy->handle);
		tl_call_slice(tl, m, ev, &sy->c, &e);
		break;
	case GS_EV_API:
		tl_call_slice(tl, m, ev, &api->c, &e);
		break;
	case GS_EV_NCCL:
		tl_nccl(tl, m, (const void *)ev);
		break;
	case GS_EV_GPU:
		tl_gpu(tl, m, (const void *)ev);
		break;
	case GS_EV_OFFCPU:
	case GS_EV_SYSCALL:
	case GS_EV_BLOCK:
	case GS_EV_FAULTS:
	case GS_EV_NET:
		tl_os_event(tl, m, ev);
		break;
	case GS_EV_STACK:
		tl_stack(tl, m, (const void *)ev);
		break;
	case GS_EV_NVML:
		tl_nvml_sample(tl, (const void *)ev);
		break;
	case GS_EV_PROBE_OUT:
		tl_probe_out(tl, (const void *)ev);
		break;
	default:
		break;
	}
	if (a->findings && findings__total(a->findings) != tl->findings)
		tl_findings(tl, a);
	tl_memory_findings(tl, a, ev->pid);
}

int timeline__close(struct timeline *tl, char *err, size_t errlen)
{
	struct hmap_slot *s;
	int r = tl->ops->close(tl->w);

	if (r)
		snprintf(err, errlen, "writing the trace failed: %s", strerror(-r));
	hmap_for_each (&tl->knames, s) {
		free(((struct kname *)s->val)->full);
		free(s->val);
	}
	hmap_for_each (&tl->ends, s)
		free(s->val);
	hmap_for_each (&tl->procs, s)
		free(s->val);
	hmap_free_with(&tl->io, NULL);
	hmap_free_with(&tl->stacks, NULL);
	hmap_free(&tl->knames);
	hmap_free(&tl->ends);
	hmap_free(&tl->procs);
	hmap_free(&tl->tracks);
	free(tl);
	return r ? -1 : 0;
}
