"""Workloads for the overhead benchmark (bench/overhead.py). Prints one JSON line: the
median time per iteration over several timed windows, after a warm-up, measured inside
the process so that start-up (and gpuscope's attach) is not counted.

    python workload.py tinyops|resnet50 [--profile]

tinyops: a launch-bound loop of tiny elementwise ops (x.add_(1) on one element), about
5 us each. resnet50: training steps of torchvision's ResNet-50, batch 64, bf16 autocast,
channels-last, synthetic data. --profile runs the timed windows under the PyTorch
profiler (CPU and CUDA activities), for comparison.
"""
import argparse
import contextlib
import json
import statistics
import time

import torch


def tinyops(profile_ctx):
    x = torch.zeros(1, device="cuda")
    iters, windows = 20000, 7
    for _ in range(2000):
        x.add_(1.0)
    torch.cuda.synchronize()
    times = []
    with profile_ctx():
        for _ in range(windows):
            t0 = time.perf_counter()
            for _ in range(iters):
                x.add_(1.0)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / iters)
    return times


def resnet50(profile_ctx):
    import torchvision

    torch.backends.cudnn.benchmark = False
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = torch.randn(64, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    target = torch.randint(0, 1000, (64,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(data), target)
        loss.backward()
        opt.step()

    for _ in range(10):
        step()
    torch.cuda.synchronize()
    times = []
    with profile_ctx():
        for _ in range(4):
            t0 = time.perf_counter()
            for _ in range(8):
                step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / 8)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["tinyops", "resnet50"])
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    if args.profile:
        from torch.profiler import profile, ProfilerActivity

        def ctx():
            return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    else:
        ctx = contextlib.nullcontext
    times = {"tinyops": tinyops, "resnet50": resnet50}[args.workload](ctx)
    print(json.dumps({"workload": args.workload, "per_iter_s": statistics.median(times),
                      "windows_s": times}))


if __name__ == "__main__":
    main()
