// SPDX-License-Identifier: MIT
/*
 * smmap: where each kernel's blocks and warps ran: per SM, the blocks (counted by their
 * first thread) and warps (by their lowest active lane as they start).
 */
#include "probe.bpf.h"

#define MAX_SMS	     256
#define SMAP_KERNELS 256

/* per kernel (the first SMAP_KERNELS) and SM: blocks, warps */
U64_MAP(sms, BPF_MAP_TYPE_ARRAY, SMAP_KERNELS *MAX_SMS * 2);

SEC("gpu/entry/*") int on_entry(struct gs_probe_ctx *c)
{
	u64 sm = bpf_get_sm_id(), tx, ty, tz, *v;
	u32 k = c->kernel < SMAP_KERNELS - 1 ? c->kernel : SMAP_KERNELS - 1, key;

	if (sm >= MAX_SMS)
		return 0;
	key = (k * MAX_SMS + (u32)sm) * 2;
	bpf_get_thread_idx(&tx, &ty, &tz);
	if (!(tx | ty | tz) && (v = bpf_map_lookup_elem(&sms, &key)))
		__sync_fetch_and_add(v, 1);
	key += 1;
	if (bpf_warp_match_leader(0) && (v = bpf_map_lookup_elem(&sms, &key)))
		__sync_fetch_and_add(v, 1);
	return 0;
}
