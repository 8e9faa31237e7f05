// SPDX-License-Identifier: MIT
/* What gpuscope probe and the in-process plane hand each other (ptx/bundle.h): the bundle
 * (read by the plane inside the program) and the maps' snapshots (read by gpuscope, written
 * by a program it does not trust), and a printing ring's records (ptx/gpuprint.h). First
 * byte: 0 a bundle, 0xff a printing record, else a snapshot of that many maps (mod 8). A
 * bundle's host programs are run as the plane runs them (probe_host.c: the interpreter, the
 * shared maps in memory of their size, the others without). */
#include <stdlib.h>
#include <string.h>

#include "ptx/bundle.h"
#include "ptx/gpuprint.h"
#include "ptx/translate.h"

static void run_hosts(const struct bundle *b)
{
	struct bpf_map_mem mm[BUNDLE_MAX_MAPS];
	struct bpf_gpu_env env = { .host = true,
				   .globaltimer = 1,
				   .pid_tgid = 2,
				   .rodata = b->rodata,
				   .rodata_len = b->rodata_len };
	unsigned long long regs[21] = { 0 }, ret;
	char err[200];

	memset(mm, 0, sizeof(mm));
	for (size_t i = 0; i < b->nmaps; i++) {
		size_t n = bundle_map_bytes(&b->maps[i]);

		mm[i].value_size = b->maps[i].value_size;
		mm[i].max_entries = b->maps[i].max_entries;
		mm[i].kind = b->maps[i].kind;
		mm[i].extra = 1;
		if (b->maps[i].shared && n <= (1u << 20))
			mm[i].data = calloc(1, n);
	}
	for (size_t h = 0; h < b->nhosts; h++)
		bpf_interp(b->hosts[h].insns, b->hosts[h].n, regs, sizeof(regs), &env, mm, b->nmaps,
			   10000, &ret, err, sizeof(err));
	for (size_t i = 0; i < b->nmaps; i++)
		free(mm[i].data);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char err[256];

	if (!size)
		return 0;
	if (data[0] == 0xff) {
		char line[300];

		gpu_print_format(data + 1, size - 1, line, sizeof(line));
	} else if (data[0] == 0) {
		struct bundle b;

		if (!bundle_parse((const char *)data + 1, size - 1, &b, err, sizeof(err))) {
			for (size_t i = 0; i < b.nmaps; i++)
				bundle_map_bytes(&b.maps[i]);
			run_hosts(&b);
			bundle_free(&b);
		}
	} else {
		struct snapshot s;

		if (!snapshot_parse(data + 1, size - 1, data[0] % 8, &s, err, sizeof(err))) {
			for (size_t i = 0; i < s.nk; i++)
				snapshot_kernel_name(&s, s.k[i].id);
			snapshot_free(&s);
		}
	}
	return 0;
}
