"""Overhead of gpuscope on real GPU workloads, against an untraced baseline and the
PyTorch profiler, run interleaved in one job (each repetition rotates the order), each
run a fresh process. Reports per-mode medians and the median of per-repetition ratios.

Modes: untraced; inject-off (`run --inject --gpu-time=off`: the in-process plane, calls
only); inject-all (`--inject`, GPU time of every launch); uprobe (`run`: kernel probes on
libcuda); torch-profiler (CPU and CUDA activities). The OS plane is on in all gpuscope
modes (it is the default); inject-all-noos and uprobe-noos are the same without it.
uprobe takes the default stacks (every 64th launch); uprobe-nostacks none, uprobe-stacks1
every launch's.

    python overhead.py --gpuscope PATH --out DIR [--reps 7] [--modes untraced,...]
                       [--workloads tinyops,busyops,cloop,resnet50,gpt2,cupy,graphs,jax]
                       [--cloop BIN] [--baseline PATH]

Workloads: bench/workload.py's (tinyops, busyops, resnet50, gpt2, cupy, graphs, jax) and
cloop, the CUDA C loop (bench/cloop.cu built as BIN; the PyTorch profiler does not apply to
it and is left out).
Besides the ratios, each gpuscope mode's host time added per launch: (its time per
iteration - untraced's) / launches per iteration, the launches counted by gpuscope in the
same run over every iteration the workload ran (iters_total).

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
           "inject-pairs": ["--inject", "--gpu-time=pairs"],
           "inject-all-noos": ["--inject", "--no-os"], "uprobe-noos": ["--no-os"],
           "uprobe-nostacks": ["--stacks", "off"], "uprobe-stacks1": ["--stacks", "1"],
           "inject-all-nostacks": ["--inject", "--stacks", "off"],
           "inject-10": ["--inject", "--gpu-time=10"], "inject-nogates": ["--inject"],
           "inject-h10ms": ["--inject"], "uprobe": []}
# (Diagnosis: events without gates; the harvester every 10 ms; the BPF ring waking its reader
# as it chooses, nearly at every record.) inject-chained: every kernel timed, consecutive
# launches chained (--gpu-time=chained).
GS_OPTS["uprobe-wakeups"] = []
GS_OPTS["inject-chained"] = ["--inject", "--gpu-time=chained"]
# inject-notwins: every launch timed, kernels inside CUDA graphs not (no twins).
GS_OPTS["inject-notwins"] = ["--inject"]
# (Diagnosis of what timing whole graph launches costs: the same without the empty kernel
# before a start event after a copy or a graph, and without gates.)
GS_OPTS["inject-notwins-noprime"] = GS_OPTS["inject-notwins-nogates"] = ["--inject"]
# inject-twin1: every launch timed, a twin at every graph launch (GPUSCOPE_TWIN_EVERY=1);
# inject-twin1-pairs: the same with an event pair around every kernel of the twin.
GS_OPTS["inject-twin1"] = GS_OPTS["inject-twin1-pairs"] = ["--inject"]
GS_ENV = {"inject-twin1": {"GPUSCOPE_TWIN_EVERY": "1"},
          "inject-twin1-pairs": {"GPUSCOPE_TWIN_EVERY": "1", "GPUSCOPE_TWIN_EVENTS": "pairs"},
          "inject-nogates": {"GPUSCOPE_NO_GATES": "1"},
          "uprobe-wakeups": {"GPUSCOPE_RING_WAKEUPS": "1"},
          "inject-h10ms": {"GPUSCOPE_HARVEST_US": "10000"},
          "inject-notwins": {"GPUSCOPE_NO_TWINS": "1"},
          "inject-notwins-noprime": {"GPUSCOPE_NO_TWINS": "1", "GPUSCOPE_NO_PRIME": "1"},
          "inject-notwins-nogates": {"GPUSCOPE_NO_TWINS": "1", "GPUSCOPE_NO_GATES": "1"}}
# inject-all-nofollow: every kernel timed, a busy stream's launches a pair each, as before
# 2026-11-27's follows (GPUSCOPE_NO_FOLLOW).
GS_OPTS["inject-all-nofollow"] = ["--inject"]
GS_ENV["inject-all-nofollow"] = {"GPUSCOPE_NO_FOLLOW": "1"}
# inject-chained-cN: chains that hold their gate N us at most (GPUSCOPE_CHAIN_US; 100 us).
for _us in (20, 30, 50):
    GS_OPTS["inject-chained-c%d" % _us] = GS_OPTS["inject-chained"]
    GS_ENV["inject-chained-c%d" % _us] = {"GPUSCOPE_CHAIN_US": str(_us)}


BASELINE = None


def gs_mode(mode):
    """The gpuscope options of a mode and the binary that runs it (None: not gpuscope)."""
    if mode.startswith("base:"):
        return GS_OPTS.get(mode[5:]), BASELINE
    return GS_OPTS.get(mode), None


CLOOP = None


def run(mode, workload, gs, out):
    cmd = ([CLOOP] if workload == "cloop" else
           [sys.executable, os.path.join(HERE, "workload.py"), workload])
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
        result["gpuscope_launches_per_iter"] = (r["kernels"]["launches"] /
                                                max(1, result.get("iters_total", 1)))
        # How the kernels timed were timed (a pair gated or not, chained, followed).
        result["gpuscope_timing"] = {
            f: sum((k.get("gpu") or {}).get(f, 0) for k in r["kernels"]["list"])
            for f in ("timed", "gated", "chained", "followed", "start_unknown")}
    return result


def save_partial(out, workload, per_mode):
    """What has been measured so far, in case the job is cut short."""
    with open(os.path.join(out, "partial-%s.json" % workload), "w") as f:
        json.dump(per_mode, f, indent=1)


def bench(workload, reps, gs, out, modes):
    if workload == "cloop":
        modes = [m for m in modes if m != "torch-profiler"]
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
    per_launch = [v["gpuscope_launches_per_iter"] for v in extra.values()
                  if v.get("gpuscope_launches_per_iter")]
    lpi = statistics.median(per_launch) if per_launch else None
    base = statistics.median(per_mode["untraced"])
    return {
        "workload": workload,
        "reps": reps,
        "modes": modes,
        "launches_per_iter": lpi,
        "host_ns_per_launch": {m: (statistics.median(v) - base) * 1e9 / lpi
                               for m, v in per_mode.items() if m != "untraced" and lpi},
        "median_per_iter_s": {m: statistics.median(v) for m, v in per_mode.items()},
        "all_per_iter_s": per_mode,
        "ratio_median": {m: statistics.median(v) for m, v in ratios.items()},
        "ratio_range": {m: [min(v), max(v)] for m, v in ratios.items()},
        "gpuscope_last_run": extra,
    }


def machine():
    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
        except OSError:
            return "?"
    return {"gpu": out(["nvidia-smi", "--query-gpu=name,driver_version",
                        "--format=csv,noheader"]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "gpuscope": out([GS, "--version"]), "python": sys.version.split()[0]}


GS = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--workloads", default="tinyops,cloop,resnet50,gpt2,cupy")
    ap.add_argument("--cloop", help="bench/cloop.cu, built")
    ap.add_argument("--baseline", help="another gpuscope, for the base:MODE modes")
    args = ap.parse_args()
    global BASELINE, CLOOP, GS
    BASELINE, CLOOP, GS = args.baseline, args.cloop, args.gpuscope
    modes = args.modes.split(",")
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    m = machine()
    print("machine: %s; %s; %s" % (m["gpu"], m["date"], m["gpuscope"]), flush=True)
    results = []
    for w in args.workloads.split(","):
        results.append(bench(w, args.reps, args.gpuscope, args.out, modes))
        with open(os.path.join(args.out, "overhead.json"), "w") as f:
            json.dump({"machine": m, "results": results, "modes": modes,
                       "wall_s": time.time() - t0}, f, indent=1)
    print("\n| workload | " + " | ".join(modes) + " |")
    print("|---|" + "---|" * len(modes))
    for r in results:
        med, q = r["median_per_iter_s"], r["ratio_median"]
        cells = ["%.2f us" % (med["untraced"] * 1e6)] + [
            "%.3fx (%.3f-%.3f)%s" % (q[x], *r["ratio_range"][x],
                                     ", %+.0f ns/launch" % r["host_ns_per_launch"][x]
                                     if x in r["host_ns_per_launch"] else "")
            if x in q else "-" for x in modes if x != "untraced"]
        print("| %s | %s |" % (r["workload"], " | ".join(cells)))


if __name__ == "__main__":
    main()
