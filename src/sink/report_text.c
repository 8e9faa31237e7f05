// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "core/demangle.h"
#include "core/names.h"
#include "core/util.h"
#include "sink/sinks.h"

static const char *kind_names[MEM_KINDS] = { "device", "managed", "host" };

static void heading(FILE *f, const char *title)
{
	fprintf(f, "\n%s\n", title);
}

static void describe_exit(char *buf, size_t n, __s32 status)
{
	if (status < 0)
		snprintf(buf, n, "still running");
	else if (WIFEXITED(status))
		snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, n, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, n, "status 0x%x", status);
}

/* The machine and its GPUs, as recorded. */
static void host(FILE *f, const struct report *r)
{
	const struct gs_ev_host *h = &r->host;
	char a[128], b[128], c[128], mem[32];

	if (r->has_host) {
		fmt_bytes(mem, sizeof(mem), (double)h->memory);
		fprintf(f, "  host: %s, Linux %s", safe_text(h->hostname, a, sizeof(a)),
			safe_text(h->kernel, b, sizeof(b)));
		if (h->os[0])
			fprintf(f, " (%s)", safe_text(h->os, a, sizeof(a)));
		fprintf(f, ", %s, %u CPUs", safe_text(h->arch, a, sizeof(a)), h->cpus);
		if (h->cpu[0])
			fprintf(f, " (%s)", safe_text(h->cpu, a, sizeof(a)));
		fprintf(f, ", %s memory", mem);
		if (h->driver[0])
			fprintf(f, ", NVIDIA driver %s", safe_text(h->driver, a, sizeof(a)));
		fputc('\n', f);
	}
	for (size_t i = 0; i < r->ngpus_info; i++) {
		const struct gs_ev_gpu_info *g = &r->gpus_info[i];

		fmt_bytes(mem, sizeof(mem), (double)g->memory);
		fprintf(f, "  GPU %d: %s, %s, %s, %s\n", g->gpu, safe_text(g->name, a, sizeof(a)),
			mem, safe_text(g->pci_bus_id, b, sizeof(b)),
			safe_text(g->uuid, c, sizeof(c)));
	}
}

/* The traced process's command line and cgroup (attach: the command is only its name). */
static void target(FILE *f, const struct report *r)
{
	char line[GS_CMDLINE_MAX], cg[GS_CGROUP_MAX];

	for (size_t i = 0; i < r->nprocs; i++) {
		const struct rep_proc *p = &r->procs[i];

		if ((__s32)p->s.pid != r->target_pid || !p->cmdline)
			continue;
		if (r->mode == GS_MODE_ATTACH)
			fprintf(f, "  command line: %s%s\n",
				safe_text(p->cmdline, line, sizeof(line)),
				p->s.cmdline_truncated ? " ..." : "");
		if (p->cgroup && strcmp(p->cgroup, "/"))
			fprintf(f, "  cgroup: %s\n", safe_text(p->cgroup, cg, sizeof(cg)));
	}
}

/* The Python interpreters seen: each version and what its stacks carry, with how many
 * processes ran it (a job of many like processes is one line). */
static void pythons(FILE *f, const struct report *r)
{
	for (size_t i = 0; i < r->nprocs; i++) {
		const struct rep_proc *p = &r->procs[i];
		unsigned int v = p->s.py_version, same = 0;
		bool earlier = false;

		if (!v)
			continue;
		for (size_t k = 0; k < r->nprocs; k++) {
			const struct rep_proc *q = &r->procs[k];

			if (q->s.py_version == v && q->s.py_status == p->s.py_status) {
				earlier |= k < i;
				same++;
			}
		}
		if (earlier)
			continue;
		fprintf(f, "  python %u.%u.%u (%u process%s): %s\n", v >> 24, (v >> 16) & 0xff,
			(v >> 8) & 0xff, same, same == 1 ? "" : "es",
			p->s.py_status == GS_PY_FRAMES
				? (p->s.py_mixed ? "Python frames in stacks, in place of the "
						   "interpreter's"
						 : "Python frames in stacks (outermost: the "
						   "interpreter's "
						   "own frames not found)")
			: p->s.py_status == GS_PY_UNSUPPORTED
				? "no known layout for this version: native stacks only"
				: "its thread states cannot be read: native stacks only");
	}
}

