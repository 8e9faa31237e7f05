// SPDX-License-Identifier: MIT
/* The OS section of the report, text and JSON (the OS plane's aggregates, model.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/names.h"
#include "core/util.h"
#include "gpuscope/cuda_abi.h"
#include "sink/sinks.h"

void report_os_text(FILE *f, const struct report *r)
{
	const struct os_result *o = &r->os;
	char a[32], b[32], c[32], name[64];

	if (!r->os_plane)
		return;
	fprintf(f,
		"\nOS (threads of the traced processes; off-CPU intervals and system calls of "
		"%u us or more)\n",
		r->os_min_us);
	if (!r->os_events) {
		fprintf(f, "  nothing recorded\n");
		return;
	}
	for (unsigned int k = GS_OFFCPU_PREEMPTED; k <= GS_OFFCPU_OTHER; k++) {
		if (!o->offcpu_count[k])
			continue;
		fmt_dur(a, sizeof(a), (double)o->offcpu_ns[k]);
		fprintf(f, "  off CPU, %-9s %8llu times, %s\n", offcpu_reason_name(k),
			(unsigned long long)o->offcpu_count[k], a);
	}
	if (o->runq_ns) {
		fmt_dur(a, sizeof(a), (double)o->runq_ns);
		fprintf(f, "  runnable but waiting for a CPU: %s\n", a);
	}
	if (o->faults)
		fprintf(f, "  page faults: %llu (%llu major)\n", (unsigned long long)o->faults,
			(unsigned long long)o->major_faults);
	for (size_t i = 0; i < o->ndevices; i++) {
		const struct io_stat *s = &o->devices[i].s;

		fmt_bytes(a, sizeof(a), (double)s->bytes);
		fmt_dur(b, sizeof(b), (double)s->total_ns / (double)s->count);
		fmt_dur(c, sizeof(c), (double)s->max_ns);
		fprintf(f, "  block I/O on %-8s %6llu requests, %s, mean %s, max %s%s\n",
			report__dev_name(r, o->devices[i].dev, name, sizeof(name)),
			(unsigned long long)s->count, a, b, c, s->errors ? ", with errors" : "");
	}
	for (int d = 0; d < 2; d++)
		for (int p = 0; p < NET_PROTOS; p++) {
			if (!o->net_calls[d][p])
				continue;
			fmt_bytes(a, sizeof(a), (double)o->net_bytes[d][p]);
			fprintf(f, "  %s %-8s %s in %llu calls\n", net_proto_name(p),
				d == GS_NET_SEND ? "sent" : "received", a,
				(unsigned long long)o->net_calls[d][p]);
		}
	if (o->nsyscalls)
		fprintf(f, "  %-16s %8s %10s %10s\n", "system call", "calls", "total", "max");
	for (size_t i = 0; i < o->nsyscalls; i++) {
		const struct sys_stat *s = &o->syscalls[i].s;

		fmt_dur(a, sizeof(a), (double)s->total_ns);
		fmt_dur(b, sizeof(b), (double)s->max_ns);
		fprintf(f, "  %-16s %8llu %10s %10s\n", syscall_name(o->syscalls[i].nr),
			(unsigned long long)s->count, a, b);
	}
	if (o->oom_killed)
		fprintf(f, "  a traced process was killed by the kernel's OOM killer\n");
}

static const struct jfield io_counts[] = {
	JU64(struct io_stat, "count", count),	    JU64(struct io_stat, "bytes", bytes),
	JU64(struct io_stat, "total_ns", total_ns), JU64(struct io_stat, "max_ns", max_ns),
	JU64(struct io_stat, "errors", errors),	    JU64(struct io_stat, "ends_unseen", ends_unseen)
};

static const struct jfield syscall_times[] = { JU64(struct sys_stat, "count", count),
					       JU64(struct sys_stat, "total_ns", total_ns),
					       JU64(struct sys_stat, "max_ns", max_ns) };

static void os_json(struct json *j, const char *key, const struct report *r,
		    const struct os_result *o)
{
	char name[64];

	json_obj_begin(j, key);
	json_obj_begin(j, "off_cpu");
	for (unsigned int k = GS_OFFCPU_PREEMPTED; k <= GS_OFFCPU_OTHER; k++) {
		json_obj_begin(j, offcpu_reason_name(k));
		json_u64(j, "count", o->offcpu_count[k]);
		json_u64(j, "ns", o->offcpu_ns[k]);
		json_obj_end(j);
	}
	json_u64(j, "runnable_waiting_ns", o->runq_ns);
	json_obj_end(j);
	json_u64(j, "page_faults", o->faults);
	json_u64(j, "major_page_faults", o->major_faults);
	json_obj_begin(j, "block_io");
	for (unsigned int op = GS_BLOCK_READ; op <= GS_BLOCK_OTHER; op++) {
		json_obj_begin(j, block_op_name(op));
		json_u64(j, "count", o->io[op].count);
		json_u64(j, "bytes", o->io[op].bytes);
		json_u64(j, "total_ns", o->io[op].total_ns);
		json_u64(j, "max_ns", o->io[op].max_ns);
		json_u64(j, "ends_unseen", o->io[op].ends_unseen);
		json_obj_end(j);
	}
	json_arr_begin(j, "devices");
	for (size_t i = 0; i < o->ndevices; i++) {
		const struct io_stat *s = &o->devices[i].s;

		json_obj_begin(j, NULL);
		json_str(j, "device", report__dev_name(r, o->devices[i].dev, name, sizeof(name)));
		JSON_U64S(j, s, io_counts);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
	json_obj_begin(j, "net");
	for (int p = 0; p < NET_PROTOS; p++) {
		json_obj_begin(j, net_proto_name(p));
		json_u64(j, "sent_bytes", o->net_bytes[GS_NET_SEND][p]);
		json_u64(j, "sent_calls", o->net_calls[GS_NET_SEND][p]);
		json_u64(j, "received_bytes", o->net_bytes[GS_NET_RECV][p]);
		json_u64(j, "received_calls", o->net_calls[GS_NET_RECV][p]);
		json_obj_end(j);
	}
	json_obj_end(j);
	json_arr_begin(j, "syscalls");
	for (size_t i = 0; i < o->nsyscalls; i++) {
		const struct sys_stat *s = &o->syscalls[i].s;

		json_obj_begin(j, NULL);
		json_str(j, "name", syscall_name(o->syscalls[i].nr));
		json_u64(j, "nr", o->syscalls[i].nr);
		JSON_U64S(j, s, syscall_times);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_u64(j, "thread_exits", o->thread_exits);
	json_bool(j, "oom_killed", o->oom_killed);
	json_obj_end(j);
}

void report_os_json(struct json *j, const struct report *r)
{
	static const struct os_result none;

	if (!r->os_plane) {
		json_str(j, "os", NULL);
		return;
	}
	json_obj_begin(j, "os");
	json_u64(j, "min_us", r->os_min_us);
	json_u64(j, "events", r->os_events);
	os_json(j, "total", r, &r->os);
	json_arr_begin(j, "processes");
	for (size_t i = 0; i < r->nprocs; i++) {
		json_obj_begin(j, NULL);
		json_u64(j, "pid", r->procs[i].s.pid);
		os_json(j, "os", r, r->procs[i].has_os ? &r->procs[i].os : &none);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}

static const char *cause_name(unsigned int c)
{
	static const char *const n[] = {
		[CAUSE_BLOCKED] = "blocked",	 [CAUSE_DISK] = "disk",
		[CAUSE_PREEMPTED] = "preempted", [CAUSE_FAULTS] = "page_faults",
		[CAUSE_ON_CPU] = "on_cpu",	 [CAUSE_QUEUED] = "queued"
	};

	return c < ARRAY_SIZE(n) && n[c] ? n[c] : "?";
}

static char *stream_text(char *buf, size_t n, __u64 key)
{
	__u64 stream = key & 0xffffffffULL;

	if (key == 0 || key == GS_CU_STREAM_LEGACY)
		snprintf(buf, n, "default stream");
	else if (stream == GS_CU_STREAM_PER_THREAD && !(key >> 32))
		snprintf(buf, n, "per-thread stream");
	else if (stream == GS_CU_STREAM_PER_THREAD)
		snprintf(buf, n, "per-thread stream of thread %u", (unsigned int)(key >> 32));
	else
		snprintf(buf, n, "stream 0x%llx", (unsigned long long)key);
	return buf;
}

/* A kernel that waited on the GPU with its stream free. */
static char *queued_describe(const struct finding *f, __u64 t0, char *buf, size_t n)
{
	char gap[32], busy[32], stream[48], other[64], why[256];

	fmt_dur(gap, sizeof(gap), (double)f->gap_ns);
	fmt_dur(busy, sizeof(busy), (double)f->busy_ns);
	stream_text(stream, sizeof(stream), f->stream);
	stream_text(other, sizeof(other), f->busy_stream);
	if (f->busy_ns)
		snprintf(why, sizeof(why), "GPU %d was running %s's %s (pid %u) for %s of it",
			 f->device, other, f->busy_kernel, f->busy_pid, busy);
	else
		snprintf(why, sizeof(why),
			 "nothing else this trace saw ran on GPU %d then (another process's "
			 "work?)",
			 f->device);
	snprintf(buf, n,
		 "kernel %s on %s waited %s on GPU %d at %.3f s (pid %u) with its launch "
		 "returned and its stream free: %s%s",
		 f->kernel, stream, gap, f->device,
		 (double)(f->gap_start > t0 ? f->gap_start - t0 : 0) / 1e9, f->pid,
		 f->after_event_wait ? "the stream was waiting for an event (cuStreamWaitEvent); "
				     : "",
		 why);
	return buf;
}

