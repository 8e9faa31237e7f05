// SPDX-License-Identifier: MIT
/*
 * gpuscope exporter: a node agent serving Prometheus metrics. A sampler thread reads NVML
 * (tiered: see nvml/nvml.h) and renders the whole exposition into a buffer; scrapes are
 * served from the latest buffer by libmicrohttpd, so a slow or vanished scraper never holds
 * up sampling, and sampling never holds up a scrape.
 *
 * Device metrics carry the DCGM exporter's names and labels (gpu, UUID, pci_bus_id, device,
 * modelName, Hostname), so that dashboards made for it work; gpuscope's own are gpuscope_*.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "cmd/common.h"
#include "cmd/exporter.h"
#include "core/util.h"
#include "nvml/nvml.h"
#include "sink/httpd.h"
#include "sink/prometheus.h"
#include "version.h"

#define DEFAULT_LISTEN "127.0.0.1:9491"

struct exporter {
	/* options */
	double interval_s;
	unsigned int slow_every;
	bool no_nvml;
	/* The DCGM exporter's exact label names (UUID, modelName, Hostname) and counter types;
	 * else Prometheus's conventions (what promtool's lint wants): uuid, model_name,
	 * hostname, and its counters without a _total suffix untyped. */
	bool dcgm_labels;
	bool no_ebpf;
	unsigned int top_kernels;
	double retain_s;
	char *libs[16];
	int nlibs;
	const char *inject_dir;
	/* state */
	struct xtrace *xt;
	struct nvml *nvml;
	char nvml_error[256];
	char hostname[256];
	pthread_mutex_t lock; /* page, samples */
	struct strbuf page;   /* the latest rendering */
	struct httpd *httpd;
	__u64 scrapes, samples, client_errors;
	double last_sample_s; /* how long the latest sample and rendering took */
	volatile sig_atomic_t stop;
};

static volatile sig_atomic_t *stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	if (stop_flag)
		*stop_flag = 1;
}

static double now_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- rendering ---------------------------------------------------------------------------- */

struct gpu_labels {
	char gpu[16], device[32];
	struct prom_labels ls;
};

static void identity(const struct exporter *ex, const struct nvml_gpu *g, struct gpu_labels *gl)
{
	snprintf(gl->gpu, sizeof(gl->gpu), "%d", g->index);
	snprintf(gl->device, sizeof(gl->device), "nvidia%u", g->minor);
	gl->ls.n = 0;
	prom_labels_add(&gl->ls, "gpu", gl->gpu);
	prom_labels_add(&gl->ls, ex->dcgm_labels ? "UUID" : "uuid", g->uuid);
	prom_labels_add(&gl->ls, "pci_bus_id", g->pci_bus_id);
	prom_labels_add(&gl->ls, "device", gl->device);
	prom_labels_add(&gl->ls, ex->dcgm_labels ? "modelName" : "model_name", g->name);
	prom_labels_add(&gl->ls, ex->dcgm_labels ? "Hostname" : "hostname", ex->hostname);
}

/* A value of one field for every GPU that has it (series of a failed field are left out,
 * not shown as 0). */
typedef double (*field_fn)(const struct nvml_gpu *g);

static bool dcgm_mode;

static void device_family(struct strbuf *sb, const struct gpu_labels *gl, const struct nvml_gpu *g,
			  unsigned int n, const char *name, const char *type, const char *help,
			  enum nvml_field f, field_fn fn)
{
	bool any = false;

