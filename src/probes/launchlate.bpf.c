// SPDX-License-Identifier: MIT
/*
 * launchlate: from the launch call on the host to the first GPU thread of the launch
 * starting, per launch. The launch's time comes in the context (the host's clock moved to
 * the GPU's global timer); each block's first thread keeps the least latency it sees in the
 * launch's hash slot (keyed by its sequence number).
 */
#include "probe.bpf.h"

struct first {
	u64 lat;    /* ns */
	u64 kernel; /* its id */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct first);
} launches SEC(".maps");

SEC("gpu/entry/*") int on_entry(struct gs_probe_ctx *c)
{
	u64 now = bpf_get_globaltimer(), seq = c->launch, lat;
	struct first *f, init;

	u64 tx, ty, tz;

	/* (a block's first thread: its start is the block's) */
	bpf_get_thread_idx(&tx, &ty, &tz);
	if (!c->launch_ns || tx | ty | tz)
		return 0;
	lat = now > c->launch_ns ? now - c->launch_ns : 0;
	f = bpf_map_lookup_elem(&launches, &seq);
	if (!f) {
		init.lat = lat;
		init.kernel = c->kernel;
		if (bpf_map_update_elem(&launches, &seq, &init, BPF_NOEXIST) == 0)
			return 0;
		f = bpf_map_lookup_elem(&launches, &seq);
		if (!f)
			return 0;
	}
	atomic_min(&f->lat, lat);
	return 0;
}
