/* SPDX-License-Identifier: MIT */
/*
 * eBPF to PTX, directly, without LLVM: each eBPF instruction becomes a few PTX instructions
 * on sixty-four-bit registers %r0..%r10, the 512-byte stack a .local array whose generic
 * address is r10, jumps branches to labels. The program becomes a PTX .func
 * `(.param .b64 ret) NAME(.param .b64 ctx)`: r1 = ctx on entry, r0 returned.
 *
 * Semantics follow the kernel's interpreter where the ISA leaves a choice: division by zero
 * gives 0 and modulo by zero leaves the dividend; shift amounts are masked to the width;
 * 32-bit operations zero the upper half. The CPU interpreter (interp.c) is the reference
 * the tests compare with.
 *
 * What is not translated is refused with the instruction's index, its opcode and why:
 * helpers without a GPU version (below), bpf-to-bpf calls, map references, the legacy packet
 * loads, signed division (ISA v4), jumps out of the program, writes to r10.
 */
#ifndef GS_PTX_TRANSLATE_H
#define GS_PTX_TRANSLATE_H

#include <linux/bpf.h>
#include <stdbool.h>
#include <stddef.h>

#define BPF_STACK_BYTES 512

struct strbuf;

/*
 * GPU helpers, numbered as bpftime numbers them (so that its probes' sources work):
 *   502 u64 bpf_get_globaltimer(void)               the GPU's global timer, ns
 *   503 bpf_get_block_idx(u64 *x, u64 *y, u64 *z)   blockIdx; 504 blockDim; 505 threadIdx;
 *   508 gridDim (each stores through its three pointers, returns 0)
 *   506 bpf_gpu_membar(void)                        membar.sys
 *   507 bpf_cuda_exit(void)                         ends the GPU thread
 *   509 bpf_get_sm_id(void), 510 bpf_get_warp_id(void), 511 bpf_get_lane_id(void)
 *   512 u64 bpf_get_device_ordinal(void)            the device the kernel runs on
 *    14 u64 bpf_get_current_pid_tgid(void)          the process's id, upper half, and its
 *                                                   main thread's, lower (a GPU thread has
 *                                                   no host thread; bpftime gives its
 *                                                   agent's polling thread)
 * (512 and 14 read the module's `gs_env`, {u64 pid_tgid; u64 device}, which the host fills
 * with the map table)
 * and gpuscope's own:
 *   520 bpf_prefetch_l2(const void *global_addr)    prefetch.global.L2
 *   521 u64 bpf_get_active_mask(void)               the warp's active lanes (activemask)
 * and, for doing work once per warp instead of once per thread (match.any.sync: sm_70+),
 * over the lanes active at the call:
 *   522 u64 bpf_warp_unique(u64 v)       how many distinct values v the lanes hold
 *   523 u64 bpf_warp_match_count(u64 v)  how many lanes hold this lane's v
 *   524 u64 bpf_warp_match_leader(u64 v) 1 for the lowest lane holding this lane's v, else 0
 *   525 u64 bpf_warp_sum(u64 v)          the sum of v over the lanes (shfl.sync)
 *   526 u64 bpf_warp_max(u64 v)          the largest v of the lanes
 * (e.g. `if (bpf_warp_match_leader(k)) add(&count[k], bpf_warp_match_count(k))`: one atomic
 * per distinct key per warp). Every lane must make the call (not only the one that then
 * writes). The reference interpreter plays a warp whose active lanes all hold the same v.
 */
enum {
	GS_BPF_GLOBALTIMER = 502,
	GS_BPF_BLOCK_IDX = 503,
	GS_BPF_BLOCK_DIM = 504,
	GS_BPF_THREAD_IDX = 505,
	GS_BPF_MEMBAR = 506,
	GS_BPF_EXIT = 507,
	GS_BPF_GRID_DIM = 508,
	GS_BPF_SM_ID = 509,
	GS_BPF_WARP_ID = 510,
	GS_BPF_LANE_ID = 511,
	GS_BPF_PREFETCH_L2 = 520,
	GS_BPF_ACTIVE_MASK = 521,
	GS_BPF_WARP_UNIQUE = 522,
	GS_BPF_WARP_MATCH_COUNT = 523,
	GS_BPF_WARP_MATCH_LEADER = 524,
	GS_BPF_WARP_SUM = 525,
	GS_BPF_WARP_MAX = 526,
	GS_BPF_PID_TGID = 14,
	GS_BPF_DEVICE = 512,
	GS_BPF_TRACE_PRINTK = 6,
	GS_BPF_PUTS = 501,
};

