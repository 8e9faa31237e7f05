"""The kernel plane's cost on training steps, untraced and traced in one process (issue 22):
between processes an untraced ResNet-50 step on the lent GPU machines varies by 30% (18.8
to 25.5 ms), which hides a 0.5% cost. Here one process trains for the whole run, and
`gpuscope attach` traces it for B seconds, detaches, leaves it alone for A seconds, and
again, ROUNDS times (ABAB...): each round's ratio is the median window time while attached
over the median while detached just before it. GPUSCOPE may name several builds, comma
separated: each round then attaches each build in turn (the order turned each round), and
each build gets its ratios, row and table.

    python3 attach_ab.py run GPUSCOPE OUT [resnet50|gpt2|tinyops|cupy|compile|jax] [ROUNDS]
                                                      [SECONDS]
                                                      (as root; a step of tinyops or cupy
                                                      is 1,000 of their ops)
    python3 attach_ab.py work WORKLOAD LOG STOPFILE   (the process: windows of 4 steps,
                                                      "start end cpu" seconds a line in
                                                      LOG, cpu the thread's CPU time)
Writes OUT/attach-WORKLOAD.json (with several builds, OUT/attach-WORKLOAD-N.json, N the
build's place in the list) and prints the table row. Windows that straddle an attach
or a detach (and the first second after each) are left out. gpuscope's options are its
defaults (the OS plane too); GS_OPTS adds some (what gpuscope writes to stderr goes beside
each report, REPORT.stderr: with GS_OPTS=-v, its counts). BPFSTATS=1: the kernel's
statistics of every BPF program (kernel.bpf_stats_enabled, bench/bpfstats.py) read inside
each attached period, as runs a step and ns a run per program (machine-wide: the OS
plane's run for every process and filter), in the JSON and a second table.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SETTLE = 1.0  # seconds after an attach whose windows are left out
END_SETTLE = 1.5  # and before the attach's end is seen (detaching, the report after it)


def work(name, log, stop):
    if name == "idle":  # (the script's own check, without a GPU: a step that sleeps)
        import ctypes

        ctypes.CDLL("libcuda.so.1").cuInit(0)
        step, sync = (lambda: time.sleep(0.002)), (lambda: None)
    else:
        import torch

        sys.path.insert(0, HERE)
        import workload

        sync = torch.cuda.synchronize
        if name == "jax":  # (its loss waited for: no torch context made)
            from fidelity_work import jax_step

            jstep, state = jax_step()
            box = {"p": state}

            def step():
                box["p"], box["loss"] = jstep(box["p"])

            sync = (lambda: box["loss"].block_until_ready())
        else:
            step = {"resnet50": workload.resnet50_step, "gpt2": workload.gpt2_step,
                    "tinyops": workload.tinyops_step, "cupy": workload.cupy_step,
                    "compile": workload.compile_step}[name]()
    for _ in range(10):
        step()
    sync()
    with open(log, "w", buffering=1) as f:
        f.write("ready\n")
        while not os.path.exists(stop):
            t0, c0 = time.time(), time.thread_time()
            for _ in range(4):
                step()
            sync()
            f.write("%.6f %.6f %.6f\n" % (t0, time.time(), time.thread_time() - c0))


def windows(log):
    """(start, end, the thread's CPU seconds) of each window."""
    out = []
    for line in open(log):
        parts = line.split()
        if len(parts) == 3:
            out.append(tuple(float(p) for p in parts))
    return out


def inside(ws, lo, hi, cpu=False):
    return [(c if cpu else e - s) / 4 for s, e, c in ws if s >= lo and e <= hi]


def sums(progs):
    """{name: (runs, ns)} summed over the programs of each name."""
    out = {}
    for name, ns, runs in progs:
        r, n = out.get(name, (0, 0))
        out[name] = (r + runs, n + ns)
    return out


def bpf_table(ws, stats):
    """Per program, over the rounds' measured spans: runs a step and ns a run (medians),
    steps from the windows inside each span (4 steps a window). Printed as a table too."""
    per = {}
    for t0, t1, d in stats:
        inside = [(s, e) for s, e, _ in ws if s >= t0 and e <= t1]
        if not inside:
            continue
        steps = 4 * len(inside) * (t1 - t0) / sum(e - s for s, e in inside)
        for name, (runs, ns) in d.items():
            if runs:
                per.setdefault(name, []).append((runs / steps, ns / runs))
    table = {k: {"runs_a_step": statistics.median(r for r, _ in v),
                 "ns_a_run": statistics.median(n for _, n in v), "rounds": len(v)}
             for k, v in per.items()}
    print("| program | runs a step | ns a run | ns a step |")
    print("|---|---|---|---|")
    for k, v in sorted(table.items(), key=lambda kv: -kv[1]["runs_a_step"] * kv[1]["ns_a_run"]):
        print("| %s | %.1f | %.0f | %.0f |" % (k, v["runs_a_step"], v["ns_a_run"],
                                               v["runs_a_step"] * v["ns_a_run"]))
    return table


def attach(gs, pid, secs, rep, extra):
    """One attached period: (start, end, the programs' statistics inside it or None)."""
    tr = subprocess.Popen([gs, "attach", "-p", str(pid), "-q", "-d", str(secs),
                           "--json=%s" % rep] + extra, stderr=subprocess.PIPE, text=True)
    line = ""  # up to "attached to pid ...", once every probe is in (-v: lines before it)
    while "attached to pid" not in line:
        more = tr.stderr.readline()
        if not more:
            break
        line += more
    t_on, stat = time.time(), None
    if os.environ.get("BPFSTATS") and "attached to pid" in line:
        import bpfstats
        time.sleep(SETTLE)
        s0, t0 = sums(bpfstats.programs()), time.time()
        time.sleep(max(0.0, t_on + secs - END_SETTLE - time.time()))
        s1, t1 = sums(bpfstats.programs()), time.time()
        stat = (t0, t1, {k: (s1[k][0] - s0.get(k, (0, 0))[0], s1[k][1] - s0.get(k, (0, 0))[1])
                         for k in s1})
    err = tr.communicate(timeout=secs + 120)[1]
    if line or err:  # (what -v says, beside the report)
        with open(rep + ".stderr", "w") as f:
            f.write(line + err)
    if "attached to pid" not in line:
        return None, "attach failed: %s%s" % (line, err[-2000:])
    return (t_on, time.time(), stat), None


def summary(ws, name, secs, periods, path, label):
    """The rounds of one build: periods [(off (a0, a1), on (b0, b1, stat), report)]."""
    res = {"workload": name, "rounds": [], "seconds": secs}
    for (a0, a1), (b0, b1, _), report in periods:
        off = inside(ws, a0 + SETTLE, a1)
        on = inside(ws, b0 + SETTLE, b1 - END_SETTLE)
        off_cpu = inside(ws, a0 + SETTLE, a1, cpu=True)
        on_cpu = inside(ws, b0 + SETTLE, b1 - END_SETTLE, cpu=True)
        rep = json.load(open(report))
        res["rounds"].append({
            "off_s": statistics.median(off) if off else None, "off_windows": len(off),
            "on_s": statistics.median(on) if on else None, "on_windows": len(on),
            "off_cpu_s": statistics.median(off_cpu) if off_cpu else None,
            "on_cpu_s": statistics.median(on_cpu) if on_cpu else None,
            "launches": rep["kernels"]["launches"], "drops": rep["drops"]["total"]})
    stats = [on[2] for _, on, _ in periods if on[2]]
    if stats:
        if label:
            print("%s:" % label)
        res["bpf"] = bpf_table(ws, stats)
    ratios = [x["on_s"] / x["off_s"] for x in res["rounds"] if x["on_s"] and x["off_s"]]
    if not ratios:
        sys.exit("no round has windows both attached and detached: periods of %g s are too "
                 "short (%g s are left out after an attach, %g s before its end)" % (
                     secs, SETTLE, END_SETTLE))
    res["ratio_median"] = statistics.median(ratios)
    res["ratio_min_max"] = [min(ratios), max(ratios)]
    cpu = [x["on_cpu_s"] / x["off_cpu_s"] for x in res["rounds"]
           if x["on_cpu_s"] and x["off_cpu_s"]]
    res["cpu_ratio_median"] = statistics.median(cpu) if cpu else None
    res["step_off_median_s"] = statistics.median(x["off_s"] for x in res["rounds"]
                                                 if x["off_s"])
    json.dump(res, open(path, "w"), indent=1)
    print("| %s%s (%d rounds of %d s) | %.2f ms | %.4fx (%.4f-%.4f) | CPU %s |" % (
        name, label and ", " + label, len(ratios), secs, 1e3 * res["step_off_median_s"],
        res["ratio_median"], res["ratio_min_max"][0], res["ratio_min_max"][1],
        "%.4fx" % res["cpu_ratio_median"] if cpu else "-"))


def run(builds, out, name, rounds, secs):
    log, stop = os.path.join(out, "ab-%s.log" % name), os.path.join(out, "ab-%s.stop" % name)
    for f in (log, stop):
        if os.path.exists(f):
            os.unlink(f)
    wl = subprocess.Popen([sys.executable, os.path.abspath(__file__), "work", name, log, stop])
    deadline = time.time() + 300
    while not (os.path.exists(log) and open(log).readline().strip() == "ready"):
        if time.time() > deadline or wl.poll() is not None:
            sys.exit("the workload did not start")
        time.sleep(0.2)
    if os.environ.get("BPFSTATS"):
        sys.path.insert(0, HERE)
        stats_was = open("/proc/sys/kernel/bpf_stats_enabled").read()
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1\n")
    extra = os.environ.get("GS_OPTS", "").split()
    n = len(builds)
    periods = [[] for _ in builds]  # per build: [(off span, on span and stats, report)]
    for p in range(rounds * n):
        b = (p % n + p // n) % n  # each build once a round, the order turned each round
        a0 = time.time()
        time.sleep(secs)
        off = (a0, time.time())
        rep = os.path.join(out, "ab-%s-%d-%d.json" % (name, b, p // n))
        on, err = attach(builds[b], wl.pid, secs, rep, extra)
        if err:
            wl.kill()
            sys.exit(err)
        periods[b].append((off, on, rep))
    open(stop, "w").close()
    wl.wait(timeout=120)
    if os.environ.get("BPFSTATS"):
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_was)
    ws = windows(log)
    for b, gs in enumerate(builds):
        path = os.path.join(out, "attach-%s%s.json" % (name, "-%d" % b if n > 1 else ""))
        summary(ws, name, secs, periods[b], path, gs if n > 1 else "")


if __name__ == "__main__":
    if sys.argv[1] == "work":
        work(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        os.makedirs(sys.argv[3], exist_ok=True)
        run([os.path.abspath(b) for b in sys.argv[2].split(",")], sys.argv[3],
            sys.argv[4] if len(sys.argv) > 4 else "resnet50", int(sys.argv[5]) if len(sys.argv) > 5 else 7,
            float(sys.argv[6]) if len(sys.argv) > 6 else 10)
