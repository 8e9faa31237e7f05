// SPDX-License-Identifier: MIT
/* The agent's GPU families (see prom_gpus.h). */
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "sink/prom_gpus.h"
#include "sink/prometheus.h"

struct gpu_labels {
	char gpu[16], device[32];
	struct prom_labels ls;
};

static void identity(const struct prom_gpus_in *in, const struct nvml_gpu *g, struct gpu_labels *gl)
{
	snprintf(gl->gpu, sizeof(gl->gpu), "%d", g->index);
	snprintf(gl->device, sizeof(gl->device), "nvidia%u", g->minor);
	gl->ls.n = 0;
	prom_labels_add(&gl->ls, "gpu", gl->gpu);
	prom_labels_add(&gl->ls, in->dcgm_labels ? "UUID" : "uuid", g->uuid);
	prom_labels_add(&gl->ls, "pci_bus_id", g->pci_bus_id);
	prom_labels_add(&gl->ls, "device", gl->device);
	prom_labels_add(&gl->ls, in->dcgm_labels ? "modelName" : "model_name", g->name);
	prom_labels_add(&gl->ls, in->dcgm_labels ? "Hostname" : "hostname", in->hostname);
}

/* A value of one field for every GPU that has it (series of a failed field are left out,
 * not shown as 0). */
typedef double (*field_fn)(const struct nvml_gpu *g);

static void device_family(struct strbuf *sb, const struct gpu_labels *gl, const struct nvml_gpu *g,
			  unsigned int n, bool dcgm, const char *name, const char *type,
			  const char *help, enum nvml_field f, field_fn fn)
{
	bool any = false;

	/* The DCGM exporter's counters have no _total suffix, which Prometheus's lint wants:
	 * untyped, unless its exact output is asked for. (PromQL's rate() takes either.) */
	if (!strcmp(type, "counter") && !dcgm)
		type = "untyped";

	for (unsigned int i = 0; i < n; i++) {
		if (!(g[i].have & (1u << f)))
			continue;
		if (!any)
			prom_family(sb, name, type, help);
		any = true;
		prom_sample(sb, name, &gl[i].ls, NULL, NULL, fn(&g[i]));
	}
}

/* A field's value as served, from a GPU's sample. */
#define GPU_FIELD(name, expr)                        \
	static double name(const struct nvml_gpu *g) \
	{                                            \
		return (double)(expr);               \
	}

GPU_FIELD(f_util, g->util_gpu)
GPU_FIELD(f_mem_util, g->util_mem)
GPU_FIELD(f_fb_free, (double)g->mem_free / 1048576.0)
GPU_FIELD(f_fb_used, (double)g->mem_used / 1048576.0)
GPU_FIELD(f_fb_reserved, (double)g->mem_reserved / 1048576.0)
GPU_FIELD(f_fb_total, g->mem_total)
GPU_FIELD(f_power, g->power_mw / 1000.0)
GPU_FIELD(f_energy, g->energy_mj)
GPU_FIELD(f_temp, g->temp_c)
GPU_FIELD(f_sm_clock, g->clock_sm_mhz)
GPU_FIELD(f_mem_clock, g->clock_mem_mhz)
GPU_FIELD(f_reasons, g->clock_reasons)
GPU_FIELD(f_pstate, g->pstate)
GPU_FIELD(f_sm_active, g->sm_active)
GPU_FIELD(f_sm_occupancy, g->sm_occupancy)
GPU_FIELD(f_tensor, g->tensor_active)
GPU_FIELD(f_dram, g->dram_active)
GPU_FIELD(f_gr, g->gr_active)
GPU_FIELD(f_pcie_tx, g->pcie_tx_bps)
GPU_FIELD(f_pcie_rx, g->pcie_rx_bps)
GPU_FIELD(f_nvlink_tx, g->nvlink_tx_bps)
GPU_FIELD(f_nvlink_rx, g->nvlink_rx_bps)
GPU_FIELD(f_ecc_c, g->ecc_corrected)
GPU_FIELD(f_ecc_u, g->ecc_uncorrected)
GPU_FIELD(f_remap_c, g->remap_corrected)
GPU_FIELD(f_remap_u, g->remap_uncorrected)
GPU_FIELD(f_remap_fail, g->remap_failure)
GPU_FIELD(f_last_xid, g->last_xid)
GPU_FIELD(f_xid_count, g->xid_count)
GPU_FIELD(f_lost, g->lost)

