// SPDX-License-Identifier: MIT
/* NVML samples (nvml_int.h): each device's fields by tier, GPM metrics and processes, each
 * call timed and a field its GPU does not support not asked again. */
#ifndef GS_STATIC_BUILD
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "nvml/nvml_int.h"

/* The GPM metrics asked for: where each goes in struct nvml_gpu, and its scale (percent to
 * a ratio, MiB/s to bytes/s). */
static const struct {
	unsigned int id;
	size_t off;
	double scale;
} gpm_ids[] = {
	{ GPM_GRAPHICS, offsetof(struct nvml_gpu, gr_active), 0.01 },
	{ GPM_SM, offsetof(struct nvml_gpu, sm_active), 0.01 },
	{ GPM_SM_OCCUPANCY, offsetof(struct nvml_gpu, sm_occupancy), 0.01 },
	{ GPM_TENSOR, offsetof(struct nvml_gpu, tensor_active), 0.01 },
	{ GPM_DRAM, offsetof(struct nvml_gpu, dram_active), 0.01 },
	{ GPM_PCIE_TX, offsetof(struct nvml_gpu, pcie_tx_bps), 1048576.0 },
	{ GPM_PCIE_RX, offsetof(struct nvml_gpu, pcie_rx_bps), 1048576.0 },
	{ GPM_NVLINK_RX, offsetof(struct nvml_gpu, nvlink_rx_bps), 1048576.0 },
	{ GPM_NVLINK_TX, offsetof(struct nvml_gpu, nvlink_tx_bps), 1048576.0 },
};
#define NGPM (sizeof(gpm_ids) / sizeof(gpm_ids[0]))

/* Time one call of a field; a field the GPU does not support is not asked again. */
#define CALL(n, d, field, expr)                                   \
	({                                                        \
		__u64 t0_ = mono_ns(), dt_;                       \
		nvret r_ = (expr);                                \
		struct nvml_call_stat *s_ = &(n)->t.stats[field]; \
		dt_ = mono_ns() - t0_;                            \
		s_->calls++;                                      \
		s_->total_ns += dt_;                              \
		s_->max_ns = GS_MAX(s_->max_ns, dt_);             \
		note(n, d, field, r_);                            \
		r_;                                               \
	})

static void note(struct nvml *n, struct dev_state *d, enum nvml_field f, nvret r)
{
	if (r == NV_SUCCESS) {
		d->g.have |= 1u << f;
		return;
	}
	if (r == NV_NOT_FOUND) /* (nothing to report: no process had a sample, say) */
		return;
	if (r == NV_NOT_SUPPORTED || r == NV_NO_PERMISSION || r == NV_FUNCTION_MISSING) {
		d->g.unsupported |= 1u << f;
		return;
	}
	if (r == NV_GPU_IS_LOST)
		d->g.lost = true;
	n->t.stats[f].errors++;
	n->t.errors++;
}

static bool wanted(const struct dev_state *d, enum nvml_field f)
{
	return !d->g.lost && !(d->g.unsupported & (1u << f));
}

static void sample_gpm(struct nvml *n, struct dev_state *d)
{
	struct nv_gpm_support sup = { .version = 1 };
	struct nv_gpm_metrics_get *mg;
	nvret r;

	if (!wanted(d, NF_GPM))
		return;
	if (!n->f.gpm_support || !n->f.gpm_alloc || !n->f.gpm_get || !n->f.gpm_metrics) {
		note(n, d, NF_GPM, NV_FUNCTION_MISSING);
		return;
	}
	if (!d->gpm[0]) {
		if (n->f.gpm_support(d->h, &sup) != NV_SUCCESS || !sup.supported ||
		    n->f.gpm_alloc(&d->gpm[0]) != NV_SUCCESS ||
		    n->f.gpm_alloc(&d->gpm[1]) != NV_SUCCESS) {
			note(n, d, NF_GPM, NV_NOT_SUPPORTED);
			return;
		}
	}
	r = CALL(n, d, NF_GPM, n->f.gpm_get(d->h, d->gpm[1]));
	if (r != NV_SUCCESS)
		return;
	if (!d->gpm_have_prev) {
		/* The first sample: nothing to compare with yet. */
		nvgpm t = d->gpm[0];

		d->gpm[0] = d->gpm[1];
		d->gpm[1] = t;
		d->gpm_have_prev = true;
		d->g.have &= ~(1u << NF_GPM);
		return;
	}
	mg = xcalloc(1, sizeof(*mg));
	mg->version = 1;
	mg->num_metrics = NGPM;
	mg->sample1 = d->gpm[0];
	mg->sample2 = d->gpm[1];
	for (unsigned int i = 0; i < NGPM; i++)
		mg->metrics[i].metric_id = gpm_ids[i].id;
	r = n->f.gpm_metrics(mg);
	if (r == NV_SUCCESS) {
		for (unsigned int i = 0; i < NGPM; i++) {
			double v = mg->metrics[i].value;

			if (mg->metrics[i].ret != NV_SUCCESS)
				v = 0;
			for (unsigned int j = 0; j < NGPM; j++)
				if (gpm_ids[j].id == mg->metrics[i].metric_id)
					*(double *)((char *)&d->g + gpm_ids[j].off) =
						v * gpm_ids[j].scale;
		}
	} else {
		note(n, d, NF_GPM, r);
		d->g.have &= ~(1u << NF_GPM);
	}
	free(mg);
	/* This sample is the next interval's start. */
	{
		nvgpm t = d->gpm[0];

		d->gpm[0] = d->gpm[1];
		d->gpm[1] = t;
	}
}

