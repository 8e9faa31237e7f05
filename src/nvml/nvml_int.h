/* SPDX-License-Identifier: MIT */
/*
 * The NVML sampler's parts (see nvml.h): the ABI of the calls used (our own declarations:
 * the header is not in Debian) and the sampler's state.
 *   nvml.c         loading, the devices, XID events, snapshots, closing;
 *   nvml_sample.c  the samples: fields by tier, GPM metrics, processes.
 * Not in the static build, which asks a helper built from these (proxy.c).
 */
#ifndef GS_NVML_INT_H
#define GS_NVML_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "nvml/nvml.h"

/* ---- the ABI ----------------------------------------------------------------------------- */

typedef int nvret;
typedef void *nvdev;
typedef void *nvset;
typedef void *nvgpm;

#define NV_SUCCESS	     0
#define NV_NOT_SUPPORTED     3
#define NV_NO_PERMISSION     4
#define NV_NOT_FOUND	     6
#define NV_INSUFFICIENT_SIZE 7
#define NV_TIMEOUT	     10
#define NV_GPU_IS_LOST	     15
#define NV_FUNCTION_MISSING  -1 /* ours: the library has no such entry point */

struct nv_utilization {
	unsigned int gpu, memory;
};

struct nv_memory {
	unsigned long long total, free, used;
};

struct nv_memory_v2 {
	unsigned int version;
	unsigned long long total, reserved, free, used;
};

#define NV_MEMORY_V2_VERSION ((unsigned int)(sizeof(struct nv_memory_v2) | (2u << 24)))