static void session(FILE *f, const struct report *r)
{
	char dur[32], ex[64];

	fmt_dur(dur, sizeof(dur), (double)r->duration_ns);
	if (r->mode == GS_MODE_RUN) {
		describe_exit(ex, sizeof(ex), r->exit_status);
		fprintf(f, "gpuscope report: run of '%s' (pid %d), %s, %s\n", r->cmd, r->target_pid,
			dur, ex);
	} else if (r->mode == GS_MODE_ATTACH) {
		fprintf(f, "gpuscope report: attached to pid %d ('%s') for %s\n", r->target_pid,
			r->cmd, dur);
	} else {
		fprintf(f, "gpuscope report: %s of events (no session record)\n", dur);
	}
	host(f, r);
	target(f, r);
	pythons(f, r);
	if (r->flags & GS_SESSION_INTERRUPTED)
		fprintf(f, "  stopped by a signal before the traced command ended\n");
	if (r->flags & GS_SESSION_TARGET_LOST)
		fprintf(f, "  the traced process disappeared during the trace\n");
	if (!r->complete_recording && r->mode)
		fprintf(f, "  the recording ends early: the trace was cut off\n");
	fprintf(f, "  processes traced: %zu%s\n", r->nprocs,
		r->follow || r->mode == 0 ? "" : " (children not followed)");
	for (size_t i = 0; i < r->nlibs; i++)
		fprintf(f, "  probes: %-10s %s (%u functions%s)\n", lib_kind_name(r->libs[i].kind),
			r->libs[i].path, r->libs[i].nprobes,
			r->libs[i].late ? ", attached after the process had loaded it" : "");
	if (!r->nlibs)
		fprintf(f, "  probes: no CUDA or NCCL library was found\n");
	if (r->inject)
		fprintf(f,
			"  driver calls: from the in-process library (--inject), not from probes "
			"on libcuda\n");
}

static void processes(FILE *f, const struct report *r, const struct text_opts *o)
{
	char peak[32], out[32], ex[64], line[GS_CMDLINE_MAX];

	if (r->nprocs < 2)
		return;
	heading(f, "Processes");
	fprintf(f, "  %7s %7s  %-16s %10s %12s %12s  %-20s  %s\n", "pid", "ppid", "command",
		"launches", "peak device", "outstanding", "end", "command line");
	for (size_t i = 0; i < r->nprocs; i++) {
		const struct rep_proc *p = &r->procs[i];

		fmt_bytes(peak, sizeof(peak), (double)p->s.peak[MK_DEVICE]);
		fmt_bytes(out, sizeof(out), (double)p->outstanding[MK_DEVICE]);
		describe_exit(ex, sizeof(ex), p->s.exited ? p->s.exit_code : -1);
		/* (The command line last: cut to 60 bytes unless --wide.) */
		safe_text(p->cmdline, line, o->wide ? sizeof(line) : 61);
		fprintf(f, "  %7u %7u  %-16s %10llu %12s %12s  %-20s  %s\n", p->s.pid, p->s.ppid,
			p->s.comm[0] ? p->s.comm : "?", (unsigned long long)p->s.launches, peak,
			out, ex, line);
	}
}

static void shape_str(char *buf, size_t n, const struct kshape *s)
{
	char grid[40], block[40];

	if (!s->count) { /* (run only by graphs built with the graph API: no launch shapes) */
		snprintf(buf, n, "%-14s %-11s %6s", "-", "-", "-");
		return;
	}
	snprintf(grid, sizeof(grid), "%ux%ux%u", s->grid[0], s->grid[1], s->grid[2]);
	snprintf(block, sizeof(block), "%ux%ux%u", s->block[0], s->block[1], s->block[2]);
	snprintf(buf, n, "%-14s %-11s %6u", grid, block, s->shmem);
}

/* Counts that say what the figures near them leave out: "  N what", those not 0. */
struct note {
	__u64 n;
	const char *what;
};

