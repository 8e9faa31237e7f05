"""How a training step's time varies on this machine, untraced (issue 22): whether two steps
next to each other differ less than two windows of steps a second apart, which says how
short an A/B window should be for a cost of 0.2-2% to show. Each step timed alone (synced
after it), with the launching thread's CPU time.

    python3 bench/step_noise.py resnet50|gpt2 [STEPS]

Prints one JSON object: the steps' median and spread, and for windows of 1, 2, 4 and 8 steps
the median |log ratio| of a window to the one after it and to the one 8 windows later (a
window's noise against its neighbour's, and against a farther one's).
"""
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload  # noqa: E402


def spread(times, size, lag):
    ws = [sum(times[i:i + size]) for i in range(0, len(times) - size + 1, size)]
    d = [abs(math.log(ws[i] / ws[i + lag])) for i in range(len(ws) - lag)]
    return round(statistics.median(d), 4) if d else None


def main():
    name = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    step = {"resnet50": workload.resnet50_step, "gpt2": workload.gpt2_step}[name]()
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    wall, cpu = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.thread_time()
        step()
        torch.cuda.synchronize()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    out = {"workload": name, "steps": steps,
           "step_ms": {"median": 1e3 * statistics.median(wall), "min": 1e3 * min(wall),
                       "max": 1e3 * max(wall)},
           "cpu_ms_median": 1e3 * statistics.median(cpu)}
    for what, xs in (("wall", wall), ("cpu", cpu)):
        out[what + "_log_ratio"] = {str(k): {"next": spread(xs, k, 1), "eighth": spread(xs, k, 8)}
                                    for k in (1, 2, 4, 8)}
    out["wall_ms"] = [round(1e3 * w, 3) for w in wall]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
