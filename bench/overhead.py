"""Overhead of gpuscope on real GPU workloads, against an untraced baseline and the
PyTorch profiler, run interleaved in one job (each repetition rotates the order), each
run a fresh process. Reports per-mode medians and the median of per-repetition ratios.

Modes: untraced; inject-off (`run --inject --gpu-time=off`: the in-process plane, calls
only); inject-all (`--inject`, GPU time of every launch); uprobe (`run`: kernel probes on
libcuda); torch-profiler (CPU and CUDA activities). The OS plane is on in all gpuscope
modes (it is the default); inject-all-noos and uprobe-noos are the same without it.
uprobe takes the default stacks (every 64th launch); uprobe-nostacks none, uprobe-stacks1
every launch's.

    python overhead.py --gpuscope PATH --out DIR [--reps-tiny 5] [--reps-resnet 3]
                       [--modes untraced,inject-off,...] [--workloads tinyops,resnet50]
                       [--baseline PATH]

A mode "base:MODE" is MODE with the --baseline gpuscope (another build, compared in the
same interleaved job).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["untraced", "inject-off", "inject-all", "uprobe", "torch-profiler"]
GS_OPTS = {"inject-off": ["--inject", "--gpu-time=off"], "inject-all": ["--inject"],
           "inject-all-noos": ["--inject", "--no-os"], "uprobe-noos": ["--no-os"],
           "uprobe-nostacks": ["--stacks", "off"], "uprobe-stacks1": ["--stacks", "1"],
           "inject-all-nostacks": ["--inject", "--stacks", "off"],
           "inject-10": ["--inject", "--gpu-time=10"], "inject-nogates": ["--inject"],
           "inject-h10ms": ["--inject"], "uprobe": []}
# (Diagnosis: events without gates; the harvester every 10 ms.)
GS_ENV = {"inject-nogates": {"GPUSCOPE_NO_GATES": "1"},
          "inject-h10ms": {"GPUSCOPE_HARVEST_US": "10000"}}


BASELINE = None


def gs_mode(mode):
    """The gpuscope options of a mode and the binary that runs it (None: not gpuscope)."""
    if mode.startswith("base:"):
        return GS_OPTS.get(mode[5:]), BASELINE
    return GS_OPTS.get(mode), None


def run(mode, workload, gs, out):
    cmd = [sys.executable, os.path.join(HERE, "workload.py"), workload]
    report = None
    opts, other = gs_mode(mode)
    if mode == "torch-profiler":
        cmd.append("--profile")
    elif opts is not None:
        report = os.path.join(out, "gs-%s-%s.json" % (mode.replace(":", "-"), workload))
        cmd = [other or gs, "run", "-q", "--json=%s" % report] + opts + ["--"] + cmd
    env = dict(os.environ, **GS_ENV.get(mode.replace("base:", ""), {}))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
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
        result["gpuscope_gpu_records"] = r["gpu"]["records"]
        result["gpuscope_unwrapped"] = r["drops"]["unwrapped_entry_points"]
    return result


def save_partial(out, workload, per_mode):
    """What has been measured so far, in case the job is cut short."""
    with open(os.path.join(out, "partial-%s.json" % workload), "w") as f:
        json.dump(per_mode, f, indent=1)


def bench(workload, reps, gs, out, modes):
    per_mode = {m: [] for m in modes}
    ratios = {m: [] for m in modes if m != "untraced"}
    extra = {}
    for rep in range(reps):
        k = rep % len(modes)
        order = modes[k:] + modes[:k]
        got = {}
        for mode in order:
            r = run(mode, workload, gs, out)
            got[mode] = r["per_iter_s"]
            per_mode[mode].append(r["per_iter_s"])
            if gs_mode(mode)[0] is not None:
                extra[mode] = {k: v for k, v in r.items() if k.startswith("gpuscope_")}
            print("  %-9s rep %d %-15s %.3f us/iter" % (workload, rep, mode,
                                                      r["per_iter_s"] * 1e6), flush=True)
        for m in ratios:
            ratios[m].append(got[m] / got["untraced"])
        save_partial(out, workload, per_mode)
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
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--workloads", default="tinyops,resnet50")
    ap.add_argument("--baseline", help="another gpuscope, for the base:MODE modes")
    args = ap.parse_args()
    global BASELINE
    BASELINE = args.baseline
    modes = args.modes.split(",")
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    reps = {"tinyops": args.reps_tiny, "resnet50": args.reps_resnet}
    results = [bench(w, reps[w], args.gpuscope, args.out, modes)
               for w in args.workloads.split(",")]
    with open(os.path.join(args.out, "overhead.json"), "w") as f:
        json.dump({"results": results, "modes": modes, "wall_s": time.time() - t0}, f,
                  indent=1)
    print("\n| workload | " + " | ".join(modes) + " |")
    print("|---|" + "---|" * len(modes))
    for r in results:
        m, q = r["median_per_iter_s"], r["ratio_median"]
        cells = ["%.2f us" % (m["untraced"] * 1e6)] + [
            "%.2f us (%.3fx, %.3f-%.3f)" % (m[x] * 1e6, q[x], *r["ratio_range"][x])
            for x in modes if x != "untraced"]
        print("| %s | %s |" % (r["workload"], " | ".join(cells)))


if __name__ == "__main__":
    main()
