// SPDX-License-Identifier: MIT
/* The OS section of the report, text and JSON (the OS plane's aggregates, model.h). */
#include <stdio.h>
#include <stdlib.h>

#include "core/json.h"
#include "core/names.h"
#include "core/procfs.h"
#include "core/util.h"
#include "sink/sinks.h"

struct keyed {
	__u64 key;
	const void *val;
};

static int by_total(const void *a, const void *b)
{
	const struct sys_stat *x = ((const struct keyed *)a)->val;
	const struct sys_stat *y = ((const struct keyed *)b)->val;

	return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

static int by_io_total(const void *a, const void *b)
{
	const struct io_stat *x = ((const struct keyed *)a)->val;
	const struct io_stat *y = ((const struct keyed *)b)->val;

	return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

/* The entries of a map, largest total time first; the caller frees. */
static struct keyed *sorted(const struct hmap *h, int (*cmp)(const void *, const void *))
{
	struct keyed *v = xcalloc(h->len + 1, sizeof(*v));
	struct hmap_slot *s;
	size_t n = 0;

	hmap_for_each (h, s)
		v[n++] = (struct keyed){ s->k1, s->val };
	qsort(v, n, sizeof(*v), cmp);
	return v;
}

void report_os_text(FILE *f, const struct report *r)
{
	const struct os_stat *o = r->os;
	char a[32], b[32], c[32], name[64];
	struct keyed *v;

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
	v = sorted(&o->devices, by_io_total);
	for (size_t i = 0; i < o->devices.len; i++) {
		const struct io_stat *s = v[i].val;

		fmt_bytes(a, sizeof(a), (double)s->bytes);
		fmt_dur(b, sizeof(b), (double)s->total_ns / (double)s->count);
		fmt_dur(c, sizeof(c), (double)s->max_ns);
		fprintf(f, "  block I/O on %-8s %6llu requests, %s, mean %s, max %s%s\n",
			block_dev_name((__u32)v[i].key, name, sizeof(name)),
			(unsigned long long)s->count, a, b, c, s->errors ? ", with errors" : "");
	}
	free(v);
	for (int d = 0; d < 2; d++)
		for (int p = 0; p < NET_PROTOS; p++) {
			if (!o->net_calls[d][p])
				continue;
			fmt_bytes(a, sizeof(a), (double)o->net_bytes[d][p]);
			fprintf(f, "  %s %-8s %s in %llu calls\n", net_proto_name(p),
				d == GS_NET_SEND ? "sent" : "received", a,
				(unsigned long long)o->net_calls[d][p]);
		}
	v = sorted(&o->syscalls, by_total);
	if (o->syscalls.len)
		fprintf(f, "  %-16s %8s %10s %10s\n", "system call", "calls", "total", "max");
	for (size_t i = 0; i < o->syscalls.len; i++) {
		const struct sys_stat *s = v[i].val;

		fmt_dur(a, sizeof(a), (double)s->total_ns);
		fmt_dur(b, sizeof(b), (double)s->max_ns);
		fprintf(f, "  %-16s %8llu %10s %10s\n", syscall_name((unsigned int)v[i].key),
			(unsigned long long)s->count, a, b);
	}
	free(v);
	if (o->oom_killed)
		fprintf(f, "  a traced process was killed by the kernel's OOM killer\n");
}

static void os_json(struct json *j, const char *key, const struct os_stat *o)
{
	struct keyed *v;
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
		json_obj_end(j);
	}
	json_arr_begin(j, "devices");
	v = sorted(&o->devices, by_io_total);
	for (size_t i = 0; i < o->devices.len; i++) {
		const struct io_stat *s = v[i].val;

		json_obj_begin(j, NULL);
		json_str(j, "device", block_dev_name((__u32)v[i].key, name, sizeof(name)));
		json_u64(j, "count", s->count);
		json_u64(j, "bytes", s->bytes);
		json_u64(j, "total_ns", s->total_ns);
		json_u64(j, "max_ns", s->max_ns);
		json_u64(j, "errors", s->errors);
		json_obj_end(j);
	}
	free(v);
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
	v = sorted(&o->syscalls, by_total);
	for (size_t i = 0; i < o->syscalls.len; i++) {
		const struct sys_stat *s = v[i].val;

		json_obj_begin(j, NULL);
		json_str(j, "name", syscall_name((unsigned int)v[i].key));
		json_u64(j, "nr", v[i].key);
		json_u64(j, "count", s->count);
		json_u64(j, "total_ns", s->total_ns);
		json_u64(j, "max_ns", s->max_ns);
		json_obj_end(j);
	}
	free(v);
	json_arr_end(j);
	json_u64(j, "thread_exits", o->thread_exits);
	json_bool(j, "oom_killed", o->oom_killed);
	json_obj_end(j);
}

void report_os_json(struct json *j, const struct report *r)
{
	static const struct os_stat none;

	if (!r->os_plane) {
		json_str(j, "os", NULL);
		return;
	}
	json_obj_begin(j, "os");
	json_u64(j, "min_us", r->os_min_us);
	json_u64(j, "events", r->os_events);
	os_json(j, "total", r->os);
	json_arr_begin(j, "processes");
	for (size_t i = 0; i < r->nprocs; i++) {
		json_obj_begin(j, NULL);
		json_u64(j, "pid", r->procs[i].pid);
		os_json(j, "os", r->procs[i].os ? r->procs[i].os : &none);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}
