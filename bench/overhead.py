"""Overhead of gpuscope on real GPU workloads, against an untraced baseline and the
PyTorch profiler, run interleaved in one job (each repetition rotates the order), each
run a fresh process. Reports per-mode medians and the median of per-repetition ratios.

    python overhead.py --gpuscope PATH --out DIR [--reps-tiny 5] [--reps-resnet 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["untraced", "gpuscope", "torch-profiler"]


def run(mode, workload, gs, out):
    cmd = [sys.executable, os.path.join(HERE, "workload.py"), workload]
    report = None
    if mode == "torch-profiler":
        cmd.append("--profile")
    elif mode == "gpuscope":
        report = os.path.join(out, "gs-%s.json" % workload)
        cmd = [gs, "run", "-q", "--json=%s" % report, "--"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise RuntimeError("%s %s failed (%d):\n%s" % (mode, workload, p.returncode,
                                                        p.stderr[-3000:]))
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    result = json.loads(line)
    if report:
        r = json.load(open(report))
        result["gpuscope_launches"] = r["kernels"]["launches"]
        result["gpuscope_drops"] = r["drops"]["total"]
        result["gpuscope_events"] = r["session"]["events"]
    return result


def bench(workload, reps, gs, out):
    per_mode = {m: [] for m in MODES}
    ratios = {m: [] for m in MODES if m != "untraced"}
    extra = {}
    for rep in range(reps):
        order = MODES[rep % 3:] + MODES[:rep % 3]
        got = {}
        for mode in order:
            r = run(mode, workload, gs, out)
            got[mode] = r["per_iter_s"]
            per_mode[mode].append(r["per_iter_s"])
            if mode == "gpuscope":
                extra = {k: v for k, v in r.items() if k.startswith("gpuscope_")}
            print("  %-9s rep %d %-15s %.3f us/iter" % (workload, rep, mode,
                                                      r["per_iter_s"] * 1e6), flush=True)
        for m in ratios:
            ratios[m].append(got[m] / got["untraced"])
    return {
        "workload": workload,
        "reps": reps,
        "median_per_iter_s": {m: statistics.median(v) for m, v in per_mode.items()},
        "all_per_iter_s": per_mode,
        "ratio_median": {m: statistics.median(v) for m, v in ratios.items()},
        "ratio_range": {m: [min(v), max(v)] for m, v in ratios.items()},
        "gpuscope_last_run": extra,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps-tiny", type=int, default=5)
    ap.add_argument("--reps-resnet", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    results = [bench("tinyops", args.reps_tiny, args.gpuscope, args.out),
               bench("resnet50", args.reps_resnet, args.gpuscope, args.out)]
    with open(os.path.join(args.out, "overhead.json"), "w") as f:
        json.dump({"results": results, "wall_s": time.time() - t0}, f, indent=1)
    print("\n| workload | untraced | gpuscope | torch profiler | gpuscope / untraced | "
          "profiler / untraced |")
    print("|---|---|---|---|---|---|")
    for r in results:
        m, q = r["median_per_iter_s"], r["ratio_median"]
        print("| %s | %.2f us | %.2f us | %.2f us | %.3f | %.3f |" % (
            r["workload"], m["untraced"] * 1e6, m["gpuscope"] * 1e6,
            m["torch-profiler"] * 1e6, q["gpuscope"], q["torch-profiler"]))


if __name__ == "__main__":
    main()
