// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Uprobes on NCCL (libnccl.so.2): collectives, point-to-point, groups and communicator
 * set-up. NCCL's arguments follow the x86-64 SysV rules like any C function; note that
 * ncclCommInitRank's 128-byte ncclUniqueId is passed in memory, so `rank` is the third
 * integer argument.
 */
#define GS_OUTERMOST_ONLY /* (calls.bpf.h) */
#include "calls.bpf.h"

#define S32(x) ((__s32)(x))

static __always_inline struct gs_ev_nccl *
nccl_reserve(const struct call_state *st, const struct gs_api_desc *d, __u64 now, long rc)
{
	struct gs_ev_nccl *e = gs_reserve_call(sizeof(*e), GS_EV_NCCL, st, now, S32(rc));

	if (e)
		gs_decode_nccl(d, st->args, S32(rc) == 0, e);
	return e;
}

SEC("uretprobe")
int BPF_KRETPROBE(ret_nccl, long rc)
{
	const struct gs_api_desc *d;
	struct call_state st;
	struct gs_ev_nccl *e;
	__u64 now;

	d = gs_returning(ctx, &st, &now);
	if (!d)
		return 0;
	if (d->shape == GS_SH_NC_INITALL) {
		/* ncclCommInitAll(comms, ndev, devlist): one record per communicator. */
		__u32 ndev = (__u32)st.args[1];

		for (__u32 i = 0; i < 16; i++) {
			if (i >= ndev)
				break;
			e = nccl_reserve(&st, d, now, rc);
			if (!e)
				return 0;
			e->comm = S32(rc) == 0 ? gs_load_u64(st.args[0] + 8ULL * i) : 0;
			e->nranks = (__s32)ndev;
			e->rank = (__s32)i;
			gs_submit(e);
		}
		return 0;
	}
	if (gs_failed(rc))
		gs_emit_stack(ctx, &st, 0, false);
	e = nccl_reserve(&st, d, now, rc);
	if (!e)
		return 0;
	gs_submit(e);
	return 0;
}
