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
#include "nvml/nvml_int.h"

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
