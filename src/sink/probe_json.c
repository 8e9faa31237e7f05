// SPDX-License-Identifier: MIT
/* `gpuscope probe --json`: the maps at exit (and each ring's records) for scripts, as
 * bpftime's loaders print their maps: what a host lookup of each key returns. */
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "core/recording.h"
#include "ptx/gpuprint.h"
#include "ptx/translate.h"
#include "sink/probe_int.h"

/* A key or value: a number if it is 4 or 8 bytes, else its bytes in hex. */
static void value(struct json *j, const char *key, const unsigned char *p, unsigned int n)
{
	char hex[2 * 256 + 1];
	u64 v = 0;

	if (n == 4 || n == 8) {
		memcpy(&v, p, n);
		json_u64(j, key, v);
		return;
	}
	n = n < 256 ? n : 256;
	for (unsigned int i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", p[i]);
	hex[2 * n] = 0;
	json_str(j, key, hex);
}

/* A context's entries holding something: arrays by index, per-thread arrays with every
 * thread's value of the key (key-major: translate.h), hash maps' full slots. */
static void entries(struct json *j, const struct bundle_map *bm, const unsigned char *d,
		    size_t bytes)
{
	size_t threads = bm->kind == GS_MAP_PER_THREAD ? bm->threads : 1, vs = bm->value_size;

	json_arr_begin(j, "entries");
	if (bm->kind == GS_MAP_HASH) {
		size_t slot = bpf_hash_slot(bm->key_size, bm->value_size);

		for (size_t e = 0; (e + 1) * slot <= bytes; e++) {
			unsigned int state;

			memcpy(&state, d + e * slot, 4);
			if (state != 2)
				continue;
			json_obj_begin(j, NULL);
			value(j, "key", d + e * slot + 8, bm->key_size);
			value(j, "value", d + e * slot + 8 + ((bm->key_size + 7) & ~7u),
			      bm->value_size);
			json_obj_end(j);
		}
		json_arr_end(j);
		return;
	}
	for (size_t e = 0; e < bm->max_entries && (e * threads + 1) * vs <= bytes; e++) {
		const unsigned char *row = d + e * threads * vs;
		bool any = false;

		for (size_t t = 0; t < threads && !any && (e * threads + t + 1) * vs <= bytes; t++)
			any = !pt_zero(row + t * vs, vs);
		if (!any)
			continue;
		json_obj_begin(j, NULL);
		json_u64(j, "key", e);
		if (bm->kind != GS_MAP_PER_THREAD) {
			value(j, "value", row, bm->value_size);
		} else {
			/* (the threads holding something: thread index -> value) */
			char name[24];

			json_obj_begin(j, "threads");
			for (size_t t = 0; t < threads && (e * threads + t + 1) * vs <= bytes; t++)
				if (!pt_zero(row + t * vs, vs)) {
					snprintf(name, sizeof(name), "%zu", t);
					value(j, name, row + t * vs, bm->value_size);
				}
			json_obj_end(j);
		}
		json_obj_end(j);
	}
	json_arr_end(j);
}

/* A ring's records from the recording, in order. */
static void records(struct json *j, const struct probe_results *r, size_t m)
{
	struct recording *rec;
	const struct gs_hdr *ev;
	char err[256], hex[2 * GS_RING_REC_MAX + 1];
	bool print = !strcmp(r->b->maps[m].name, GS_PRINT_MAP);
	int k;

	json_arr_begin(j, "records");
	if (r->events && (rec = recording__open(r->events, err, sizeof(err)))) {
		while ((k = recording__next(rec, &ev, err, sizeof(err))) > 0) {
			const struct gs_ev_probe_out *o = (const void *)ev;
			unsigned int len;

			if (ev->type != GS_EV_PROBE_OUT || o->map != m)
				continue;
			len = o->len < GS_RING_REC_MAX ? o->len : GS_RING_REC_MAX;
			for (unsigned int b = 0; b < len; b++)
				snprintf(hex + 2 * b, 3, "%02x", o->data[b]);
			hex[2 * len] = 0;
			json_obj_begin(j, NULL);
			json_u64(j, "pid", ev->pid);
			json_i64(j, "device", o->device);
			json_u64(j, "ts", ev->ts);
			json_str(j, "data", hex);
			if (print) {
				char line[1024];

				json_str(j, "text",
					 gpu_print_format(o->data, len, line, sizeof(line)) ? NULL
											    : line);
			}
			json_obj_end(j);
		}
		recording__close(rec);
	}
	json_arr_end(j);
}

void render_maps_json(const struct probe_results *r, FILE *out)
{
	static const char *const kinds[] = { "?", "array", "per_thread", "hash", "ring" };
	struct json j;

	json_init(&j, out);
	json_obj_begin(&j, NULL);
	json_arr_begin(&j, "maps");
	for (size_t m = 0; m < r->b->nmaps; m++) {
		const struct bundle_map *bm = &r->b->maps[m];
		u64 drops = 0;

		json_obj_begin(&j, NULL);
		json_str(&j, "name", bm->name);
		json_str(&j, "kind", kinds[bm->kind <= GS_MAP_RING ? bm->kind : 0]);
		json_u64(&j, "key_size", bm->key_size);
		json_u64(&j, "value_size", bm->value_size);
		json_u64(&j, bm->kind == GS_MAP_RING ? "bytes" : "max_entries", bm->max_entries);
		if (bm->kind == GS_MAP_PER_THREAD)
			json_u64(&j, "threads", bm->threads);
		json_arr_begin(&j, "contexts");
		for (size_t i = 0; i < r->n; i++)
			for (size_t c = 0; c < r->s[i].nctx; c++) {
				const struct snap_ctx *x = &r->s[i].ctx[c];

				if (!x->data[m])
					continue;
				json_obj_begin(&j, NULL);
				json_u64(&j, "pid", (u64)r->s[i].pid);
				json_i64(&j, "device", x->device);
				if (bm->kind == GS_MAP_RING) {
					u64 ctl[2] = { 0, 0 };

					if (x->bytes[m] >= sizeof(ctl))
						memcpy(ctl, x->data[m], sizeof(ctl));
					json_u64(&j, "drops", ctl[1]);
					drops += ctl[1];
				} else {
					entries(&j, bm, x->data[m], x->bytes[m]);
				}
				json_obj_end(&j);
			}
		json_arr_end(&j);
		if (bm->kind == GS_MAP_RING) {
			json_u64(&j, "drops", drops);
			records(&j, r, m);
		}
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
}
