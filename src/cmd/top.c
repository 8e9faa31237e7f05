// SPDX-License-Identifier: MIT
/*
 * gpuscope top: a live view of the node's GPUs (NVML) and CUDA processes (the exporter's
 * eBPF plane): per GPU utilisation, SM activity, memory, power and temperature; per process
 * launches/s, device memory, copy bandwidth, time in synchronisation and its top kernels.
 * Plain ANSI (a redraw per interval); --once prints one interval's view and exits, --json
 * the same as JSON for scripts.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "cmd/common.h"
#include "cmd/exporter.h"
#include "core/json.h"
#include "core/util.h"
#include "nvml/nvml.h"

#define MAX_PROCS 256
#define TOP_K	  5

struct pstat {
	__u32 pid;
	char comm[16];
	bool exited;
	__u64 launches, copy_bytes, sync_ns, mem, peak;
	struct xkernel *k;
	size_t nk;
};

struct view {
	double dt;
	struct pstat now[MAX_PROCS], before[MAX_PROCS];
	size_t nnow, nbefore;
	struct nvml_gpu gpus[NVML_MAX_DEVICES];
	unsigned int ngpus;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void free_stats(struct pstat *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(s[i].k);
}

static void snapshot(struct xtrace *x, struct pstat *out, size_t *n)
{
	struct xproc procs[MAX_PROCS];
	size_t np = x ? xtrace_procs(x, procs, MAX_PROCS) : 0;

	for (size_t i = 0; i < np; i++) {
		struct pstat *s = &out[i];

		s->pid = procs[i].pid;
		memcpy(s->comm, procs[i].comm, sizeof(s->comm));
		s->exited = procs[i].exited;
		s->launches = procs[i].launches;
		s->copy_bytes = procs[i].copy_bytes;
		s->sync_ns = procs[i].sync_ns;
		s->mem = procs[i].mem;
		s->peak = procs[i].peak;
		s->nk = xtrace_kernels(x, s->pid, &s->k);
	}
	*n = np;
}

static const struct pstat *before_of(const struct view *v, __u32 pid)
{
	for (size_t i = 0; i < v->nbefore; i++)
		if (v->before[i].pid == pid)
			return &v->before[i];
	return NULL;
}

static __u64 kernel_before(const struct pstat *b, const char *name)
{
	for (size_t i = 0; b && i < b->nk; i++)
		if (!strcmp(b->k[i].name, name))
			return b->k[i].launches;
	return 0;
}

static double rate(__u64 now, __u64 before, double dt)
{
	return now >= before && dt > 0 ? (double)(now - before) / dt : 0;
}

/* ---- output ----------------------------------------------------------------------------- */