	/* The DCGM exporter's counters have no _total suffix, which Prometheus's lint wants:
	 * untyped, unless its exact output is asked for. (PromQL's rate() takes either.) */
	if (!strcmp(type, "counter") && !dcgm_mode)
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

static double f_util(const struct nvml_gpu *g)
{
	return g->util_gpu;
}
static double f_mem_util(const struct nvml_gpu *g)
{
	return g->util_mem;
}
static double f_fb_free(const struct nvml_gpu *g)
{
	return (double)g->mem_free / 1048576.0;
}
static double f_fb_used(const struct nvml_gpu *g)
{
	return (double)g->mem_used / 1048576.0;
}
static double f_fb_reserved(const struct nvml_gpu *g)
{
	return (double)g->mem_reserved / 1048576.0;
}
static double f_fb_total(const struct nvml_gpu *g)
{
	return (double)g->mem_total;
}
static double f_power(const struct nvml_gpu *g)
{
	return g->power_mw / 1000.0;
}
static double f_energy(const struct nvml_gpu *g)
{
	return (double)g->energy_mj;
}
static double f_temp(const struct nvml_gpu *g)
{
	return g->temp_c;
}
static double f_sm_clock(const struct nvml_gpu *g)
{
	return g->clock_sm_mhz;
}
static double f_mem_clock(const struct nvml_gpu *g)
{
	return g->clock_mem_mhz;
}
static double f_reasons(const struct nvml_gpu *g)
{
	return (double)g->clock_reasons;
}
static double f_pstate(const struct nvml_gpu *g)
{
	return g->pstate;
}
static double f_sm_active(const struct nvml_gpu *g)
{
	return g->sm_active;
}
static double f_sm_occupancy(const struct nvml_gpu *g)
{
	return g->sm_occupancy;
}
static double f_tensor(const struct nvml_gpu *g)
{
	return g->tensor_active;
}
static double f_dram(const struct nvml_gpu *g)
{
	return g->dram_active;
}
static double f_gr(const struct nvml_gpu *g)
{
	return g->gr_active;
}
static double f_pcie_tx(const struct nvml_gpu *g)
{
	return g->pcie_tx_bps;
}
static double f_pcie_rx(const struct nvml_gpu *g)
{
	return g->pcie_rx_bps;
}
static double f_nvlink_tx(const struct nvml_gpu *g)
{
	return g->nvlink_tx_bps;
}
static double f_nvlink_rx(const struct nvml_gpu *g)
{
	return g->nvlink_rx_bps;
}
static double f_ecc_c(const struct nvml_gpu *g)
{
	return (double)g->ecc_corrected;
}
static double f_ecc_u(const struct nvml_gpu *g)
{
	return (double)g->ecc_uncorrected;
}
static double f_remap_c(const struct nvml_gpu *g)
{
	return g->remap_corrected;
}
static double f_remap_u(const struct nvml_gpu *g)
{
	return g->remap_uncorrected;
}
static double f_remap_fail(const struct nvml_gpu *g)
{
	return g->remap_failure;
}

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

static void device_metrics(struct exporter *ex, struct strbuf *sb)
{
	static struct nvml_gpu g[NVML_MAX_DEVICES];
	static struct gpu_labels gl[NVML_MAX_DEVICES];
	struct nvml_call_stat st[NF_COUNT];
	unsigned int n = nvml_snapshot(ex->nvml, g, NVML_MAX_DEVICES);
	bool any;

	dcgm_mode = ex->dcgm_labels;
	for (unsigned int i = 0; i < n; i++)
		identity(ex, &g[i], &gl[i]);
	for (size_t i = 0; i < ARRAY_SIZE(device_fields); i++)
		device_family(sb, gl, g, n, device_fields[i].name, device_fields[i].type,
			      device_fields[i].help, device_fields[i].field, device_fields[i].fn);
	/* XIDs: the last one as the DCGM exporter has it, and a count of them. */
	prom_family(sb, "DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error seen.");
	for (unsigned int i = 0; i < n; i++)
		prom_sample(sb, "DCGM_FI_DEV_XID_ERRORS", &gl[i].ls, NULL, NULL,
			    (double)g[i].last_xid);
	prom_family(sb, "gpuscope_xid_errors_total", "counter",
		    "XID errors reported by the driver since the agent started.");
	for (unsigned int i = 0; i < n; i++)
		prom_sample(sb, "gpuscope_xid_errors_total", &gl[i].ls, NULL, NULL,
			    (double)g[i].xid_count);
	prom_family(sb, "gpuscope_gpu_lost", "gauge",
		    "1 if the GPU fell off the bus (NVML: GPU is lost, or XID 79); it is no "
		    "longer sampled.");
	for (unsigned int i = 0; i < n; i++)
		prom_sample(sb, "gpuscope_gpu_lost", &gl[i].ls, NULL, NULL, g[i].lost);
	/* Per process, from NVML's process list (slow tier). */
	any = false;
	for (unsigned int i = 0; i < n; i++) {
		for (unsigned int k = 0; k < g[i].nprocs && (g[i].have & (1u << NF_PROCS)); k++) {
			char pid[16];

			if (g[i].procs[k].used_bytes == ~0ULL)
				continue;
			if (!any)
				prom_family(sb, "gpuscope_gpu_process_memory_bytes", "gauge",
					    "GPU memory a process uses (NVML).");
			any = true;
			snprintf(pid, sizeof(pid), "%u", g[i].procs[k].pid);
			prom_sample(sb, "gpuscope_gpu_process_memory_bytes", &gl[i].ls, "pid", pid,
				    (double)g[i].procs[k].used_bytes);
		}
	}
	any = false;
	for (unsigned int i = 0; i < n; i++) {
		for (unsigned int k = 0; k < g[i].nprocs && (g[i].have & (1u << NF_PROC_UTIL));
		     k++) {
			char pid[16];

			if (g[i].procs[k].sm_util < 0)
				continue;
			if (!any)
				prom_family(sb, "gpuscope_gpu_process_sm_utilization_ratio",
					    "gauge",
					    "Ratio of time a process had a kernel running (NVML).");
			any = true;
			snprintf(pid, sizeof(pid), "%u", g[i].procs[k].pid);
			prom_sample(sb, "gpuscope_gpu_process_sm_utilization_ratio", &gl[i].ls,
				    "pid", pid, g[i].procs[k].sm_util / 100.0);
		}
	}
	/* What NVML costs us, per field. */
	nvml_call_stats(ex->nvml, st);
	prom_family(sb, "gpuscope_nvml_calls_total", "counter", "NVML calls made, by field.");
	for (int f = 0; f < NF_COUNT; f++)
		if (st[f].calls)
			prom_sample(sb, "gpuscope_nvml_calls_total", NULL, "field",
				    nvml_field_name((enum nvml_field)f), (double)st[f].calls);
	prom_family(sb, "gpuscope_nvml_call_seconds_total", "counter",
		    "Time spent in NVML calls, by field.");
	for (int f = 0; f < NF_COUNT; f++)
		if (st[f].calls)
			prom_sample(sb, "gpuscope_nvml_call_seconds_total", NULL, "field",
				    nvml_field_name((enum nvml_field)f), st[f].total_ns / 1e9);
	prom_family(sb, "gpuscope_nvml_errors_total", "counter",
		    "NVML calls that failed at run time, by field.");
	for (int f = 0; f < NF_COUNT; f++)
		if (st[f].calls)
			prom_sample(sb, "gpuscope_nvml_errors_total", NULL, "field",
				    nvml_field_name((enum nvml_field)f), (double)st[f].errors);
}

/* The agent's own CPU time and memory, under the names client libraries use. */
static void self_metrics(struct exporter *ex, struct strbuf *sb, double sample_s)
{
	struct rusage ru;
	long rss_pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		long size;

		if (fscanf(f, "%ld %ld", &size, &rss_pages) != 2)
			rss_pages = 0;
		fclose(f);
	}
	getrusage(RUSAGE_SELF, &ru);
	prom_family(sb, "process_cpu_seconds_total", "counter",
		    "User and system CPU time of the agent.");
	prom_sample(sb, "process_cpu_seconds_total", NULL, NULL, NULL,
		    (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
			    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
	prom_family(sb, "process_resident_memory_bytes", "gauge", "Resident memory of the agent.");
	prom_sample(sb, "process_resident_memory_bytes", NULL, NULL, NULL,
		    (double)rss_pages * (double)sysconf(_SC_PAGESIZE));
	prom_family(sb, "gpuscope_nvml_up", "gauge",
		    "1 if NVML is loaded and answering, 0 if not (see the agent's log).");
	prom_sample(sb, "gpuscope_nvml_up", NULL, NULL, NULL, ex->nvml != NULL);
	prom_family(sb, "gpuscope_exporter_samples_total", "counter", "Samples taken.");
	prom_sample(sb, "gpuscope_exporter_samples_total", NULL, NULL, NULL, (double)ex->samples);
	prom_family(sb, "gpuscope_exporter_scrapes_total", "counter",
		    "Scrapes served (this one included).");
	prom_sample(sb, "gpuscope_exporter_scrapes_total", NULL, NULL, NULL,
		    (double)__atomic_load_n(&ex->scrapes, __ATOMIC_RELAXED) + 1);
	prom_family(sb, "gpuscope_exporter_sample_duration_seconds", "gauge",
		    "How long the latest sample and its rendering took.");
	prom_sample(sb, "gpuscope_exporter_sample_duration_seconds", NULL, NULL, NULL, sample_s);
	prom_family(sb, "gpuscope_exporter_connections_cut_total", "counter",
		    "HTTP connections the agent cut: no request within " GS_STR(
			    HTTPD_DEADLINE_S) " s of their start or of their previous response (a "
					      "peer that trickles bytes to "
					      "hold a connection open), or a response not taken in "
					      "30 s.");
	prom_sample(sb, "gpuscope_exporter_connections_cut_total", NULL, NULL, NULL,
		    ex->httpd ? (double)httpd__cut(ex->httpd) : 0);
	prom_family(sb, "gpuscope_build_info", "gauge", "The agent's version.");
	prom_sample(sb, "gpuscope_build_info", NULL, "version", GS_VERSION, 1);
}

static void render(struct exporter *ex, struct strbuf *sb, double sample_s)
{
	sb_reset(sb);
	if (ex->nvml)
		device_metrics(ex, sb);
	if (ex->xt)
		xtrace_render(ex->xt, sb);
	self_metrics(ex, sb, sample_s);
}

/* ---- sampling ----------------------------------------------------------------------------- */

static void *sampler(void *arg)
{
	struct exporter *ex = arg;
	struct strbuf next = { 0 };

	while (!ex->stop) {
		double t0 = now_s(CLOCK_MONOTONIC), left;

		if (ex->nvml)
			nvml_sample(ex->nvml, ex->slow_every);
		ex->samples++;
		render(ex, &next, ex->last_sample_s);
		pthread_mutex_lock(&ex->lock);
		{
			struct strbuf t = ex->page;

			ex->page = next;
			next = t;
		}
		ex->last_sample_s = now_s(CLOCK_MONOTONIC) - t0;
		pthread_mutex_unlock(&ex->lock);
		for (left = ex->interval_s - (now_s(CLOCK_MONOTONIC) - t0); left > 0 && !ex->stop;
		     left -= 0.05)
			usleep(left > 0.05 ? 50000 : (useconds_t)(left * 1e6));
	}
	sb_free(&next);
	return NULL;
}

/* ---- serving ------------------------------------------------------------------------------ */

static void respond(void *ctx, const char *url, struct httpd_reply *r)
{
	struct exporter *ex = ctx;
	static const char index_page[] =
		"<html><head><title>gpuscope exporter</title></head><body>"
		"<h1>gpuscope exporter</h1><p><a href=\"/metrics\">metrics</a></p></body></html>\n";

	if (!strcmp(url, "/metrics")) {
		pthread_mutex_lock(&ex->lock);
		httpd_reply(r, 200, PROM_CONTENT_TYPE, ex->page.buf ? ex->page.buf : "",
			    ex->page.len);
		pthread_mutex_unlock(&ex->lock);
		__atomic_add_fetch(&ex->scrapes, 1, __ATOMIC_RELAXED);
	} else if (!strcmp(url, "/healthz")) {
		httpd_reply(r, 200, "text/plain", "ok\n", 3);
	} else if (!strcmp(url, "/")) {
		httpd_reply(r, 200, "text/html", index_page, sizeof(index_page) - 1);
	} else {
		httpd_reply(r, 404, "text/plain", "not found: try /metrics\n", 24);
	}
}

/* Parse ADDR:PORT ([ADDR]:PORT for IPv6) and bind a listening socket. -1: usage error
 * (message printed), -2: runtime error (printed). */
static int listen_on(const char *spec, struct sockaddr_storage *ss, int *fd_out)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	socklen_t len;
	__u32 port;
	int fd, one = 1;

	memset(ss, 0, sizeof(*ss));
	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host) ||
	    parse_u32(colon + 1, &port) || port == 0 || port > 65535) {
		gs_err("exporter: --listen wants ADDR:PORT (e.g. 127.0.0.1:9491 or [::]:9491), "
		       "not '%s'",
		       spec);
		return -1;
	}
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = 0;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host) - 2);
		host[strlen(host) - 2] = 0;
	}
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((unsigned short)port);
		len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((unsigned short)port);
		len = sizeof(*in6);
	} else {
		gs_err("exporter: --listen: '%s' is not an IPv4 or IPv6 address", host);
		return -1;
	}
	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		gs_err("exporter: cannot make a socket: %s", strerror(errno));
		return -2;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)ss, len) || listen(fd, 64)) {
		gs_err("exporter: cannot listen on %s: %s%s", spec, strerror(errno),
		       errno == EADDRINUSE ? " (another exporter? --listen another port)" : "");
		close(fd);
		return -2;
	}
	*fd_out = fd;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpuscope exporter [options]\n\n"
		"Serve Prometheus metrics of this node's GPUs at /metrics: device metrics under\n"
		"the DCGM exporter's names and labels (so its dashboards work), per-process GPU\n"
		"memory and utilisation, XID errors, and what the agent itself costs.\n\n"
		"options:\n"
		"  -l, --listen ADDR:PORT  where to serve (default " DEFAULT_LISTEN
		"; [::]:PORT or\n"
		"                          0.0.0.0:PORT to expose it)\n"
		"  -i, --interval SECONDS  how often to sample the GPUs (default 1)\n"
		"      --slow-every N      process lists, ECC and row remapping every Nth sample\n"
		"                          (default 10)\n"
		"      --dcgm-labels       the DCGM exporter's exact label names (UUID, "
		"modelName,\n"
		"                          Hostname) and counter types, for dashboards keyed on\n"
		"                          them (default: uuid, model_name, hostname, as\n"
		"                          Prometheus's conventions have them)\n"
		"      --no-nvml           no device metrics\n"
		"      --no-ebpf           no per-process metrics from eBPF probes (they need "
		"root)\n"
		"      --lib PATH          also probe this CUDA/NCCL library from the start (the\n"
		"                          system's libcuda is; others when first opened)\n"
		"      --top-kernels N     kernels named per process, the rest as \"other\" (10)\n"
		"      --retain SECONDS    how long an exited process's series stay (default 60)\n"
		"      --inject-dir DIR    read the in-process plane of programs that preload\n"
		"                          DIR/libgpuscope-inject.so with "
		"GPUSCOPE_INJECT_DIR=DIR:\n"
		"                          GPU time per kernel (written there, with DIR made\n"
		"                          sticky and writable by all, as /tmp)\n"
		"  -h, --help              this help\n\n"
		"examples:\n"
		"  gpuscope exporter\n"
		"  gpuscope exporter --listen 0.0.0.0:9491 --interval 5\n"
		"  curl -s localhost:9491/metrics | grep DCGM_FI_DEV_GPU_UTIL\n");
}

