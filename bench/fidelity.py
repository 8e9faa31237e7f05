"""The fidelity table of issue 22: what gpuscope reports against CUPTI (the PyTorch
profiler's trace, taken in the same processes) on PyTorch eager, torch.compile, CUDA graphs,
JAX, CuPy and a 2-GPU NCCL job (bench/fidelity_work.py), in both planes:

    python3 fidelity.py run GPUSCOPE OUTDIR [WORKLOAD...]   (on the GPU machine)
    python3 fidelity.py table OUTDIR                         (again, from what run left)

Rows, per workload and plane:
  kernels       every kernel execution (launches not captured, plus runs in graphs)
  names         distinct kernel names whose execution counts are equal
  graph kernels executions inside graph launches (CUPTI: a kernel whose correlation is a
                cu(da)GraphLaunch call's, or no call's in the trace) against the report's
                runs_in_graphs
  copies        count and bytes per direction; memsets
  memory        the framework's own peak reserve (PyTorch, CuPy, JAX memory stats) against
                gpuscope's device peak (which also holds what libraries allocate beside the
                framework: at least as much, so >= is the check)
  NCCL calls    the collectives the workload made against the report's
  GPU time      (--inject) each kernel execution paired with CUPTI's (per process, per
                name, in order), its duration as the report computes it (analysis/
                model_gpu.c) against CUPTI's, by size: < 2 us, 2-50 us, > 50 us: median
                error, p10-p90, share within 2% or 0.5 us; executions in graphs have none
Writes OUTDIR/fidelity.json and OUTDIR/fidelity.md.
"""
import collections
import glob
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import gsrec  # noqa: E402

WORKLOADS = ["eager", "graphs", "cupy", "jax", "nccl2", "compile"]
MORE = ["compile_gpt2", "graphs_sync"]  # (run when named)
# (--inject with event pairs: the profiler in the same process has CUPTI. The default's,
# CUPTI's, against the profiler in another process: bench/cupti_fidelity.py.)
PLANES = {"uprobe": [], "inject": ["--inject", "--gpu-time=pairs"]}
IDLE_WINDOW_NS = 50000  # analysis/model_gpu.c


def norm(name):
    return re.sub(r"\s+", "", name)


def run(gs, out, workloads):
    # (FIDELITY_PLANES=inject: that plane only, for a quicker look at its GPU times.)
    planes = os.environ.get("FIDELITY_PLANES", ",".join(PLANES)).split(",")
    for w in workloads:
        for plane, opts in PLANES.items():
            if plane not in planes:
                continue
            d = os.path.join(out, w, plane)
            os.makedirs(d, exist_ok=True)
            cmd = [gs, "run", "-q", "--no-os", "-o", os.path.join(d, "run.gsrec"),
                   "--json=%s" % os.path.join(d, "report.json")] + opts + \
                  ["--", sys.executable, os.path.join(HERE, "fidelity_work.py"), w, d]
            rc, wall = run_logged(cmd, d, 400)
            print("%-8s %-6s rc=%s %.0fs" % (w, plane, rc, wall), flush=True)