static void json_view(const struct view *v, FILE *f)
{
	struct json j;

	json_init(&j, f);
	json_obj_begin(&j, NULL);
	json_f64(&j, "interval_s", v->dt);
	json_arr_begin(&j, "gpus");
	for (unsigned int i = 0; i < v->ngpus; i++) {
		const struct nvml_gpu *g = &v->gpus[i];

		json_obj_begin(&j, NULL);
		json_i64(&j, "index", g->index);
		json_str(&j, "name", g->name);
		json_str(&j, "uuid", g->uuid);
		json_bool(&j, "lost", g->lost);
		if (g->have & (1u << NF_UTIL))
			json_u64(&j, "utilization_percent", g->util_gpu);
		if (g->have & (1u << NF_GPM))
			json_f64(&j, "sm_active", g->sm_active);
		if (g->have & (1u << NF_MEMORY)) {
			json_u64(&j, "memory_used_bytes", g->mem_used);
			json_u64(&j, "memory_total_bytes", g->mem_total);
		}
		if (g->have & (1u << NF_POWER))
			json_f64(&j, "power_watts", g->power_mw / 1000.0);
		if (g->have & (1u << NF_TEMP))
			json_u64(&j, "temperature_c", g->temp_c);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_arr_begin(&j, "processes");
	for (size_t i = 0; i < v->nnow; i++) {
		const struct pstat *p = &v->now[i], *b = before_of(v, p->pid);

		json_obj_begin(&j, NULL);
		json_u64(&j, "pid", p->pid);
		json_str(&j, "comm", p->comm);
		json_bool(&j, "running", !p->exited);
		json_u64(&j, "launches", p->launches);
		json_f64(&j, "launches_per_s", rate(p->launches, b ? b->launches : 0, v->dt));
		json_u64(&j, "device_memory_bytes", p->mem);
		json_u64(&j, "device_memory_peak_bytes", p->peak);
		json_f64(&j, "copy_bytes_per_s", rate(p->copy_bytes, b ? b->copy_bytes : 0, v->dt));
		json_f64(&j, "sync_wait_ratio", rate(p->sync_ns, b ? b->sync_ns : 0, v->dt) / 1e9);
		json_arr_begin(&j, "top_kernels");
		for (size_t k = 0; k < p->nk && k < TOP_K; k++) {
			json_obj_begin(&j, NULL);
			json_str(&j, "kernel", p->k[k].name);
			json_u64(&j, "launches", p->k[k].launches);
			json_f64(&j, "launches_per_s",
				 rate(p->k[k].launches, kernel_before(b, p->k[k].name), v->dt));
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
}

static void text_view(const struct view *v, FILE *f, bool ansi, const char *note)
{
	char a[32], b[32], c[32];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	if (ansi)
		fputs("\033[H\033[2J", f);
	fprintf(f, "gpuscope top  %02d:%02d:%02d  (every %.1f s%s)%s\n\n", tm.tm_hour, tm.tm_min,
		tm.tm_sec, v->dt, ansi ? "; Ctrl-C quits" : "", note);
	fprintf(f, "%-4s %-28s %5s %5s %22s %7s %5s\n", "GPU", "NAME", "UTIL", "SM", "MEMORY",
		"POWER", "TEMP");
	for (unsigned int i = 0; i < v->ngpus; i++) {
		const struct nvml_gpu *g = &v->gpus[i];
		char util[8] = "-", sm[8] = "-", mem[80] = "-", pw[16] = "-", temp[8] = "-";

		if (g->lost) {
			fprintf(f, "%-4d %-28.28s  lost: fell off the bus\n", g->index, g->name);
			continue;
		}
		if (g->have & (1u << NF_UTIL))
			snprintf(util, sizeof(util), "%u%%", g->util_gpu);
		if (g->have & (1u << NF_GPM))
			snprintf(sm, sizeof(sm), "%.0f%%", g->sm_active * 100);
		if (g->have & (1u << NF_MEMORY)) {
			fmt_bytes(a, sizeof(a), (double)g->mem_used);
			fmt_bytes(b, sizeof(b), (double)g->mem_total);
			snprintf(mem, sizeof(mem), "%s / %s", a, b);
		}
		if (g->have & (1u << NF_POWER))
			snprintf(pw, sizeof(pw), "%.0f W", g->power_mw / 1000.0);
		if (g->have & (1u << NF_TEMP))
			snprintf(temp, sizeof(temp), "%uC", g->temp_c);
		fprintf(f, "%-4d %-28.28s %5s %5s %22s %7s %5s\n", g->index, g->name, util, sm, mem,
			pw, temp);
	}
	if (!v->ngpus)
		fprintf(f, "(no GPUs: NVML not loaded)\n");
	fprintf(f, "\n%-8s %-16s %10s %10s %11s %5s  %s\n", "PID", "COMMAND", "LAUNCH/s", "GPU MEM",
		"COPY/s", "SYNC", "TOP KERNELS (launches/s)");
	for (size_t i = 0; i < v->nnow; i++) {
		const struct pstat *p = &v->now[i], *bp = before_of(v, p->pid);
		char kernels[256] = "";
		size_t len = 0;

		fmt_bytes(a, sizeof(a), (double)p->mem);
		fmt_bytes(c, sizeof(c), rate(p->copy_bytes, bp ? bp->copy_bytes : 0, v->dt));
		for (size_t k = 0; k < p->nk && k < 3 && len < sizeof(kernels) - 1; k++)
			len += (size_t)snprintf(
				kernels + len, sizeof(kernels) - len, "%s%.40s %.0f", k ? ", " : "",
				p->k[k].name,
				rate(p->k[k].launches, kernel_before(bp, p->k[k].name), v->dt));
		fprintf(f, "%-8u %-16s %10.0f %10s %9s/s %4.0f%%  %s%s\n", p->pid, p->comm,
			rate(p->launches, bp ? bp->launches : 0, v->dt), a, c,
			100 * rate(p->sync_ns, bp ? bp->sync_ns : 0, v->dt) / 1e9, kernels,
			p->exited ? "  (exited)" : "");
	}
	if (!v->nnow)
		fprintf(f, "(no CUDA process seen yet)\n");
	fflush(f);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: gpuscope top [options]\n\n"
		   "A live view of this node's GPUs and CUDA processes: per GPU utilisation, SM\n"
		   "activity, memory, power, temperature; per process launches/s, device memory,\n"
		   "copy bandwidth, time in synchronisation and its top kernels.\n\n"
		   "options:\n"
		   "  -i, --interval SECONDS  refresh interval (default 1)\n"
		   "      --once              one interval's view, then exit\n"
		   "      --json              with --once: as JSON\n"
		   "      --lib PATH          also probe this CUDA/NCCL library from the start\n"
		   "      --no-ebpf           GPUs only (processes need root)\n"
		   "      --no-nvml           processes only\n"
		   "  -h, --help              this help\n\n"
		   "examples:\n"
		   "  sudo gpuscope top\n"
		   "  sudo gpuscope top --once --json --interval 5 | jq '.processes[0]'\n");
}

int cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
		OPT_ARG("interval", 'i'), OPT_FLAG("once", 'O'),    OPT_FLAG("json", 'J'),
		OPT_ARG("lib", 'L'),	  OPT_FLAG("no-ebpf", 'E'), OPT_FLAG("no-nvml", 'N'),
		OPT_FLAG("help", 'h'),	  { NULL, 0, NULL, 0 },
	};
	double interval = 1;
	bool once = false, as_json = false, no_ebpf = false, no_nvml = false;
	char *libs[16], err[256], note[300] = "";
	int nlibs = 0, opt;
	struct nvml *nvml = NULL;
	struct xtrace *x = NULL;
	struct view *v;
	struct sigaction sa;

	optind = 1;
	while ((opt = getopt_long(argc, argv, ":i:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'i':
			if (parse_seconds(optarg, &interval) || interval < 0.1 || interval > 3600) {
				gs_err("top: --interval wants seconds from 0.1 to 3600, not '%s'",
				       optarg);
				return GS_EXIT_USAGE;
			}
			break;
		case 'O':
			once = true;
			break;
		case 'J':
			as_json = true;
			break;
		case 'L':
			if (nlibs == 16) {
				gs_err("top: --lib at most 16 times");
				return GS_EXIT_USAGE;
			}
			libs[nlibs++] = optarg;
			break;
		case 'E':
			no_ebpf = true;
			break;
		case 'N':
			no_nvml = true;
			break;
		case 'h':
			usage(stdout);
			return GS_EXIT_OK;
		default:
			return bad_option("top", opt, argv);
		}
	}
	if (optind < argc) {
		gs_err("top: unexpected argument '%s' (see gpuscope top --help)", argv[optind]);
		return GS_EXIT_USAGE;
	}
	if (as_json && !once) {
		gs_err("top: --json goes with --once (a live view is text)");
		return GS_EXIT_USAGE;
	}
	if (!no_nvml) {
		nvml = nvml_open(err, sizeof(err));
		if (!nvml)
			snprintf(note, sizeof(note), "  [%s]", err);
	}
	if (!no_ebpf) {
		struct xtrace_opts xo = {
			.libs = libs, .nlibs = nlibs, .top = 1000, .retain_s = 5, .ebpf = true
		};

		x = xtrace_open(&xo);
		if (!x)
			gs_warn("top: without CUDA processes (--no-ebpf to not try)");
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	v = xcalloc(1, sizeof(*v));
	if (nvml)
		nvml_sample(nvml, 1);
	snapshot(x, v->now, &v->nnow);
	/* (--once: what the view covers starts now, with the probes attached: a script may
	 * start its workload on this line) */
	if (once)
		gs_info("top: watching for %.1f s", interval);
	while (!stop) {
		double t0 = mono();

		/* The interval's records, then what they add up to. */
		while (!stop && mono() - t0 < interval) {
			if (x)
				xtrace_poll(x);
			else
				usleep(100000);
		}
		free_stats(v->before, v->nbefore);
		memcpy(v->before, v->now, sizeof(v->now));
		v->nbefore = v->nnow;
		snapshot(x, v->now, &v->nnow);
		v->dt = mono() - t0;
		if (nvml) {
			nvml_sample(nvml, 5);
			v->ngpus = nvml_snapshot(nvml, v->gpus, NVML_MAX_DEVICES);
		}
		if (once) {
			if (as_json)
				json_view(v, stdout);
			else
				text_view(v, stdout, false, note);
			break;
		}
		text_view(v, stdout, isatty(STDOUT_FILENO), note);
	}
	free_stats(v->before, v->nbefore);
	free_stats(v->now, v->nnow);
	free(v);
	xtrace_close(x);
	nvml_close(nvml);
	return GS_EXIT_OK;
}