static void notes(FILE *f, const struct note *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].n)
			fprintf(f, "  %llu %s\n", (unsigned long long)v[i].n, v[i].what);
}

static void kernels(FILE *f, const struct report *r, const struct text_opts *o)
{
	const struct note kernel_notes[] = {
		{ r->cond_graph_launches, "graph launches ran conditional nodes: the kernels of "
					  "their bodies (run as the GPU decides) are not counted" },
		{ r->graph_nodes_lost, "graph kernel nodes past gpuscope's limit (2^20 a process) "
				       "were not kept: their runs are not counted" },
		{ r->graph_launches_unseen, "graph launches ran graphs made before tracing began: "
					    "the kernels they ran are not counted" },
		{ r->driver_names,
		  "kernel handles whose lookups were not seen (made before tracing "
		  "began, or by cuKernelGetFunction, not probed on this driver) are "
		  "named from the driver's objects" },
	};
	char name[1024], shape[96];
	size_t shown = GS_MIN(r->nkernels, o->top);

	heading(f, "Kernels");
	fprintf(f, "  %llu launches of %zu kernels", (unsigned long long)r->launches, r->nkernels);
	if (r->graph_launches)
		fprintf(f, ", %llu graph launches (%llu kernel runs)",
			(unsigned long long)r->graph_launches,
			(unsigned long long)r->kernel_runs_in_graphs);
	if (r->launch_errors)
		fprintf(f, ", %llu failed", (unsigned long long)r->launch_errors);
	fprintf(f, "\n");
	if (r->results_unread)
		fprintf(f,
			"  results read for %llu of %llu launch calls (uprobe sessions: each "
			"kernel's until one succeeds, and every Nth; --stacks 1 reads all)\n",
			(unsigned long long)(r->launches + r->graph_launches + r->launch_errors -
					     r->results_unread),
			(unsigned long long)(r->launches + r->graph_launches + r->launch_errors));
	notes(f, kernel_notes, ARRAY_SIZE(kernel_notes));
	if (r->unknown_kernels)
		fprintf(f,
			"  %llu kernels (%llu launches) have no name: their names were looked up "
			"before tracing began\n",
			(unsigned long long)r->unknown_kernels,
			(unsigned long long)r->unknown_launches);
	if (!r->nkernels)
		return;
	fprintf(f, "  %9s %10s  %-14s %-11s %6s  %s\n", "launches", "graph runs", "grid", "block",
		"smem", "kernel");
	for (size_t i = 0; i < shown; i++) {
		const struct rep_kernel *k = &r->kernels[i];

		if (o->wide)
			gs_strlcpy(name, k->display, sizeof(name));
		else
			shorten_name(k->display, 80, name, sizeof(name));
		shape_str(shape, sizeof(shape), &k->shapes[0]);
		fprintf(f, "  %9llu %10llu  %s  %s\n", (unsigned long long)k->launches,
			(unsigned long long)k->graph_runs, shape, name);
		for (int s = 1; s < KSTAT_SHAPES && k->shapes[s].count; s++) {
			shape_str(shape, sizeof(shape), &k->shapes[s]);
			fprintf(f, "  %9s %10s  %s    %llu of the launches\n", "", "", shape,
				(unsigned long long)k->shapes[s].count);
		}
		if (k->other_shapes)
			fprintf(f, "  %9s %10s  %-33s    %llu of the launches\n", "", "",
				"other shapes", (unsigned long long)k->other_shapes);
	}
	if (shown < r->nkernels)
		fprintf(f, "  ... %zu more kernels (--top N, or --json for all)\n",
			r->nkernels - shown);
	fprintf(f, "  by API:");
	for (size_t i = 0; i < r->nlaunch_apis; i++)
		fprintf(f, "%s %s %llu", i ? "," : "", api_name(r->launch_apis[i].api),
			(unsigned long long)r->launch_apis[i].count);
	fprintf(f, "\n");
}

/* Device memory per process and GPU, where a process used more than one (or one that is
 * not known). */
