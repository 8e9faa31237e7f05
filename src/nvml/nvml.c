// SPDX-License-Identifier: MIT
/* NVML sampler (see nvml.h). The NVML declarations are our own: the header is not in
 * Debian, and only the stable ABI of the few calls used here is needed. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "nvml/nvml.h"

static const char *const field_names[NF_COUNT] = {
	[NF_UTIL] = "utilization",
	[NF_MEMORY] = "memory",
	[NF_POWER] = "power",
	[NF_ENERGY] = "energy",
	[NF_TEMP] = "temperature",
	[NF_MEM_TEMP] = "memory_temperature",
	[NF_CLOCK_SM] = "sm_clock",
	[NF_CLOCK_MEM] = "memory_clock",
	[NF_CLOCK_REASONS] = "clock_event_reasons",
	[NF_GPM] = "gpm",
	[NF_PROCS] = "processes",
	[NF_PROC_UTIL] = "process_utilization",
	[NF_ECC] = "ecc",
	[NF_REMAP] = "remapped_rows",
	[NF_PCIE] = "pcie_throughput",
	[NF_PSTATE] = "pstate",
};

const char *nvml_field_name(enum nvml_field f)
{
	return f < NF_COUNT ? field_names[f] : "?";
}

/* The static build asks a helper instead (proxy.c); the helper is built from what follows. */
#ifndef GS_STATIC_BUILD

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

static __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

static __u64 real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

static void start_events(struct nvml *n);

/* ---- loading ------------------------------------------------------------------------------ */

static void *sym(void *lib, const char *a, const char *b)
{
	void *p = dlsym(lib, a);

	return p || !b ? p : dlsym(lib, b);
}

static const char *nv_error(const struct nvml *n, nvret r)
{
	const char *s = n->f.error_string ? n->f.error_string(r) : NULL;

	return s ? s : "unknown error";
}

struct nvml *nvml_open(char *err, size_t errlen)
{
	const char *path = getenv("GPUSCOPE_NVML"); /* (tests: the test double) */
	struct nvml *n;
	unsigned int count = 0;
	nvret r;

	if (path && !*path)
		path = NULL;
	n = xcalloc(1, sizeof(*n));
	pthread_mutex_init(&n->lock, NULL);
	n->lib = dlopen(path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->lib && !path)
		n->lib = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		snprintf(err, errlen, "NVML not found (libnvidia-ml.so.1: %s)", dlerror());
		free(n);
		return NULL;
	}
#define FN_LOAD(id, type, a, b) n->f.id = (type)sym(n->lib, a, b);
	NVML_FUNCS(FN_LOAD)
	if (!n->f.init || !n->f.count || !n->f.by_index) {
		snprintf(err, errlen, "NVML library lacks nvmlInit/nvmlDeviceGetCount");
		goto fail;
	}
	r = n->f.init();
	if (r != NV_SUCCESS) {
		snprintf(err, errlen, "NVML failed to initialise: %s", nv_error(n, r));
		goto fail;
	}
	if (n->f.driver_version)
		n->f.driver_version(n->t.driver, sizeof(n->t.driver));
	r = n->f.count(&count);
	if (r != NV_SUCCESS) {
		snprintf(err, errlen, "NVML cannot count GPUs: %s", nv_error(n, r));
		n->f.shutdown ? (void)n->f.shutdown() : (void)0;
		goto fail;
	}
	for (unsigned int i = 0; i < count && n->ndev < NVML_MAX_DEVICES; i++) {
		struct dev_state *d = &n->dev[n->ndev];
		struct nv_pci_info pci;

		if (n->f.by_index(i, &d->h) != NV_SUCCESS)
			continue; /* (no permission for this one, say: left out) */
		d->g.index = (int)i;
		d->g.minor = i;
		if (n->f.uuid)
			n->f.uuid(d->h, d->g.uuid, sizeof(d->g.uuid));
		if (n->f.name)
			n->f.name(d->h, d->g.name, sizeof(d->g.name));
		memset(&pci, 0, sizeof(pci));
		if (n->f.pci && n->f.pci(d->h, &pci) == NV_SUCCESS) {
			pci.bus_id[sizeof(pci.bus_id) - 1] = 0;
			gs_strlcpy(d->g.pci_bus_id, pci.bus_id, sizeof(d->g.pci_bus_id));
		}
		if (n->f.minor)
			n->f.minor(d->h, &d->g.minor);
		n->ndev++;
	}
	start_events(n);
	return n;
