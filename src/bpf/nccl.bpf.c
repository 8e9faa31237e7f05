// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Uprobes on NCCL (libnccl.so.2): collectives, point-to-point, groups and communicator
 * set-up. NCCL's arguments follow the x86-64 SysV rules like any C function; note that
 * ncclCommInitRank's 128-byte ncclUniqueId is passed in memory, so `rank` is the third
 * integer argument.
 */
#include "calls.bpf.h"

#define S32(x) ((__s32)(x))

static __always_inline struct gs_ev_nccl *nccl_reserve(const struct call_state *st, __u64 now,
						       long rc, __u32 op)
{
	struct gs_ev_nccl *e = gs_reserve_call(sizeof(*e), GS_EV_NCCL, st, now, S32(rc));

	if (!e)
		return NULL;
	e->op = op;
	e->comm = 0;
	e->count = 0;
	e->stream = 0;
	e->sendbuf = 0;
	e->recvbuf = 0;
	e->datatype = -1;
	e->redop = -1;
	e->peer = -1;
	e->nranks = -1;
	e->rank = -1;
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
			e = nccl_reserve(&st, now, rc, d->arg);
			if (!e)
				return 0;
			e->comm = S32(rc) == 0 ? gs_read_u64(st.args[0] + 8ULL * i) : 0;
			e->nranks = (__s32)ndev;
			e->rank = (__s32)i;
			bpf_ringbuf_submit(e, 0);
		}
		return 0;
	}
	e = nccl_reserve(&st, now, rc, d->arg);
	if (!e)
		return 0;
	switch (d->shape) {
	case GS_SH_NC_OP7:
	case GS_SH_NC_ROOT7:
		e->sendbuf = st.args[0];
		e->recvbuf = st.args[1];
		e->count = st.args[2];
		e->datatype = S32(st.args[3]);
		if (d->shape == GS_SH_NC_OP7)
			e->redop = S32(st.args[4]);
		else
			e->peer = S32(st.args[4]);
		e->comm = st.args[5];
		e->stream = st.args[6];
		break;
	case GS_SH_NC_REDUCE:
		e->sendbuf = st.args[0];
		e->recvbuf = st.args[1];
		e->count = st.args[2];
		e->datatype = S32(st.args[3]);
		e->redop = S32(st.args[4]);
		e->peer = S32(st.args[5]);
		e->comm = st.args[6];
		e->stream = st.args[7];
		break;
	case GS_SH_NC_GATHER:
		e->sendbuf = st.args[0];
		e->recvbuf = st.args[1];
		e->count = st.args[2];
		e->datatype = S32(st.args[3]);
		e->comm = st.args[4];
		e->stream = st.args[5];
		break;
	case GS_SH_NC_P2P:
		if (d->arg == GS_NCCL_RECV)
			e->recvbuf = st.args[0];
		else
			e->sendbuf = st.args[0];
		e->count = st.args[1];
		e->datatype = S32(st.args[2]);
		e->peer = S32(st.args[3]);
		e->comm = st.args[4];
		e->stream = st.args[5];
		break;
	case GS_SH_NC_INIT:
		e->comm = S32(rc) == 0 ? gs_read_u64(st.args[0]) : 0;
		e->nranks = S32(st.args[1]);
		e->rank = S32(st.args[2]);
		break;
	case GS_SH_NC_DESTROY:
		e->comm = st.args[0];
		break;
	default: /* GS_SH_NC_GROUP */
		break;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}
