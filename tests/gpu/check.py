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


def run_gs(gs, args, out, name, env=None, timeout=600):
    rep = os.path.join(out, "%s.json" % name)
    rec = os.path.join(out, "%s.gsrec" % name)
    cmd = [gs, "run", "-q", "-o", rec, "--json=%s" % rep, "--"] + args
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
        if cat == "kernel":
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
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

    if shutil.which("nvcc"):
        bins = step("nvcc build", build_nvcc, args.out)
        if bins:
            step("nvcc static cudart", nvcc_case, gs, args.out, bins["static"], "static")
            step("nvcc shared cudart", nvcc_case, gs, args.out, bins["shared"], "shared")
            step("nvcc late attach", attach_case, gs, args.out, bins["shared"])
    step("torch elementwise", torch_case, gs, args.out, args.python, "elementwise", 500)
    step("torch matmul", torch_case, gs, args.out, args.python, "matmul", 200)
    step("torch triton", torch_case, gs, args.out, args.python, "triton", 300)
    step("torch attach elementwise", torch_attach_case, gs, args.out, args.python,
         "elementwise", 500)
    step("torch attach matmul", torch_attach_case, gs, args.out, args.python, "matmul", 200)
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
    failed = [r for r in results if not r["ok"]]
    with open(os.path.join(args.out, "gpu-results.json"), "w") as f:
        json.dump({"results": results, "failed": len(failed), "wall_s": time.time() - t0}, f,
                  indent=1)
    print("\n%d checks, %d failed, %.0f s" % (len(results), len(failed), time.time() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
