"""Does what an event pair adds depend on the kernel's launch (issue 22)? One process runs
CuPy kernels that do nothing, with 16 .. 3,928 bytes of parameters (a pointer and 1 .. 490
doubles) on 1 or 1,024 blocks, 40 launches each, one at a time (gated); then kernels with
0 .. 200 KiB of dynamic shared memory, 40 launches each back to back (sb_*) and 40 each
after a kernel with none (sa_*, the GPU reconfiguring its shared memory between them?);
under the PyTorch profiler (CUPTI), itself under `gpuscope run --inject`. Each execution is
paired with CUPTI's in order, and the report's duration (the pair less event_overhead_ns)
compared.

    python3 param_bias.py run GPUSCOPE OUTDIR     (on the GPU machine)
    python3 param_bias.py work TRACE              (the workload itself)
Writes OUTDIR/param.json and prints a table: per kernel, the median error against CUPTI.
"""
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
DOUBLES = (1, 16, 64, 256, 490)
BLOCKS = (1, 1024)
SMEM_KIB = (0, 48, 100, 200)
RUNS = 40


def kernels():
    for n in DOUBLES:
        for b in BLOCKS:
            yield n, b, "k_%d_%d" % (n, b)


def smem_kernels():
    for s in SMEM_KIB:
        for how in ("sb", "sa"):
            yield s, how, "%s_%d" % (how, s)


def work(trace):
    import cupy as cp
    import numpy as np
    from torch.profiler import ProfilerActivity, profile

    src = []
    for n, b, name in kernels():
        args = ", ".join("double a%d" % i for i in range(n))
        src.append('extern "C" __global__ void %s(double *out, %s)\n'
                   "{ if (a0 == -1.0 && threadIdx.x == 0) out[blockIdx.x] = a%d; }\n"
                   % (name, args, n - 1))
    for _, _, name in list(smem_kernels()) + [(0, 0, "z")]:
        src.append('extern "C" __global__ void %s(double *out, double a)\n'
                   "{ extern __shared__ double s[]; if (a == -1.0) { s[threadIdx.x] = a;"
                   " __syncthreads(); out[threadIdx.x] = s[31 - threadIdx.x]; } }\n" % name)
    mod = cp.RawModule(code="".join(src))
    out = cp.zeros(1024, dtype=cp.float64)
    runs = []
    for n, b, name in kernels():
        f = mod.get_function(name)
        vals = tuple(np.float64(i) for i in range(n))
        runs.append((f, b, (out,) + vals))
    for f, b, args in runs:  # (first launches: not measured)
        f((b,), (32,), args)
    cp.cuda.runtime.deviceSynchronize()
    z = mod.get_function("z")
    z((1,), (32,), (out, np.float64(0)))
    smem = []
    for s, how, name in smem_kernels():
        f = mod.get_function(name)
        f.max_dynamic_shared_size_bytes = s * 1024
        f((132,), (32,), (out, np.float64(0)), shared_mem=s * 1024)
        smem.append((f, s * 1024, how))
    cp.cuda.runtime.deviceSynchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for f, b, args in runs:
            for _ in range(RUNS):
                f((b,), (32,), args)
                cp.cuda.runtime.deviceSynchronize()
        for f, s, how in smem:
            for _ in range(RUNS):
                if how == "sa":
                    z((132,), (32,), (out, np.float64(0)))
                f((132,), (32,), (out, np.float64(0)), shared_mem=s)
                cp.cuda.runtime.deviceSynchronize()
    prof.export_chrome_trace(trace)


def analyse(gs, out):
    from gputime_bias import traced

    cupti, _, kern, dev = traced(gs, __file__, out, "param",
                                 keep=lambda name: name[:2] in ("k_", "sa", "sb", "z"))
    over = dev["event_overhead_ns"]
    by = {}
    for c, r in zip(cupti, kern):
        if r["flags"] & 2:  # gated
            by.setdefault(c[2], []).append((r["end"] - r["start"] - over - c[1], c[1]))
    res = {"event_overhead_ns": over, "event_launch_ns": dev.get("event_launch_ns"),
           "kernels": {}}
    print("event pair taken off: %s ns (launch part %s ns)" % (over, dev.get("event_launch_ns")))
    print("| kernel (doubles, blocks) | param bytes | n | CUPTI median | error median |")
    print("|---|---|---|---|---|")
    for n, b, name in kernels():
        v = by.get(name, [])
        row = {"param_bytes": 8 + 8 * n, "blocks": b, "n": len(v),
               "cupti_median_ns": statistics.median([x[1] for x in v]) if v else None,
               "err_median_ns": statistics.median([x[0] for x in v]) if v else None}
        res["kernels"][name] = row
        print("| %s | %d | %d | %s | %s |" % (name, row["param_bytes"], row["n"],
                                            row["cupti_median_ns"], row["err_median_ns"]))
    print("| kernel (after another with no shared memory: sa) | shared KiB | n | CUPTI median "
          "| error median |")
    print("|---|---|---|---|---|")
    for s, how, name in smem_kernels():
        v = by.get(name, [])
        row = {"smem_kib": s, "n": len(v),
               "cupti_median_ns": statistics.median([x[1] for x in v]) if v else None,
               "err_median_ns": statistics.median([x[0] for x in v]) if v else None}
        res["kernels"][name] = row
        print("| %s | %d | %d | %s | %s |" % (name, s, row["n"], row["cupti_median_ns"],
                                            row["err_median_ns"]))
    json.dump(res, open(os.path.join(out, "param.json"), "w"), indent=1)


if __name__ == "__main__":
    from gputime_bias import main

    main(work, analyse)