/* The device families, in the order they are served: the DCGM exporter's names. */
static const struct device_field {
	const char *name, *type, *help;
	enum nvml_field field;
	field_fn fn;
} device_fields[] = {
	{ "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %): time a kernel was running.",
	  NF_UTIL, f_util },
	{ "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", NF_UTIL, f_mem_util },
	{ "DCGM_FI_DEV_FB_FREE", "gauge", "Frame buffer memory free (in MiB).", NF_MEMORY,
	  f_fb_free },
	{ "DCGM_FI_DEV_FB_USED", "gauge", "Frame buffer memory used (in MiB).", NF_MEMORY,
	  f_fb_used },
	{ "DCGM_FI_DEV_FB_RESERVED", "gauge", "Frame buffer memory reserved (in MiB).", NF_MEMORY,
	  f_fb_reserved },
	{ "gpuscope_gpu_memory_total_bytes", "gauge", "Frame buffer memory installed (bytes).",
	  NF_MEMORY, f_fb_total },
	{ "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", NF_POWER, f_power },
	{ "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
	  "Total energy consumption since the driver loaded (in mJ).", NF_ENERGY, f_energy },
	{ "DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", NF_TEMP, f_temp },
	{ "DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", NF_CLOCK_SM,
	  f_sm_clock },
	{ "DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", NF_CLOCK_MEM,
	  f_mem_clock },
	{ "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge",
	  "Why the clocks are held down (NVML clock event reason bits).", NF_CLOCK_REASONS,
	  f_reasons },
	{ "DCGM_FI_DEV_PSTATE", "gauge", "Performance state (0-15).", NF_PSTATE, f_pstate },
	{ "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge",
	  "Ratio of time the graphics engine is active (GPM).", NF_GPM, f_gr },
	{ "DCGM_FI_PROF_SM_ACTIVE", "gauge",
	  "Ratio of cycles an SM has at least one warp assigned (GPM).", NF_GPM, f_sm_active },
	{ "DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "Ratio of warps resident to the maximum (GPM).",
	  NF_GPM, f_sm_occupancy },
	{ "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
	  "Ratio of cycles the tensor pipes are active (GPM).", NF_GPM, f_tensor },
	{ "DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
	  "Ratio of cycles the memory interface is active (GPM).", NF_GPM, f_dram },
	{ "DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
	  "PCIe bytes transmitted per second (GPM, or the PCIe counters).", NF_GPM, f_pcie_tx },
	{ "DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
	  "PCIe bytes received per second (GPM, or the PCIe counters).", NF_GPM, f_pcie_rx },
	{ "DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge", "NVLink bytes transmitted per second (GPM).",
	  NF_GPM, f_nvlink_tx },
	{ "DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge", "NVLink bytes received per second (GPM).",
	  NF_GPM, f_nvlink_rx },
	{ "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter",
	  "Single-bit (corrected) ECC errors since the driver loaded.", NF_ECC, f_ecc_c },
	{ "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
	  "Double-bit (uncorrected) ECC errors since the driver loaded.", NF_ECC, f_ecc_u },
	{ "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
	  "Rows remapped for correctable errors.", NF_REMAP, f_remap_c },
	{ "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
	  "Rows remapped for uncorrectable errors.", NF_REMAP, f_remap_u },
	{ "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether row remapping has failed.", NF_REMAP,
	  f_remap_fail },
};

/* A family every GPU has a value of. */
static void gpu_family(struct strbuf *sb, const struct gpu_labels *gl, const struct nvml_gpu *g,
		       unsigned int n, const char *name, const char *type, const char *help,
		       field_fn fn)
{
	prom_family(sb, name, type, help);
	for (unsigned int i = 0; i < n; i++)
		prom_sample(sb, name, &gl[i].ls, NULL, NULL, fn(&g[i]));
}

