// SPDX-License-Identifier: MIT
/*
 * Test double for libnvidia-ml.so.1: the entry points gpuscope's sampler uses, with values
 * from a script file that the test can rewrite while the agent runs (re-read whenever its
 * modification time changes). FAKENVML_SCRIPT names it; each line is "KEY VALUE":
 *
 *   gpus N                        how many GPUs (default 1)
 *   driver STRING                 nvmlSystemGetDriverVersion
 *   gpuI.FIELD VALUE              a value of GPU I: util, mem_util, mem_total, mem_used,
 *                                 mem_reserved, power_mw, energy_mj, temp, sm_clock,
 *                                 mem_clock, reasons, pstate, ecc_corrected, ecc_uncorrected,
 *                                 remap_corrected, remap_uncorrected, sm_active (percent),
 *                                 tensor_active, dram_active, pcie_tx_mibs, pcie_rx_mibs
 *   gpuI.proc PID BYTES SM MEM    a process on GPU I (repeat the line for more)
 *   gpuI.unsupported NAME,NAME    entry points that answer NOT_SUPPORTED on GPU I
 *   gpuI.fail NAME,NAME           entry points that answer UNKNOWN (an NVML fault)
 *   gpuI.lost 1                   every call on GPU I answers GPU_IS_LOST
 *   gpuI.xid SEQ CODE             deliver XID CODE once per new SEQ
 *   gpuI.gpm 0|1                  GPM supported (default 1)
 *   no_v2 1                       the _v2 entry points are missing (an older library)
 *
 * NAME is an NVML function name without the "nvmlDevice" prefix (GetPowerUsage, ...).
 * FAKENVML_STATS names a file that gets "FUNCTION CALLS" lines at nvmlShutdown.
 * FAKENVML_INIT_FAIL=1: nvmlInit fails (driver not loaded).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT	__attribute__((visibility("default")))
#define MAXGPU	8
#define MAXPROC 32

enum {
	OK = 0,
	UNINITIALIZED = 1,
	INVALID_ARGUMENT = 2,
	NOT_SUPPORTED = 3,
	NOT_FOUND = 6,
	INSUFFICIENT_SIZE = 7,
	DRIVER_NOT_LOADED = 9,
	TIMEOUT = 10,
	GPU_IS_LOST = 15,
	UNKNOWN = 999,
};

struct proc {
	unsigned int pid, sm, mem;
	unsigned long long bytes;
};

struct gpu {
	unsigned long long v[32];
	char unsupported[512], fail[512];
	int lost, gpm_off;
	struct proc procs[MAXPROC];
	int nprocs;
	unsigned long long xid_seq, xid_code, xid_delivered;
};

enum {
	V_UTIL,
	V_MEM_UTIL,
	V_MEM_TOTAL,
	V_MEM_USED,
	V_MEM_RESERVED,
	V_POWER,
	V_ENERGY,
	V_TEMP,
	V_SM_CLOCK,
	V_MEM_CLOCK,
	V_REASONS,
	V_PSTATE,
	V_ECC_C,
	V_ECC_U,
	V_REMAP_C,
	V_REMAP_U,
	V_SM_ACTIVE,
	V_TENSOR,
	V_DRAM,
	V_PCIE_TX,
	V_PCIE_RX,
	V_COUNT
};

static const char *const vnames[V_COUNT] = {
	"util",		 "mem_util",	    "mem_total",       "mem_used",
	"mem_reserved",	 "power_mw",	    "energy_mj",       "temp",
	"sm_clock",	 "mem_clock",	    "reasons",	       "pstate",
	"ecc_corrected", "ecc_uncorrected", "remap_corrected", "remap_uncorrected",
	"sm_active",	 "tensor_active",   "dram_active",     "pcie_tx_mibs",
	"pcie_rx_mibs",
};

static struct {
	pthread_mutex_t lock;
	int ngpu, initialized, no_v2;
	char driver[80];
	struct gpu g[MAXGPU];
	time_t mtime;
	long mtime_ns;
	/* call counts, by name */
	char names[64][64];
	unsigned long calls[64];
	int nnames;
} S = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void count(const char *fn)
{
	int i;

	for (i = 0; i < S.nnames; i++)
		if (!strcmp(S.names[i], fn))
			break;
	if (i == S.nnames && S.nnames < 64)
		snprintf(S.names[S.nnames++], sizeof(S.names[0]), "%s", fn);
	if (i < 64)
		S.calls[i]++;
}

