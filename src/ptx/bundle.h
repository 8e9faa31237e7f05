/* SPDX-License-Identifier: MIT */
/*
 * What gpuscope hands the in-process plane for device-side probes (GPUSCOPE_PROBE names the
 * file), and what the plane hands back (the snapshot, one file per process in
 * GPUSCOPE_PROBE_OUT).
 *
 * The bundle, text:
 *   gpuscope-probes 1
 *   map NAME KIND KEY VALUE ENTRIES THREADS [SHARED] (one per map, in gs_maps order; a
 *                                                 ring buffer's ENTRIES: its bytes; SHARED
 *                                                 1: an array in host memory, one for the
 *                                                 process, host programs' and the GPU's)
 *   probe POINT KERNEL FUNC                      (POINT: enum ptx_point)
 *   host WHEN NAME N                             then N eBPF instructions (8 bytes each)
 *                                                 and a newline: a host program run at
 *                                                 launches (WHEN: enum bpfobj_host_run),
 *                                                 its map references BPF_PSEUDO_MAP_IDX
 *   rodata N                                     then N bytes and a newline: the object's
 *                                                 read-only data, for the host programs
 *   funcs BYTES                                  then BYTES of PTX: gs_maps and the probes
 *
 * The snapshot, text lines then each map's bytes:
 *   gpuscope-probe-snapshot 1
 *   pid PID
 *   kernel ID INSTRUMENTED ROUTED FALLBACK NAME  (whether probes went in; launches routed to
 *                                                 the probed code, and launches that ran
 *                                                 the original instead)
 *   note TEXT                                    (what went wrong, once per thing)
 *   stat KEY VALUE                               (instrumentation times and such)
 *   ctx DEVICE SM                                (a context's maps follow)
 *   data MAP BYTES                               then BYTES of the map's memory
 *   end
 * Both are parsed as untrusted (bounded, every number checked).
 */
#ifndef GS_PTX_BUNDLE_H
#define GS_PTX_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <linux/bpf.h>

#include "ptx/rewrite.h"

#define BUNDLE_MAX_MAPS	  64
#define BUNDLE_MAX_PROBES 64
#define BUNDLE_MAX_HOST	  16
#define BUNDLE_HOST_INSNS 4096

struct bundle_map {
	char name[64];
	unsigned int kind, key_size, value_size, max_entries;
	unsigned int threads; /* per-thread arrays: how many threads have theirs */
	unsigned int shared;  /* 1: in host memory (bundle.h's SHARED) */
};

struct bundle_host {
	char name[64];
	int when; /* enum bpfobj_host_run */
	struct bpf_insn *insns;
	size_t n;
};

struct bundle {
	struct bundle_map maps[BUNDLE_MAX_MAPS];
	size_t nmaps;
	struct ptx_probe probes[BUNDLE_MAX_PROBES]; /* strings owned */
	size_t nprobes;
	struct bundle_host hosts[BUNDLE_MAX_HOST]; /* insns owned */
	size_t nhosts;
	unsigned char *rodata; /* (owned) */
	size_t rodata_len;
	char *funcs;
};

/* A ring buffer's size is one the GPU side takes (a power of two, GS_RING_MIN..MAX). */
bool bundle_ring_ok(unsigned int bytes);
/* A map's bytes in device memory (0 if too large to hold; a ring: its control block). */
size_t bundle_map_bytes(const struct bundle_map *m);
int bundle_write(const struct bundle *b, FILE *f);
int bundle_parse(const char *buf, size_t len, struct bundle *b, char *err, size_t errlen);
void bundle_free(struct bundle *b);

struct snap_kernel {
	unsigned int id;
	int instrumented;
	unsigned long long routed, fallback;
	char *name;
};

struct snap_ctx {
	int device;
	unsigned int sm;
	unsigned char **data; /* [nmaps], NULL where missing */
	size_t *bytes;
};

struct snapshot {
	int pid;
	struct snap_kernel *k;
	size_t nk;
	char **notes;
	size_t nnotes;
	char **stats; /* "KEY VALUE" */
	size_t nstats;
	struct snap_ctx *ctx;
	size_t nctx;
	size_t nmaps;
};

/* nmaps: the bundle's. 0, or -1 with err set. */
int snapshot_parse(const unsigned char *buf, size_t len, size_t nmaps, struct snapshot *s,
		   char *err, size_t errlen);
void snapshot_free(struct snapshot *s);
const char *snapshot_kernel_name(const struct snapshot *s, unsigned int id);

#endif