static void sample_procs(struct nvml *n, struct dev_state *d)
{
	struct nv_process_info info[NVML_MAX_PROCS];
	struct nv_process_util_sample util[NVML_MAX_PROCS];
	unsigned int count = NVML_MAX_PROCS;
	nvret r = NV_FUNCTION_MISSING;

	if (!wanted(d, NF_PROCS))
		return;
	if (n->f.procs) {
		r = CALL(n, d, NF_PROCS, n->f.procs(d->h, &count, info));
	} else if (n->f.procs_v1) {
		struct nv_process_info_v1 v1[NVML_MAX_PROCS];

		r = CALL(n, d, NF_PROCS, n->f.procs_v1(d->h, &count, v1));
		for (unsigned int i = 0; r == NV_SUCCESS && i < count; i++) {
			info[i].pid = v1[i].pid;
			info[i].used_gpu_memory = v1[i].used_gpu_memory;
		}
	} else {
		note(n, d, NF_PROCS, r);
	}
	if (r == NV_INSUFFICIENT_SIZE) /* more than we keep: the first ones */
		count = NVML_MAX_PROCS;
	else if (r != NV_SUCCESS)
		return;
	d->g.have |= 1u << NF_PROCS;
	d->g.nprocs = GS_MIN(count, (unsigned int)NVML_MAX_PROCS);
	for (unsigned int i = 0; i < d->g.nprocs; i++) {
		d->g.procs[i].pid = info[i].pid;
		d->g.procs[i].used_bytes = info[i].used_gpu_memory;
		d->g.procs[i].sm_util = -1;
		d->g.procs[i].mem_util = -1;
	}
	/* Utilisation: only processes with samples since the previous call come back. */
	if (!wanted(d, NF_PROC_UTIL) || !n->f.proc_util)
		return;
	count = NVML_MAX_PROCS;
	r = CALL(n, d, NF_PROC_UTIL, n->f.proc_util(d->h, util, &count, d->proc_util_ts));
	if (r == NV_NOT_FOUND) { /* none had any: all at 0 */
		for (unsigned int i = 0; i < d->g.nprocs; i++)
			d->g.procs[i].sm_util = d->g.procs[i].mem_util = 0;
		d->g.have |= 1u << NF_PROC_UTIL;
		return;
	}
	if (r != NV_SUCCESS)
		return;
	for (unsigned int i = 0; i < d->g.nprocs; i++)
		d->g.procs[i].sm_util = d->g.procs[i].mem_util = 0;
	for (unsigned int k = 0; k < GS_MIN(count, (unsigned int)NVML_MAX_PROCS); k++) {
		/* (NVML returns garbage at times: utilisations over 100 are dropped.) */
		if (util[k].sm_util > 100 || util[k].mem_util > 100)
			continue;
		d->proc_util_ts = GS_MAX(d->proc_util_ts, util[k].timestamp);
		for (unsigned int i = 0; i < d->g.nprocs; i++)
			if (d->g.procs[i].pid == util[k].pid) {
				d->g.procs[i].sm_util = (int)util[k].sm_util;
				d->g.procs[i].mem_util = (int)util[k].mem_util;
			}
	}
}

