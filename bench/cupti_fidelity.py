"""--gpu-time=cupti against CUPTI (issue 22's fidelity table, for the mode that cannot share
a process with the PyTorch profiler: CUPTI has one client, and the profiler takes it over).
Each workload of bench/fidelity_work.py runs twice: untraced under the profiler, and under
`gpuscope run --inject --gpu-time=cupti` without it (FID_GPU_TIME=all: the default mode
instead, graphs' kernels then timed by twins at sampled launches, not by records). Per
workload:
  executions    kernel executions: CUPTI's, the report's (launches not captured plus runs
                in graphs), and the records the driver gave gpuscope
  in graphs     CUPTI's executions inside graph launches, the report's runs_in_graphs,
                and gpuscope's records of kernels run by graphs
  names         kernel names whose record counts equal CUPTI's executions
  lost          launches whose record never came; records no launch matched (or nameless in
                a graph)
  GPU time      each kernel's median duration in gpuscope's process against its median in
                the profiler's (the same kernels in another process: not one execution
                against itself), by CUPTI's size: < 2 us, 2-50 us, > 50 us: median
                difference, p10-p90, share within 2% or 0.5 us

    python3 cupti_fidelity.py run GPUSCOPE OUTDIR [WORKLOAD...]   (on the GPU machine)
    python3 cupti_fidelity.py table OUTDIR
"""
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fidelity  # noqa: E402
from fidelity import gsrec, med, norm, pct  # noqa: E402

WORKLOADS = ["eager", "graphs", "compile", "jax", "cupy"]
BINS = (("< 2 us", 0, 2000), ("2-50 us", 2000, 50000), ("> 50 us", 50000, float("inf")))


def run(gs, out, workloads):
    for w in workloads:
        for side in ("prof", "gs"):
            d = os.path.join(out, w, side)
            os.makedirs(d, exist_ok=True)
            work = [sys.executable, os.path.join(HERE, "fidelity_work.py"), w, d]
            cmd, env = work, {}
            if side == "gs":
                env = dict(FIDELITY_NO_PROFILER="1", GPUSCOPE_INJECT_DEBUG="1")
                mode = os.environ.get("FID_GPU_TIME", "cupti")
                cmd = [gs, "run", "-q", "--no-os", "--inject", "--gpu-time=" + mode, "-o",
                       os.path.join(d, "run.gsrec"),
                       "--json=%s" % os.path.join(d, "report.json"), "--"] + work
            rc, wall = fidelity.run_logged(cmd, d, 300, **env)
            print("%-8s %-4s rc=%s %.0fs" % (w, side, rc, wall), flush=True)


def ours(path, report):
    """name -> [durations] of the records the driver gave, and name -> how many of them ran
    in graphs. Names as they were when each record was written (XLA's handles are given
    again to other kernels)."""
    display = {k["name"]: norm(k["display"]) for k in report["kernels"]["list"] if k["name"]}
    names, alias = {}, {}
    durs, in_graph = collections.defaultdict(list), collections.Counter()
    for r in gsrec.records(path):
        if r["type"] == gsrec.EV_KNAME:
            handle, _, _, _, length, ns = fidelity.struct.unpack_from("<QQQHHB", r["body"])
            if ns == gsrec.NS_DRIVER:
                names[(r["pid"], handle)] = r["body"][32:32 + length].decode(errors="replace")
        elif r["type"] == gsrec.EV_KALIAS:  # (a function named through its kernel's handle)
            handle, target, _, _ = fidelity.struct.unpack_from("<QQHB", r["body"])
            alias[(r["pid"], handle)] = target
        elif r["type"] == gsrec.EV_GPU:
            (start, end, _, func, _, _, _, _, _, _, kind, flags, _, _,
             flags2) = gsrec.GPU.unpack_from(r["body"])
            if kind != 1 or not flags2 & 1:
                continue
            key = (r["pid"], func)
            name = display.get(names.get(key) or names.get((r["pid"], alias.get(key))),
                               "?%x" % func)
            durs[name].append(end - start)
            in_graph[name] += bool(flags & 64)
    return durs, in_graph


