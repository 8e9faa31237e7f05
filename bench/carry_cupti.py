"""Whether the PyTorch profiler (CUPTI) itself lengthens what a carrier's events read
(src/inject/gputime_carry.c): bench/gputime_bias.py found PyTorch's kernels 3-4 us longer
between a carrier's events than between a gated pair, against CUPTI, where bench/
carry_bias.cu, without CUPTI, found a carrier reading what the kernel's own timer reads
plus 3.5 us whatever its parameters, grid or length. Here the same elementwise kernels
(x.add_(1) on 2^4 .. 2^26 floats, 40 launches a size, each size waited for) run under
`gpuscope run --inject`, with carriers (GPUSCOPE_CARRY=1) and without, each with the
profiler recording CUDA activity and without: per size, the median of what the events read
(end - start, as recorded: a carried run corrected to read as its pairs, once it can be),
and how many of the 40 (CARRY_N) were carried, and of those corrected.

    python3 carry_cupti.py run GPUSCOPE OUTDIR     (on the GPU machine)
    python3 carry_cupti.py work PROFILE            (the workload: PROFILE 1 or 0)
Writes OUTDIR/carry_cupti.json and prints a table.
"""
import contextlib
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
SIZES = list(range(4, 27, 2))
N = int(os.environ.get("CARRY_N", "40"))  # launches a size


def work(profile):
    import torch
    from torch.profiler import ProfilerActivity, profile as prof

    xs = [torch.zeros(1 << k, device="cuda") for k in SIZES]
    for x in xs:  # (warm-up: first launches)
        x.add_(1)
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CUDA]) if profile == "1" else \
            contextlib.nullcontext():
        for x in xs:
            for _ in range(N):
                x.add_(1)
            torch.cuda.synchronize()


def run(gs, out):
    import gsrec

    res = {}
    for carry in (True, False):
        for profile in ("0", "1"):
            name = "%s-%s" % ("carry" if carry else "pairs",
                              "profiler" if profile == "1" else "alone")
            env = dict(os.environ)
            if carry:
                env["GPUSCOPE_CARRY"] = "1"
            rec = os.path.join(out, name + ".gsrec")
            p = subprocess.run([gs, "run", "-q", "--inject", "-o", rec, "--", sys.executable,
                                os.path.abspath(__file__), "work", profile],
                               capture_output=True, text=True, env=env)
            if p.returncode:
                sys.exit("gpuscope run failed: %s" % p.stderr[-2000:])
            kern = sorted((r for r in gsrec.gpu_records(rec) if r["kind"] == 1),
                          key=lambda r: r["start"])[-len(SIZES) * N:]
            os.unlink(rec)
            res[name] = [{"floats": 1 << k,
                          "raw_median_ns": statistics.median(
                              r["end"] - r["start"] for r in kern[i * N:(i + 1) * N]),
                          "carried": sum(bool(r["flags"] & 128) for r in kern[i * N:(i + 1) * N]),
                          "corrected": sum(r["flags"] & 130 == 130
                                           for r in kern[i * N:(i + 1) * N])}
                         for i, k in enumerate(SIZES)]
    json.dump(res, open(os.path.join(out, "carry_cupti.json"), "w"), indent=1)
    names = list(res)
    print("| floats | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for i, k in enumerate(SIZES):
        print("| 2^%d | " % k + " | ".join(
            "%.0f (%d carried, %d corrected)" % (res[n][i]["raw_median_ns"], res[n][i]["carried"],
                                                 res[n][i]["corrected"])
            for n in names) + " |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "work":
        work(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        os.makedirs(sys.argv[3], exist_ok=True)
        run(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
