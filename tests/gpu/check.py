"""The GPU suite: real CUDA programs, PyTorch, cuBLAS, Triton and NCCL under gpuscope on a
GPU machine, each compared with its ground truth:

- nvcc programs (static and shared runtime, and a late attach) record their own truth;
- PyTorch workloads are run a second time under the PyTorch profiler, whose CUPTI trace
  lists every kernel that ran and every copy with its bytes.

    python3 check.py --gpuscope PATH --out DIR

Writes DIR/gpu-results.json and prints one line per check; exit status 1 if any failed.
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import gsrec  # noqa: E402
import gsreport  # noqa: E402

results = []


def record(case, check, ok, truth, got, note=""):
    results.append({"case": case, "check": check, "ok": bool(ok), "truth": truth,
                    "gpuscope": got, "note": note})
    print("%-4s %-26s %-34s truth=%-14s gpuscope=%-14s %s" % (
        "ok" if ok else "FAIL", case, check, truth, got, note), flush=True)


PLANE_OPTS = []  # --plane inject: ["--inject"]


def run_gs(gs, args, out, name, env=None, timeout=600):
    rep = os.path.join(out, "%s.json" % name)
    rec = os.path.join(out, "%s.gsrec" % name)
    cmd = [gs, "run", "-q", "-o", rec, "--json=%s" % rep] + PLANE_OPTS + ["--"] + args
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    wall = time.time() - t0
    with open(os.path.join(out, "%s.log" % name), "w") as f:
        f.write(p.stdout + "\n---- stderr\n" + p.stderr)
    if p.returncode:
        raise RuntimeError("%s exited %d: %s" % (name, p.returncode, p.stderr[-2000:]))
    return json.load(open(rep)), wall


# ---- nvcc programs --------------------------------------------------------------------------

def build_nvcc(out):
    src = os.path.join(HERE, "vector_add.cu")
    bins = {}
    for kind, flags in (("static", []), ("shared", ["-cudart", "shared"])):
        exe = os.path.join(out, "vector_add_" + kind)
        subprocess.run(["nvcc", "-O2", "-arch=sm_90"] + flags + [src, "-o", exe], check=True)
        bins[kind] = exe
    return bins


def nvcc_case(gs, out, exe, kind):
    truth_path = os.path.join(out, "truth-%s.json" % kind)
    env = dict(os.environ, GS_TRUTH=truth_path)
    report, _ = run_gs(gs, [exe, "--loops", "3"], out, "nvcc-" + kind, env=env)
    truth = json.load(open(truth_path))
    flat = gsreport.flatten(report)
    case = "nvcc %s cudart" % kind
    for key in sorted(truth):
        record(case, key, truth[key] == flat.get(key, 0), truth[key], flat.get(key, 0))
    exe_probed = [l for l in report["libraries"] if l["kind"] == "executable"]
    if kind == "static":
        record(case, "runtime found in executable", len(exe_probed) == 1, 1, len(exe_probed))
    # The runtime's registration names each host stub (the second way to a name).
    stubs = sorted(n for ns, _, n in gsrec.knames(os.path.join(out, "nvcc-%s.gsrec" % kind))
                   if ns == gsrec.NS_HOSTFN)
    record(case, "names from __cudaRegisterFunction", stubs == ["_Z5scalePffi",
           "_Z6vecAddPKfS0_Pfi"], 2, len(stubs))


def attach_case(gs, out, exe):
    gate = os.path.join(out, "attach-gate")
    truth_path = os.path.join(out, "truth-attach.json")
    rep = os.path.join(out, "attach.json")
    env = dict(os.environ, GS_TRUTH=truth_path)
    wl = subprocess.Popen([exe, "--loops", "2", "--wait", gate], env=env)
    deadline = time.time() + 60
    while not os.path.exists(gate + ".ready"):
        if time.time() > deadline or wl.poll() is not None:
            raise RuntimeError("attach workload did not reach its gate")
        time.sleep(0.05)
    tracer = subprocess.Popen([gs, "attach", "-p", str(wl.pid), "-q", "--json=%s" % rep],
                              stderr=subprocess.PIPE, text=True)
    line = tracer.stderr.readline()
    open(gate, "w").close()
    wl.wait(timeout=120)
    tracer.communicate(timeout=120)
    report = json.load(open(rep))
    truth = json.load(open(truth_path))
    k = report["kernels"]
    after = truth["launches"] - truth["warmup_launches"]
    case = "nvcc late attach"
    record(case, "attached", "attached to pid" in line, True, "attached to pid" in line)
    record(case, "launches after the attach", k["launches"] == after, after, k["launches"])
    record(case, "kernels without a name", k["unnamed"] == 2, 2, k["unnamed"],
           "looked up at their first launch, before the attach")
    flat = gsreport.flatten(report)
    for key in ("copy:HtoD:bytes", "copy:DtoH:bytes"):
        record(case, key, flat.get(key) == truth[key], truth[key], flat.get(key))


# ---- PyTorch workloads ----------------------------------------------------------------------

def norm(name):
    return re.sub(r"\s+", "", name)


def cupti_truth(trace_path):
    """Kernels by name and copies by direction from the PyTorch profiler's trace."""
    events = json.load(open(trace_path))["traceEvents"]
    kernels = collections.Counter()
    copies = collections.defaultdict(lambda: [0, 0])
    memsets = 0
    for e in events:
        cat = e.get("cat")
        if cat == "kernel" and not e["name"].startswith("gpuscope_"):  # (ours: see below)
            kernels[norm(e["name"])] += 1
        elif cat == "gpu_memcpy":
            m = re.search(r"Memcpy (\w+)", e["name"])
            d = {"HtoD": "HtoD", "DtoH": "DtoH", "DtoD": "DtoD", "HtoH": "HtoH",
                 "PtoP": "peer"}.get(m.group(1) if m else "", "other")
            copies[d][0] += 1
            copies[d][1] += int(e.get("args", {}).get("bytes", 0))
        elif cat == "gpu_memset":
            memsets += 1
    return kernels, copies, memsets