/*
 * Printing from the GPU, as bpftime's helpers print on the host:
 *     6 bpf_trace_printk(fmt, fmt_size, a1, a2, a3)  (bpf_printk's)
 *   501 ebpf_puts(str)
 * each a record {u32 helper; u32 len; u64 a1, a2, a3; len bytes of fmt or str (at most
 * GS_PRINT_TEXT, up to its NUL)} in the object's printing ring (a ring map named
 * GS_PRINT_MAP that bpfobj adds to an object whose device programs print; a printing
 * call's `off` is that ring's index + 1), which the host formats (probe_maps.c). 0, or the
 * ring's error (-EAGAIN when full).
 */
#define GS_PRINT_MAP   "gs_print"
#define GS_PRINT_HDR   32
#define GS_PRINT_TEXT  (GS_RING_REC_MAX - GS_PRINT_HDR)
#define GS_PRINT_BYTES (1u << 20)

/*
 * Read-only data (.rodata: string literals, bpf_printk's formats, const arrays): the
 * object's gathered into one module array `gs_rodata`; a 64-bit immediate whose src_reg is
 * BPF_PSEUDO_MAP_VALUE and imm an offset into it is that offset's address.
 */
#define GS_RODATA_MAX (64u << 10)

/*
 * Maps. A program refers to map i with a 64-bit immediate whose src_reg is
 * BPF_PSEUDO_MAP_IDX and whose imm is i (the caller resolves the object's relocations so).
 * On the GPU, the module's `gs_maps` table holds a 24-byte descriptor per map
 * ({u64 data; u32 value_size; u32 max_entries; u32 kind; u32 extra}), filled by the host
 * before launches; the immediate is the descriptor's address. Three kinds:
 *   - arrays (BPF_MAP_TYPE_ARRAY): one array for the whole launch;
 *   - per-thread arrays (BPF_MAP_TYPE_PERCPU_ARRAY, a CPU's array becoming a GPU thread's;
 *     bpftime's PERGPUTD_ARRAY_MAP): thread t of the launch (its block's linear index times
 *     the threads in a block, plus its linear index in the block) has element key at
 *     key * threads + t, key-major as bpftime lays it out (a key's values for all threads
 *     together: what a host lookup of the key returns); `extra` is threads, how many
 *     threads have theirs (a thread past it finds no element);
 *   - hash maps (below): `extra` is the key size.
 * The helpers, as the kernel's:
 *   1 bpf_map_lookup_elem(map, key)      the value's address, NULL past the end
 *   2 bpf_map_update_elem(map, key, value, flags)  copies the value; -E2BIG past the end,
 *                                                  -EEXIST with BPF_NOEXIST
 *   3 bpf_map_delete_elem(map, key)      -EINVAL (arrays cannot delete)
 */
#define GS_MAP_DESC 24

enum bpf_map_kind {
	GS_MAP_ARRAY = 1,
	GS_MAP_PER_THREAD = 2,
	GS_MAP_HASH = 3,
	GS_MAP_RING = 4,
};

/*
 * Ring buffers: records the GPU writes while kernels run and the host drains into the event
 * stream (BPF_MAP_TYPE_RINGBUF, whose max_entries is its bytes; BPF_MAP_TYPE_PERF_EVENT_ARRAY,
 * GS_RING_PERF_BYTES of them). The helpers, as the kernel's (flags ignored):
 *   130 bpf_ringbuf_output(map, data, size, flags)
 *    25 bpf_perf_event_output(ctx, map, flags, data, size)
 * 0, -EAGAIN when the ring has no room (counted as a drop), -E2BIG past GS_RING_REC_MAX
 * bytes, -EINVAL for a map that is not a ring. (bpf_ringbuf_reserve/submit are refused: a
 * record may wrap around the ring's end, where no pointer into it would do.)
 *
 * The descriptor: data a GS_RING_CTL-byte control block in device memory, max_entries 0 (so
 * lookups and updates find nothing), extra the ring's bytes (a power of two). The control
 * block: {u64 head (bytes reserved, ever); u64 drops; u64 ring (its device address: host
 * memory mapped into the device); u64 tail (the device address of the host's consumer
 * position, host memory too); u64 tail_seen (the last tail read, in device memory); u64
 * tail_read_at (when, on the global timer)}. When the tail seen says full, one thread in
 * GS_RING_REREAD_NS reads the host's again (the others drop at once: thousands of threads
 * reading across the bus at once would stall the kernel for milliseconds); so a record may
 * be dropped for up to that long after the host made room.
 *
 * A record sits at an 8-aligned position, taken modulo the ring's size, word by word:
 * {u32 len; u32 state; u64 gpu_ns (the global timer)} then len bytes, padded to 8. A writer
 * reserves 16 + len rounded up to 8 with a compare-and-swap on head (if head - tail leaves
 * room), writes the words, then (membar.sys) the first word with state 1. The host reads
 * from its tail while state is 1, clears what it read and moves the tail on (gpuring.h).
 */