def run_logged(cmd, d, timeout, **env):
    """cmd run with env added, its output and exit status (or "timeout") in d/log.txt:
    (status, seconds). Each run compiles afresh: Inductor's and Triton's caches its own in
    d, then gone."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(d, "inductor"),
               TRITON_CACHE_DIR=os.path.join(d, "triton"), **env)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        rc, log = p.returncode, p.stdout + "\n---- stderr\n" + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, log = "timeout", str(e)
    with open(os.path.join(d, "log.txt"), "w") as f:
        f.write("rc=%s wall=%.1fs\n%s" % (rc, time.time() - t0, log))
    for c in ("inductor", "triton"):
        shutil.rmtree(os.path.join(d, c), ignore_errors=True)
    return rc, time.time() - t0


# ---- CUPTI's side -----------------------------------------------------------------------

def cupti(d):
    """Per process (the workload's pid): kernels (ts ns, dur ns, name, in a graph), copies
    per direction [count, bytes], memsets."""
    procs = {}
    for path in sorted(glob.glob(os.path.join(d, "cupti-*.json"))):
        facts = json.load(open(path.replace("cupti-", "facts-")))
        ev = json.load(open(path))["traceEvents"]
        # A kernel runs in a graph when the call it correlates with launched a graph, or
        # is not in the trace (the profiler keeps no cuGraphLaunch driver calls: XLA's).
        api = {e["args"].get("correlation"): e.get("name", "") for e in ev
               if e.get("cat") in ("cuda_runtime", "cuda_driver")}
        kernels, copies, memsets = [], collections.defaultdict(lambda: [0, 0]), 0
        # The graph launches, in order (one correlation each, shared by its kernels, its
        # call in the trace or not): the nth's kernels are paired with those gpuscope timed
        # in the nth (through its twin).
        first = {}
        for e in ev:
            corr = e.get("args", {}).get("correlation")
            if (e.get("cat") == "kernel" and not e["name"].startswith("gpuscope_") and
                    "GraphLaunch" in api.get(corr, "GraphLaunch")):
                first[corr] = min(first.get(corr, float("inf")), float(e["ts"]))
        nth = {corr: i for i, corr in enumerate(sorted(first, key=first.get))}
        in_launch = collections.defaultdict(lambda: collections.defaultdict(list))
        for e in ev:
            cat = e.get("cat")
            if cat == "kernel" and not e["name"].startswith("gpuscope_"):
                corr = e["args"].get("correlation")
                kernels.append((float(e["ts"]) * 1e3, float(e["dur"]) * 1e3, norm(e["name"]),
                                corr in nth))
                if corr in nth:
                    in_launch[nth[corr]][norm(e["name"])].append(
                        (float(e["ts"]), float(e["dur"]) * 1e3))
            elif cat == "gpu_memcpy":
                m = re.search(r"Memcpy (\w+)", e["name"])
                k = {"PtoP": "peer"}.get(m.group(1), m.group(1)) if m else "other"
                copies[k][0] += 1
                copies[k][1] += int(e.get("args", {}).get("bytes", 0))
            elif cat == "gpu_memset":
                memsets += 1
        procs[facts["pid"]] = {"facts": facts, "kernels": sorted(kernels), "copies": copies,
                               "memsets": memsets, "graph_launches": in_launch}
    return procs


# ---- gpuscope's side ----------------------------------------------------------------------

def ran(c):
    """[count, bytes] of the copies (or sets) a direction's report says ran: calls, less
    those of zero bytes and those captured into graphs, plus graph launches' runs."""
    if not c:
        return [0, 0]
    return [c["count"] - c.get("empty", 0) - c.get("captured", 0) + c.get("graph_runs", 0),
            c["bytes"] - c.get("captured_bytes", 0) + c.get("graph_bytes", 0)]


def executions(report):
    got = collections.Counter()
    for k in report["kernels"]["list"]:
        got[norm(k["display"])] += k["launches"] - k["captured"] + k["graph_runs"]
    return got


def graph_launch_api():
    """The api ids of cuGraphLaunch and its _ptsz variant (their places in gpuscope/api.h)."""
    here = os.path.dirname(os.path.abspath(__file__))
    text = open(os.path.join(here, "..", "include", "gpuscope", "api.h")).read()
    ids = re.findall(r"^\s*X\((\w+),", text, re.M)
    return {i + 1 for i, n in enumerate(ids) if n in ("CU_GRAPH_LAUNCH", "CU_GRAPH_LAUNCH_PTSZ")}


def durations(d, report):
    """(pid, name) -> [(start, duration as the report has it)] of timed launches; and
    (pid, nth graph launch, name) -> the same of kernels timed inside graphs. Names are
    taken as they were when the launch was recorded: a handle can be named again (XLA
    unloads its autotuning modules and the driver hands their handles out again)."""
    names, alias, graph_calls, in_graph = {}, {}, collections.defaultdict(list), []
    graph_api = graph_launch_api()
    display = {k["name"]: norm(k["display"]) for k in report["kernels"]["list"] if k["name"]}
    over = {dv["device"]: (dv["event_overhead_ns"], dv["chained_event_overhead_ns"],
                           dv.get("graph_event_overhead_ns", dv["event_overhead_ns"]),
                           dv.get("busy_event_overhead_ns", dv["event_overhead_ns"]),
                           dv.get("carried_event_overhead_ns", dv["event_overhead_ns"]))
            for dv in report["gpu"]["devices"]}
    out = collections.defaultdict(list)
    for rec in gsrec.records(os.path.join(d, "run.gsrec")):
        b = rec["body"]
        if rec["type"] == gsrec.EV_KNAME:
            handle, _, _, _, length, ns = struct.unpack_from("<QQQHHB", b)
            if ns == gsrec.NS_DRIVER:
                names[(rec["pid"], handle)] = b[32:32 + length].decode(errors="replace")
        elif rec["type"] == gsrec.EV_KALIAS:
            handle, target, _, ns = struct.unpack_from("<QQHB", b)
            alias[(rec["pid"], handle)] = target
        elif rec["type"] == gsrec.EV_GPU:
            (start, end, call_end, func, _, _, _, _, _, _, kind, flags, device, _,
             _) = gsrec.GPU.unpack_from(b)
            if kind != 1:
                continue
            key = (rec["pid"], func)
            name = names.get(key) or names.get((rec["pid"], alias.get(key)))
            dur = report_duration(start, end, call_end, flags, over.get(device, (0,) * 5))
            if flags & 64:  # inside a graph: paired by its launch
                in_graph.append((rec["pid"], rec["ts"], display.get(name, "?%x" % func),
                                 start, dur))
            else:
                out[(rec["pid"], display.get(name, "?%x" % func))].append((start, dur))
        elif rec["type"] == EV_LAUNCH and struct.unpack_from("<H", b, 16)[0] in graph_api:
            graph_calls[rec["pid"]].append(rec["ts"])
    nth = {(pid, ts): i for pid, v in graph_calls.items() for i, ts in enumerate(sorted(v))}
    graphs = collections.defaultdict(list)
    for pid, ts, name, start, dur in in_graph:
        if (pid, ts) in nth:
            graphs[(pid, nth[(pid, ts)], name)].append((start, dur))
    return out, graphs


EV_LAUNCH = 1


def report_duration(start, end, call_end, flags, over):
    """A kernel's duration from its record, as analysis/model_gpu.c computes it (None: one
    the report leaves out, its start or end not known well enough)."""
    gated, submitted = flags & (2 | 64 | 128), call_end
    idle = not gated and start < submitted
    if flags & 4 or flags & 8 or (idle and submitted - start > IDLE_WINDOW_NS):
        return None
    s = min(submitted, end) if idle else start
    # (chained, in a graph, run by a carrier and not corrected to its pairs, ungated on a
    # busy stream, else a gated pair)
    o = min(over[1 if flags & 16 else 2 if flags & 64 else 4 if flags & 130 == 128
                 else 0 if gated or idle else 3], end - s)
    if not idle:
        s += o // 2
    return end - (o - o // 2) - s


# ---- the table ---------------------------------------------------------------------------

def med(v):
    return statistics.median(v) if v else None


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else None


def compare(d, plane):
    rep_path = os.path.join(d, "report.json")
    if not os.path.exists(rep_path):
        return {"error": open(os.path.join(d, "log.txt")).read()[-1500:]}
    report = json.load(open(rep_path))
    procs = cupti(d)
    if not procs:
        return {"error": "no CUPTI trace: " + open(os.path.join(d, "log.txt")).read()[-1500:]}
    rows = {}
    want = collections.Counter()
    for p in procs.values():
        want.update(k[2] for k in p["kernels"])
    got = executions(report)
    rows["kernels"] = [sum(want.values()), sum(got.values())]
    diff = sorted(((n, want.get(n, 0), got.get(n, 0)) for n in set(want) | set(got)
                   if want.get(n, 0) != got.get(n, 0)), key=lambda x: -abs(x[1] - x[2]))
    rows["names"] = [len(want), len(want) - len([x for x in diff if x[1]])]
    rows["names_differing"] = [[n[:90], a, b] for n, a, b in diff[:6]]
    rows["graph kernels"] = [sum(k[3] for p in procs.values() for k in p["kernels"]),
                             report["kernels"]["runs_in_graphs"]]
    copies = collections.defaultdict(lambda: [0, 0])
    for p in procs.values():
        for k, (c, b) in p["copies"].items():
            copies[k][0] += c
            copies[k][1] += b
    for k in sorted(set(copies) | set(report["copies"]) - {"memset"}):
        rows["copies %s" % k] = [copies.get(k, [0, 0]), ran(report["copies"].get(k, {}))]
    rows["memsets"] = [sum(p["memsets"] for p in procs.values()),
                       ran(report["copies"].get("memset", {}))[0]]
    fw = [p["facts"].get("framework_reserved_peak") for p in procs.values()]
    if all(isinstance(x, int) for x in fw):
        rows["memory peak (>=)"] = [sum(fw), report["memory"]["peak_bytes"]["device"]]
    calls = collections.Counter()
    for p in procs.values():
        calls.update(p["facts"].get("nccl_calls", {}))
    for op, n in sorted(calls.items()):
        rows["NCCL %s calls" % op] = [n, report["nccl"]["ops"].get(op, {}).get("calls", 0)]
    res = {"rows": rows, "kernels_results_unread": report["kernels"].get("results_unread")}
    if plane == "inject" and os.path.exists(os.path.join(d, "run.gsrec")):
        res["gpu_time"] = gpu_time(d, report, procs)
        # (What was taken off kernel times, and by which rule: analysis/model_gpu.c.)
        res["event_overhead"] = [{k: dv.get(k) for k in (
            "device", "event_overhead_ns", "event_launch_ns", "graph_event_overhead_ns")}
            for dv in report["gpu"]["devices"]]
    return res


def graph_pairs(procs, graphs):
    """(ours, CUPTI's, position, launch) durations of kernels inside graphs, paired per graph
    launch (the nth of the process) and name in order, the position being the kernel's place
    in its launch by CUPTI's start (0 first); and how many of CUPTI's in the launches
    gpuscope timed could not be paired."""
    pairs, untimed = [], 0
    for pid, p in procs.items():
        for i, by_name in p["graph_launches"].items():
            starts = sorted(ts for runs in by_name.values() for ts, _ in runs)
            place = {ts: n for n, ts in reversed(list(enumerate(starts)))}
            for name, cupti_runs in by_name.items():
                if not any(k[0] == pid and k[1] == i for k in graphs):
                    continue  # (a launch not sampled)
                ours = sorted(graphs.get((pid, i, name), []))
                if len(ours) != len(cupti_runs):
                    untimed += len(cupti_runs)
                    continue
                pairs += [(g, c, place[ts], i) for (_, g), (ts, c) in
                          zip(ours, sorted(cupti_runs)) if g is not None]
    return pairs, untimed


def by_launch(pairs):
    """Error median by graph launch timed (the nth launch of its process): {n: [kernels,
    error median]}."""
    at = collections.defaultdict(list)
    for g, c, _, i in pairs:
        at[i].append(g - c)
    return {i: [len(v), med(v)] for i, v in sorted(at.items())}


def by_position(pairs):
    """Error by place in the graph launch: {position: [n, CUPTI median, error median, p90]}."""
    at = collections.defaultdict(list)
    for g, c, pos, _ in pairs:
        at[pos].append((g - c, c))
    return {pos: [len(v), med([c for _, c in v]), med([e for e, _ in v]),
                  pct([e for e, _ in v], 0.9)] for pos, v in sorted(at.items())}


def gpu_time(d, report, procs):
    mine, graphs = durations(d, report)
    buckets = {"<2us": [], "2-50us": [], ">50us": []}
    unpaired, unknown, in_graphs = 0, 0, 0
    unpaired_names, per_name = [], []
    pairs, graph_untimed = graph_pairs(procs, graphs)
    for g, c, _, _ in pairs:
        b = "graph <2us" if c < 2000 else "graph 2-50us" if c <= 50000 else "graph >50us"
        buckets.setdefault(b, []).append((g - c, c))
    for pid, p in procs.items():
        by_name = collections.defaultdict(list)
        for ts, dur, name, graph in p["kernels"]:
            if graph:
                in_graphs += 1
            else:
                by_name[name].append(dur)
        for name, durs in by_name.items():
            ours = sorted(mine.get((pid, name), []))
            if len(ours) != len(durs):
                unpaired += len(durs)
                unpaired_names.append([name[:80], len(durs), len(ours)])
                continue
            errs = []
            for c, (_, g) in zip(durs, ours):
                if g is None:
                    unknown += 1
                    continue
                b = "<2us" if c < 2000 else "2-50us" if c <= 50000 else ">50us"
                buckets[b].append((g - c, c))
                errs.append((g - c, c))
            if errs:
                per_name.append({"name": name[:80], "n": len(errs),
                                 "cupti_median_ns": med([c for _, c in errs]),
                                 "median_err_ns": med([e for e, _ in errs]),
                                 "within": sum(abs(e) <= max(0.02 * c, 500)
                                               for e, c in errs) / len(errs)})
    out = {"unpaired": unpaired, "start_unknown": unknown,
           "in_graphs": in_graphs, "in_graphs_timed": len(pairs),
           "in_graphs_untimed": graph_untimed, "graph_positions": by_position(pairs),
           "graph_launches": by_launch(pairs),
           "unpaired_names": unpaired_names[:8],
           "worst": sorted(per_name, key=lambda x: x["within"])[:8]}
    for b, v in buckets.items():
        err = [e for e, _ in v]
        out[b] = {"n": len(v), "cupti_median_ns": med([c for _, c in v]),
                  "median_err_ns": med(err), "p10_err_ns": pct(err, 0.1),
                  "p90_err_ns": pct(err, 0.9),
                  "median_rel": med([e / c for e, c in v]) if v else None,
                  "within_2pct_or_0.5us": (sum(abs(e) <= max(0.02 * c, 500) for e, c in v) /
                                           len(v)) if v else None}
    return out


def cell(want, got, ge=False):
    ok = got >= want if ge else got == want
    return "%s %s / %s" % ("ok" if ok else "**differs**", want, got)


def table(out):
    res = {"machine": open(os.path.join(out, "machine.txt")).read().strip()
           if os.path.exists(os.path.join(out, "machine.txt")) else None, "workloads": {}}
    for w in WORKLOADS + MORE:
        for plane in PLANES:
            d = os.path.join(out, w, plane)
            if os.path.isdir(d):
                res["workloads"].setdefault(w, {})[plane] = compare(d, plane)
    json.dump(res, open(os.path.join(out, "fidelity.json"), "w"), indent=1)
    lines = ["# Fidelity against CUPTI", "", "```", res["machine"] or "", "```", "",
             "Each cell: CUPTI (or the workload's own count) / gpuscope.", ""]
    for w, planes in res["workloads"].items():
        lines += ["## %s" % w, "", "| row | %s |" % " | ".join(planes),
                  "|---|" + "---|" * len(planes)]
        keys = []
        for r in planes.values():
            keys += [k for k in r.get("rows", {}) if k not in keys and k != "names_differing"]
        for k in keys:
            cells = []
            for r in planes.values():
                v = r.get("rows", {}).get(k)
                if v is None:
                    cells.append("-")
                elif k == "names":
                    cells.append("%s %d of %d equal" % ("ok" if v[0] == v[1] else "**differs**",
                                                        v[1], v[0]))
                else:
                    cells.append(cell(v[0], v[1], k.endswith("(>=)")))
            lines.append("| %s | %s |" % (k, " | ".join(cells)))
        for plane, r in planes.items():
            if "error" in r:
                lines += ["", "%s: no result: `%s`" % (plane, r["error"][-300:].replace("\n", " "))]
            if r.get("rows", {}).get("names_differing"):
                lines += ["", "%s, names that differ (CUPTI, gpuscope): %s" % (
                    plane, "; ".join("`%s` %d/%d" % tuple(x)
                                     for x in r["rows"]["names_differing"]))]
            g = r.get("gpu_time")
            if g:
                lines += ["", "%s GPU time (paired with CUPTI's: launches per name in order, %d "
                          "unpaired, %d start unknown; of %d executions in graphs, %d timed "
                          "(the twins' runs, per graph launch and name), %d in timed launches "
                          "unpaired):" % (
                              plane, g["unpaired"], g["start_unknown"], g.get("in_graphs", 0),
                              g.get("in_graphs_timed", 0), g["in_graphs_untimed"]),
                          "", "| size | n | CUPTI median | error median (p10..p90) | relative "
                          "| within 2% or 0.5 us |", "|---|---|---|---|---|---|"]
                for b in ("<2us", "2-50us", ">50us", "graph <2us", "graph 2-50us",
                          "graph >50us"):
                    x = g.get(b)
                    if x and x["n"]:
                        lines.append("| %s | %d | %.0f ns | %+.0f ns (%+.0f..%+.0f) | %+.1f%% | "
                                     "%.0f%% |" % (b, x["n"], x["cupti_median_ns"],
                                                   x["median_err_ns"], x["p10_err_ns"],
                                                   x["p90_err_ns"], 100 * x["median_rel"],
                                                   100 * x["within_2pct_or_0.5us"]))
                if g.get("graph_positions"):
                    lines += ["", "in graphs, by place in the launch (CUPTI's start order): "
                              "place, n, CUPTI median, error median, p90: " + "; ".join(
                                  "%s: %d, %.0f, %+.0f, %+.0f" % (pos, *v) for pos, v in
                                  g["graph_positions"].items())]
                if g.get("graph_launches"):
                    lines += ["", "in graphs, by graph launch timed: launch, kernels, error "
                              "median: " + "; ".join("%s: %d, %+.0f" % (i, *v) for i, v in
                                                     g["graph_launches"].items())]
                if g.get("worst"):
                    lines += ["", "least exact kernels (n, CUPTI median, error median, within): " +
                              "; ".join("`%s` %d, %.0f ns, %+.0f ns, %.0f%%" % (
                                  w["name"][:60], w["n"], w["cupti_median_ns"],
                                  w["median_err_ns"], 100 * w["within"])
                                  for w in g["worst"][:5])]
                if g.get("unpaired_names"):
                    lines += ["", "unpaired (CUPTI, gpuscope records): " + "; ".join(
                        "`%s` %d/%d" % tuple(u) for u in g["unpaired_names"])]
        lines.append("")
    open(os.path.join(out, "fidelity.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    if sys.argv[1] == "run":
        out = os.path.abspath(sys.argv[3])
        os.makedirs(out, exist_ok=True)
        run(os.path.abspath(sys.argv[2]), out, sys.argv[4:] or WORKLOADS)
        table(out)
    else:
        table(sys.argv[2])
