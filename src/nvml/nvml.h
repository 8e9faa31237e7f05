/* SPDX-License-Identifier: MIT */
/*
 * NVML sampler: libnvidia-ml.so.1 loaded at run time (no build-time dependency; versioned
 * entry points with fallbacks), devices sampled in tiers so that the cheap fields are fresh
 * and the expensive ones (process lists, ECC, row remapping, PCIe counters that block for a
 * 20 ms window) do not hold the driver's lock often:
 *
 *   fast (every call of nvml_sample): utilisation, memory, power, temperature, clocks and
 *     clock-event reasons, P-state, GPM metrics on Hopper and newer (SM, tensor and DRAM
 *     activity, PCIe and NVLink bytes/s, over the interval since the previous sample);
 *   slow (every `slow_every` samples): energy (4.4 ms a call on an H200), per-process
 *     memory and utilisation, ECC error totals, remapped rows, PCIe throughput where GPM is
 *     not there;
 *   events: XIDs from a thread waiting on an NVML event set.
 *
 * A field a GPU does not support is marked so once and never asked again; one that fails
 * at run time is left out of that sample (not reported as 0). A GPU that falls off the bus
 * (NVML_ERROR_GPU_IS_LOST, XID 79) is marked lost and no longer sampled.
 */
#ifndef GS_NVML_NVML_H
#define GS_NVML_NVML_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#define NVML_MAX_DEVICES 64
#define NVML_MAX_PROCS	 256

/* Fields, for "have" bits and call-cost statistics. */
enum nvml_field {
	NF_UTIL,
	NF_MEMORY,
	NF_POWER,
	NF_ENERGY,
	NF_TEMP,
	NF_MEM_TEMP,
	NF_CLOCK_SM,
	NF_CLOCK_MEM,
	NF_CLOCK_REASONS,
	NF_GPM,
	NF_PROCS,
	NF_PROC_UTIL,
	NF_ECC,
	NF_REMAP,
	NF_PCIE,
	NF_PSTATE,
	NF_COUNT
};

struct nvml_proc {
	__u32 pid;
	__u64 used_bytes; /* ~0: not available */
	int sm_util;	  /* percent over the last interval, -1 not known */
	int mem_util;
};

struct nvml_gpu {
	/* identity */
	int index;
	unsigned int minor; /* /dev/nvidiaN */
	char uuid[96], name[96], pci_bus_id[40];
	bool lost;	   /* fell off the bus: no longer sampled */
	__u32 have;	   /* 1 << enum nvml_field: present in the latest sample */
	__u32 unsupported; /* fields the GPU does not have */
	__u64 sampled_ns;  /* CLOCK_MONOTONIC of the latest sample */
	__u64 slow_ns;	   /* of the latest slow-tier sample */
	/* fast tier */
	unsigned int util_gpu, util_mem; /* percent */
	__u64 mem_total, mem_used, mem_free, mem_reserved;
	unsigned int power_mw;
	__u64 energy_mj; /* since the driver loaded */
	unsigned int temp_c, mem_temp_c;
	unsigned int clock_sm_mhz, clock_mem_mhz;
	__u64 clock_reasons; /* nvmlClocksEventReason bits */
	int pstate;
	/* GPM (ratios 0..1 and bytes/s), over the interval between the latest two samples */
	double sm_active, sm_occupancy, tensor_active, dram_active, gr_active;
	double pcie_tx_bps, pcie_rx_bps, nvlink_tx_bps, nvlink_rx_bps;
	/* slow tier */
	__u64 ecc_corrected, ecc_uncorrected; /* volatile (since the driver loaded) */
	unsigned int remap_corrected, remap_uncorrected;
	bool remap_pending, remap_failure;
	unsigned int nprocs;
	struct nvml_proc procs[NVML_MAX_PROCS];
	/* XID events (from the event thread) */
	__u64 xid_count;
	unsigned long long last_xid;
	__u64 last_xid_realtime_ns;
};

struct nvml_call_stat {
	__u64 calls, errors, total_ns, max_ns;
};

struct nvml;

/* What either side's struct nvml (nvml.c: NVML itself; proxy.c: its helper) begins with,
 * for the getters of totals.c. */
struct nvml_totals {
	char driver[96];
	struct nvml_call_stat stats[NF_COUNT];
	__u64 errors;
};

/* Load and initialise. NULL with *err set (one line) when NVML is not there or fails:
 * callers go on without device metrics. */
struct nvml *nvml_open(char *err, size_t errlen);
void nvml_close(struct nvml *n);
/* Sample every GPU (the slow tier too every `slow_every` calls; 0: never). */
void nvml_sample(struct nvml *n, unsigned int slow_every);
/* A consistent copy of the latest sample (the XID thread writes concurrently). */
unsigned int nvml_snapshot(struct nvml *n, struct nvml_gpu *out, unsigned int max);
const char *nvml_driver_version(const struct nvml *n);
/* What NVML calls cost, per field (calls made by nvml_sample). */
void nvml_call_stats(struct nvml *n, struct nvml_call_stat out[NF_COUNT]);
const char *nvml_field_name(enum nvml_field f);
/* Runtime errors seen (a field that failed in a sample), for the exporter's own metrics. */
__u64 nvml_errors(struct nvml *n);

#endif
