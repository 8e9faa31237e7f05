"""PyTorch memory problems for the memory analyses on a GPU (bench/memory_gpu.sh).

    python torch_memory.py CASE N [--facts FACTS.json]

  list_leak   N steps; each appends a 4 MiB activation to a list that is never emptied
  graph_leak  N steps of a small MLP; the loss is summed into a running total without
              .item(), so every step's autograd graph and saved tensors stay alive
  steady      N steps of the same MLP, loss taken with .item(): nothing kept (the control)
  train       N training steps of torchvision's ResNet-50 (batch 32, synthetic data): a
              real run's allocations, for the memory-map picture
  fragment    fill the GPU with 6 MiB tensors, free two of every three, then ask for
              64 MiB: two thirds of the memory is free inside the allocator's segments,
              which it cannot give back (the OOM PyTorch calls "reserved but unallocated")

Run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 for each tensor to be its own driver allocation
(what a leak looks like at the driver level without the cache in between); without it,
the driver sees the caching allocator's segments. --facts writes what the program knows:
bytes it kept, the free memory before the failing ask, PyTorch's own OOM message.
"""
import argparse
import json
import sys
import time

import torch

MIB = 1 << 20


def list_leak(n, facts):
    kept = []
    x = torch.randn(1024, 1024, device="cuda")
    for _ in range(n):
        kept.append(x * 2)  # 4 MiB each, never dropped
        time.sleep(0.005)
    torch.cuda.synchronize()
    facts["kept_bytes"] = sum(t.numel() * t.element_size() for t in kept)
    facts["kept_tensors"] = len(kept)


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                               torch.nn.Linear(4096, 1024)).cuda()


def graph_leak(n, facts):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    total = 0
    for _ in range(n):
        x = torch.randn(256, 1024, device="cuda")
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward(retain_graph=True)
        opt.step()
        total = total + loss  # the bug: keeps every step's graph alive
        time.sleep(0.005)
    torch.cuda.synchronize()
    facts["allocated_end"] = torch.cuda.memory_allocated()


def steady(n, facts):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    total = 0.0
    for _ in range(n):
        x = torch.randn(256, 1024, device="cuda")
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
        time.sleep(0.005)
    torch.cuda.synchronize()
    facts["allocated_end"] = torch.cuda.memory_allocated()


def train(n, facts):
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(32, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (32,), device="cuda")
    for _ in range(n):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    torch.cuda.synchronize()
    facts["allocated_end"] = torch.cuda.memory_allocated()
    facts["max_reserved"] = torch.cuda.max_memory_reserved()


def fragment(n, facts):
    """The caching allocator's fragmentation: 6 MiB tensors fill 20 MiB segments three at
    a time; two of each three are freed, so every segment keeps one live tensor and cannot
    be given back; a 64 MiB ask then needs a new segment the driver has no memory for."""
    del n
    blocks = []
    try:
        while True:
            blocks.append(torch.empty(6 * MIB, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError:
        pass
    facts["filled_blocks"] = len(blocks)
    for i in range(len(blocks)):
        if i % 3:
            blocks[i] = None
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    facts.update(free_before_ask=free, total=total, asked=64 * MIB,
                 reserved=torch.cuda.memory_reserved(),
                 allocated=torch.cuda.memory_allocated())
    try:
        torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")
        facts["ask"] = "succeeded"
    except torch.OutOfMemoryError as e:
        facts["ask"] = "failed"
        facts["torch_message"] = str(e).splitlines()[0][:600]


CASES = {"list_leak": list_leak, "graph_leak": graph_leak, "steady": steady,
         "train": train, "fragment": fragment}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("n", type=int)
    ap.add_argument("--facts")
    args = ap.parse_args()
    facts = {"case": args.case, "n": args.n}
    t0 = time.time()
    CASES[args.case](args.n, facts)
    facts["seconds"] = time.time() - t0
    if args.facts:
        with open(args.facts, "w") as f:
            json.dump(facts, f)


if __name__ == "__main__":
    sys.exit(main())