struct nv_pci_info {
	char bus_id_legacy[16];
	unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

struct nv_process_info { /* _v2/_v3 entry points */
	unsigned int pid;
	unsigned long long used_gpu_memory;
	unsigned int gpu_instance_id, compute_instance_id;
};

struct nv_process_info_v1 {
	unsigned int pid;
	unsigned long long used_gpu_memory;
};

struct nv_process_util_sample {
	unsigned int pid;
	unsigned long long timestamp;
	unsigned int sm_util, mem_util, enc_util, dec_util;
};

struct nv_event_data {
	nvdev device;
	unsigned long long event_type, event_data;
	unsigned int gpu_instance_id, compute_instance_id;
};

#define NV_EVENT_XID 0x8ULL

struct nv_gpm_support {
	unsigned int version, supported;
};

struct nv_gpm_metric {
	unsigned int metric_id;
	nvret ret;
	double value;
	char *short_name, *long_name, *unit;
};

/* Larger than any version's metric array: the library fills numMetrics entries. */
struct nv_gpm_metrics_get {
	unsigned int version, num_metrics;
	nvgpm sample1, sample2;
	struct nv_gpm_metric metrics[512];
};

enum {
	GPM_GRAPHICS = 1,
	GPM_SM = 2,
	GPM_SM_OCCUPANCY = 3,
	GPM_TENSOR = 5,
	GPM_DRAM = 10,
	GPM_PCIE_TX = 20, /* MiB/s */
	GPM_PCIE_RX = 21,
	GPM_NVLINK_RX = 60,
	GPM_NVLINK_TX = 61,
};
/* Entry points, each with the names to try, newest first. */
#define NVML_FUNCS(X)                                                                              \
	X(init, nvret (*)(void), "nvmlInit_v2", "nvmlInit")                                        \
	X(shutdown, nvret (*)(void), "nvmlShutdown", NULL)                                         \
	X(error_string, const char *(*)(nvret), "nvmlErrorString", NULL)                           \
	X(driver_version, nvret (*)(char *, unsigned int), "nvmlSystemGetDriverVersion", NULL)     \
	X(count, nvret (*)(unsigned int *), "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount")         \
	X(by_index, nvret (*)(unsigned int, nvdev *), "nvmlDeviceGetHandleByIndex_v2",             \
	  "nvmlDeviceGetHandleByIndex")                                                            \
	X(uuid, nvret (*)(nvdev, char *, unsigned int), "nvmlDeviceGetUUID", NULL)                 \
	X(name, nvret (*)(nvdev, char *, unsigned int), "nvmlDeviceGetName", NULL)                 \
	X(pci, nvret (*)(nvdev, struct nv_pci_info *), "nvmlDeviceGetPciInfo_v3",                  \
	  "nvmlDeviceGetPciInfo_v2")                                                               \
	X(minor, nvret (*)(nvdev, unsigned int *), "nvmlDeviceGetMinorNumber", NULL)               \
	X(util, nvret (*)(nvdev, struct nv_utilization *), "nvmlDeviceGetUtilizationRates", NULL)  \
	X(memory_v2, nvret (*)(nvdev, struct nv_memory_v2 *), "nvmlDeviceGetMemoryInfo_v2", NULL)  \
	X(memory, nvret (*)(nvdev, struct nv_memory *), "nvmlDeviceGetMemoryInfo", NULL)           \
	X(power, nvret (*)(nvdev, unsigned int *), "nvmlDeviceGetPowerUsage", NULL)                \
	X(energy, nvret (*)(nvdev, unsigned long long *), "nvmlDeviceGetTotalEnergyConsumption",   \
	  NULL)                                                                                    \
	X(temperature, nvret (*)(nvdev, int, unsigned int *), "nvmlDeviceGetTemperature", NULL)    \
	X(clock, nvret (*)(nvdev, int, unsigned int *), "nvmlDeviceGetClockInfo", NULL)            \
	X(reasons, nvret (*)(nvdev, unsigned long long *),                                         \
	  "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")   \
	X(pstate, nvret (*)(nvdev, int *), "nvmlDeviceGetPerformanceState", NULL)                  \
	X(procs, nvret (*)(nvdev, unsigned int *, struct nv_process_info *),                       \
	  "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2")    \
	X(procs_v1, nvret (*)(nvdev, unsigned int *, struct nv_process_info_v1 *),                 \
	  "nvmlDeviceGetComputeRunningProcesses", NULL)                                            \
	X(proc_util,                                                                               \
	  nvret (*)(nvdev, struct nv_process_util_sample *, unsigned int *, unsigned long long),   \
	  "nvmlDeviceGetProcessUtilization", NULL)                                                 \
	X(ecc, nvret (*)(nvdev, int, int, unsigned long long *), "nvmlDeviceGetTotalEccErrors",    \
	  NULL)                                                                                    \
	X(remapped,                                                                                \
	  nvret (*)(nvdev, unsigned int *, unsigned int *, unsigned int *, unsigned int *),        \
	  "nvmlDeviceGetRemappedRows", NULL)                                                       \
	X(pcie, nvret (*)(nvdev, int, unsigned int *), "nvmlDeviceGetPcieThroughput", NULL)        \
	X(set_create, nvret (*)(nvset *), "nvmlEventSetCreate", NULL)                              \
	X(set_free, nvret (*)(nvset), "nvmlEventSetFree", NULL)                                    \
	X(register_events, nvret (*)(nvdev, unsigned long long, nvset),                            \
	  "nvmlDeviceRegisterEvents", NULL)                                                        \
	X(set_wait, nvret (*)(nvset, struct nv_event_data *, unsigned int), "nvmlEventSetWait_v2", \
	  "nvmlEventSetWait")                                                                      \
	X(gpm_support, nvret (*)(nvdev, struct nv_gpm_support *), "nvmlGpmQueryDeviceSupport",     \
	  NULL)                                                                                    \
	X(gpm_alloc, nvret (*)(nvgpm *), "nvmlGpmSampleAlloc", NULL)                               \
	X(gpm_free, nvret (*)(nvgpm), "nvmlGpmSampleFree", NULL)                                   \
	X(gpm_get, nvret (*)(nvdev, nvgpm), "nvmlGpmSampleGet", NULL)                              \
	X(gpm_metrics, nvret (*)(struct nv_gpm_metrics_get *), "nvmlGpmMetricsGet", NULL)

#define FN_FIELD(id, type, a, b) __typeof__(type) id;
struct nvml_fns {
	NVML_FUNCS(FN_FIELD)
};

/* ---- state -------------------------------------------------------------------------------- */

struct dev_state {
	nvdev h;
	struct nvml_gpu g;
	nvgpm gpm[2]; /* the previous sample and the next */
	bool gpm_have_prev;
	unsigned long long proc_util_ts; /* the latest process sample's time, for the next */
};

struct nvml {
	struct nvml_totals t; /* (first: totals.c reads it) */
	void *lib;
	struct nvml_fns f;
	unsigned int ndev;
	struct dev_state dev[NVML_MAX_DEVICES];
	__u64 samples;
	pthread_mutex_t lock; /* the XID thread against samples and snapshots */
	pthread_t events;
	nvset set;
	bool events_running, stop;
};

static inline __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

#endif
