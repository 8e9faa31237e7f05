"""GPU durations of kernels launched on a busy stream, `--inject` against CUPTI (issue 22):
one process queues a 4096 x 4096 matmul (milliseconds of work) and then 10 launches of an
elementwise kernel (x.add_(1) on 2^4 .. 2^24 floats) behind it, 4 times a size, under the
PyTorch profiler, itself under `gpuscope run --inject`. Every add is launched onto a busy
stream: none needs a gate, and each is timed either from the end event of the launch
before it (a follow, src/inject/gputime_chain.c) or, with GPUSCOPE_NO_FOLLOW=1 (GS_ENV),
from a start event of its own. The kernels are paired with CUPTI's in order, and the
error of the reported duration (the record less what the report says an event pair adds:
busy_event_overhead_ns for an ungated launch) is given by size bucket, by how each was
timed (followed: from the end event before, not chained; pair: ungated, its own start
event; gated), and by what ran before it (the matmul or an add), with the raw excess over
CUPTI and the calibration's medians (GS_CAL_OVERHEAD, _EMPTY, _CHAINED, _BUSY_EMPTY) to
find the rule from.

    python3 busy_bias.py run GPUSCOPE OUTDIR   (on the GPU machine; GS_ENV="VAR=v ...")
    python3 busy_bias.py work TRACE            (the workload itself)
Writes OUTDIR/busy.json and prints a table.
"""
import json
import os

from gputime_bias import main, med, traced

ROUNDS, LAUNCHES = 4, 10


def work(trace):
    import torch
    from torch.profiler import ProfilerActivity, profile

    big = torch.randn(4096, 4096, device="cuda")
    xs = [torch.zeros(1 << k, device="cuda") for k in range(4, 25, 2)]
    for x in xs:  # (warm-up: first launches, and each kernel's time known to gpuscope)
        big @ big
        x.add_(1)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for x in xs:
            for _ in range(ROUNDS):
                big @ big
                for _ in range(LAUNCHES):
                    x.add_(1)
            torch.cuda.synchronize()
    prof.export_chrome_trace(trace)


def how(flags):
    if flags & 32 and not flags & 16:
        return "followed"
    return "gated" if flags & 2 else "pair"


def analyse(gs, out):
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in os.environ.get("GS_ENV", "").split())
    cupti, recs, kern, dev = traced(gs, __file__, out, "busy", env=env)
    said, said_busy = dev["event_overhead_ns"], dev.get("busy_event_overhead_ns")
    # The calibration's records (bench/gputime_bias.py's, and GS_CAL_BUSY_EMPTY, 7).
    cal = {name: med([r["end"] - r["start"] for r in recs if r["kind"] == 5 and r["func"] == w])
           for name, w in (("kernel", 0), ("empty", 1), ("chained", 3), ("busy_empty", 7))}
    rows, after = {}, None
    for c, r in zip(cupti, kern):
        if "gemm" in c[2].lower():
            after = "gemm"
            continue  # (the matmuls: what the adds queue behind)
        raw, d = r["end"] - r["start"], c[1]
        b = "<2us" if d < 2000 else "2-50us" if d <= 50000 else ">50us"
        # (What the report takes off: a busy stream's figure for an ungated launch that did
        # not find its stream idle, analysis/model_gpu.c.)
        off = said_busy if said_busy is not None and not r["flags"] & 3 else said
        for key in ((how(r["flags"]), b, "all"), (how(r["flags"]), b, "after " + after)):
            rows.setdefault(key, []).append((raw - min(off, raw) - d, d, raw - d))
        after = "add"
    table = []
    for (h, b, where), v in sorted(rows.items()):
        table.append({"how": h, "bucket": b, "after": where, "n": len(v),
                      "median_err_ns": med([e for e, _, _ in v]),
                      "raw_minus_cupti_median_ns": med([x for _, _, x in v]),
                      "within_2pct_or_0.5us":
                      sum(abs(e) <= max(0.02 * d, 500) for e, d, _ in v) / len(v)})
    report = json.load(open(os.path.join(out, "busy-report.json")))
    counts = {}
    for k in report["kernels"]["list"]:
        g = k.get("gpu") or {}
        for f in ("timed", "gated", "followed", "chained", "start_unknown"):
            counts[f] = counts.get(f, 0) + g.get(f, 0)
    res = {"gs_env": os.environ.get("GS_ENV", ""), "event_overhead_ns": said,
           "busy_event_overhead_ns": said_busy,
           "event_launch_ns": dev.get("event_launch_ns"), "calibration_median_ns": cal,
           "cupti_kernels": len(cupti), "gpuscope_kernel_records": len(kern),
           "counts": counts, "table": table}
    json.dump(res, open(os.path.join(out, "busy.json"), "w"), indent=1)
    print("GS_ENV=%r: %d CUPTI kernels, %d records; the report takes off %s ns (on a busy "
          "stream %s ns); kernels: %s; calibration medians: %s"
          % (res["gs_env"], len(cupti), len(kern), said, said_busy, counts, cal))
    print("| timed as | bucket | after | n | raw-CUPTI | error: median | within 2% or 0.5 us |")
    print("|---|---|---|---|---|---|---|")
    for t in table:
        print("| %s | %s | %s | %d | %+.0f ns | %+.0f ns | %.0f%% |" % (
            t["how"], t["bucket"], t["after"], t["n"], t["raw_minus_cupti_median_ns"],
            t["median_err_ns"], 100 * t["within_2pct_or_0.5us"]))


if __name__ == "__main__":
    main(work, analyse)
