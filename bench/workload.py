"""Workloads for the overhead benchmark (bench/overhead.py). Prints one JSON line: the
median time per iteration over several timed windows, after a warm-up, measured inside
the process so that start-up (and gpuscope's attach) is not counted.

    python workload.py tinyops|busyops|resnet50|gpt2|cupy|graphs|jax|compile_ro [--profile]

tinyops: a launch-bound loop of tiny elementwise ops (x.add_(1) on one element), about
5 us each. busyops: a GPU-bound loop of the same on 2^24 floats (each launch finds its
stream busy). resnet50: training steps of torchvision's ResNet-50, batch 64, bf16 autocast,
channels-last, synthetic data. gpt2: training steps of GPT-2 small (transformers, 124M,
batch 8 x 512 tokens, bf16 autocast, AdamW), synthetic tokens. cupy: a launch-bound loop
of CuPy's elementwise x += 1 on one element. graphs: an MLP training step captured in a
CUDA graph, replayed and waited for each iteration. jax: a jitted MLP training step (XLA's
command buffers), its loss waited for each iteration. compile_ro: a transformer encoder
layer's training step under torch.compile's reduce-overhead mode (its forward and backward
CUDA graphs). --profile runs the timed windows under the
PyTorch profiler (CPU and CUDA activities: CUPTI sees CuPy's kernels too), for comparison.
--ab FILE MODES N: modes compared inside one process (bench/inject_ab.sh): N rounds of one
timed window per mode of MODES (a comma list), the order turned each round, under `gpuscope
run --inject` with GPUSCOPE_AB_FILE=FILE (src/inject/ab.c says the modes); "profiler" is a
window under the PyTorch profiler with the plane passing calls through, "profcuda" one under
its CUDA activity alone.
WORKLOAD_BATCH sets resnet50's and gpt2's batch (64 and 8 by default: steps bound by the
launching threads on the H200 guests; larger, steps bound by the GPU).
(The CUDA C loop is bench/cloop.cu.) iters_total: every iteration run, warm-up included
(for launches per iteration from a count of the process's launches).
"""
import argparse
import contextlib
import json
import os
import statistics
import time

import torch


def tinyops(profile_ctx):
    x = torch.zeros(1, device="cuda")
    return windows_of(lambda: x.add_(1.0), 2000, 20000, 7, profile_ctx,
                      torch.cuda.synchronize)


def tinyops_step(n=1000):
    """n tiny ops (bench/attach_ab.py's step)."""
    x = torch.zeros(1, device="cuda")

    def step():
        for _ in range(n):
            x.add_(1.0)

    return step


def cupy_step(n=1000):
    """n of CuPy's x += 1 on one element (bench/attach_ab.py's step)."""
    import cupy as cp

    x = cp.zeros(1, dtype=cp.float32)

    def step():
        for _ in range(n):
            x.__iadd__(1.0)

    return step


def busyops(profile_ctx):
    """A GPU-bound loop: x.add_(1) on 2^24 floats (about 30 us of GPU time each, more than
    a launch takes on the host): every launch finds its stream busy."""
    x = torch.zeros(1 << 24, device="cuda")
    return windows_of(lambda: x.add_(1.0), 200, 1000, 7, profile_ctx, torch.cuda.synchronize)


ITERS = {"n": 0}
# --ab FILE MODES N; AB["windows"] the (mode, seconds, round) of each window.
# AB["cpu"] the same with the window's CPU time on this thread (a guest's time stolen by
# its host, and other programs', are not in it; gpuscope's threads are not either).
AB = {"file": None, "modes": [], "rounds": 0, "windows": [], "cpu": []}