fail:
	dlclose(n->lib);
	free(n);
	return NULL;
}

/* ---- sampling ----------------------------------------------------------------------------- */

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

/* ---- XID events --------------------------------------------------------------------------- */

static void *event_thread(void *arg)
{
	struct nvml *n = arg;
	unsigned int backoff_ms = 0;

	while (!__atomic_load_n(&n->stop, __ATOMIC_ACQUIRE)) {
		struct nv_event_data e;
		nvret r;

		memset(&e, 0, sizeof(e));
		r = n->f.set_wait(n->set, &e, 1000);
		if (r == NV_TIMEOUT)
			continue;
		if (r != NV_SUCCESS) {
			/* (an NVML fault: back off, 1 s doubling to 30 s) */
			struct timespec ts;

			backoff_ms = backoff_ms ? GS_MIN(backoff_ms * 2, 30000u) : 1000;
			ts.tv_sec = backoff_ms / 1000;
			ts.tv_nsec = (long)(backoff_ms % 1000) * 1000000L;
			nanosleep(&ts, NULL);
			continue;
		}
		backoff_ms = 0;
		if (!(e.event_type & NV_EVENT_XID))
			continue;
		pthread_mutex_lock(&n->lock);
		for (unsigned int i = 0; i < n->ndev; i++) {
			struct dev_state *d = &n->dev[i];

			if (d->h != e.device)
				continue;
			d->g.xid_count++;
			d->g.last_xid = e.event_data;
			d->g.last_xid_realtime_ns = real_ns();
			if (e.event_data == 79) /* fallen off the bus */
				d->g.lost = true;
		}
		pthread_mutex_unlock(&n->lock);
	}
	return NULL;
}

static void start_events(struct nvml *n)
{
	bool any = false;

	if (!n->f.set_create || !n->f.register_events || !n->f.set_wait ||
	    n->f.set_create(&n->set) != NV_SUCCESS)
		return;
	for (unsigned int i = 0; i < n->ndev; i++)
		any |= n->f.register_events(n->dev[i].h, NV_EVENT_XID, n->set) == NV_SUCCESS;
	if (any && pthread_create(&n->events, NULL, event_thread, n) == 0)
		n->events_running = true;
	else if (n->f.set_free)
		n->f.set_free(n->set);
}

/* ---- reading ------------------------------------------------------------------------------ */

unsigned int nvml_snapshot(struct nvml *n, struct nvml_gpu *out, unsigned int max)
{
	unsigned int k = GS_MIN(max, n->ndev);

	pthread_mutex_lock(&n->lock);
	for (unsigned int i = 0; i < k; i++)
		out[i] = n->dev[i].g;
	pthread_mutex_unlock(&n->lock);
	return k;
}

void nvml_close(struct nvml *n)
{
	if (!n)
		return;
	if (n->events_running) {
		__atomic_store_n(&n->stop, true, __ATOMIC_RELEASE);
		pthread_join(n->events, NULL);
		if (n->f.set_free)
			n->f.set_free(n->set);
	}
	for (unsigned int i = 0; i < n->ndev; i++)
		for (int k = 0; k < 2; k++)
			if (n->dev[i].gpm[k] && n->f.gpm_free)
				n->f.gpm_free(n->dev[i].gpm[k]);
	if (n->f.shutdown)
		n->f.shutdown();
	dlclose(n->lib);
	pthread_mutex_destroy(&n->lock);
	free(n);
}
#endif /* !GS_STATIC_BUILD */
