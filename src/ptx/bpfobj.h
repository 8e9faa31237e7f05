/* SPDX-License-Identifier: MIT */
/*
 * A clang-compiled eBPF object (clang -target bpf) read for device-side probes: its maps and
 * its programs, each program's instructions with its map references resolved to
 * BPF_PSEUDO_MAP_IDX immediates (libbpf opens the object; the relocations are read from
 * the ELF file, as libbpf does not give them out before loading).
 */
#ifndef GS_PTX_BPFOBJ_H
#define GS_PTX_BPFOBJ_H

#include <linux/bpf.h>
#include <stddef.h>

#define BPFOBJ_MAX_MAPS 64

struct bpfobj_map {
	char name[64];
	unsigned int type, key_size, value_size, max_entries;
	unsigned int kind; /* enum bpf_map_kind, 0 if the GPU has none */
};

struct bpfobj_prog {
	char *name, *section;
	struct bpf_insn *insns; /* resolved */
	size_t n;
	char *err; /* why its references cannot be resolved, or NULL */
};

struct bpfobj {
	struct bpfobj_map maps[BPFOBJ_MAX_MAPS];
	size_t nmaps;
	struct bpfobj_prog *progs;
	size_t nprogs;
};

/* 0, or -1 with err set (not an object libbpf opens, more than BPFOBJ_MAX_MAPS maps). */
int bpfobj_open(const char *path, struct bpfobj *o, char *err, size_t errlen);
void bpfobj_close(struct bpfobj *o);
/* The GPU's kind of a map type, 0 if it has none. */
unsigned int bpfobj_map_kind(unsigned int type);

#endif