static void defaults(void)
{
	S.ngpu = 1;
	snprintf(S.driver, sizeof(S.driver), "580.00-fake");
	for (int i = 0; i < MAXGPU; i++) {
		memset(&S.g[i], 0, sizeof(S.g[i]));
		S.g[i].v[V_MEM_TOTAL] = 80ULL << 30;
		S.g[i].v[V_PSTATE] = 0;
	}
}

/* Re-read the script when it changed. Under the lock. */
static void load(void)
{
	const char *path = getenv("FAKENVML_SCRIPT");
	char line[512];
	struct stat st;
	FILE *f;

	if (!path || stat(path, &st))
		return;
	if (st.st_mtim.tv_sec == S.mtime && st.st_mtim.tv_nsec == S.mtime_ns)
		return;
	f = fopen(path, "r");
	if (!f)
		return;
	S.mtime = st.st_mtim.tv_sec;
	S.mtime_ns = st.st_mtim.tv_nsec;
	{
		/* keep what XIDs were delivered across reloads */
		unsigned long long delivered[MAXGPU];

		for (int i = 0; i < MAXGPU; i++)
			delivered[i] = S.g[i].xid_delivered;
		defaults();
		for (int i = 0; i < MAXGPU; i++)
			S.g[i].xid_delivered = delivered[i];
	}
	while (fgets(line, sizeof(line), f)) {
		char key[128], val[384];
		unsigned int i;

		if (sscanf(line, "%127s %383[^\n]", key, val) != 2)
			continue;
		if (!strcmp(key, "gpus")) {
			S.ngpu = atoi(val) < 0 ? 0 : atoi(val) > MAXGPU ? MAXGPU : atoi(val);
		} else if (!strcmp(key, "driver")) {
			snprintf(S.driver, sizeof(S.driver), "%.79s", val);
		} else if (!strcmp(key, "no_v2")) {
			S.no_v2 = atoi(val);
		} else if (sscanf(key, "gpu%u.", &i) == 1 && i < MAXGPU) {
			struct gpu *g = &S.g[i];
			const char *field = strchr(key, '.') + 1;

			if (!strcmp(field, "proc") && g->nprocs < MAXPROC) {
				struct proc *p = &g->procs[g->nprocs];

				if (sscanf(val, "%u %llu %u %u", &p->pid, &p->bytes, &p->sm,
					   &p->mem) == 4)
					g->nprocs++;
			} else if (!strcmp(field, "unsupported")) {
				snprintf(g->unsupported, sizeof(g->unsupported), ",%s,", val);
			} else if (!strcmp(field, "fail")) {
				snprintf(g->fail, sizeof(g->fail), ",%s,", val);
			} else if (!strcmp(field, "lost")) {
				g->lost = atoi(val);
			} else if (!strcmp(field, "gpm")) {
				g->gpm_off = !atoi(val);
			} else if (!strcmp(field, "xid")) {
				sscanf(val, "%llu %llu", &g->xid_seq, &g->xid_code);
			} else {
				for (int k = 0; k < V_COUNT; k++)
					if (!strcmp(field, vnames[k]))
						g->v[k] = strtoull(val, NULL, 0);
			}
		}
	}
	fclose(f);
}

/* A device handle is a pointer into S.g. */
static struct gpu *gpu_of(void *h, int *idx)
{
	struct gpu *g = h;

	if (g < S.g || g >= S.g + MAXGPU)
		return NULL;
	*idx = (int)(g - S.g);
	return *idx < S.ngpu ? g : NULL;
}

static int listed(const char *list, const char *fn)
{
	char k[80];

	snprintf(k, sizeof(k), ",%s,", fn);
	return strstr(list, k) != NULL;
}

/* Enter a device call: the script's answer for it, or OK to go on. Takes the lock. */
static int enter(void *h, const char *fn, struct gpu **out)
{
	int idx;
	struct gpu *g;

	pthread_mutex_lock(&S.lock);
	count(fn);
	load();
	if (!S.initialized)
		return UNINITIALIZED;
	g = gpu_of(h, &idx);
	if (!g)
		return INVALID_ARGUMENT;
	if (g->lost)
		return GPU_IS_LOST;
	if (listed(g->unsupported, fn))
		return NOT_SUPPORTED;
	if (listed(g->fail, fn))
		return UNKNOWN;
	*out = g;
	return OK;
}

