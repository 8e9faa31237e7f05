"""What bench/cupti_plane_gpu.sh's recordings say of --gpu-time=cupti: per workload, the
launches, the GPU records written by the driver (GS_GPU_BY_DRIVER), CUPTI's state, the
records matched to no launch (or run in graphs) and the launches whose record never came;
how many kernels read as starting before their launch call began (a mismatch would show
there); and for ResNet-50 each kernel's median duration against the same kernel's with
event pairs in another process (median of the per-kernel differences, and how many within
2% or 0.5 us).

    python3 bench/cupti_check.py DIR
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
import gsrec  # noqa: E402


def by_name(path):
    names = {}
    for ns, handle, name in gsrec.knames(path):
        names[handle] = name
    for handle, target, ns in gsrec.kaliases(path):
        if target in names:
            names.setdefault(handle, names[target])
    return names


def medians(path, driver):
    names = by_name(path)
    durs = {}
    for r in gsrec.gpu_records(path):
        if r["kind"] == 1 and bool(r["flags2"] & 1) == driver and not r["flags"] & 64:
            durs.setdefault(names.get(r["func"], hex(r["func"])), []).append(r["end"] - r["start"])
    return {k: statistics.median(v) for k, v in durs.items() if len(v) >= 5}


def main(d):
    for w in sorted(f[:-len("-cupti.json")] for f in os.listdir(d) if f.endswith("-cupti.json")):
        rec, rep = os.path.join(d, w + "-cupti.gsrec"), os.path.join(d, w + "-cupti.json")
        if not os.path.exists(rep):
            print(w, "no report")
            continue
        r = json.load(open(rep))
        g = r["gpu"]
        recs = [x for x in gsrec.gpu_records(rec) if x["kind"] == 1] if os.path.exists(rec) else []
        drv = [x for x in recs if x["flags2"] & 1]
        early = sum(x["start"] + 1000 < x["call"] for x in drv)
        print("%-9s launches %d, records by the driver %d, cupti processes %d, missing %d, "
              "handed over %d, unmatched or in graphs %d, lost %d, starting before their "
              "call %d" % (w, r["kernels"]["launches"], len(drv), g.get("cupti_processes", -1),
                           g.get("cupti_missing", -1), g.get("cupti_handed_over", -1),
                           g.get("cupti_unmatched", -1), r["drops"]["gpu_time_lost"], early))
    a = os.path.join(d, "resnet50-cupti.gsrec")
    b = os.path.join(d, "resnet50-pairs.gsrec")
    if os.path.exists(a) and os.path.exists(b):
        ma, mb = medians(a, True), medians(b, False)
        common = sorted(set(ma) & set(mb))
        diffs = [ma[k] - mb[k] for k in common]
        within = sum(abs(ma[k] - mb[k]) <= max(500, 0.02 * ma[k]) for k in common)
        if diffs:
            print("resnet50: %d kernels in both; CUPTI less pairs, median of the per-kernel "
                  "medians' differences %+.0f ns (p10 %+.0f, p90 %+.0f); within 2%% or 0.5 us: "
                  "%d" % (len(common), statistics.median(diffs),
                          sorted(diffs)[len(diffs) // 10], sorted(diffs)[9 * len(diffs) // 10],
                          within))


if __name__ == "__main__":
    main(sys.argv[1])
