"""GPU durations of `--inject` against CUPTI, by kernel size (issue 22): one process runs
elementwise kernels from about 1 us to about 1 ms (x.add_(1) on 2^4 .. 2^26 floats, 40
launches each (BIAS_N), launch-bound for the small ones; BIAS_ORDER=interleave: 2^4 .. 2^20
in turn, BIAS_N rounds) and cuBLAS GEMMs, under the PyTorch
profiler, itself under `gpuscope run --inject`; then each kernel execution is paired with
CUPTI's (in order) and the ways of turning a gated event pair into a kernel duration are
compared per size bucket (< 2 us, 2-50 us, > 50 us):

  reported   the pair less what the report says an event pair adds (event_overhead_ns:
             analysis/model_gpu.c says how it is found);
  kernel     the pair less the calibration kernel's pair less its own span (GS_CAL_OVERHEAD,
             gpuscope's estimator before 2026-11-26);
  raw        the event pair as recorded (a chained launch's: the end event before it
             and its own);
  empty      the pair less a gated pair with nothing between (GS_CAL_EMPTY);
  midpoint   the pair less the midpoint of kernel's and empty's (the report's rule where
             what a kernel's launch adds is not known for the GPU, GS_CAL_LAUNCH);
and the constant that would make each bucket's median exact (raw - CUPTI).

    python3 gputime_bias.py run GPUSCOPE OUTDIR     (on the GPU machine; GS_OPTS: more
                                                    options of gpuscope run)
    python3 gputime_bias.py work TRACE              (the workload itself)
Writes OUTDIR/bias.json and prints a table.
"""
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))


def work(trace):
    import torch
    from torch.profiler import ProfilerActivity, profile

    xs = [torch.zeros(1 << k, device="cuda") for k in range(4, 27, 2)]
    mats = [torch.randn(n, n, device="cuda") for n in (256, 1024, 4096)]
    for x in xs:  # (warm-up: first launches, not measured)
        x.add_(1)
    for m in mats:
        m @ m
    torch.cuda.synchronize()
    n = int(os.environ.get("BIAS_N", "40"))  # (launches a size)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        if os.environ.get("BIAS_ORDER") == "interleave":
            # (the sizes up to 2^20 floats in turn, each round waited for: every launch a
            # new shape for its stream, as in a training step)
            for _ in range(n):
                for x in xs[:9]:
                    x.add_(1)
                torch.cuda.synchronize()
        else:
            for x in xs:
                for _ in range(n):
                    x.add_(1)
                torch.cuda.synchronize()
        for m in mats:
            for _ in range(10):
                m @ m
            torch.cuda.synchronize()
    prof.export_chrome_trace(trace)


def med(v):
    return statistics.median(v) if v else None


def traced(gs, script, out, stem, opts=(), env=None, keep=lambda name: True):
    """SCRIPT's workload (`SCRIPT work TRACE`) run under `gpuscope run --inject OPTS` into
    OUT/STEM.gsrec and OUT/STEM-report.json: CUPTI's kernels (start, duration, name) that
    keep(name) and are not gpuscope's, sorted; gpuscope's GPU records; its kernel records
    paired with CUPTI's (the last as many, by start); the report's first device."""
    import gsrec

    trace = os.path.join(out, "cupti.json")
    rec = os.path.join(out, stem + ".gsrec")
    rep = os.path.join(out, stem + "-report.json")
    # (Event pairs unless told: the profiler in the same process has CUPTI.)
    pairs = [] if any(o.startswith("--gpu-time") for o in opts) else ["--gpu-time=pairs"]
    p = subprocess.run([gs, "run", "-q", "--inject"] + pairs + list(opts) +
                       ["-o", rec, "--json=%s" % rep, "--", sys.executable,
                        os.path.abspath(script), "work", trace],
                       capture_output=True, text=True, env=env)
    if p.returncode:
        sys.exit("gpuscope run failed: %s" % p.stderr[-2000:])
    cupti = sorted((float(e["ts"]) * 1e3, float(e["dur"]) * 1e3, e["name"])
                   for e in json.load(open(trace))["traceEvents"]
                   if e.get("cat") == "kernel" and not e["name"].startswith("gpuscope_")
                   and keep(e["name"]))
    recs = gsrec.gpu_records(rec)
    kern = sorted((r for r in recs if r["kind"] == 1), key=lambda r: r["start"])
    kern = kern[len(kern) - len(cupti):]  # (the profiled ones: the last)
    return cupti, recs, kern, json.load(open(rep))["gpu"]["devices"][0]