static void per_device(FILE *f, const struct report *r)
{
	char a[32], b[32];

	for (size_t i = 0; i < r->nprocs; i++) {
		const struct rep_proc *p = &r->procs[i];
		int n = 0;

		for (int d = 0; d <= MEM_DEVS; d++)
			n += p->s.dev_peak[d] != 0;
		if (n < 2 && !p->s.dev_peak[MEM_DEVS])
			continue;
		fprintf(f, "  pid %u device memory, peak (outstanding):", p->s.pid);
		n = 0;
		for (int d = 0; d <= MEM_DEVS; d++) {
			if (!p->s.dev_peak[d])
				continue;
			fmt_bytes(a, sizeof(a), (double)p->s.dev_peak[d]);
			fmt_bytes(b, sizeof(b), (double)p->s.dev_in_use[d]);
			if (d < MEM_DEVS)
				fprintf(f, "%s GPU %d %s (%s)", n++ ? "," : "", d, a, b);
			else
				fprintf(f, "%s GPU not known %s (%s)", n++ ? "," : "", a, b);
		}
		fprintf(f, "\n");
	}
}

static void memory(FILE *f, const struct report *r)
{
	char a[32], b[32], c[32];
	size_t shown;

	heading(f, "Memory (device: linear allocations plus VMM physical memory)");
	fprintf(f, "  peak in use: device %s, managed %s, host page-locked %s\n",
		fmt_bytes(a, sizeof(a), (double)r->peak[MK_DEVICE]),
		fmt_bytes(b, sizeof(b), (double)r->peak[MK_MANAGED]),
		fmt_bytes(c, sizeof(c), (double)r->peak[MK_HOST]));
	fprintf(f, "  %llu allocations, %llu frees, %llu failed allocations",
		(unsigned long long)r->allocs, (unsigned long long)r->frees,
		(unsigned long long)r->failed_allocs);
	if (r->reserved)
		fprintf(f, "; VMM address space reserved %s",
			fmt_bytes(a, sizeof(a), (double)r->reserved));
	fprintf(f, "\n");
	per_device(f, r);
	if (r->untracked_frees)
		fprintf(f, "  %llu frees of memory allocated before tracing began (or never)\n",
			(unsigned long long)r->untracked_frees);
	fprintf(f, "  outstanding at end:");
	for (int k = 0; k < MEM_KINDS; k++)
		fprintf(f, "%s %s %s in %llu", k ? "," : "", kind_names[k],
			fmt_bytes(a, sizeof(a), (double)r->outstanding_bytes[k]),
			(unsigned long long)r->outstanding_count[k]);
	fprintf(f, "\n");
	if (!r->noutstanding)
		return;
	fprintf(f, "  %9s %12s %12s  %-8s  %s\n", "count", "size", "total", "kind", "allocated by");
	shown = GS_MIN(r->noutstanding, (size_t)15);
	for (size_t i = 0; i < shown; i++) {
		const struct rep_outstanding *o = &r->outstanding[i];

		fprintf(f, "  %9llu %12s %12s  %-8s  %s\n", (unsigned long long)o->count,
			fmt_bytes(a, sizeof(a), (double)o->size),
			fmt_bytes(b, sizeof(b), (double)(o->size * o->count)), kind_names[o->kind],
			api_name(o->api));
	}
	if (shown < r->noutstanding)
		fprintf(f, "  ... %zu more groups\n", r->noutstanding - shown);
}

static double secs(__u64 ns)
{
	return (double)ns / 1e9;
}

/* A site's headline, its whole stack when the label is shorter, and its trend test, up to
 * the caller's own end of that line. */
static void site_trend(FILE *f, const char *tag, const struct rep_site *s,
		       const struct leak_test *t)
{
	char a[32];

	fprintf(f, "  %s pid %u site #%u %s\n", tag, s->pid, s->id, s->label);
	if (strcmp(s->stack, s->label))
		fprintf(f, "       stack: %s\n", s->stack);
	fprintf(f, "       +%s/s (Sen's slope) from %.3f s to %.3f s, p %.1e over %u samples",
		fmt_bytes(a, sizeof(a), t->slope_bps), secs(t->from), secs(t->to),
		GS_MAX(1 - t->confidence, 1e-12), t->n);
}

