// SPDX-License-Identifier: MIT
/* NVML as a source of a session (see nvml.h). */
#include <stdlib.h>

#include "core/util.h"
#include "nvml/nvml.h"
#include "source/nvml.h"

struct nvml_source {
	struct nvml *nvml;
	struct stream *s;
	__u64 next;
	struct nvml_gpu g[NVML_MAX_DEVICES];
};

static unsigned int sample(struct nvml_source *n)
{
	unsigned int count;

	nvml_sample(n->nvml, 0);
	count = nvml_snapshot(n->nvml, n->g, NVML_MAX_DEVICES);
	for (unsigned int i = 0; i < count; i++) {
		const struct nvml_gpu *g = &n->g[i];
		struct gs_ev_nvml e = { .gpu = g->index };

		e.have = (g->have & (1u << NF_UTIL) ? GS_NVML_UTIL : 0) |
			 (g->have & (1u << NF_MEMORY) ? GS_NVML_MEMORY : 0) |
			 (g->have & (1u << NF_POWER) ? GS_NVML_POWER : 0) |
			 (g->have & (1u << NF_TEMP) ? GS_NVML_TEMP : 0) |
			 (g->have & (1u << NF_CLOCK_SM) ? GS_NVML_CLOCK : 0) |
			 (g->have & (1u << NF_GPM) ? GS_NVML_GPM : 0) |
			 (g->lost ? GS_NVML_LOST : 0);
		e.util_gpu = g->util_gpu;
		e.util_mem = g->util_mem;
		e.mem_used = g->mem_used;
		e.mem_total = g->mem_total;
		e.power_mw = g->power_mw;
		e.temp_c = g->temp_c;
		e.clock_sm_mhz = g->clock_sm_mhz;
		e.clock_mem_mhz = g->clock_mem_mhz;
		e.sm_active = g->sm_active;
		e.tensor_active = g->tensor_active;
		e.dram_active = g->dram_active;
		e.h.type = GS_EV_NVML;
		e.h.source = GS_SRC_NVML;
		e.h.size = sizeof(e);
		e.h.ts = gs_now_ns();
		stream__push(n->s, &e.h);
	}
	return count;
}

/* Each GPU's identity, once, at the start. */
static void start_fn(void *obj)
{
	struct nvml_source *n = obj;
	const char *driver = nvml_driver_version(n->nvml);
	unsigned int count;

	/* (A first sample: the memory size comes with it.) */
	n->next = gs_now_ns() + 1000000000ULL;
	count = sample(n);
	for (unsigned int i = 0; i < count; i++) {
		const struct nvml_gpu *g = &n->g[i];
		struct gs_ev_gpu_info e = { .gpu = g->index, .minor = g->minor };

		if (g->index < 0 || g->index >= GS_GPUS_MAX)
			continue;
		e.memory = g->mem_total;
		gs_strlcpy(e.name, g->name, sizeof(e.name));
		gs_strlcpy(e.uuid, g->uuid, sizeof(e.uuid));
		gs_strlcpy(e.pci_bus_id, g->pci_bus_id, sizeof(e.pci_bus_id));
		gs_strlcpy(e.driver, driver ? driver : "", sizeof(e.driver));
		e.h.type = GS_EV_GPU_INFO;
		e.h.source = GS_SRC_NVML;
		e.h.size = sizeof(e);
		e.h.ts = gs_now_ns();
		stream__push(n->s, &e.h);
	}
}

static int poll_fn(void *obj, int timeout_ms)
{
	struct nvml_source *n = obj;
	__u64 t = gs_now_ns();

	(void)timeout_ms;
	if (t < n->next)
		return 0;
	n->next = t + 1000000000ULL;
	sample(n);
	return 1;
}

static void close_fn(void *obj)
{
	nvml_close(((struct nvml_source *)obj)->nvml);
	free(obj);
}

static const struct source_ops ops = {
	.name = "nvml", .start = start_fn, .poll = poll_fn, .close = close_fn
};

void nvml_source__open(struct session *s)
{
	struct nvml_source *n = xcalloc(1, sizeof(*n));
	char err[256];

	n->nvml = nvml_open(err, sizeof(err));
	if (!n->nvml) {
		gs_debug("no device metrics in the trace: %s", err);
		free(n);
		return;
	}
	n->s = s->stream;
	session__add_source(s, &ops, n);
}
