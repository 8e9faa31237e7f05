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
#include "sink/prom_gpus.h"
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

static void device_metrics(struct exporter *ex, struct strbuf *sb)
{
	static struct nvml_gpu g[NVML_MAX_DEVICES];
	struct nvml_call_stat st[NF_COUNT];
	struct prom_gpus_in in = {
		.g = g, .stats = st, .hostname = ex->hostname, .dcgm_labels = ex->dcgm_labels
	};

	in.n = nvml_snapshot(ex->nvml, g, NVML_MAX_DEVICES);
	nvml_call_stats(ex->nvml, st);
	prom_gpus__render(sb, &in);
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