static void sample_slow(struct nvml *n, struct dev_state *d)
{
	unsigned long long v;
	unsigned int a, b, c, e;

	sample_procs(n, d);
	/* Energy: a counter, and measured on an H200 at 4.4 ms a call (the fast fields take
	 * 10-130 us): here, with the others that cost. */
	if (wanted(d, NF_ENERGY) && n->f.energy) {
		if (CALL(n, d, NF_ENERGY, n->f.energy(d->h, &v)) == NV_SUCCESS)
			d->g.energy_mj = v;
	} else if (!n->f.energy) {
		note(n, d, NF_ENERGY, NV_FUNCTION_MISSING);
	}
	if (wanted(d, NF_ECC) && n->f.ecc) {
		if (CALL(n, d, NF_ECC, n->f.ecc(d->h, 0, 0, &v)) == NV_SUCCESS) {
			d->g.ecc_corrected = v;
			if (n->f.ecc(d->h, 1, 0, &v) == NV_SUCCESS)
				d->g.ecc_uncorrected = v;
		}
	} else if (!n->f.ecc) {
		note(n, d, NF_ECC, NV_FUNCTION_MISSING);
	}
	if (wanted(d, NF_REMAP) && n->f.remapped) {
		if (CALL(n, d, NF_REMAP, n->f.remapped(d->h, &a, &b, &c, &e)) == NV_SUCCESS) {
			d->g.remap_corrected = a;
			d->g.remap_uncorrected = b;
			d->g.remap_pending = c != 0;
			d->g.remap_failure = e != 0;
		}
	} else if (!n->f.remapped) {
		note(n, d, NF_REMAP, NV_FUNCTION_MISSING);
	}
	/* PCIe bytes from the counters that block for 20 ms: only where GPM has none. */
	if (wanted(d, NF_PCIE) && n->f.pcie && (d->g.unsupported & (1u << NF_GPM))) {
		if (CALL(n, d, NF_PCIE, n->f.pcie(d->h, 0, &a)) == NV_SUCCESS &&
		    n->f.pcie(d->h, 1, &b) == NV_SUCCESS) {
			d->g.pcie_tx_bps = (double)a * 1024.0; /* KB/s */
			d->g.pcie_rx_bps = (double)b * 1024.0;
		}
	}
	d->g.slow_ns = mono_ns();
}

static void sample_fast(struct nvml *n, struct dev_state *d)
{
	struct nv_utilization u;
	struct nv_memory_v2 m2 = { .version = NV_MEMORY_V2_VERSION };
	struct nv_memory m1;
	unsigned int v;
	unsigned long long ull;
	int i;

#define FIELD(fld, fn, ...)                                                               \
	(wanted(d, fld) && (n->f.fn ? CALL(n, d, fld, n->f.fn(__VA_ARGS__)) == NV_SUCCESS \
				    : (note(n, d, fld, NV_FUNCTION_MISSING), false)))
	if (FIELD(NF_UTIL, util, d->h, &u)) {
		d->g.util_gpu = u.gpu;
		d->g.util_mem = u.memory;
	}
	if (wanted(d, NF_MEMORY)) {
		nvret r = n->f.memory_v2 ? CALL(n, d, NF_MEMORY, n->f.memory_v2(d->h, &m2))
					 : NV_FUNCTION_MISSING;

		if (r == NV_SUCCESS) {
			d->g.mem_total = m2.total;
			d->g.mem_used = m2.used;
			d->g.mem_free = m2.free;
			d->g.mem_reserved = m2.reserved;
		} else if (r != NV_GPU_IS_LOST && n->f.memory) {
			/* (an older driver: no v2, no reserved) */
			d->g.unsupported &= ~(1u << NF_MEMORY);
			if (CALL(n, d, NF_MEMORY, n->f.memory(d->h, &m1)) == NV_SUCCESS) {
				d->g.mem_total = m1.total;
				d->g.mem_used = m1.used;
				d->g.mem_free = m1.free;
				d->g.mem_reserved = 0;
			}
		}
	}
	if (FIELD(NF_POWER, power, d->h, &v))
		d->g.power_mw = v;
	if (FIELD(NF_TEMP, temperature, d->h, 0, &v))
		d->g.temp_c = v;
	if (FIELD(NF_CLOCK_SM, clock, d->h, 1, &v))
		d->g.clock_sm_mhz = v;
	if (FIELD(NF_CLOCK_MEM, clock, d->h, 2, &v))
		d->g.clock_mem_mhz = v;
	if (FIELD(NF_CLOCK_REASONS, reasons, d->h, &ull))
		d->g.clock_reasons = ull;
	if (FIELD(NF_PSTATE, pstate, d->h, &i))
		d->g.pstate = i;
#undef FIELD
	sample_gpm(n, d);
}

void nvml_sample(struct nvml *n, unsigned int slow_every)
{
	bool slow = slow_every && n->samples % slow_every == 0;

	n->samples++;
	for (unsigned int i = 0; i < n->ndev; i++) {
		struct dev_state *d = &n->dev[i];
		__u32 keep_slow;

		/* (Under the lock: snapshots are taken from other threads.) */
		pthread_mutex_lock(&n->lock);
		if (d->g.lost) { /* (the event thread may have found it so) */
			d->g.have = 0;
			pthread_mutex_unlock(&n->lock);
			continue;
		}
		/* What this sample gets is what it has; the slow tier's stays until its next. */
		keep_slow = d->g.have & ((1u << NF_PROCS) | (1u << NF_PROC_UTIL) | (1u << NF_ECC) |
					 (1u << NF_REMAP) | (1u << NF_PCIE) | (1u << NF_ENERGY));
		d->g.have = slow ? 0 : keep_slow;
		sample_fast(n, d);
		if (slow)
			sample_slow(n, d);
		d->g.sampled_ns = mono_ns();
		if (d->g.lost)
			d->g.have = 0;
		pthread_mutex_unlock(&n->lock);
	}
}
#endif /* !GS_STATIC_BUILD */