int cmd_exporter(int argc, char **argv)
{
	static const struct option opts[] = {
		OPT_ARG("listen", 'l'),	      OPT_ARG("interval", 'i'),
		OPT_ARG("slow-every", 'S'),   OPT_FLAG("no-nvml", 'N'),
		OPT_FLAG("dcgm-labels", 'D'), OPT_FLAG("no-ebpf", 'E'),
		OPT_ARG("lib", 'L'),	      OPT_ARG("top-kernels", 'K'),
		OPT_ARG("retain", 'R'),	      OPT_ARG("inject-dir", 'J'),
		OPT_FLAG("help", 'h'),	      { NULL, 0, NULL, 0 },
	};
	struct exporter ex = {
		.interval_s = 1, .slow_every = 10, .top_kernels = 10, .retain_s = 60
	};
	const char *listen_spec = DEFAULT_LISTEN;
	struct sockaddr_storage ss;
	struct httpd *d;
	struct sigaction sa;
	char err[256];
	pthread_t th;
	int opt, fd = -1, r;

	optind = 1;
	while ((opt = getopt_long(argc, argv, ":l:i:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'l':
			listen_spec = optarg;
			break;
		case 'i':
			if (parse_seconds(optarg, &ex.interval_s) || ex.interval_s < 0.1 ||
			    ex.interval_s > 3600) {
				gs_err("exporter: --interval wants seconds from 0.1 to 3600, not "
				       "'%s'",
				       optarg);
				return GS_EXIT_USAGE;
			}
			break;
		case 'S':
			if (parse_u32(optarg, &ex.slow_every) || !ex.slow_every) {
				gs_err("exporter: --slow-every wants a positive number, not '%s'",
				       optarg);
				return GS_EXIT_USAGE;
			}
			break;
		case 'N':
			ex.no_nvml = true;
			break;
		case 'D':
			ex.dcgm_labels = true;
			break;
		case 'E':
			ex.no_ebpf = true;
			break;
		case 'L':
			if (ex.nlibs == 16) {
				gs_err("exporter: --lib at most 16 times");
				return GS_EXIT_USAGE;
			}
			ex.libs[ex.nlibs++] = optarg;
			break;
		case 'K':
			if (parse_u32(optarg, &ex.top_kernels) || !ex.top_kernels ||
			    ex.top_kernels > 1000) {
				gs_err("exporter: --top-kernels wants 1 to 1000, not '%s'", optarg);
				return GS_EXIT_USAGE;
			}
			break;
		case 'R':
			if (parse_seconds(optarg, &ex.retain_s) || ex.retain_s > 86400) {
				gs_err("exporter: --retain wants seconds up to 86400, not '%s'",
				       optarg);
				return GS_EXIT_USAGE;
			}
			break;
		case 'J':
			ex.inject_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return GS_EXIT_OK;
		default:
			return bad_option("exporter", opt, argv);
		}
	}
	if (optind < argc) {
		gs_err("exporter: unexpected argument '%s' (see gpuscope exporter --help)",
		       argv[optind]);
		return GS_EXIT_USAGE;
	}
	r = listen_on(listen_spec, &ss, &fd);
	if (r)
		return r == -1 ? GS_EXIT_USAGE : GS_EXIT_RUNTIME;
	if (gethostname(ex.hostname, sizeof(ex.hostname) - 1))
		snprintf(ex.hostname, sizeof(ex.hostname), "unknown");
	if (!ex.no_nvml) {
		ex.nvml = nvml_open(ex.nvml_error, sizeof(ex.nvml_error));
		if (!ex.nvml)
			gs_warn("exporter: %s; serving without device metrics", ex.nvml_error);
	}
	if (!ex.no_ebpf || ex.inject_dir) {
		struct xtrace_opts xo = { .libs = ex.libs,
					  .nlibs = ex.nlibs,
					  .top = ex.top_kernels,
					  .retain_s = ex.retain_s,
					  .ebpf = !ex.no_ebpf,
					  .inject_dir = ex.inject_dir };

		ex.xt = xtrace_open(&xo);
		if (!ex.xt && xo.ebpf && xo.inject_dir) {
			gs_warn("exporter: without kernel probes; per-process metrics of programs "
				"that preload the in-process library only");
			xo.ebpf = false;
			ex.xt = xtrace_open(&xo);
		}
		if (!ex.xt && ex.inject_dir) {
			close(fd);
			nvml_close(ex.nvml);
			return GS_EXIT_RUNTIME;
		}
		if (!ex.xt)
			gs_warn("exporter: serving without per-process metrics (--no-ebpf to not "
				"try)");
		else if (ex.inject_dir)
			gs_info("exporter: programs started with LD_PRELOAD=%s "
				"GPUSCOPE_INJECT_DIR=%s are read in-process",
				xtrace_library(ex.xt), ex.inject_dir);
	}
	pthread_mutex_init(&ex.lock, NULL);
	/* The first page before the first scrape can come. */
	if (ex.nvml)
		nvml_sample(ex.nvml, ex.slow_every);
	ex.samples = 1;
	render(&ex, &ex.page, 0);
	stop_flag = &ex.stop;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* (Each connection is a socket and our duplicate of it.) */
	gs_raise_fd_limit(2 * HTTPD_CONNECTIONS + 256);
	d = httpd__start(fd, ss.ss_family == AF_INET6, respond, &ex, err, sizeof(err));
	if (!d) {
		gs_err("exporter: %s on %s", err, listen_spec);
		close(fd);
		nvml_close(ex.nvml);
		return GS_EXIT_RUNTIME;
	}
	ex.httpd = d;
	if (pthread_create(&th, NULL, sampler, &ex)) {
		gs_err("exporter: cannot start the sampler: %s", strerror(errno));
		httpd__stop(d);
		nvml_close(ex.nvml);
		return GS_EXIT_RUNTIME;
	}
	gs_info("exporter: serving http://%s/metrics (%s, %s)", listen_spec,
		ex.nvml ? "NVML loaded" : "no NVML",
		ex.xt && xtrace_probes(ex.xt) ? "eBPF probes" : "no eBPF probes");
	while (!ex.stop) {
		if (ex.xt)
			xtrace_poll(ex.xt);
		else
			pause();
	}
	pthread_join(th, NULL);
	httpd__stop(d);
	xtrace_close(ex.xt);
	nvml_close(ex.nvml);
	sb_free(&ex.page);
	pthread_mutex_destroy(&ex.lock);
	return GS_EXIT_OK;
}
