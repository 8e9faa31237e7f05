/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Maps and helpers shared by every gpuscope BPF object. Each object defines these maps;
 * the loader (tracer.c) makes all objects use the first object's instances
 * (bpf_map__reuse_fd), so there is one ring buffer and one set of traced processes.
 */
#ifndef GPUSCOPE_COMMON_BPF_H
#define GPUSCOPE_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "gpuscope/event.h"

#define GS_MAX_TRACKED 65536

/* The event stream. Sized by the loader (--buffer-size). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} events SEC(".maps");

/* Processes (tgid) being traced; value unused. Filled by user space and on fork. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GS_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u32);
} tracked SEC(".maps");

/* Records lost because the ring buffer was full, per event type; read by user space. */
__u64 drop_count[GS_EV_MAX] = {};
/* Calls whose entry state could not be stored, so their return produced nothing; and
 * calls and OS events of a traced thread that got no storage (GS_TRACED_STORAGE), lost. */
__u64 lost_calls = 0;

/*
 * Ring bytes waiting past which a record wakes the reader up; below them the reader comes at
 * its poll's timeout. (0: the ring's own choice, a wakeup whenever the reader has caught up.)
 * A wakeup is an interrupt the producing CPU raises for itself (irq_work): measured on an
 * H100 machine's guest kernel, the launch return program took 1.9 us a run with one at
 * nearly every launch, the reader being that quick.
 */
const volatile __u64 wake_bytes = 0;

static __always_inline __u64 gs_wake_flags(void)
{
	if (!wake_bytes)
		return 0;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wake_bytes ? BPF_RB_FORCE_WAKEUP
									   : BPF_RB_NO_WAKEUP;
}

/* A reserved record handed to the reader. */
#define gs_submit(e) bpf_ringbuf_submit((e), gs_wake_flags())

/* Every process is traced (the exporter: which ones run CUDA is up to the files probed). */
const volatile bool track_all = false;

static __always_inline bool gs_tracked(__u32 tgid)
{
	return track_all || bpf_map_lookup_elem(&tracked, &tgid) != NULL;
}

/*
 * The traced set's generation: bumped each time a process leaves it (proc.bpf.c at its
 * last thread's exit; tracer__untrack). A thread's storage may keep gs_tracked's answer for
 * its process as the generation it was found at (gs_tracked_gen, read before asking): one
 * of an older generation is asked again. Asking the storage a thread's program reads anyway
 * saves a lookup in the set's hash table, a helper call (tens of ns each with the kernel's
 * mitigations). Shared by every object, like `tracked`; user space maps it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tracked_gen SEC(".maps");

/* (Never 0, which a thread's fresh storage holds.) */
static __always_inline __u64 gs_tracked_gen(void)
{
	__u32 zero = 0;
	__u64 *g = bpf_map_lookup_elem(&tracked_gen, &zero);

	return (g ? *(volatile __u64 *)g : 0) + 1;
}

/* A 64-bit key's bits mixed (MurmurHash3's finalizer), for tables indexed by its top bits:
 * handles are allocated at regular strides, which a multiplicative hash alone left in a
 * few of a small table's sets (kernels 288 bytes apart: 13 of 32 sets). */
static __always_inline __u64 gs_mix64(__u64 k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

/* The storage of `task` in the task-storage map `map`, NULL if none: most threads of other
 * programs have no storage of any map, told without a helper call. */
#define GS_STORAGE_OF(map, task) \
	((task)->bpf_storage ? bpf_task_storage_get(map, task, 0, 0) : NULL)

/*
 * The storage of `task` in the task-storage map `map` (its value has a __u64 `tracked`) if
 * the task's process is traced, NULL if not or if there is no room (then counted in
 * lost_calls: what the thread did there is lost). `found`: what a lookup
 * without creating gave (NULL: none). The answer kept there is taken when of the current
 * generation; else the set is asked, and the answer kept (the storage made if need be;
 * `first` runs on a storage that held none yet).
 */
#define GS_TRACED_STORAGE(map, task, found, first)                                                \
	({                                                                                        \
		typeof(found) s_ = (found);                                                       \
		__u64 gen_ = gs_tracked_gen();                                                    \
                                                                                                  \
		if (!s_ || !(track_all || s_->tracked == gen_)) {                                 \
			if (!gs_tracked((task)->tgid))                                            \
				s_ = NULL;                                                        \
			else if (!s_ && !(s_ = bpf_task_storage_get(                              \
						  map, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE))) \
				__sync_fetch_and_add(&lost_calls, 1);                             \
			if (s_ && !s_->tracked)                                                   \
				first;                                                            \
			if (s_)                                                                   \
				s_->tracked = gen_;                                               \
		}                                                                                 \
		s_;                                                                               \
	})

static __always_inline void gs_tracked_gone(void)
{
	__u32 zero = 0;
	__u64 *g = bpf_map_lookup_elem(&tracked_gen, &zero);

	if (g)
		__sync_fetch_and_add(g, 1);
}

static __always_inline void gs_count_drop(__u32 type)
{
	if (type < GS_EV_MAX)
		__sync_fetch_and_add(&drop_count[type], 1);
}

static __always_inline void gs_fill(struct gs_hdr *h, __u32 size, __u16 type, __u8 source, __u64 ts,
				    __u64 pid_tgid)
{
	h->type = type;
	h->source = source;
	h->flags = 0;
	h->size = size;
	h->ts = ts;
	h->pid = pid_tgid >> 32;
	h->tid = (__u32)pid_tgid;
}

/* Reserve a record of `size` bytes and fill its header; NULL (and a counted drop) if full. */
static __always_inline void *gs_reserve(__u32 size, __u16 type, __u8 source, __u64 ts,
					__u64 pid_tgid)
{
	struct gs_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		gs_count_drop(type);
		return NULL;
	}
	gs_fill(h, size, type, source, ts, pid_tgid);
	return h;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#endif /* GPUSCOPE_COMMON_BPF_H */