#define DEVCALL(h, fn, ...)                    \
	do {                                   \
		struct gpu *g = NULL;          \
		int r_ = enter(h, fn, &g);     \
		if (r_ == OK) {                \
			__VA_ARGS__;           \
		}                              \
		pthread_mutex_unlock(&S.lock); \
		return r_;                     \
	} while (0)

EXPORT int nvmlInit_v2(void)
{
	pthread_mutex_lock(&S.lock);
	count("nvmlInit_v2");
	if (getenv("FAKENVML_INIT_FAIL")) {
		pthread_mutex_unlock(&S.lock);
		return DRIVER_NOT_LOADED;
	}
	if (!S.ngpu && !S.mtime)
		defaults();
	S.mtime = 0;
	S.mtime_ns = 0;
	load();
	S.initialized = 1;
	pthread_mutex_unlock(&S.lock);
	return OK;
}

EXPORT int nvmlShutdown(void)
{
	const char *path = getenv("FAKENVML_STATS");

	pthread_mutex_lock(&S.lock);
	if (path) {
		FILE *f = fopen(path, "w");

		for (int i = 0; f && i < S.nnames; i++)
			fprintf(f, "%s %lu\n", S.names[i], S.calls[i]);
		if (f)
			fclose(f);
	}
	S.initialized = 0;
	pthread_mutex_unlock(&S.lock);
	return OK;
}

EXPORT const char *nvmlErrorString(int r)
{
	switch (r) {
	case OK:
		return "Success";
	case NOT_SUPPORTED:
		return "Not Supported";
	case DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	case GPU_IS_LOST:
		return "GPU is lost";
	case TIMEOUT:
		return "Timeout";
	default:
		return "Unknown Error";
	}
}

EXPORT int nvmlSystemGetDriverVersion(char *buf, unsigned int len)
{
	pthread_mutex_lock(&S.lock);
	load();
	snprintf(buf, len, "%s", S.driver);
	pthread_mutex_unlock(&S.lock);
	return OK;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned int *n)
{
	pthread_mutex_lock(&S.lock);
	count("nvmlDeviceGetCount_v2");
	load();
	*n = (unsigned int)S.ngpu;
	pthread_mutex_unlock(&S.lock);
	return S.initialized ? OK : UNINITIALIZED;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h)
{
	if (i >= (unsigned int)S.ngpu)
		return INVALID_ARGUMENT;
	*h = &S.g[i];
	return OK;
}

EXPORT int nvmlDeviceGetUUID(void *h, char *buf, unsigned int len)
{
	DEVCALL(h, "GetUUID",
		snprintf(buf, len, "GPU-fake0000-0000-0000-0000-00000000000%d", (int)(g - S.g)));
}

EXPORT int nvmlDeviceGetName(void *h, char *buf, unsigned int len)
{
	DEVCALL(h, "GetName", snprintf(buf, len, "gpuscope NVML test double"));
}

