"""Python frames on real PyTorch work (issue 20), run under gpuscope --inject on a GPU:

    python py_frames.py gpt2 STEPS     GPT-2 (transformers, random weights) training steps;
                                       prints the median step time after 3 (JSON)
    python py_frames.py leak STEPS     each step keeps a 4 MiB tensor in a Python list
    python py_frames.py resnet STEPS SLOW   ResNet-18 steps from a DataLoader; batch SLOW
                                       takes 300 ms to load
    python py_frames.py exc N          N caught torch.OutOfMemoryError (a 4 PiB tensor), N
                                       caught ValueErrors, then an uncaught RuntimeError
    python py_frames.py raises N       time N raise/catch of a ValueError (after loading the
                                       driver, so that gpuscope probes the interpreter);
                                       prints ns per raise (JSON)
    python py_frames.py steps REPORT.json   the steps gpuscope found (no GPU)
    python py_frames.py check RECORDING REPORT.json SCRIPT   (no GPU: reads gpuscope's output)

`check` prints, as JSON: how many launch stacks were taken and how many carry a Python
frame, the Python frames most seen, and the leak site's name against the line of this
file that keeps the tensors (marked `# KEEP`).
"""
import json
import os
import struct
import sys
import time


def train_step(model, opt, data):
    loss = model(data, labels=data).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def gpt2(steps):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=8192, n_positions=256)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randint(0, cfg.vocab_size, (8, 128), device="cuda")
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        train_step(model, opt, data)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    later = sorted(times[3:]) or times
    print(json.dumps({"steps": steps, "step_ms_median": 1e3 * later[len(later) // 2]}))


def resnet(steps, slow):
    """ResNet-18 training steps fed by a DataLoader (2 workers) over synthetic images; the
    batch `slow` takes 300 ms to load (one of its items sleeps)."""
    import torch
    import torch.nn.functional as F
    import torchvision

    batch = 32

    class Images(torch.utils.data.Dataset):
        def __len__(self):
            return steps * batch

        def __getitem__(self, i):
            if i == slow * batch:
                time.sleep(0.3)
            return torch.randn(3, 64, 64), i % 10

    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(Images(), batch_size=batch, num_workers=2)
    model = torchvision.models.resnet18(num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
    print(json.dumps({"steps": steps, "slow": slow}))


def exc(n):
    import torch

    torch.zeros(4, device="cuda")
    for i in range(n):
        try:
            torch.empty(1 << 50, device="cuda")  # OOM
        except torch.OutOfMemoryError:
            pass
        try:
            int("x%d" % i)  # VALUE
        except ValueError:
            pass
    raise RuntimeError("the end")  # UNCAUGHT


def raises(n):
    import ctypes

    ctypes.CDLL("libcuda.so.1").cuInit(0)
    time.sleep(1.0)  # (gpuscope probes the interpreter once it has loaded the driver)
    t0 = time.perf_counter()
    for i in range(n):
        try:
            raise ValueError(i)
        except ValueError:
            pass
    print(json.dumps({"raises": n, "ns_per_raise": 1e9 * (time.perf_counter() - t0) / n}))


def steps_of(report):
    """The steps gpuscope found, in short (no GPU): with their parts' totals, and how far
    a step's parts are from its duration at most."""
    st = json.load(open(report))["steps"]
    off = max((abs(sum(v or 0 for v in s["parts"].values()) - s["duration_ns"]) /
               max(s["duration_ns"], 1) for s in st["list"]), default=None)
    print(json.dumps({k: st.get(k) for k in ("count", "how", "step_function", "anchor_kernel",
                                             "median_ns", "p90_ns", "max_ns", "slow",
                                             "gpu_timed", "parts")} |
                     {"parts_off_max": off,
                      "slow_steps": [(i, s["duration_ns"], s["parts"], s["cause"])
                                     for i, s in enumerate(st["list"]) if s["slow"]],
                      "step0_parts": st["list"][0]["parts"] if st["list"] else None,
                      "step5_parts": st["list"][5]["parts"] if len(st["list"]) > 5 else None}))


KEPT = []  # (alive until exit: a leak)


def leak(steps):
    import torch

    x = torch.randn(1024, 1024, device="cuda")
    for _ in range(steps):
        KEPT.append(x * 2)  # KEEP
        time.sleep(0.005)
    torch.cuda.synchronize()


def check(recording, report, script):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
    import gsrec

    stacks = with_py = borrowed = 0
    names, seen, by_tid, lent = {}, {}, {}, []
    mark = 1 << 63 | 1  # (GS_PYFRAME_BORROWED: a thread without Python, the frames lent)
    for r in gsrec.records(recording):
        if r["type"] == 21:
            addr, n = struct.unpack_from("<QH", r["body"])
            names[addr] = r["body"][16:16 + n].decode(errors="replace")
        elif r["type"] == 20:
            arg, api, n = struct.unpack_from("<QHH", r["body"])
            ips = struct.unpack_from("<%dQ" % n, r["body"], 16)
            if arg == 0:  # (launch stacks carry the kernel handle)
                continue
            stacks += 1
            py = [ip for ip in ips if ip >> 63]
            with_py += bool(py)
            t = by_tid.setdefault(r["tid"], [0, 0])
            t[0] += 1
            t[1] += bool(py)
            for ip in [ip for ip in py if ip != mark][:1]:
                seen[ip] = seen.get(ip, 0) + 1
            if mark in ips:
                borrowed += 1
                lent.append(ips[ips.index(mark) + 1:])
    keep = [n for n, line in enumerate(open(script), 1) if line.rstrip().endswith("# KEEP")][0]
    rep = json.load(open(report))
    sites = [{k: s.get(k) for k in ("where", "suspected", "grew", "outstanding_bytes")}
             for s in rep["memory"]["sites"]]
    # Python threads: those with a Python frame on any of their launch stacks (the others,
    # autograd's engine threads say, run no Python).
    py_threads = {t: v for t, v in by_tid.items() if v[1]}
    on_py = sum(v[0] for v in py_threads.values())
    # Of the stacks of threads without Python (autograd's engine), the script's innermost
    # line among the frames they took: loss.backward()'s, if all went well.
    script_lines = {}
    for frames in lent:
        line = next((names.get(ip, "") for ip in frames
                     if os.path.abspath(script) in names.get(ip, "")), None)
        script_lines[line] = script_lines.get(line, 0) + 1
    out = {"launch_stacks": stacks, "with_python_frame": with_py,
           "borrowed_stacks": borrowed,
           "borrowed_script_lines": sorted(((c, l) for l, c in script_lines.items() if l),
                                           reverse=True)[:4],
           "share_all": with_py / stacks if stacks else None,
           "threads": {str(t): {"stacks": v[0], "with_python": v[1]} for t, v in by_tid.items()},
           "share_on_python_threads": sum(v[1] for v in py_threads.values()) / on_py
           if on_py else None,
           "innermost_python_frames": sorted(((c, names.get(ip, hex(ip)))
                                              for ip, c in seen.items()), reverse=True)[:8],
           "python": [p.get("python") for p in rep["processes"]],
           "leaks": rep["memory"]["suspected_leaks"], "sites": sites[:3],
           "keep_line": "leak (%s:%d)" % (os.path.abspath(script), keep),
           "leak_named_by_keep_line": any(s["where"].startswith(
               "leak (%s:%d)" % (os.path.abspath(script), keep)) for s in sites)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check(*sys.argv[2:5])
    elif sys.argv[1] == "steps":
        steps_of(sys.argv[2])
    elif sys.argv[1] in ("exc", "raises"):
        {"exc": exc, "raises": raises}[sys.argv[1]](int(sys.argv[2]))
    elif sys.argv[1] == "resnet":
        resnet(int(sys.argv[2]), int(sys.argv[3]))
    else:
        {"gpt2": gpt2, "leak": leak}[sys.argv[1]](int(sys.argv[2]))