def gpuscope_kernels(report):
    got = collections.Counter()
    for k in report["kernels"]["list"]:
        runs = k["launches"] - k["captured"] + k["graph_runs"]
        got[norm(k["display"])] += runs
    return got


def torch_case(gs, out, python, workload, n, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    script = os.path.join(HERE, "torch_work.py")
    facts_path = os.path.join(out, "facts-%s.json" % workload)
    report, wall = run_gs(gs, [python, script, workload, str(n), "--facts", facts_path],
                          out, "torch-" + workload, env=env)
    trace = os.path.join(out, "cupti-%s.json" % workload)
    p = subprocess.run([python, script, workload, str(n), "--profile", trace], env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise RuntimeError("profiled %s failed: %s" % (workload, p.stderr[-2000:]))
    kernels, copies, memsets = cupti_truth(trace)
    got = gpuscope_kernels(report)
    case = "torch " + workload
    record(case, "kernels run (all)", sum(kernels.values()) == sum(got.values()),
           sum(kernels.values()), sum(got.values()))
    names_ok = sum(1 for k in kernels if got.get(k) == kernels[k])
    record(case, "kernel names with equal counts", names_ok == len(kernels), len(kernels),
           names_ok, "of %d distinct" % len(kernels))
    for k in sorted(kernels, key=lambda k: -kernels[k])[:3]:
        record(case, "  " + k[:32], got.get(k) == kernels[k], kernels[k], got.get(k, 0))
    for d, (count, nbytes) in sorted(copies.items()):
        gc = report["copies"].get(d, {})
        record(case, "copies %s (count, bytes)" % d,
               (gc.get("count"), gc.get("bytes")) == (count, nbytes), (count, nbytes),
               (gc.get("count"), gc.get("bytes")))
    gm = report["copies"].get("memset", {}).get("count", 0)
    record(case, "memsets", gm == memsets, memsets, gm)
    facts = json.load(open(facts_path))
    return report, facts, got, kernels


def torch_attach_case(gs, out, python, workload, n):
    """Attach to a PyTorch process after its kernels were named; the PyTorch profiler in
    that same process records the same stretch. Names are unknown to gpuscope, so the
    counts per kernel are compared as multisets."""
    script = os.path.join(HERE, "torch_work.py")
    gate = os.path.join(out, "gate-" + workload)
    trace = os.path.join(out, "cupti-attach-%s.json" % workload)
    rep = os.path.join(out, "attach-%s.json" % workload)
    wl = subprocess.Popen([python, script, workload, str(n), "--wait", gate, "--profile",
                           trace])
    deadline = time.time() + 120
    while not os.path.exists(gate + ".ready"):
        if time.time() > deadline or wl.poll() is not None:
            raise RuntimeError("torch workload did not reach its gate")
        time.sleep(0.05)
    tracer = subprocess.Popen([gs, "attach", "-p", str(wl.pid), "-q", "--json=%s" % rep],
                              stderr=subprocess.PIPE, text=True)
    line = tracer.stderr.readline()
    open(gate, "w").close()
    if wl.wait(timeout=300):
        raise RuntimeError("attached torch workload failed")
    tracer.communicate(timeout=120)
    report = json.load(open(rep))
    kernels, copies, _ = cupti_truth(trace)
    got = gpuscope_kernels(report)
    case = "torch attach " + workload
    record(case, "attached", "attached to pid" in line, True, "attached to pid" in line)
    record(case, "kernels run (all)", sum(kernels.values()) == sum(got.values()),
           sum(kernels.values()), sum(got.values()))
    record(case, "counts per kernel (multiset)",
           sorted(kernels.values()) == sorted(got.values()), sorted(kernels.values()),
           sorted(got.values()))
    record(case, "kernels without a name", report["kernels"]["unnamed"] >= 1, ">=1",
           report["kernels"]["unnamed"], "named before the attach")
    # Pointers allocated before the attach cannot be classified: compare all copies.
    want = (sum(c for c, _ in copies.values()), sum(b for _, b in copies.values()))
    gcs = [v for k, v in report["copies"].items() if k != "memset"]
    have = (sum(v["count"] for v in gcs), sum(v["bytes"] for v in gcs))
    record(case, "copies, all directions (count, bytes)", want == have, want, have,
           "directions: %s" % sorted(k for k in report["copies"] if k != "memset"))


# ---- GPU time against CUPTI ------------------------------------------------------------------

def cupti_kernels(trace_path):
    """Kernel executions from the profiler's trace: (start ns, duration ns, name), in order."""
    out = []
    for e in json.load(open(trace_path))["traceEvents"]:
        # (gpuscope's own kernels are not the program's: a few calibration runs per
        # context, and an empty kernel before a gated launch after a copy)
        if e.get("cat") == "kernel" and not e["name"].startswith("gpuscope_"):
            out.append((float(e["ts"]) * 1000.0, float(e["dur"]) * 1000.0, norm(e["name"])))
    return sorted(out)


def within(got, want):
    return abs(got - want) <= max(0.02 * want, 2000.0)


def gputime_case(gs, out, python, workload, n):
    """gpuscope --inject and the PyTorch profiler in the same process, timing the same
    kernel executions: per kernel, GPU durations must agree within 2% or 2 us."""
    script = os.path.join(HERE, "torch_work.py")
    trace = os.path.join(out, "cupti-gputime-%s.json" % workload)
    report, _ = run_gs(gs, [python, script, workload, str(n), "--profile", trace], out,
                       "gputime-" + workload)
    cupti = cupti_kernels(trace)
    by_name = collections.defaultdict(list)
    for _, dur, name in cupti:
        by_name[name].append(dur)
    case = "gpu time " + workload
    mine = {norm(k["display"]): k["gpu"] for k in report["kernels"]["list"] if k["gpu"]}
    # Launch by launch: the k-th kernel execution of each in both, start and end offsets.
    recs = sorted((r for r in gsrec.gpu_records(os.path.join(out, "gputime-%s.gsrec" % workload))
                   if r["kind"] == 1), key=lambda r: r["start"])
    pairs = []
    if len(recs) == len(cupti):
        offset = sorted(c[0] - r["start"] for c, r in zip(cupti, recs))[len(cupti) // 2]
        for c, r in zip(cupti, recs):
            est_start = max(r["start"], r["call"]) if r["flags"] & 1 else r["start"]
            pairs.append({"cupti_start": c[0] - offset, "cupti_dur": c[1], "name": c[2],
                          "ev_start": r["start"], "ev_end": r["end"], "call": r["call"],
                          "call_end": r["call_end"], "idle": r["flags"] & 1,
                          "gated": (r["flags"] >> 1) & 1,
                          # (as the report has it: analysis/gputime.c)
                          "start_unknown": int(bool(
                              r["flags"] & 12 or (not r["flags"] & 2 and
                                                  r["start"] < r["call_end"] - 50000))),
                          "est_dur": r["end"] - est_start})
        diffs = sorted(p["ev_end"] - p["ev_start"] - p["cupti_dur"] for p in pairs)
        print("  %s: raw event pair minus CUPTI duration: median %.0f ns, p10 %.0f, p90 %.0f; "
              "gated %d of %d; device event pair %s ns" % (
                  workload, diffs[len(diffs) // 2], diffs[len(diffs) // 10],
                  diffs[9 * len(diffs) // 10], sum(p["gated"] for p in pairs), len(pairs),
                  [d.get("event_overhead_ns") for d in report["gpu"]["devices"]]), flush=True)
    # Executions gpuscope says it has no time for (a launch that waited for the GPU inside
    # its call: when it started is not known) are compared as such: counted, and left out
    # of CUPTI's mean too, paired launch by launch.
    unknown = collections.defaultdict(list)
    for p in pairs:
        if p["start_unknown"]:
            unknown[norm(p["name"])].append(p["cupti_dur"])
    detail = []
    for name in sorted(by_name, key=lambda k: -sum(by_name[k])):
        durs = list(by_name[name])
        for d in unknown.get(name, []):
            durs.remove(d)
        g = mine.get(name)
        nu = g["start_unknown"] if g else 0
        want = sum(durs) / len(durs) if durs else 0
        got = g["total_ns"] / g["timed"] if g and g["timed"] else None
        if g is None and not durs:  # every execution of it waited inside its call
            nu = len(unknown.get(name, []))
        ok = (nu == len(unknown.get(name, [])) and
              (not durs if g is None or not g["timed"] else
               g["timed"] == len(durs) and within(got, want)))
        detail.append({"kernel": name, "cupti_n": len(by_name[name]), "cupti_mean_ns": want,
                       "gpuscope_n": g["timed"] if g else 0, "gpuscope_mean_ns": got,
                       "start_unknown": nu,
                       "gpuscope_p50_ns": g["p50_ns"] if g else None,
                       "cupti_p50_ns": sorted(durs)[len(durs) // 2] if durs else None,
                       "idle_stream_starts": g["idle_stream_starts"] if g else None})
        record(case, "mean " + name[:28], ok, "%.0f ns x%d" % (want, len(durs)),
               "%s x%s%s" % ("%.0f ns" % got if got else None, g["timed"] if g else 0,
                             " (+%d start unknown)" % nu if nu else ""))
    record(case, "executions paired", len(recs) == len(cupti), len(cupti), len(recs))
    with open(os.path.join(out, "gputime-%s-detail.json" % workload), "w") as f:
        json.dump({"kernels": detail, "pairs": pairs, "gpu": report["gpu"]}, f)


def main():
    global PLANE_OPTS
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--plane", choices=["uprobe", "inject"], default="uprobe")
    ap.add_argument("--only-gputime", action="store_true")
    args = ap.parse_args()
    inject = args.plane == "inject"
    PLANE_OPTS = ["--inject"] if inject else []
    os.makedirs(args.out, exist_ok=True)
    gs = os.path.abspath(args.gpuscope)
    t0 = time.time()
    steps = []

    def step(name, fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except Exception as e:  # one broken case must not hide the others
            record(name, "ran", False, "ran", "error", str(e)[:300])
            return None

    if args.only_gputime:
        step("gpu time matmul", gputime_case, gs, args.out, args.python, "matmul", 200)
        step("gpu time elementwise", gputime_case, gs, args.out, args.python, "elementwise",
             500)
        return 0
    if shutil.which("nvcc"):
        bins = step("nvcc build", build_nvcc, args.out)
        if bins:
            step("nvcc static cudart", nvcc_case, gs, args.out, bins["static"], "static")
            step("nvcc shared cudart", nvcc_case, gs, args.out, bins["shared"], "shared")
            if not inject:  # attach is the kernel plane's alone
                step("nvcc late attach", attach_case, gs, args.out, bins["shared"])
    step("torch elementwise", torch_case, gs, args.out, args.python, "elementwise", 500)
    step("torch matmul", torch_case, gs, args.out, args.python, "matmul", 200)
    step("torch triton", torch_case, gs, args.out, args.python, "triton", 300)
    if not inject:
        step("torch attach elementwise", torch_attach_case, gs, args.out, args.python,
             "elementwise", 500)
        step("torch attach matmul", torch_attach_case, gs, args.out, args.python, "matmul",
             200)
    else:
        step("gpu time matmul", gputime_case, gs, args.out, args.python, "matmul", 200)
        step("gpu time elementwise", gputime_case, gs, args.out, args.python, "elementwise",
             500)
    r = step("torch expandable", torch_case, gs, args.out, args.python, "expandable", 4,
             {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    if r:
        report, facts = r[0], r[1]
        by_api = report["memory"]["by_api"]
        creates = by_api.get("cuMemCreate", {}).get("calls", 0)
        plain = by_api.get("cuMemAlloc_v2", {}).get("calls", 0)
        record("torch expandable", "cuMemCreate calls", creates > 0, ">0", creates,
               "cuMemAlloc_v2 calls: %d" % plain)
        peak = report["memory"]["peak_bytes"]["device"]
        record("torch expandable", "peak device >= torch reserved",
               peak >= facts["max_reserved"], facts["max_reserved"], peak)
    r = step("torch nccl", torch_case, gs, args.out, args.python, "nccl", 50,
             {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"})
    if r:
        report, facts = r[0], r[1]
        ar = report["nccl"]["ops"].get("all_reduce", {})
        record("torch nccl", "ncclAllReduce calls", ar.get("calls") == facts["all_reduce_calls"],
               facts["all_reduce_calls"], ar.get("calls"))
        record("torch nccl", "ncclAllReduce bytes", ar.get("bytes") == facts["all_reduce_bytes"],
               facts["all_reduce_bytes"], ar.get("bytes"))
        comms = report["nccl"]["communicators"]
        record("torch nccl", "communicator rank/size",
               any(c["rank"] == 0 and c["nranks"] == 1 for c in comms), "0/1",
               ["%d/%d" % (c["rank"], c["nranks"]) for c in comms])
    if inject:  # every driver entry point handed out was wrapped
        for name in ("torch-matmul", "torch-triton", "torch-nccl"):
            path = os.path.join(args.out, name + ".json")
            if os.path.exists(path):
                n = json.load(open(path))["drops"]["unwrapped_entry_points"]
                record("inject " + name, "unwrapped entry points", n == 0, 0, n)
    failed = [r for r in results if not r["ok"]]
    with open(os.path.join(args.out, "gpu-results.json"), "w") as f:
        json.dump({"results": results, "failed": len(failed), "wall_s": time.time() - t0}, f,
                  indent=1)
    print("\n%d checks, %d failed, %.0f s" % (len(results), len(failed), time.time() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