struct pci_info {
	char bus_id_legacy[16];
	unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

EXPORT int nvmlDeviceGetPciInfo_v3(void *h, struct pci_info *p)
{
	DEVCALL(h, "GetPciInfo_v3", {
		memset(p, 0, sizeof(*p));
		p->bus = (unsigned int)(g - S.g) + 0x18;
		snprintf(p->bus_id, sizeof(p->bus_id), "00000000:%02X:00.0", p->bus);
	});
}

EXPORT int nvmlDeviceGetMinorNumber(void *h, unsigned int *m)
{
	DEVCALL(h, "GetMinorNumber", *m = (unsigned int)(g - S.g));
}

EXPORT int nvmlDeviceGetUtilizationRates(void *h, unsigned int u[2])
{
	DEVCALL(h, "GetUtilizationRates", {
		u[0] = (unsigned int)g->v[V_UTIL];
		u[1] = (unsigned int)g->v[V_MEM_UTIL];
	});
}

struct mem_v2 {
	unsigned int version;
	unsigned long long total, reserved, free, used;
};

static int memory_v2(void *h, struct mem_v2 *m)
{
	if (S.no_v2)
		return NOT_SUPPORTED;
	DEVCALL(h, "GetMemoryInfo_v2", {
		if (m->version != (unsigned int)(sizeof(*m) | (2u << 24))) {
			r_ = INVALID_ARGUMENT;
		} else {
			m->total = g->v[V_MEM_TOTAL];
			m->reserved = g->v[V_MEM_RESERVED];
			m->used = g->v[V_MEM_USED];
			m->free = m->total - m->used - m->reserved;
		}
	});
}

EXPORT int nvmlDeviceGetMemoryInfo_v2(void *h, struct mem_v2 *m)
{
	return memory_v2(h, m);
}

EXPORT int nvmlDeviceGetMemoryInfo(void *h, unsigned long long m[3])
{
	DEVCALL(h, "GetMemoryInfo", {
		m[0] = g->v[V_MEM_TOTAL];
		m[2] = g->v[V_MEM_USED];
		m[1] = m[0] - m[2];
	});
}

EXPORT int nvmlDeviceGetPowerUsage(void *h, unsigned int *mw)
{
	DEVCALL(h, "GetPowerUsage", *mw = (unsigned int)g->v[V_POWER]);
}

EXPORT int nvmlDeviceGetTotalEnergyConsumption(void *h, unsigned long long *mj)
{
	DEVCALL(h, "GetTotalEnergyConsumption", *mj = g->v[V_ENERGY]);
}

EXPORT int nvmlDeviceGetTemperature(void *h, int sensor, unsigned int *t)
{
	DEVCALL(h, "GetTemperature", {
		if (sensor != 0)
			r_ = INVALID_ARGUMENT;
		else
			*t = (unsigned int)g->v[V_TEMP];
	});
}

EXPORT int nvmlDeviceGetClockInfo(void *h, int type, unsigned int *mhz)
{
	DEVCALL(h, "GetClockInfo",
		*mhz = (unsigned int)(type == 1 ? g->v[V_SM_CLOCK] : g->v[V_MEM_CLOCK]));
}

EXPORT int nvmlDeviceGetCurrentClocksEventReasons(void *h, unsigned long long *r)
{
	DEVCALL(h, "GetCurrentClocksEventReasons", *r = g->v[V_REASONS]);
}

EXPORT int nvmlDeviceGetPerformanceState(void *h, int *p)
{
	DEVCALL(h, "GetPerformanceState", *p = (int)g->v[V_PSTATE]);
}

struct proc_info {
	unsigned int pid;
	unsigned long long used;
	unsigned int gi, ci;
};

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *n, struct proc_info *p)
{
	DEVCALL(h, "GetComputeRunningProcesses_v3", {
		if (*n < (unsigned int)g->nprocs) {
			*n = (unsigned int)g->nprocs;
			r_ = INSUFFICIENT_SIZE;
		} else {
			for (int i = 0; i < g->nprocs; i++)
				p[i] = (struct proc_info){ g->procs[i].pid, g->procs[i].bytes,
							   0xffffffffu, 0xffffffffu };
			*n = (unsigned int)g->nprocs;
		}
	});
}

struct util_sample {
	unsigned int pid;
	unsigned long long ts;
	unsigned int sm, mem, enc, dec;
};

EXPORT int nvmlDeviceGetProcessUtilization(void *h, struct util_sample *s, unsigned int *n,
					   unsigned long long last)
{
	(void)last;
	DEVCALL(h, "GetProcessUtilization", {
		int k = 0;

		for (int i = 0; i < g->nprocs; i++)
			if ((g->procs[i].sm || g->procs[i].mem) && k < (int)*n)
				s[k++] = (struct util_sample){ g->procs[i].pid, 1, g->procs[i].sm,
							       g->procs[i].mem, 0, 0 };
		*n = (unsigned int)k;
		if (!k)
			r_ = NOT_FOUND;
	});
}

EXPORT int nvmlDeviceGetTotalEccErrors(void *h, int type, int counter, unsigned long long *c)
{
	(void)counter;
	DEVCALL(h, "GetTotalEccErrors", *c = type ? g->v[V_ECC_U] : g->v[V_ECC_C]);
}

EXPORT int nvmlDeviceGetRemappedRows(void *h, unsigned int *c, unsigned int *u, unsigned int *p,
				     unsigned int *f)
{
	DEVCALL(h, "GetRemappedRows", {
		*c = (unsigned int)g->v[V_REMAP_C];
		*u = (unsigned int)g->v[V_REMAP_U];
		*p = 0;
		*f = 0;
	});
}