/* Leaks, what was never freed (by site), out-of-memory findings, fragmentation. */
static void memory_analyses(FILE *f, const struct report *r)
{
	char a[32], b[32], c[1536];
	size_t shown = 0;

	if (!r->sites_total && !r->ooms_total)
		return;
	heading(f, "Memory analyses");
	if (!r->stacks)
		fprintf(f, "  (no call stacks were taken: sites are the allocating functions)\n");
	fprintf(f,
		"  %llu suspected leak%s (a site's outstanding bytes rising through the later "
		"half of the run: Mann-Kendall, 99.9%%)\n",
		(unsigned long long)r->leaks, r->leaks == 1 ? "" : "s");
	for (size_t i = 0; i < r->nsites && r->sites[i].leak.suspected; i++) {
		const struct rep_site *s = &r->sites[i];

		site_trend(f, "LEAK", s, &s->leak);
		fprintf(f, "; %s outstanding in %llu of %llu allocations\n",
			fmt_bytes(b, sizeof(b), (double)s->live_bytes),
			(unsigned long long)s->live_count, (unsigned long long)s->allocs);
		for (unsigned int k = 0; k < s->nexamples; k++)
			fprintf(f, "       e.g. 0x%llx %s allocated at %.3f s, not freed\n",
				(unsigned long long)s->examples[k].addr,
				fmt_bytes(a, sizeof(a), (double)s->examples[k].size),
				secs(s->examples[k].ts));
	}
	if (r->grew)
		fprintf(f,
			"  %llu site%s grew as a leak does for a while, then stopped (a loop that "
			"kept what it made, then ended; a collection emptied at last):\n",
			(unsigned long long)r->grew, r->grew == 1 ? "" : "s");
	for (size_t i = 0; i < r->nsites; i++) {
		const struct rep_site *s = &r->sites[i];

		if (!s->grew)
			continue;
		site_trend(f, "GREW", s, &s->earlier);
		fprintf(f,
			" (suspected from %.3f s to %.3f s); peak %s, %s outstanding at the end\n",
			secs(s->suspected_since), secs(s->suspected_last),
			fmt_bytes(b, sizeof(b), (double)s->peak_bytes),
			fmt_bytes(c, sizeof(c), (double)s->live_bytes));
	}
	for (size_t i = 0; i < r->nsites; i++)
		shown += !r->sites[i].leak.suspected && !r->sites[i].grew && r->sites[i].live_bytes;
	if (shown) {
		fprintf(f, "  outstanding by site (at exit, for processes that exited), largest "
			   "first:\n");
		for (size_t i = 0; i < r->nsites; i++) {
			const struct rep_site *s = &r->sites[i];

			if (s->leak.suspected || s->grew || !s->live_bytes)
				continue;
			fprintf(f, "  %12s in %6llu  pid %u site #%u %s\n",
				fmt_bytes(a, sizeof(a), (double)s->live_bytes),
				(unsigned long long)s->live_count, s->pid, s->id, s->label);
		}
	}
	if (r->ooms_total)
		fprintf(f, "  %llu allocation%s failed for lack of memory\n",
			(unsigned long long)r->ooms_total, r->ooms_total == 1 ? "" : "s");
	for (size_t i = 0; i < r->nooms; i++)
		fprintf(f, "  OOM %.3f s pid %u tid %u at %s: %s\n", secs(r->ooms[i].o.ts),
			r->ooms[i].o.pid, r->ooms[i].o.tid,
			r->ooms[i].site[0] ? r->ooms[i].site : "?",
			report__oom_text(&r->ooms[i], c, sizeof(c)));
	for (size_t i = 0; i < r->nfrags; i++) {
		const struct rep_frag *g = &r->frags[i];

		fprintf(f,
			"  fragmentation pid %u GPU %d: worst %.2f at %.3f s (%s free in "
			"partly used 2 MiB pages, largest piece %s; %s live), at the end %.2f\n",
			g->pid, g->device, frag_score(&g->worst), secs(g->worst.ts),
			fmt_bytes(a, sizeof(a), (double)g->worst.stranded),
			fmt_bytes(b, sizeof(b), (double)g->worst.largest_stranded),
			fmt_bytes(c, sizeof(c), (double)g->worst.live), frag_score(&g->last));
	}
}