def analyse(gs, out):
    extra = os.environ.get("GS_OPTS", "").split()  # (--gpu-time=chained, say)
    cupti, recs, kern, dev = traced(gs, __file__, out, "bias", extra)
    cal = {w: [r["end"] - r["start"] for r in recs if r["kind"] == 5 and r["func"] == w]
           for w in (0, 1, 2)}
    over, empty = med(cal[0]), med(cal[1])
    said = dev["event_overhead_ns"]
    said_chained = dev.get("chained_event_overhead_ns", said)
    said_carried = dev.get("carried_event_overhead_ns", said)
    buckets = {"<2us": [], "2-50us": [], ">50us": []}
    places = {}  # the place in its chain (0: a pair, or a chain's first) of kernels < 50 us
    place = 0
    for c, r in zip(cupti, kern):
        place = place + 1 if r["flags"] & 32 else 0
        # Gated, nothing else said of it but that it was held in a chain (16), timed from
        # the end event before it (32); or run by a carrier (128).
        if not r["flags"] & (2 | 128) or r["flags"] & ~(3 | 16 | 32 | 128):
            continue
        raw, d = r["end"] - r["start"], c[1]
        b = "<2us" if d < 2000 else "2-50us" if d <= 50000 else ">50us"
        # (a carried run corrected to read as its pairs (128 with 2) as a pair)
        off = (said_chained if r["flags"] & 32 else
               said_carried if r["flags"] & 130 == 128 else said)
        if d <= 50000:
            k = str(place) if place < 4 else "4-7" if place < 8 else "8+"
            places.setdefault(k, []).append((raw - d, raw - min(off, raw) - d, d))
        buckets[b].append({"cupti": d, "raw": raw, "reported": raw - min(off, raw),
                           "kernel": raw - min(over, raw), "empty": raw - min(empty, raw),
                           "midpoint": raw - min((over + empty) / 2, raw),
                           "chained": bool(r["flags"] & 32),
                           "carried": bool(r["flags"] & 128),
                           "corrected": r["flags"] & 130 == 130})
    table = {}
    for b, v in buckets.items():
        row = {"n": len(v), "chained": sum(x["chained"] for x in v),
               "carried": sum(x["carried"] for x in v),
               "corrected": sum(x["corrected"] for x in v),
               "cupti_median_ns": med([x["cupti"] for x in v]),
               "raw_minus_cupti_median_ns": med([x["raw"] - x["cupti"] for x in v])}
        for est in ("reported", "kernel", "raw", "empty", "midpoint"):
            err = [x[est] - x["cupti"] for x in v]
            rel = [e / x["cupti"] for e, x in zip(err, v)]
            ok = [abs(e) <= max(0.02 * x["cupti"], 500) for e, x in zip(err, v)]
            row[est] = {"median_err_ns": med(err), "median_rel": med(rel),
                        "within_2pct_or_0.5us": sum(ok) / len(ok) if ok else None}
        # (the report's estimate for the carried and for the pairs apart)
        for part, sub in (("carried", [x for x in v if x["carried"]]),
                          ("corrected", [x for x in v if x["corrected"]]),
                          ("pairs", [x for x in v if not x["carried"]])):
            err = [x["reported"] - x["cupti"] for x in sub]
            ok = [abs(e) <= max(0.02 * x["cupti"], 500) for e, x in zip(err, sub)]
            row["reported_" + part] = {
                "n": len(sub), "median_err_ns": med(err),
                "raw_minus_cupti_median_ns": med([x["raw"] - x["cupti"] for x in sub]),
                "within_2pct_or_0.5us": sum(ok) / len(ok) if ok else None}
        table[b] = row
    by_place = {}
    for k, v in sorted(places.items()):
        by_place[k] = {"n": len(v), "raw_minus_cupti_median_ns": med([x[0] for x in v]),
                       "reported_err_median_ns": med([x[1] for x in v]),
                       "within_2pct_or_0.5us": sum(abs(x[1]) <= max(0.02 * x[2], 500)
                                                   for x in v) / len(v)}
    # What a kernel adds to an empty pair beyond CUPTI's duration, as kernels under 2 us
    # have it (gputime_ctx.c's table by architecture).
    small = table["<2us"]["raw_minus_cupti_median_ns"]
    res = {"reported_overhead_ns": said, "by_place_under_50us": by_place,
           "reported_launch_ns": dev.get("event_launch_ns"),
           "launch_exact_ns": small - empty if empty is not None and small is not None else None, "reported_chained_overhead_ns": said_chained,
           "reported_carried_overhead_ns": said_carried,
           "carried_calibration_ns": med([r["end"] - r["start"] for r in recs
                                          if r["kind"] == 5 and r["func"] == 9]),
           "carried_empty_ns": med([r["end"] - r["start"] for r in recs
                                    if r["kind"] == 5 and r["func"] == 10]),
           "carried_still_ns": med([r["end"] - r["start"] for r in recs
                                    if r["kind"] == 5 and r["func"] == 11]),
           "calibration_chained_ns": [r["end"] - r["start"] for r in recs
                                      if r["kind"] == 5 and r["func"] == 3],
           "calibration_overhead_ns": cal[0],
           "empty_pair_ns": cal[1],
           "calibration_span_ns": cal[2], "cupti_kernels": len(cupti),
           "gpuscope_kernel_records": len([r for r in recs if r["kind"] == 1]),
           "paired_gated": sum(len(v) for v in buckets.values()), "buckets": table}
    json.dump(res, open(os.path.join(out, "bias.json"), "w"), indent=1)
    print("calibration overhead (median) %s ns, empty gated pair %s ns, kernel span %s ns; "
          "the report takes off %s ns (chained: %s ns), the empty pair and %s ns of a kernel's "
          "launch (0: the midpoint); exact for kernels under 2 us: %s ns"
          % (over, empty, med(cal[2]), said, said_chained, res["reported_launch_ns"],
             res["launch_exact_ns"]))
    print("| bucket | n (chained) | CUPTI median | raw-CUPTI | reported: error (rel, within 2%% "
          "or 0.5 us) | kernel | raw | empty | midpoint |")
    print("|---|---|---|---|---|---|---|---|---|")
    f = lambda e: "%+.0f ns (%+.1f%%, %.0f%%)" % (e["median_err_ns"], 100 * e["median_rel"],
                                                   100 * e["within_2pct_or_0.5us"]) \
        if e["median_err_ns"] is not None else "-"
    for b, row in table.items():
        print("| %s | %d (%d) | %s | %s | %s | %s | %s | %s | %s |" % (
            b, row["n"], row["chained"], row["cupti_median_ns"], row["raw_minus_cupti_median_ns"],
            f(row["reported"]), f(row["kernel"]), f(row["raw"]), f(row["empty"]),
            f(row["midpoint"])))
    print("\nKernels under 50 us by place in their chain (0: a pair, or a chain's first):")
    print("| place | n | raw-CUPTI | reported: error, within |")
    print("|---|---|---|---|")
    for k, v in by_place.items():
        print("| %s | %d | %+.0f ns | %+.0f ns, %.0f%% |" % (
            k, v["n"], v["raw_minus_cupti_median_ns"], v["reported_err_median_ns"],
            100 * v["within_2pct_or_0.5us"]))


def main(work_fn, analyse_fn):
    """The command line of this script and bench/param_bias.py: work TRACE, or run GS OUT."""
    if sys.argv[1] == "work":
        work_fn(sys.argv[2])
    else:
        os.makedirs(sys.argv[3], exist_ok=True)
        analyse_fn(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main(work, analyse)
