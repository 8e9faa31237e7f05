// SPDX-License-Identifier: MIT
/* The report as JSON. Field names are stable: scripts and the tests read them. */
#include <stdio.h>

#include "core/json.h"
#include "core/util.h"
#include "core/names.h"
#include "sink/sinks.h"

#define REPORT_JSON_VERSION 1

static const char *kind_names[MEM_KINDS] = { "device", "managed", "host" };

static void by_kind(struct json *j, const char *key, const __u64 *v)
{
	json_obj_begin(j, key);
	for (int k = 0; k < MEM_KINDS; k++)
		json_u64(j, kind_names[k], v[k]);
	json_obj_end(j);
}

static void session(struct json *j, const struct report *r)
{
	json_obj_begin(j, "session");
	json_str(j, "mode",
		 r->mode == GS_MODE_RUN	     ? "run"
		 : r->mode == GS_MODE_ATTACH ? "attach"
					     : NULL);
	json_str(j, "command", r->mode ? r->cmd : NULL);
	json_i64(j, "target_pid", r->target_pid);
	json_i64(j, "exit_status", r->exit_status);
	json_f64(j, "duration_s", (double)r->duration_ns / 1e9);
	json_u64(j, "start_unix_ns", r->start_realtime_ns);
	json_bool(j, "follow_children", r->follow);
	json_bool(j, "interrupted", r->flags & GS_SESSION_INTERRUPTED);
	json_bool(j, "target_lost", r->flags & GS_SESSION_TARGET_LOST);
	json_bool(j, "complete_recording", r->complete_recording);
	json_str(j, "plane", r->inject ? "inject" : "uprobe");
	json_u64(j, "events", r->events);
	json_obj_end(j);
	json_arr_begin(j, "libraries");
	for (size_t i = 0; i < r->nlibs; i++) {
		json_obj_begin(j, NULL);
		json_str(j, "path", r->libs[i].path);
		json_str(j, "kind", lib_kind_name(r->libs[i].kind));
		json_u64(j, "functions", r->libs[i].nprobes);
		json_u64(j, "missing", r->libs[i].nmissing);
		json_bool(j, "late", r->libs[i].late);
		json_obj_end(j);
	}
	json_arr_end(j);
}