def profiler(cuda_only=False):
    """The PyTorch profiler; cuda_only: its CUDA activity alone (CUPTI's kernel, copy and
    runtime records, no CPU operator events)."""
    from torch.profiler import profile, ProfilerActivity

    acts = [ProfilerActivity.CUDA] if cuda_only else [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    return profile(activities=acts)


def ab_set(mode):
    """Before a window: the mode written to FILE whole, and the plane's thread (which reads
    it every millisecond) given time to see it."""
    tmp = AB["file"] + ".tmp"
    with open(tmp, "w") as f:
        f.write("pass" if mode in ("profiler", "profcuda") else mode)
    os.replace(tmp, AB["file"])
    time.sleep(0.02)


def ab_windows(fn, iters, sync):
    """The A/B rounds: each window after a tenth of its length run untimed in its mode."""
    times = []
    modes = AB["modes"]
    iters = int(os.environ.get("AB_ITERS", iters))  # (a window's steps, when set)
    AB["iters"] = max(1, iters // 10) + iters  # (a window's, warm-up included)
    for r in range(AB["rounds"]):
        for j in range(len(modes)):
            mode = modes[(r + j) % len(modes)]
            ab_set(mode)
            prof = mode in ("profiler", "profcuda")
            with profiler(mode == "profcuda") if prof else contextlib.nullcontext():
                for _ in range(max(1, iters // 10)):
                    fn()
                sync()
                t0, c0 = time.perf_counter(), time.thread_time()
                for _ in range(iters):
                    fn()
                sync()
                times.append((time.perf_counter() - t0) / iters)
                cpu = (time.thread_time() - c0) / iters
            AB["windows"].append((mode, times[-1], r))
            AB["cpu"].append((mode, cpu, r))
            ITERS["n"] += max(1, iters // 10) + iters
    return times


def windows_of(fn, warm, iters, windows, profile_ctx, sync):
    """fn() warm times, then windows of iters each (timed, synced), under profile_ctx."""
    for _ in range(warm):
        fn()
    sync()
    ITERS["n"] += warm
    if AB["file"]:
        return ab_windows(fn, iters, sync)
    times = []
    with profile_ctx():
        for w in range(windows):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            sync()
            times.append((time.perf_counter() - t0) / iters)
    ITERS["n"] += iters * windows
    return times


def gpt2_step():
    """One training step of GPT-2 small (the model built here)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config()).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (int(os.environ.get("WORKLOAD_BATCH", 8)), 512), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()

    return step


def gpt2(profile_ctx):
    return windows_of(gpt2_step(), 5, 8, 4, profile_ctx, torch.cuda.synchronize)


def cupy_loop(profile_ctx):
    import cupy as cp

    x = cp.zeros(1, dtype=cp.float32)

    def op():
        x.__iadd__(1.0)

    return windows_of(op, 2000, 20000, 7, profile_ctx,
                      cp.cuda.runtime.deviceSynchronize)


def resnet50_step():
    """One training step of ResNet-50 (the model built here)."""
    import torchvision

    torch.backends.cudnn.benchmark = False
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batch = int(os.environ.get("WORKLOAD_BATCH", 64))
    data = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    target = torch.randint(0, 1000, (batch,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(data), target)
        loss.backward()
        opt.step()

    return step


def graphs(profile_ctx):
    """A training step (an MLP's forward, backward and SGD) captured in a CUDA graph,
    replayed and waited for each iteration (bench/fidelity_work.py's graphs)."""
    from fidelity_work import graph_step

    g, _ = graph_step()

    def step():
        g.replay()
        torch.cuda.synchronize()

    return windows_of(step, 50, 500, 7, profile_ctx, torch.cuda.synchronize)


def compile_step(mode=None):
    """A training step of one transformer encoder layer (256 wide, 4 heads, batch 8 x 128),
    its forward and backward compiled by torch.compile (Inductor's Triton kernels, each
    launched; mode "reduce-overhead": as CUDA graphs), the optimizer's step eager."""
    torch.manual_seed(0)
    block = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True).cuda()
    fwd = torch.compile(block, mode=mode)
    opt = torch.optim.SGD(block.parameters(), lr=1e-3)
    x = torch.randn(8, 128, 256, device="cuda")

    def step():
        loss = fwd(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def compile_ro_step():
    """compile_step in reduce-overhead mode (bench/fidelity_work.py's compile_ro)."""
    return compile_step("reduce-overhead")


def compile_ro(profile_ctx):
    return windows_of(compile_ro_step(), 30, 200, 7, profile_ctx, torch.cuda.synchronize)


def jax_loop(profile_ctx):
    """The jitted MLP training step of bench/fidelity_work.py's jax, its loss waited for
    each iteration."""
    from fidelity_work import jax_step

    step, params = jax_step()
    state = {"p": params}

    def it():
        state["p"], loss = step(state["p"])
        loss.block_until_ready()

    return windows_of(it, 50, 300, 7, profile_ctx, lambda: None)


def resnet50(profile_ctx):
    return windows_of(resnet50_step(), 10, 8, 4, profile_ctx, torch.cuda.synchronize)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload",
                    choices=["tinyops", "busyops", "resnet50", "gpt2", "cupy", "graphs", "jax",
                             "compile_ro"])
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--ab", nargs=3, metavar=("FILE", "MODES", "N"))
    args = ap.parse_args()
    if args.ab:
        AB["file"], AB["modes"], AB["rounds"] = args.ab[0], args.ab[1].split(","), int(args.ab[2])
    ctx = profiler if args.profile else contextlib.nullcontext
    times = {"tinyops": tinyops, "busyops": busyops, "resnet50": resnet50, "gpt2": gpt2,
             "cupy": cupy_loop, "graphs": graphs, "jax": jax_loop,
             "compile_ro": compile_ro}[args.workload](ctx)
    print(json.dumps({"workload": args.workload, "per_iter_s": statistics.median(times),
                      "iters_total": ITERS["n"], "windows_s": times, "ab": AB["windows"],
                      "ab_cpu": AB["cpu"], "ab_iters": AB.get("iters", 0)}))


if __name__ == "__main__":
    main()