#define GS_RING_CTL	   64
#define GS_RING_REREAD_NS  2000
#define GS_RING_REC_MAX	   256
#define GS_RING_HDR	   16
#define GS_RING_MIN	   4096
#define GS_RING_MAX	   (256u << 20)
#define GS_RING_PERF_BYTES (4u << 20)
#define GS_BPF_PERF_OUTPUT 25
#define GS_BPF_RING_OUTPUT 130

/*
 * Hash maps (BPF_MAP_TYPE_HASH): max_entries slots of bpf_hash_slot() bytes: {u32 state;
 * u32 pad; key; value}, key and value each rounded up to 8 bytes; state 0 empty, 1 being
 * written, 2 full, 3 deleted (not reused). Open addressing from the key's FNV-1a hash,
 * linear probing; an insert claims a slot with a compare-and-swap. The descriptor's last
 * field is the key size. lookup: NULL if absent; update: -EEXIST (BPF_NOEXIST, present),
 * -ENOENT (BPF_EXIST, absent), -E2BIG (no free slot); delete: 0, or -ENOENT.
 */
size_t bpf_hash_slot(unsigned int key_size, unsigned int value_size);

struct bpf_map_mem {
	unsigned char *data; /* value_size * max_entries (* threads, per-thread) bytes, or
			      * max_entries hash slots, or a ring's control block */
	unsigned int value_size, max_entries;
	unsigned int kind;	  /* enum bpf_map_kind */
	unsigned int extra;	  /* per-thread: how many threads have their array; hash: key size;
			     * ring: its bytes */
	unsigned char *ring;	  /* a ring's bytes, for the interpreter */
	unsigned long long *tail; /* and its consumer position */
};

/* The module-level declarations of the maps' table, gs_env and the object's read-only data
 * (rodata, n bytes), before the functions that use them. */
void bpf_ptx_maps_decl(struct strbuf *out, unsigned int nmaps, const unsigned char *rodata,
		       size_t n);

/* What the GPU helpers return, for the reference interpreter (a thread of a launch); or, with
 * host set, a host program's run (bpfobj.h): its helpers are the maps', printing, 14 and
 * 5 (bpf_ktime_get_ns: globaltimer), and the GPU's are refused. */
struct bpf_gpu_env {
	unsigned int tid[3], ntid[3], ctaid[3], nctaid[3];
	unsigned int smid, warpid, laneid, activemask;
	unsigned long long globaltimer;
	unsigned long long pid_tgid, device;
	const unsigned char *rodata; /* the object's read-only data (gs_rodata), n bytes */
	size_t rodata_len;
	bool host;
};

/* Whether a helper has a GPU version. */
int bpf_gpu_helper(int id);

/*
 * Append the PTX function NAME for the n instructions to out. 0, or -1 with err set (and
 * out as it was).
 */
int bpf_to_ptx(const struct bpf_insn *insns, size_t n, const char *name, struct strbuf *out,
	       char *err, size_t errlen);
/* A whole module around it (.version/.target/.address_size), for ptxas and tests. */
int bpf_to_ptx_module(const struct bpf_insn *insns, size_t n, const char *name, unsigned int sm,
		      struct strbuf *out, char *err, size_t errlen);

/*
 * The reference interpreter: run on the CPU with r1 = ctx (ctx_size bytes, readable and
 * writable) and a 512-byte stack; memory outside those two is refused, as are more than
 * max_steps instructions. 0 with *ret = r0, or -1 with err set.
 */
int bpf_interp(const struct bpf_insn *insns, size_t n, void *ctx, size_t ctx_size,
	       const struct bpf_gpu_env *env, const struct bpf_map_mem *maps, size_t nmaps,
	       unsigned long long max_steps, unsigned long long *ret, char *err, size_t errlen);

#endif