def compare(d):
    rep = os.path.join(d, "gs", "report.json")
    procs = fidelity.cupti(os.path.join(d, "prof"))
    if not os.path.exists(rep) or not procs:
        logs = [open(os.path.join(d, s, "log.txt")).read()[-1200:] for s in ("prof", "gs")
                if os.path.exists(os.path.join(d, s, "log.txt"))]
        return {"error": "\n".join(logs)}
    report = json.load(open(rep))
    want, want_graph = collections.defaultdict(list), 0
    for p in procs.values():
        for _, dur, name, in_graph in p["kernels"]:
            want[name].append(dur)
            want_graph += in_graph
    durs, in_graph = ours(os.path.join(d, "gs", "run.gsrec"), report)
    got = fidelity.executions(report)
    g = report["gpu"]
    equal = [n for n in want if len(durs.get(n, [])) == len(want[n])]
    differ = sorted(((n, len(want.get(n, [])), len(durs.get(n, [])))
                     for n in set(want) | set(durs) if len(want.get(n, [])) !=
                     len(durs.get(n, []))), key=lambda x: -abs(x[1] - x[2]))
    res = {"executions": [sum(map(len, want.values())), sum(got.values()),
                          sum(map(len, durs.values()))],
           "in graphs": [want_graph, report["kernels"]["runs_in_graphs"],
                         sum(in_graph.values())],
           "names": [len(want), len(equal)],
           "names_differing": [[n[:90], a, b] for n, a, b in differ[:6]],
           "lost": report["drops"]["gpu_time_lost"],
           "unmatched": g.get("cupti_unmatched"),
           "cupti": [g.get("cupti_processes"), g.get("cupti_missing"),
                     g.get("cupti_handed_over")]}
    bins = {}
    for label, lo, hi in BINS:
        errs = []
        for n, v in want.items():
            c = med(v)
            if lo <= c < hi and durs.get(n):
                errs.append((med(durs[n]) - c, c))
        rel = [e / c * 100 for e, c in errs]
        bins[label] = {"kernels": len(errs), "median_pct": med(rel),
                       "p10_pct": pct(rel, 0.1), "p90_pct": pct(rel, 0.9),
                       "within": sum(abs(e) <= max(0.02 * c, 500) for e, c in errs)}
    res["gpu_time"] = bins
    return res


def table(out):
    results = {w: compare(os.path.join(out, w)) for w in sorted(os.listdir(out))
               if os.path.isdir(os.path.join(out, w))}
    json.dump(results, open(os.path.join(out, "cupti-fidelity.json"), "w"), indent=1)
    lines = ["| workload | executions CUPTI / report / records | in graphs CUPTI / report / "
             "records | names equal | lost, unmatched | GPU time by size: kernels, median "
             "(p10..p90), within 2% or 0.5 us |", "|---|---|---|---|---|---|"]
    for w, r in results.items():
        if "error" in r:
            lines.append("| %s | error: %s |" % (w, r["error"][-300:].replace("\n", " ")))
            continue
        t = "; ".join("%s: %d, %s (%s..%s), %d" % (
            k, b["kernels"], fmt(b["median_pct"]), fmt(b["p10_pct"]), fmt(b["p90_pct"]),
            b["within"]) for k, b in r["gpu_time"].items() if b["kernels"])
        lines.append("| %s | %s | %s | %d of %d | %d, %s | %s |" % (
            w, " / ".join(map(str, r["executions"])), " / ".join(map(str, r["in graphs"])),
            r["names"][1], r["names"][0], r["lost"], r["unmatched"], t))
        for n, a, b in r["names_differing"]:
            lines.append("|  | %s: CUPTI %d, records %d |" % (n, a, b))
    text = "\n".join(lines) + "\n"
    open(os.path.join(out, "cupti-fidelity.md"), "w").write(text)
    print(text)


def fmt(x):
    return "-" if x is None else "%+.2f%%" % x


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4:] or WORKLOADS)
        table(sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