char *finding_describe(const struct finding *f, __u64 t0, char *buf, size_t n)
{
	char gap[32], late[32], off[32], io[32], bytes[32], dev[48], stream[48], what[256];

	if (f->cause == CAUSE_QUEUED)
		return queued_describe(f, t0, buf, n);
	fmt_dur(gap, sizeof(gap), (double)f->gap_ns);
	fmt_dur(late, sizeof(late), (double)f->wait_ns);
	fmt_dur(off, sizeof(off), (double)f->off_ns);
	fmt_dur(io, sizeof(io), (double)f->io_ns);
	fmt_bytes(bytes, sizeof(bytes), (double)f->io_bytes);
	snprintf(dev, sizeof(dev), "%s", f->io_dev_name);
	if (f->stream == 0 || f->stream == 1)
		snprintf(stream, sizeof(stream), "default stream");
	else if (f->stream == 2)
		snprintf(stream, sizeof(stream), "per-thread stream");
	else
		snprintf(stream, sizeof(stream), "stream 0x%llx", (unsigned long long)f->stream);
	switch (f->cause) {
	case CAUSE_DISK:
		if (f->io_count && 2 * f->off_ns < f->io_ns)
			snprintf(what, sizeof(what),
				 "on the CPU issuing I/O%s%s%s on %s for %s (%u requests, %s; off "
				 "the CPU only %s)",
				 f->syscall >= 0 ? " in " : "",
				 f->syscall >= 0 ? syscall_name((unsigned int)f->syscall) : "",
				 f->syscall >= 0 ? "()" : "", dev, io, f->io_count, bytes, off);
		else if (f->io_count)
			snprintf(what, sizeof(what),
				 "blocked in %s%s on %s for %s (%u requests, %s)",
				 f->syscall >= 0 ? syscall_name((unsigned int)f->syscall)
						 : "a page-in",
				 f->syscall >= 0 ? "()" : "", dev, off, f->io_count, bytes);
		else
			snprintf(what, sizeof(what), "blocked on disk%s%s%s for %s",
				 f->syscall >= 0 ? " in " : "",
				 f->syscall >= 0 ? syscall_name((unsigned int)f->syscall) : "",
				 f->syscall >= 0 ? "()" : "", off);
		break;
	case CAUSE_BLOCKED:
		snprintf(what, sizeof(what), "asleep%s%s%s for %s", f->syscall >= 0 ? " in " : "",
			 f->syscall >= 0 ? syscall_name((unsigned int)f->syscall) : "",
			 f->syscall >= 0 ? "()" : "", off);
		break;
	case CAUSE_PREEMPTED:
		snprintf(what, sizeof(what),
			 "runnable but preempted for %s (its CPU went to other "
			 "tasks)",
			 off);
		break;
	case CAUSE_FAULTS:
		snprintf(what, sizeof(what), "on the CPU, taking %llu page faults (%llu major)",
			 (unsigned long long)f->faults, (unsigned long long)f->major_faults);
		break;
	default:
		snprintf(what, sizeof(what), "on the CPU in its own code (off it only %s)", off);
		break;
	}
	if (f->launch_gap)
		snprintf(buf, n,
			 "%s got no launch for %s at %.3f s (pid %u; without GPU times the GPU "
			 "may still have had work queued): launching thread %u was %s",
			 stream, gap, (double)(f->gap_start > t0 ? f->gap_start - t0 : 0) / 1e9,
			 f->pid, f->tid, what);
	else
		snprintf(buf, n,
			 "%s idle %s at %.3f s (pid %u, GPU %d): the launch came %s late; "
			 "launching thread %u was %s",
			 stream, gap, (double)(f->gap_start > t0 ? f->gap_start - t0 : 0) / 1e9,
			 f->pid, f->device, late, f->tid, what);
	if (f->other_tid) {
		size_t len = strlen(buf);

		fmt_dur(off, sizeof(off), (double)f->other_off_ns);
		fmt_bytes(bytes, sizeof(bytes), (double)f->other_io_bytes);
		snprintf(dev, sizeof(dev), "%s", f->other_io_dev_name);
		fmt_dur(io, sizeof(io), (double)f->other_io_ns);
		if (f->other_cause == CAUSE_DISK && f->other_io_count &&
		    2 * f->other_off_ns < f->other_io_ns)
			snprintf(what, sizeof(what),
				 "on the CPU issuing I/O%s%s%s on %s for %s (%u requests, %s; off "
				 "the CPU only %s)",
				 f->other_syscall >= 0 ? " in " : "",
				 f->other_syscall >= 0
					 ? syscall_name((unsigned int)f->other_syscall)
					 : "",
				 f->other_syscall >= 0 ? "()" : "", dev, io, f->other_io_count,
				 bytes, off);
		else if (f->other_cause == CAUSE_DISK && f->other_io_count)
			snprintf(what, sizeof(what),
				 "blocked in %s() on %s for %s (%u requests, %s)",
				 f->other_syscall >= 0
					 ? syscall_name((unsigned int)f->other_syscall)
					 : "a page-in",
				 dev, off, f->other_io_count, bytes);
		else
			snprintf(what, sizeof(what), "%s in %s() for %s",
				 f->other_cause == CAUSE_DISK ? "blocked on disk" : "asleep",
				 f->other_syscall >= 0
					 ? syscall_name((unsigned int)f->other_syscall)
					 : "?",
				 off);
		snprintf(buf + len, n - len, "; meanwhile its thread %u was %s", f->other_tid,
			 what);
	}
	return buf;
}