EXPORT int nvmlDeviceGetPcieThroughput(void *h, int counter, unsigned int *kbs)
{
	DEVCALL(h, "GetPcieThroughput",
		*kbs = (unsigned int)((counter ? g->v[V_PCIE_RX] : g->v[V_PCIE_TX]) * 1024));
}

/* ---- GPM: a sample is a copy of the GPU's activity values at the time ----------------- */

struct gpm_sample {
	unsigned long long v[V_COUNT];
};

struct gpm_support {
	unsigned int version, supported;
};

EXPORT int nvmlGpmQueryDeviceSupport(void *h, struct gpm_support *s)
{
	DEVCALL(h, "GpmQueryDeviceSupport", s->supported = !g->gpm_off);
}

EXPORT int nvmlGpmSampleAlloc(struct gpm_sample **s)
{
	*s = calloc(1, sizeof(**s));
	return *s ? OK : UNKNOWN;
}

EXPORT int nvmlGpmSampleFree(struct gpm_sample *s)
{
	free(s);
	return OK;
}

EXPORT int nvmlGpmSampleGet(void *h, struct gpm_sample *s)
{
	DEVCALL(h, "GpmSampleGet", {
		if (g->gpm_off)
			r_ = NOT_SUPPORTED;
		else
			memcpy(s->v, g->v, sizeof(s->v));
	});
}

struct gpm_metric {
	unsigned int id;
	int ret;
	double value;
	char *a, *b, *c;
};

struct gpm_get {
	unsigned int version, n;
	struct gpm_sample *s1, *s2;
	struct gpm_metric m[];
};

/* The value over the interval: the later sample's (the script sets the rates). */
EXPORT int nvmlGpmMetricsGet(struct gpm_get *q)
{
	pthread_mutex_lock(&S.lock);
	count("GpmMetricsGet");
	pthread_mutex_unlock(&S.lock);
	if (!q || q->version != 1 || !q->s1 || !q->s2)
		return INVALID_ARGUMENT;
	for (unsigned int i = 0; i < q->n; i++) {
		const unsigned long long *v = q->s2->v;

		q->m[i].ret = OK;
		switch (q->m[i].id) {
		case 1:
			q->m[i].value = (double)v[V_SM_ACTIVE];
			break;
		case 2:
			q->m[i].value = (double)v[V_SM_ACTIVE];
			break;
		case 3:
			q->m[i].value = (double)v[V_SM_ACTIVE] / 2;
			break;
		case 5:
			q->m[i].value = (double)v[V_TENSOR];
			break;
		case 10:
			q->m[i].value = (double)v[V_DRAM];
			break;
		case 20:
			q->m[i].value = (double)v[V_PCIE_TX];
			break;
		case 21:
			q->m[i].value = (double)v[V_PCIE_RX];
			break;
		case 60:
		case 61:
			q->m[i].value = 0;
			break;
		default:
			q->m[i].ret = NOT_SUPPORTED;
			break;
		}
	}
	return OK;
}

/* ---- events ------------------------------------------------------------------------------ */

struct event_data {
	void *device;
	unsigned long long type, data;
	unsigned int gi, ci;
};

static int event_set; /* one set suffices */

EXPORT int nvmlEventSetCreate(void **set)
{
	*set = &event_set;
	return OK;
}

EXPORT int nvmlEventSetFree(void *set)
{
	(void)set;
	return OK;
}

EXPORT int nvmlDeviceRegisterEvents(void *h, unsigned long long mask, void *set)
{
	(void)mask;
	(void)set;
	DEVCALL(h, "RegisterEvents", (void)g);
}

EXPORT int nvmlEventSetWait_v2(void *set, struct event_data *e, unsigned int timeout_ms)
{
	(void)set;
	/* Poll the script every 10 ms up to the timeout. */
	for (unsigned int waited = 0; waited <= timeout_ms; waited += 10) {
		pthread_mutex_lock(&S.lock);
		load();
		for (int i = 0; i < S.ngpu; i++) {
			struct gpu *g = &S.g[i];

			if (g->xid_seq > g->xid_delivered) {
				g->xid_delivered = g->xid_seq;
				e->device = g;
				e->type = 0x8;
				e->data = g->xid_code;
				pthread_mutex_unlock(&S.lock);
				return OK;
			}
		}
		pthread_mutex_unlock(&S.lock);
		usleep(10000);
	}
	return TIMEOUT;
}
