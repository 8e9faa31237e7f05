"""Copies and sets under --gpu-time=all against CUPTI (issue 22): since 2026-11-29 the
asynchronous 1-D ones are timed by CUPTI's memcpy and memset records, not by event pairs.
Each workload (STEPS training steps of bench/workload.py's resnet50 or gpt2, after 3 warm-up
ones) runs twice: untraced under the PyTorch profiler (CUDA activities), and under
`gpuscope run --inject` (the default mode) without it. Per workload and kind (memcpy,
memset), for the asynchronous calls of the steps (the profiler's events whose runtime or
driver call has "Async" in its name; gpuscope's records of calls made between the steps'
first and last, by CLOCK_MONOTONIC): how many, and per size the median duration, the profiler's
against gpuscope's records (the same sizes in another process: not one execution against
itself), and how many of gpuscope's were the driver's (flags2).

    python3 copies_fidelity.py run GPUSCOPE OUTDIR [WORKLOAD...]   (on the GPU machine)
    python3 copies_fidelity.py work WORKLOAD STEPS OUT.json|-      (one side)
"""
import collections
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import gsrec  # noqa: E402

STEPS = int(os.environ.get("STEPS", "20"))


def work(name, steps, trace):
    import torch
    import workload

    step = {"resnet50": workload.resnet50_step, "gpt2": workload.gpt2_step}[name]()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    if trace.startswith("-"):  # (-PATH: the steps' window, CLOCK_MONOTONIC ns, to PATH)
        t0 = time.monotonic_ns()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        open(trace[1:], "w").write("%d %d\n" % (t0, time.monotonic_ns()))
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    p.export_chrome_trace(trace)


def profiler_side(trace):
    """(kind, bytes) -> [durations ns] of the asynchronous calls' copies and sets."""
    ev = json.load(open(trace))["traceEvents"]
    calls = {e["args"]["correlation"]: e["name"] for e in ev
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in
             e.get("args", {})}
    out = collections.defaultdict(list)
    for e in ev:
        kind = {"gpu_memcpy": "memcpy", "gpu_memset": "memset"}.get(e.get("cat"))
        if not kind:
            continue
        name = calls.get(e.get("args", {}).get("correlation"), "")
        if "Async" not in name:
            continue
        out[(kind, int(e["args"].get("bytes", 0)))].append(int(round(e["dur"] * 1000)))
    return out


def gpuscope_side(rec, window):
    """(kind, bytes) -> [durations ns] of the calls made in the steps' window, and how many
    were the driver's."""
    t0, t1 = map(int, open(window).read().split())
    out, driver = collections.defaultdict(list), 0
    for r in gsrec.gpu_records(rec):
        if r["kind"] not in (3, 4) or not t0 <= r["call"] <= t1:
            continue
        out[("memcpy" if r["kind"] == 3 else "memset", r["bytes"])].append(r["end"] - r["start"])
        driver += r["flags2"] & 1
    return out, driver


def run(gs, out, workloads):
    rows = []
    for w in workloads:
        d = os.path.join(out, w)
        os.makedirs(d, exist_ok=True)
        trace, rec = os.path.join(d, "prof.json"), os.path.join(d, "run.gsrec")
        me = [sys.executable, os.path.abspath(__file__), "work", w, str(STEPS)]
        subprocess.run(me + [trace], check=True, stdout=subprocess.DEVNULL,
                       stderr=open(os.path.join(d, "prof.err"), "w"))
        window = os.path.join(d, "window")
        subprocess.run([gs, "run", "-q", "--no-os", "--inject", "-o", rec,
                        "--json=%s" % os.path.join(d, "report.json"), "--"] + me +
                       ["-" + window],
                       check=True, stdout=subprocess.DEVNULL,
                       stderr=open(os.path.join(d, "gs.err"), "w"),
                       env=dict(os.environ, GPUSCOPE_INJECT_DEBUG="1"))
        prof, (mine, driver) = profiler_side(trace), gpuscope_side(rec, window)
        for kind in ("memcpy", "memset"):
            pk = {k: v for k, v in prof.items() if k[0] == kind}
            mk = {k: v for k, v in mine.items() if k[0] == kind}
            both = [k for k in pk if k in mk]
            diffs = [statistics.median(mk[k]) - statistics.median(pk[k]) for k in both]
            rows.append({"workload": w, "kind": kind,
                         "profiler": sum(map(len, pk.values())),
                         "gpuscope": sum(map(len, mk.values())),
                         "sizes": len(pk), "sizes_both": len(both),
                         "median_diff_ns": statistics.median(diffs) if diffs else None,
                         "max_abs_diff_ns": max(map(abs, diffs)) if diffs else None,
                         "driver_records": driver})
    json.dump(rows, open(os.path.join(out, "copies.json"), "w"), indent=1)
    print("| workload | kind | async calls: profiler (%d steps) | gpuscope | sizes (both) | "
          "median of per-size median differences | largest | gpuscope's by the driver |"
          % STEPS)
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %d | %d | %d (%d) | %s ns | %s ns | %d |" % (
            r["workload"], r["kind"], r["profiler"], r["gpuscope"], r["sizes"],
            r["sizes_both"], r["median_diff_ns"], r["max_abs_diff_ns"], r["driver_records"]))


if __name__ == "__main__":
    if sys.argv[1] == "work":
        work(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        os.makedirs(sys.argv[3], exist_ok=True)
        run(os.path.abspath(sys.argv[2]), sys.argv[3], sys.argv[4:] or ["resnet50", "gpt2"])
