/* SPDX-License-Identifier: MIT */
/*
 * The agent's GPU families, from NVML's sample: the DCGM exporter's names (DCGM_FI_*, with
 * its label names or Prometheus's), XID errors, lost GPUs, NVML's per-process memory and
 * SM share, and what the NVML calls cost. A field a GPU does not have is left out, not 0.
 */
#ifndef GS_SINK_PROM_GPUS_H
#define GS_SINK_PROM_GPUS_H

#include <stdbool.h>

#include "core/util.h"
#include "nvml/nvml.h"

struct prom_gpus_in {
	const struct nvml_gpu *g; /* the GPUs' latest sample */
	unsigned int n;
	const struct nvml_call_stat *stats; /* [NF_COUNT] */
	const char *hostname;
	bool dcgm_labels; /* the DCGM exporter's label names and counter types */
};

void prom_gpus__render(struct strbuf *sb, const struct prom_gpus_in *in);

#endif