static void copies(FILE *f, const struct report *r)
{
	char a[32], b[32], c[32], d[32];
	bool any = false;
	__u64 empty = 0, captured = 0, runs = 0, unread = 0, async = 0;

	for (int k = 0; k < GS_COPY_KIND_MAX; k++)
		any |= r->copies[k].count || r->copies[k].errors || r->copies[k].graph_runs;
	if (!any)
		return;
	heading(f, "Copies and sets");
	fprintf(f, "  %-8s %8s %12s %9s %12s %12s %12s\n", "", "calls", "bytes", "async",
		"sync time", "sync rate", "failed");
	for (int k = 0; k < GS_COPY_KIND_MAX; k++) {
		const struct copy_stat *s = &r->copies[k];

		if (!s->count && !s->errors)
			continue;
		fmt_bytes(a, sizeof(a), (double)s->bytes);
		fmt_dur(b, sizeof(b), (double)s->sync_ns);
		fmt_rate_over(c, sizeof(c), s->sync_bytes, s->sync_ns);
		snprintf(d, sizeof(d), "%llu", (unsigned long long)s->errors);
		fprintf(f, "  %-8s %8llu %12s %9llu %12s %12s %12s\n", copy_kind_name(k),
			(unsigned long long)s->count, a, (unsigned long long)s->async_count, b, c,
			d);
	}
	fprintf(f, "  (sync rate: bytes over call time of synchronous calls; asynchronous calls "
		   "return before the copy ends)\n");
	for (int k = 0; k < GS_COPY_KIND_MAX; k++) {
		empty += r->copies[k].empty;
		captured += r->copies[k].captured;
		runs += r->copies[k].graph_runs;
		unread += r->copies[k].results_unread;
		async += r->copies[k].async_count;
	}
	if (empty)
		fprintf(f, "  (calls of zero bytes, no copy made: %llu)\n",
			(unsigned long long)empty);
	if (unread)
		fprintf(f,
			"  (results read for %llu of %llu asynchronous calls: sets are uprobe "
			"sessions, each function's read until one succeeds on a CPU, then every "
			"Nth; --stacks 1 reads all)\n",
			(unsigned long long)(async - unread), (unsigned long long)async);
	if (captured || runs)
		fprintf(f,
			"  (calls captured into CUDA graphs, not run then: %llu; copies and sets "
			"run by graph launches: %llu)\n",
			(unsigned long long)captured, (unsigned long long)runs);
}

static void syncs(FILE *f, const struct report *r)
{
	char a[32], b[32];

	if (!r->nsyncs)
		return;
	heading(f, "Synchronisation (host time blocked)");
	for (size_t i = 0; i < r->nsyncs; i++) {
		const struct rep_sync *s = &r->syncs[i];

		fprintf(f, "  %-28s %8llu calls  total %10s  max %10s", api_name(s->api),
			(unsigned long long)s->s.calls,
			fmt_dur(a, sizeof(a), (double)s->s.total_ns),
			fmt_dur(b, sizeof(b), (double)s->s.max_ns));
		if (s->s.not_ready)
			fprintf(f, "  (%llu not ready)", (unsigned long long)s->s.not_ready);
		fprintf(f, "\n");
	}
}

static void nccl(FILE *f, const struct report *r)
{
	char a[32], b[32], c[32];
	bool any = false;

	for (int op = 0; op < NCCL_OPS; op++)
		any |= r->nccl[op].calls != 0;
	if (!any)
		return;
	heading(f, "NCCL");
	fprintf(f, "  %-15s %8s %12s %12s %12s %7s\n", "", "calls", "bytes", "call time", "max",
		"failed");
	for (int op = 1; op < NCCL_OPS; op++) {
		const struct nccl_stat *s = &r->nccl[op];

		if (!s->calls)
			continue;
		fprintf(f, "  %-15s %8llu %12s %12s %12s %7llu\n", nccl_op_name(op),
			(unsigned long long)s->calls, fmt_bytes(a, sizeof(a), (double)s->bytes),
			fmt_dur(b, sizeof(b), (double)s->total_ns),
			fmt_dur(c, sizeof(c), (double)s->max_ns), (unsigned long long)s->errors);
	}
	for (size_t i = 0; i < r->ncomms; i++) {
		const struct comm_entry *c = &r->comms[i];

		if (c->nranks > 0)
			fprintf(f, "  communicator 0x%llx: pid %u, rank %d of %d, %llu calls%s\n",
				(unsigned long long)c->comm, c->pid, c->rank, c->nranks,
				(unsigned long long)c->calls, c->destroyed ? ", destroyed" : "");
		else
			fprintf(f,
				"  communicator 0x%llx: pid %u, rank and size unknown, %llu "
				"calls\n",
				(unsigned long long)c->comm, c->pid, (unsigned long long)c->calls);
	}
}

