"""Device memory on two GPUs from one process, and a kernel that waits on the GPU.

Run under gpuscope on a machine with two GPUs (see bench/results/...-per-device). It
allocates 256 MiB on cuda:0 and 512 MiB on cuda:1 through PyTorch (its caching allocator
calls cudaMalloc in each device's context), then on cuda:0 queues GEMMs on one stream and
an elementwise kernel on a second stream that waits for an event recorded after them: the
elementwise kernel is launched at once and waits on the GPU. Facts go to stdout as JSON.
"""
import json
import time

import torch


def main():
    facts = {}
    a = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
    b = torch.empty(512 << 20, dtype=torch.uint8, device="cuda:1")
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    facts["reserved:0"] = torch.cuda.memory_reserved(0)
    facts["reserved:1"] = torch.cuda.memory_reserved(1)
    x = torch.randn(8192, 8192, device="cuda:0")
    s1, s2 = torch.cuda.Stream(device=0), torch.cuda.Stream(device=0)
    gemms = []
    for _ in range(3):
        with torch.cuda.stream(s1):
            begin = torch.cuda.Event(enable_timing=True)
            begin.record(s1)
            for _ in range(10):
                y = x @ x
            ev = torch.cuda.Event(enable_timing=True)
            ev.record(s1)
        s2.wait_event(ev)
        with torch.cuda.stream(s2):
            z = x + 1
        torch.cuda.synchronize(0)
        gemms.append(begin.elapsed_time(ev))
        time.sleep(0.05)
    facts["gemms_ms"] = gemms  # what the elementwise kernel waited for, at most
    facts["reserved_end:0"] = torch.cuda.memory_reserved(0)
    facts["reserved_end:1"] = torch.cuda.memory_reserved(1)
    del a, b, y, z
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