void report_findings_text(FILE *f, const struct report *r)
{
	char line[512];

	if (!r->nfindings)
		return;
	fprintf(f, "\nFindings (%s: %llu; the longest)\n",
		r->findings[0].launch_gap
			? "launches 10 ms or more after the previous one into their stream"
			: "GPU streams idle waiting for a launch, kernels waiting on the GPU",
		(unsigned long long)r->findings_total);
	for (size_t i = 0; i < r->nfindings; i++)
		fprintf(f, "  %s\n", finding_describe(&r->findings[i], r->t0, line, sizeof(line)));
}

static const struct jfield finding_times[] = { JU64(struct finding, "idle_ns", gap_ns),
					       JU64(struct finding, "launch_late_ns", wait_ns),
					       JU64(struct finding, "thread_off_cpu_ns", off_ns) };

static const struct jfield finding_io[] = {
	JU64(struct finding, "io_bytes", io_bytes), JU64(struct finding, "io_ns", io_ns),
	JU64(struct finding, "page_faults", faults),
	JU64(struct finding, "major_page_faults", major_faults)
};

void report_findings_json(struct json *j, const struct report *r)
{
	char line[512], sbuf[64];

	json_obj_begin(j, "findings");
	json_u64(j, "gaps", r->findings_total);
	json_arr_begin(j, "longest");
	for (size_t i = 0; i < r->nfindings; i++) {
		const struct finding *x = &r->findings[i];

		json_obj_begin(j, NULL);
		json_str(j, "text", finding_describe(x, r->t0, line, sizeof(line)));
		json_str(j, "kind",
			 x->launch_gap		    ? "launch_gap"
			 : x->cause == CAUSE_QUEUED ? "queue_wait"
						    : "idle_stream");
		json_str(j, "cause", cause_name(x->cause));
		json_hex(j, "stream", x->stream);
		json_u64(j, "pid", x->pid);
		json_u64(j, "tid", x->tid);
		json_i64(j, "device", x->device);
		json_u64(j, "at_ns", x->gap_start > r->t0 ? x->gap_start - r->t0 : 0);
		JSON_U64S(j, x, finding_times);
		json_str(j, "syscall",
			 x->syscall >= 0 ? syscall_name((unsigned int)x->syscall) : NULL);
		json_str(j, "io_device", x->io_count ? x->io_dev_name : NULL);
		json_u64(j, "io_requests", x->io_count);
		JSON_U64S(j, x, finding_io);
		if (x->cause == CAUSE_QUEUED) {
			json_u64(j, "queued_ns", x->gap_ns);
			json_str(j, "kernel", x->kernel);
			json_bool(j, "after_event_wait", x->after_event_wait);
			if (x->busy_ns) {
				json_obj_begin(j, "busy_with");
				json_u64(j, "pid", x->busy_pid);
				json_hex(j, "stream", x->busy_stream);
				json_str(j, "stream_text",
					 stream_text(sbuf, sizeof(sbuf), x->busy_stream));
				json_str(j, "kernel", x->busy_kernel);
				json_u64(j, "overlap_ns", x->busy_ns);
				json_obj_end(j);
			} else {
				json_str(j, "busy_with", NULL);
			}
		}
		if (x->other_tid) {
			json_obj_begin(j, "other_thread");
			json_u64(j, "tid", x->other_tid);
			json_str(j, "cause", cause_name(x->other_cause));
			json_str(j, "syscall",
				 x->other_syscall >= 0
					 ? syscall_name((unsigned int)x->other_syscall)
					 : NULL);
			json_u64(j, "off_cpu_ns", x->other_off_ns);
			json_u64(j, "io_requests", x->other_io_count);
			json_u64(j, "io_bytes", x->other_io_bytes);
			json_u64(j, "io_ns", x->other_io_ns);
			json_obj_end(j);
		} else {
			json_str(j, "other_thread", NULL);
		}
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}