static void errors(FILE *f, const struct report *r)
{
	char t[32];

	heading(f, "Errors");
	if (!r->nerrors) {
		fprintf(f, "  no failed calls\n");
		return;
	}
	fprintf(f, "  %llu failed calls\n", (unsigned long long)r->error_calls);
	for (size_t i = 0; i < r->nerrors; i++) {
		const struct rep_error *e = &r->errors[i];
		const char *rn = result_name(e->api, e->result);

		fprintf(f, "  %-28s %s (%d): %llu, first at %s (pid %u, tid %u)\n",
			api_name(e->api), rn ? rn : "unknown result", e->result,
			(unsigned long long)e->count, fmt_dur(t, sizeof(t), (double)e->first_ts),
			e->pid, e->tid);
	}
}

static void losses(FILE *f, const struct report *r)
{
	const struct note loss_notes[] = {
		{ r->nameless, "kernel names could not be read from the process" },
		{ r->unwrapped, "driver entry points were handed out unwrapped: calls through "
				"them are not traced" },
		{ r->gates_forced, "GPU timing gates opened by the watchdog: a launch call "
				   "blocked behind one; those launches' times may include "
				   "waiting" },
		{ r->time_capped, "launches were due for GPU timing but left untimed, to keep "
				  "to a thread's rate and the process's share of time "
				  "(--gpu-time=N: at most 1000 timed a second a thread and 0.25% "
				  "of the process's time, unless "
				  "GPUSCOPE_TIME_RATE and GPUSCOPE_TIME_BUDGET say others, 0 "
				  "none)" },
		{ r->time_lost, "launches and copies were due for GPU timing but left untimed "
				"for want of events (8192 a context) or room in the queue of "
				"pairs not yet read" },
		{ r->rings_lost, "in-process rings stopped early (a process died while writing, "
				 "or the ring was damaged)" },
		{ r->stacks_skipped, "launches' call stacks were due but skipped, to take at most "
				     "20 a second a thread (without --stacks; --stacks N takes "
				     "every Nth)" },
	};

	heading(f, "Events");
	fprintf(f, "  %llu events, %llu dropped because the ring buffer was full",
		(unsigned long long)r->events, (unsigned long long)r->drops_total);
	if (r->lost_calls)
		fprintf(f,
			", %llu calls and OS events lost (no room in the kernel for their state)",
			(unsigned long long)r->lost_calls);
	fprintf(f, "\n");
	if (r->drops_total) {
		fprintf(f, "  dropped:");
		for (int t = 0; t < GS_EV_MAX; t++)
			if (r->drops[t])
				fprintf(f, " %s %llu", event_type_name(t),
					(unsigned long long)r->drops[t]);
		fprintf(f, " (a larger --buffer-size keeps more)\n");
	}
	notes(f, loss_notes, ARRAY_SIZE(loss_notes));
}

void report_text__write(FILE *f, const struct report *r, const struct text_opts *o)
{
	session(f, r);
	processes(f, r, o);
	kernels(f, r, o);
	report_gpu_text(f, r, o);
	report_python_text(f, r);
	report_pyexc_text(f, r);
	report_steps_text(f, r);
	memory(f, r);
	memory_analyses(f, r);
	report_devcode_text(f, r);
	copies(f, r);
	syncs(f, r);
	nccl(f, r);
	report_os_text(f, r);
	report_findings_text(f, r);
	errors(f, r);
	losses(f, r);
	fflush(f);
}