/* A family of NVML's processes of each GPU that has `field` (a value below 0: none). */
static void proc_family(struct strbuf *sb, const struct gpu_labels *gl, const struct nvml_gpu *g,
			unsigned int n, enum nvml_field field, const char *name, const char *help,
			double (*fn)(const struct nvml_proc *p))
{
	bool any = false;

	for (unsigned int i = 0; i < n; i++)
		for (unsigned int k = 0; k < g[i].nprocs && (g[i].have & (1u << field)); k++) {
			double v = fn(&g[i].procs[k]);
			char pid[16];

			if (v < 0)
				continue;
			if (!any)
				prom_family(sb, name, "gauge", help);
			any = true;
			snprintf(pid, sizeof(pid), "%u", g[i].procs[k].pid);
			prom_sample(sb, name, &gl[i].ls, "pid", pid, v);
		}
}

static double p_memory(const struct nvml_proc *p)
{
	return p->used_bytes == ~0ULL ? -1 : (double)p->used_bytes;
}

static double p_sm_util(const struct nvml_proc *p)
{
	return p->sm_util < 0 ? -1 : p->sm_util / 100.0;
}

static double c_calls(const struct nvml_call_stat *c)
{
	return (double)c->calls;
}

static double c_seconds(const struct nvml_call_stat *c)
{
	return c->total_ns / 1e9;
}

static double c_errors(const struct nvml_call_stat *c)
{
	return (double)c->errors;
}

/* What NVML costs, per field. */
static const struct {
	const char *name, *help;
	double (*fn)(const struct nvml_call_stat *c);
} costs[] = {
	{ "gpuscope_nvml_calls_total", "NVML calls made, by field.", c_calls },
	{ "gpuscope_nvml_call_seconds_total", "Time spent in NVML calls, by field.", c_seconds },
	{ "gpuscope_nvml_errors_total", "NVML calls that failed at run time, by field.", c_errors },
};

void prom_gpus__render(struct strbuf *sb, const struct prom_gpus_in *in)
{
	static struct gpu_labels gl[NVML_MAX_DEVICES];
	const struct nvml_gpu *g = in->g;
	const struct nvml_call_stat *st = in->stats;
	unsigned int n = GS_MIN(in->n, (unsigned int)NVML_MAX_DEVICES);

	for (unsigned int i = 0; i < n; i++)
		identity(in, &g[i], &gl[i]);
	for (size_t i = 0; i < ARRAY_SIZE(device_fields); i++)
		device_family(sb, gl, g, n, in->dcgm_labels, device_fields[i].name,
			      device_fields[i].type, device_fields[i].help, device_fields[i].field,
			      device_fields[i].fn);
	/* XIDs: the last one as the DCGM exporter has it, and a count of them; lost GPUs. */
	gpu_family(sb, gl, g, n, "DCGM_FI_DEV_XID_ERRORS", "gauge",
		   "Value of the last XID error seen.", f_last_xid);
	gpu_family(sb, gl, g, n, "gpuscope_xid_errors_total", "counter",
		   "XID errors reported by the driver since the agent started.", f_xid_count);
	gpu_family(sb, gl, g, n, "gpuscope_gpu_lost", "gauge",
		   "1 if the GPU fell off the bus (NVML: GPU is lost, or XID 79); it is no "
		   "longer sampled.",
		   f_lost);
	/* Per process, from NVML's process list (slow tier). */
	proc_family(sb, gl, g, n, NF_PROCS, "gpuscope_gpu_process_memory_bytes",
		    "GPU memory a process uses (NVML).", p_memory);
	proc_family(sb, gl, g, n, NF_PROC_UTIL, "gpuscope_gpu_process_sm_utilization_ratio",
		    "Ratio of time a process had a kernel running (NVML).", p_sm_util);
	/* What NVML costs us, per field. */
	for (size_t c = 0; c < ARRAY_SIZE(costs); c++) {
		prom_family(sb, costs[c].name, "counter", costs[c].help);
		for (int f = 0; f < NF_COUNT; f++)
			if (st[f].calls)
				prom_sample(sb, costs[c].name, NULL, "field",
					    nvml_field_name((enum nvml_field)f),
					    costs[c].fn(&st[f]));
	}
}
