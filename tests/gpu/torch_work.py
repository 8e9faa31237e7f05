"""PyTorch, cuBLAS, Triton and NCCL workloads for the GPU suite (tests/gpu/check.py).

    python torch_work.py WORKLOAD N [--profile TRACE.json] [--facts FACTS.json]
                                    [--wait FILE]

Without --profile the workload runs plainly (under gpuscope). With --profile the whole
run, from before the first CUDA call, is recorded by the PyTorch profiler (CUPTI), whose
trace is the ground truth the checker compares gpuscope's report with: every kernel that
ran, by name, and every memcpy/memset with its bytes. --facts writes what the workload
itself knows (bytes it reserved, NCCL calls it made).

--wait FILE (elementwise, matmul): after the first iteration, create FILE.ready and wait
for FILE (so gpuscope can attach); with --profile, only what follows is profiled, so the
profile and an attached gpuscope see the same stretch of the run.
"""
import argparse
import json
import os
import sys

import torch

CHECKPOINT = []  # set by main(): called by workloads after their first iteration


def checkpoint():
    for fn in CHECKPOINT:
        fn()


def elementwise(n, facts):
    x = torch.zeros(1 << 20, device="cuda")
    for i in range(n):
        x.add_(1.0)
        if i == 0:
            checkpoint()
    y = x.cpu()
    assert float(y[0]) == n
    facts["checked"] = True


def matmul(n, facts):
    torch.manual_seed(0)
    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")
    for i in range(n):
        c = a @ b
        if i == 0:
            checkpoint()
    torch.cuda.synchronize()
    ref = (a.double() @ b.double())
    err = float((c.double() - ref).norm() / ref.norm())
    facts["rel_error"] = err
    assert err < 1e-2, err


def triton_add(n, facts):
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
        pid = tl.program_id(axis=0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) +
                 tl.load(y_ptr + offs, mask=mask), mask=mask)

    size = 1 << 20
    x = torch.ones(size, device="cuda")
    y = torch.full((size,), 2.0, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(size, 1024),)
    for _ in range(n):
        add_kernel[grid](x, y, out, size, BLOCK=1024)
    torch.cuda.synchronize()
    assert float(out[size - 1]) == 3.0
    facts["checked"] = True


def expandable(n, facts):
    # Run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the caching allocator maps
    # physical chunks with cuMemCreate/cuMemMap and never calls cuMemAlloc.
    keep = []
    for i in range(n):
        keep.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    facts["max_reserved"] = torch.cuda.max_memory_reserved()
    facts["max_allocated"] = torch.cuda.max_memory_allocated()
    del keep
    torch.cuda.empty_cache()


def nccl_allreduce(n, facts):
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    x = torch.ones(1 << 20, device="cuda")
    for _ in range(n):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    assert float(x[0]) == 1.0
    dist.destroy_process_group()
    facts["all_reduce_calls"] = n
    facts["all_reduce_bytes"] = n * (1 << 20) * 4


WORKLOADS = {
    "elementwise": elementwise,
    "matmul": matmul,
    "triton": triton_add,
    "expandable": expandable,
    "nccl": nccl_allreduce,
}


def wait_for(path):
    import time

    open(path + ".ready", "w").close()
    while not os.path.exists(path):
        time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("n", type=int)
    ap.add_argument("--profile")
    ap.add_argument("--facts")
    ap.add_argument("--wait")
    args = ap.parse_args()
    facts = {}
    prof = None
    if args.profile:
        from torch.profiler import profile, ProfilerActivity

        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    if args.wait:
        def gate():
            torch.cuda.synchronize()
            wait_for(args.wait)
            if prof:
                prof.__enter__()

        CHECKPOINT.append(gate)
    elif prof:
        prof.__enter__()
    WORKLOADS[args.workload](args.n, facts)
    torch.cuda.synchronize()
    if prof:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(args.profile)
    if args.facts:
        with open(args.facts, "w") as f:
            json.dump(facts, f)


if __name__ == "__main__":
    sys.exit(main())
