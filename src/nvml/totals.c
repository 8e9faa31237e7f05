// SPDX-License-Identifier: MIT
/* The getters of what NVML's two ways in (nvml.c, proxy.c) both keep: struct nvml_totals,
 * the first member of either's struct nvml. */
#include <string.h>

#include "nvml/nvml.h"

static const struct nvml_totals *totals(const struct nvml *n)
{
	return (const struct nvml_totals *)n;
}

const char *nvml_driver_version(const struct nvml *n)
{
	return totals(n)->driver;
}

void nvml_call_stats(struct nvml *n, struct nvml_call_stat out[NF_COUNT])
{
	memcpy(out, totals(n)->stats, sizeof(totals(n)->stats));
}

__u64 nvml_errors(struct nvml *n)
{
	return totals(n)->errors;
}