/* The machine and its GPUs, as recorded at the start (null: the recording has none). */
static void host(struct json *j, const struct report *r)
{
	const struct gs_ev_host *h = &r->host;

	if (!r->has_host && !r->ngpus_info) {
		json_str(j, "host", NULL);
		return;
	}
	json_obj_begin(j, "host");
	json_str(j, "hostname", r->has_host ? h->hostname : NULL);
	json_str(j, "kernel", r->has_host ? h->kernel : NULL);
	json_str(j, "arch", r->has_host ? h->arch : NULL);
	json_str(j, "os", r->has_host && h->os[0] ? h->os : NULL);
	json_str(j, "cpu", r->has_host && h->cpu[0] ? h->cpu : NULL);
	json_u64(j, "cpus", h->cpus);
	json_u64(j, "memory_bytes", h->memory);
	json_str(j, "nvidia_driver", h->driver[0] ? h->driver : NULL);
	json_str(j, "boot_id", h->boot_id[0] ? h->boot_id : NULL);
	json_str(j, "gpuscope_version", r->has_host ? h->gpuscope : NULL);
	json_arr_begin(j, "gpus");
	for (size_t i = 0; i < r->ngpus_info; i++) {
		const struct gs_ev_gpu_info *g = &r->gpus_info[i];

		json_obj_begin(j, NULL);
		json_i64(j, "index", g->gpu);
		json_str(j, "name", g->name);
		json_str(j, "uuid", g->uuid);
		json_str(j, "pci_bus_id", g->pci_bus_id);
		json_u64(j, "memory_bytes", g->memory);
		json_u64(j, "minor", g->minor);
		json_str(j, "driver", g->driver[0] ? g->driver : NULL);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}

static const struct jfield proc_calls[] = {
	JU64(struct rep_proc, "allocations", s.allocs), JU64(struct rep_proc, "frees", s.frees),
	JU64(struct rep_proc, "failed_allocations", s.failed_allocs),
	JU64(struct rep_proc, "untracked_frees", s.untracked_frees),
	JU64(struct rep_proc, "reserved_bytes", s.reserved)
};

static const struct jfield proc_by_allocator[] = {
	JU64(struct rep_proc, "pool_bytes", s.pool_in_use),
	JU64(struct rep_proc, "pool_peak_bytes", s.pool_peak),
	JU64(struct rep_proc, "vmm_physical_bytes", s.vmm_physical),
	JU64(struct rep_proc, "vmm_mapped_bytes", s.vmm_mapped),
	JU64(struct rep_proc, "vmm_reserved_bytes", s.reserved)
};

static void processes(struct json *j, const struct report *r)
{
	json_arr_begin(j, "processes");
	for (size_t i = 0; i < r->nprocs; i++) {
		const struct rep_proc *p = &r->procs[i];

		json_obj_begin(j, NULL);
		json_u64(j, "pid", p->s.pid);
		json_u64(j, "ppid", p->s.ppid);
		json_str(j, "comm", p->s.comm);
		json_str(j, "exe", p->exe);
		json_str(j, "command_line", p->cmdline);
		json_bool(j, "command_line_cut", p->s.cmdline_truncated);
		json_str(j, "cgroup", p->cgroup);
		if (p->cmdline)
			json_u64(j, "uid", p->s.uid);
		else
			json_str(j, "uid", NULL);
		if (p->s.py_version) {
			char v[32];

			snprintf(v, sizeof(v), "%u.%u.%u", p->s.py_version >> 24,
				 (p->s.py_version >> 16) & 0xff, (p->s.py_version >> 8) & 0xff);
			json_obj_begin(j, "python");
			json_str(j, "version", v);
			json_str(j, "frames",
				 p->s.py_status == GS_PY_FRAMES	       ? "read"
				 : p->s.py_status == GS_PY_UNSUPPORTED ? "unsupported"
								       : "unreadable");
			json_bool(j, "in_place", p->s.py_mixed);
			json_obj_end(j);
		} else {
			json_str(j, "python", NULL);
		}
		json_bool(j, "traced_from_start", p->s.complete);
		json_bool(j, "exited", p->s.exited);
		json_i64(j, "exit_status", p->s.exited ? p->s.exit_code : -1);
		json_u64(j, "launches", p->s.launches);
		by_kind(j, "peak_bytes", p->s.peak);
		by_kind(j, "outstanding_bytes", p->outstanding);
		/* Device memory per device (null: a device not known, or beyond the 16th). */
		json_arr_begin(j, "devices");
		for (int d = 0; d <= MEM_DEVS; d++) {
			if (!p->s.dev_peak[d])
				continue;
			json_obj_begin(j, NULL);
			if (d < MEM_DEVS)
				json_u64(j, "device", (__u64)d);
			else
				json_str(j, "device", NULL);
			json_u64(j, "peak_bytes", p->s.dev_peak[d]);
			json_u64(j, "outstanding_bytes", p->s.dev_in_use[d]);
			json_obj_end(j);
		}
		json_arr_end(j);
		JSON_U64S(j, p, proc_calls);
		json_obj_begin(j, "device_memory_by_allocator");
		JSON_U64S(j, p, proc_by_allocator);
		json_obj_end(j);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static const struct jfield kernel_counts[] = { JU64(struct rep_kernel, "launches", launches),
					       JU64(struct rep_kernel, "captured", captured),
					       JU64(struct rep_kernel, "graph_runs", graph_runs),
					       JU64(struct rep_kernel, "failed", errors) };

static void kernel(struct json *j, const struct rep_kernel *k)
{
	json_obj_begin(j, NULL);
	json_str(j, "name", k->mangled);
	json_str(j, "display", k->display);
	if (!k->mangled) {
		json_hex(j, "handle", k->handle);
		json_u64(j, "pid", k->pid);
	}
	json_u64(j, "processes", k->nprocs);
	JSON_U64S(j, k, kernel_counts);
	json_f64(j, "call_time_s", (double)k->call_ns / 1e9);
	json_bool(j, "cooperative", k->flags & GS_LAUNCH_COOPERATIVE);
	json_bool(j, "cluster", k->flags & GS_LAUNCH_CLUSTER);
	json_arr_begin(j, "shapes");
	for (int s = 0; s < KSTAT_SHAPES && k->shapes[s].count; s++) {
		const struct kshape *sh = &k->shapes[s];

		json_obj_begin(j, NULL);
		json_arr_begin(j, "grid");
		for (int d = 0; d < 3; d++)
			json_u64(j, NULL, sh->grid[d]);
		json_arr_end(j);
		json_arr_begin(j, "block");
		for (int d = 0; d < 3; d++)
			json_u64(j, NULL, sh->block[d]);
		json_arr_end(j);
		json_u64(j, "shared_mem", sh->shmem);
		json_u64(j, "count", sh->count);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_u64(j, "other_shapes", k->other_shapes);
	json_obj_begin(j, "by_api");
	for (int a = 0; a < KSTAT_APIS && k->apis[a].count; a++)
		json_u64(j, api_name(k->apis[a].api), k->apis[a].count);
	json_obj_end(j);
	report_gpu_stat_json(j, "gpu", k->gpu);
	json_obj_end(j);
}

static const struct jfield kernel_totals[] = {
	JU64(struct report, "launches", launches),
	JU64(struct report, "failed", launch_errors),
	JU64(struct report, "results_unread", results_unread),
	JU64(struct report, "graph_launches", graph_launches),
	JU64(struct report, "graphs", graphs),
	JU64(struct report, "runs_in_graphs", kernel_runs_in_graphs),
	JU64(struct report, "graph_launches_conditional", cond_graph_launches),
	JU64(struct report, "graph_nodes_lost", graph_nodes_lost),
	JU64(struct report, "graph_launches_unseen", graph_launches_unseen),
	JU64(struct report, "unnamed", unknown_kernels),
	JU64(struct report, "unnamed_launches", unknown_launches),
	JU64(struct report, "named_from_driver", driver_names)
};

static void kernels(struct json *j, const struct report *r)
{
	json_obj_begin(j, "kernels");
	JSON_U64S(j, r, kernel_totals);
	json_obj_begin(j, "by_api");
	for (size_t i = 0; i < r->nlaunch_apis; i++)
		json_u64(j, api_name(r->launch_apis[i].api), r->launch_apis[i].count);
	json_obj_end(j);
	json_arr_begin(j, "list");
	for (size_t i = 0; i < r->nkernels; i++)
		kernel(j, &r->kernels[i]);
	json_arr_end(j);
	json_obj_end(j);
}

static void secs(struct json *j, const char *key, __u64 ns)
{
	json_f64(j, key, (double)ns / 1e9);
}

static const struct jfield site_counts[] = { JU64(struct rep_site, "outstanding_bytes", live_bytes),
					     JU64(struct rep_site, "outstanding_count", live_count),
					     JU64(struct rep_site, "peak_bytes", peak_bytes),
					     JU64(struct rep_site, "allocations", allocs),
					     JU64(struct rep_site, "allocated_bytes", alloc_bytes),
					     JU64(struct rep_site, "frees", frees),
					     JU64(struct rep_site, "failed", failed) };

static void site(struct json *j, const struct rep_site *s)
{
	json_obj_begin(j, NULL);
	json_u64(j, "pid", s->pid);
	json_u64(j, "site", s->id);
	json_str(j, "where", s->label);
	json_str(j, "stack", s->stack);
	json_str(j, "api", api_name(s->api));
	json_str(j, "kind", kind_names[s->kind]);
	JSON_U64S(j, s, site_counts);
	json_bool(j, "process_exited", s->exited);
	json_obj_begin(j, "leak");
	json_bool(j, "suspected", s->leak.suspected);
	json_f64(j, "confidence", s->leak.confidence);
	json_f64(j, "growth_bytes_per_s", s->leak.slope_bps);
	json_i64(j, "window_growth_bytes", s->leak.growth);
	json_u64(j, "window_samples", s->leak.n);
	secs(j, "window_from_s", s->leak.from);
	secs(j, "window_to_s", s->leak.to);
	if (s->suspected_since)
		secs(j, "first_suspected_s", s->suspected_since);
	else
		json_str(j, "first_suspected_s", NULL);
	/* Suspected earlier, not at the end: the test as of the last time it was. */
	if (s->grew) {
		json_obj_begin(j, "earlier");
		secs(j, "last_suspected_s", s->suspected_last);
		json_f64(j, "confidence", s->earlier.confidence);
		json_f64(j, "growth_bytes_per_s", s->earlier.slope_bps);
		json_i64(j, "window_growth_bytes", s->earlier.growth);
		json_u64(j, "window_samples", s->earlier.n);
		secs(j, "window_from_s", s->earlier.from);
		secs(j, "window_to_s", s->earlier.to);
		json_obj_end(j);
	} else {
		json_str(j, "earlier", NULL);
	}
	json_obj_end(j);
	json_arr_begin(j, "oldest_live");
	for (unsigned int i = 0; i < s->nexamples; i++) {
		json_obj_begin(j, NULL);
		json_hex(j, "address", s->examples[i].addr);
		json_u64(j, "size", s->examples[i].size);
		secs(j, "time_s", s->examples[i].ts);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}

static const struct jfield oom_sizes[] = {
	JU64(struct oom_finding, "other_processes_bytes", others_bytes),
	JU64(struct oom_finding, "free_between_allocations_bytes", holes),
	JU64(struct oom_finding, "largest_free_range_bytes", largest_hole),
	JU64(struct oom_finding, "address_span_bytes", span),
	JU64(struct oom_finding, "stranded_bytes", stranded),
	JU64(struct oom_finding, "largest_stranded_bytes", largest_stranded)
};

static void oom(struct json *j, const struct rep_oom *ro)
{
	const struct oom_finding *o = &ro->o;
	char text[1536];

	json_obj_begin(j, NULL);
	secs(j, "time_s", o->ts);
	json_u64(j, "pid", o->pid);
	json_u64(j, "tid", o->tid);
	json_str(j, "api", api_name(o->api));
	json_i64(j, "device", o->device);
	json_u64(j, "requested_bytes", o->requested);
	json_str(j, "cause", oom_cause_key(o->cause));
	json_u64(j, "process_device_bytes", o->live_dev);
	json_u64(j, "process_all_devices_bytes", o->live_all);
	if (o->have_nvml) {
		json_u64(j, "nvml_used_bytes", o->nvml_used);
		json_u64(j, "nvml_total_bytes", o->nvml_total);
		json_u64(j, "nvml_free_bytes", o->nvml_total - GS_MIN(o->nvml_used, o->nvml_total));
	} else {
		json_str(j, "nvml_used_bytes", NULL);
		json_str(j, "nvml_total_bytes", NULL);
		json_str(j, "nvml_free_bytes", NULL);
	}
	json_u64(j, "other_processes", o->others);
	JSON_U64S(j, o, oom_sizes);
	json_u64(j, "site", o->site);
	json_str(j, "where", ro->site);
	json_str(j, "caching_allocator", report__caching_allocator(ro->site));
	json_arr_begin(j, "top_sites");
	for (unsigned int k = 0; k < o->ntop; k++) {
		json_obj_begin(j, NULL);
		json_u64(j, "site", o->top[k].site);
		json_str(j, "where", ro->top[k]);
		json_u64(j, "bytes", o->top[k].bytes);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_str(j, "text", report__oom_text(ro, text, sizeof(text)));
	json_obj_end(j);
}

static const struct jfield frag_sizes[] = {
	JU64(struct frag_sample, "live_bytes", live),
	JU64(struct frag_sample, "free_between_bytes", holes),
	JU64(struct frag_sample, "largest_free_range_bytes", largest_hole),
	JU64(struct frag_sample, "stranded_bytes", stranded),
	JU64(struct frag_sample, "largest_stranded_bytes", largest_stranded),
	JU64(struct frag_sample, "allocations", ranges)
};

static void frag_sample_json(struct json *j, const char *key, const struct frag_sample *f)
{
	json_obj_begin(j, key);
	secs(j, "time_s", f->ts);
	json_f64(j, "score", frag_score(f));
	JSON_U64S(j, f, frag_sizes);
	json_obj_end(j);
}

static void memory_analyses(struct json *j, const struct report *r)
{
	json_u64(j, "sites_total", r->sites_total);
	json_bool(j, "sites_are_stacks", r->stacks);
	json_u64(j, "suspected_leaks", r->leaks);
	json_u64(j, "grew_then_stopped_sites", r->grew);
	json_arr_begin(j, "sites");
	for (size_t i = 0; i < r->nsites; i++)
		site(j, &r->sites[i]);
	json_arr_end(j);
	json_u64(j, "out_of_memory", r->ooms_total);
	json_arr_begin(j, "ooms");
	for (size_t i = 0; i < r->nooms; i++)
		oom(j, &r->ooms[i]);
	json_arr_end(j);
	json_arr_begin(j, "fragmentation");
	for (size_t i = 0; i < r->nfrags; i++) {
		json_obj_begin(j, NULL);
		json_u64(j, "pid", r->frags[i].pid);
		json_i64(j, "device", r->frags[i].device);
		json_u64(j, "samples", r->frags[i].samples);
		frag_sample_json(j, "worst", &r->frags[i].worst);
		frag_sample_json(j, "last", &r->frags[i].last);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static const struct jfield memory_calls[] = {
	JU64(struct report, "allocations", allocs), JU64(struct report, "frees", frees),
	JU64(struct report, "failed_allocations", failed_allocs),
	JU64(struct report, "untracked_frees", untracked_frees),
	JU64(struct report, "reserved_bytes", reserved)
};

static void memory(struct json *j, const struct report *r)
{
	json_obj_begin(j, "memory");
	by_kind(j, "peak_bytes", r->peak);
	by_kind(j, "in_use_end_bytes", r->in_use_end);
	JSON_U64S(j, r, memory_calls);
	json_obj_begin(j, "by_api");
	for (size_t i = 0; i < r->nalloc_apis; i++) {
		json_obj_begin(j, api_name(r->alloc_apis[i].api));
		json_u64(j, "calls", r->alloc_apis[i].count);
		json_u64(j, "bytes", r->alloc_api_bytes[i]);
		json_obj_end(j);
	}
	json_obj_end(j);
	json_obj_begin(j, "outstanding");
	by_kind(j, "bytes", r->outstanding_bytes);
	by_kind(j, "count", r->outstanding_count);
	json_arr_begin(j, "by_call");
	for (size_t i = 0; i < r->noutstanding; i++) {
		json_obj_begin(j, NULL);
		json_str(j, "api", api_name(r->outstanding[i].api));
		json_str(j, "kind", kind_names[r->outstanding[i].kind]);
		json_u64(j, "size", r->outstanding[i].size);
		json_u64(j, "count", r->outstanding[i].count);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_arr_begin(j, "largest");
	for (size_t i = 0; i < r->nlargest; i++) {
		const struct rep_alloc *a = &r->largest[i];

		json_obj_begin(j, NULL);
		json_u64(j, "pid", a->pid);
		json_u64(j, "tid", a->tid);
		json_str(j, "api", api_name(a->api));
		json_str(j, "kind", kind_names[a->kind]);
		json_hex(j, "address", a->addr);
		json_u64(j, "size", a->size);
		json_f64(j, "time_s",
			 a->ts > r->start_ts ? (double)(a->ts - r->start_ts) / 1e9 : 0);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
	memory_analyses(j, r);
	json_obj_end(j);
}

static const struct jfield copy_counts[] = { JU64(struct copy_stat, "count", count),
					     JU64(struct copy_stat, "bytes", bytes),
					     JU64(struct copy_stat, "sync_count", sync_count),
					     JU64(struct copy_stat, "sync_bytes", sync_bytes) };

static const struct jfield copy_async[] = {
	JU64(struct copy_stat, "async_count", async_count),
	JU64(struct copy_stat, "async_bytes", async_bytes),
	JU64(struct copy_stat, "failed", errors),
	JU64(struct copy_stat, "results_unread", results_unread),
	JU64(struct copy_stat, "empty", empty),
	JU64(struct copy_stat, "captured", captured),
	JU64(struct copy_stat, "captured_bytes", captured_bytes),
	JU64(struct copy_stat, "graph_runs", graph_runs),
	JU64(struct copy_stat, "graph_bytes", graph_bytes)
};

static void copies(struct json *j, const struct report *r)
{
	json_obj_begin(j, "copies");
	for (int k = 0; k < GS_COPY_KIND_MAX; k++) {
		const struct copy_stat *s = &r->copies[k];

		if (!s->count && !s->errors && !s->graph_runs)
			continue;
		json_obj_begin(j, copy_kind_name(k));
		JSON_U64S(j, s, copy_counts);
		json_f64(j, "sync_time_s", (double)s->sync_ns / 1e9);
		json_f64(j, "sync_bytes_per_s",
			 s->sync_ns ? (double)s->sync_bytes * 1e9 / (double)s->sync_ns : 0);
		JSON_U64S(j, s, copy_async);
		json_obj_end(j);
	}
	json_obj_end(j);
}

static void syncs(struct json *j, const struct report *r)
{
	json_obj_begin(j, "sync");
	for (size_t i = 0; i < r->nsyncs; i++) {
		const struct rep_sync *s = &r->syncs[i];

		json_obj_begin(j, api_name(s->api));
		json_u64(j, "calls", s->s.calls);
		json_f64(j, "total_s", (double)s->s.total_ns / 1e9);
		json_f64(j, "max_s", (double)s->s.max_ns / 1e9);
		json_u64(j, "not_ready", s->s.not_ready);
		json_obj_end(j);
	}
	json_obj_end(j);
}

static void nccl(struct json *j, const struct report *r)
{
	json_obj_begin(j, "nccl");
	json_obj_begin(j, "ops");
	for (int op = 1; op < NCCL_OPS; op++) {
		const struct nccl_stat *s = &r->nccl[op];

		if (!s->calls)
			continue;
		json_obj_begin(j, nccl_op_name(op));
		json_u64(j, "calls", s->calls);
		json_u64(j, "bytes", s->bytes);
		json_f64(j, "total_s", (double)s->total_ns / 1e9);
		json_f64(j, "max_s", (double)s->max_ns / 1e9);
		json_u64(j, "failed", s->errors);
		json_u64(j, "unknown_comm_size", s->unknown_size);
		json_obj_end(j);
	}
	json_obj_end(j);
	json_arr_begin(j, "communicators");
	for (size_t i = 0; i < r->ncomms; i++) {
		const struct comm_entry *c = &r->comms[i];

		json_obj_begin(j, NULL);
		json_u64(j, "pid", c->pid);
		json_hex(j, "comm", c->comm);
		json_i64(j, "rank", c->rank);
		json_i64(j, "nranks", c->nranks);
		json_u64(j, "calls", c->calls);
		json_bool(j, "destroyed", c->destroyed);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}

static const struct jfield losses[] = { JU64(struct report, "lost_calls", lost_calls),
					JU64(struct report, "unreadable_names", nameless),
					JU64(struct report, "unwrapped_entry_points", unwrapped),
					JU64(struct report, "rings_lost", rings_lost),
					JU64(struct report, "gates_forced", gates_forced),
					JU64(struct report, "gpu_time_capped", time_capped),
					JU64(struct report, "gpu_time_lost", time_lost),
					JU64(struct report, "stacks_taken", stacks_taken),
					JU64(struct report, "stacks_skipped", stacks_skipped) };

static void errors(struct json *j, const struct report *r)
{
	json_arr_begin(j, "errors");
	for (size_t i = 0; i < r->nerrors; i++) {
		const struct rep_error *e = &r->errors[i];

		json_obj_begin(j, NULL);
		json_str(j, "api", api_name(e->api));
		json_i64(j, "result", e->result);
		json_str(j, "name", result_name(e->api, e->result));
		json_u64(j, "count", e->count);
		json_f64(j, "first_s", (double)e->first_ts / 1e9);
		json_u64(j, "pid", e->pid);
		json_u64(j, "tid", e->tid);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_begin(j, "drops");
	json_u64(j, "total", r->drops_total);
	json_obj_begin(j, "by_type");
	for (int t = 1; t < GS_EV_MAX; t++)
		if (r->drops[t])
			json_u64(j, event_type_name(t), r->drops[t]);
	json_obj_end(j);
	JSON_U64S(j, r, losses);
	json_obj_end(j);
}

void report_json__write(FILE *f, const struct report *r)
{
	struct json j;

	json_init(&j, f);
	json_obj_begin(&j, NULL);
	json_u64(&j, "gpuscope_report", REPORT_JSON_VERSION);
	session(&j, r);
	host(&j, r);
	processes(&j, r);
	kernels(&j, r);
	memory(&j, r);
	copies(&j, r);
	syncs(&j, r);
	nccl(&j, r);
	errors(&j, r);
	report_gpu_json(&j, r);
	report_python_json(&j, r);
	report_pyexc_json(&j, r);
	report_steps_json(&j, r);
	report_devcode_json(&j, r);
	report_os_json(&j, r);
	report_findings_json(&j, r);
	json_obj_end(&j);
	json_finish(&j);
	fflush(f);
}
