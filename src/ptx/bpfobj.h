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
#include <stdbool.h>
#include <stddef.h>

#define BPFOBJ_MAX_MAPS 64

/*
 * bpftime's GPU map types (its runtime/include/bpftime_shm.hpp), taken as the GPU kinds
 * whose meaning they have: a hash map; an array per GPU thread (1502 in device memory, 1512
 * in host memory for bpftime: the same here), key-major as bpftime lays it out; one array
 * for all threads (1503, 1513); a ring buffer (1527: max_entries records of at most
 * value_size bytes per thread for bpftime; here one ring sized for BPFTIME_RING_THREADS
 * threads' worth); 1504 (an array bpftime shares with a kernel BPF array map, which host
 * programs write): an array in host memory, shared by the device programs of every context
 * and the host programs gpuscope runs in the program (below).
 */
#define BPFTIME_MAP_GPU_HASH		    1501
#define BPFTIME_MAP_PERGPUTD_ARRAY	    1502
#define BPFTIME_MAP_GPU_ARRAY		    1503
#define BPFTIME_MAP_GPU_KERNEL_SHARED_ARRAY 1504
#define BPFTIME_MAP_PERGPUTD_ARRAY_HOST	    1512
#define BPFTIME_MAP_GPU_ARRAY_HOST	    1513
#define BPFTIME_MAP_GPU_RINGBUF		    1527
#define BPFTIME_RING_THREADS		    1024

/* What the GPU takes, for messages. */
#define BPFOBJ_GPU_MAPS                                                                       \
	"the GPU takes bpftime's GPU_HASH_MAP (1501), PERGPUTD_ARRAY_MAP (1502, 1512), "      \
	"GPU_ARRAY_MAP (1503, 1513), GPU_KERNEL_SHARED_ARRAY_MAP (1504) and GPU_RINGBUF_MAP " \
	"(1527), and the kernel's arrays (2), "                                               \
	"per-CPU arrays (6: one per GPU thread), hash maps (1) and ring buffers (27, 4); "    \
	"arrays with 4-byte keys, hash keys of up to 256 bytes"

struct bpfobj_map {
	char name[64];
	unsigned int type, key_size, value_size, max_entries;
	unsigned int kind; /* enum bpf_map_kind, 0 if the GPU has none */
	bool shared;	   /* in host memory: 1504, or an array a host program run here uses */
};

/*
 * Host programs gpuscope runs itself, in the program's process (the reference interpreter,
 * interp.c): uprobes on the launch, as bpftime's launchlate attaches its own (section
 * `uprobe` or `uretprobe`, bare as bpftime's loaders attach them, or naming a
 * ...LaunchKernel... function). They run at each kernel launch call, before it (uprobe) or
 * after it (uretprobe), on the launching thread; their context is a struct pt_regs holding
 * the launch as cudaLaunchKernel's registers would (function, grid x|y<<32, grid z, block
 * x|y<<32, block z); and they take array maps (shared with the device programs, in host
 * memory) and the helpers below. Other host programs are named and left alone.
 */
enum bpfobj_host_run {
	BPFOBJ_HOST_NOT_RUN = 0,
	BPFOBJ_HOST_ENTRY = 1,
	BPFOBJ_HOST_EXIT = 2,
};
#define BPFOBJ_HOST_HELPERS                                                                  \
	"map lookup, update and delete (1-3), bpf_ktime_get_ns (5: the host's clock on the " \
	"GPU's global timer), bpf_trace_printk (6), bpf_get_current_pid_tgid (14) and "      \
	"ebpf_puts (501)"

struct bpfobj_prog {
	char *name, *section;
	struct bpf_insn *insns; /* resolved */
	size_t n;
	char *err;		  /* why its references cannot be resolved, or NULL */
	bool host;		  /* a host program (uprobe, tracepoint/..., perf_event...) */
	enum bpfobj_host_run run; /* a host program gpuscope runs, and when */
};

struct bpfobj {
	struct bpfobj_map maps[BPFOBJ_MAX_MAPS];
	size_t nmaps; /* (with the printing ring, GS_PRINT_MAP, if a device program prints) */
	unsigned char *rodata; /* the read-only data sections, gathered (translate.h) */
	size_t rodata_len;
	struct bpfobj_prog *progs;
	size_t nprogs;
};

/* 0, or -1 with err set (not an object libbpf opens, more than BPFOBJ_MAX_MAPS maps). */
int bpfobj_open(const char *path, struct bpfobj *o, char *err, size_t errlen);
void bpfobj_close(struct bpfobj *o);
/* The GPU's kind of a map type, 0 if it has none. */
unsigned int bpfobj_map_kind(unsigned int type);
/* The bytes of the GPU ring standing for a ring map (its max_entries as the object has it). */
unsigned int bpfobj_ring_bytes(unsigned int type, unsigned int value_size,
			       unsigned int max_entries);

#endif
