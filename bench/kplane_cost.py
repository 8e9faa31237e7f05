"""What the kernel plane adds to a program's calls (issue 22): bench/kplane_cost.c's loops
(launch, copy, getppid, read, pingpong) untraced, traced by `gpuscope run` with each build of
BUILDS, and beside a traced process (the loop untraced while the build traces another: what
every other program on the machine pays). The variants alternate in each round, the order
turned each round. Per run: ns a call (the median of its windows), and the kernel's
statistics of the programs that ran between its first and last windows
(kernel.bpf_stats_enabled, read by bench/bpfstats.py): runs a call and ns a run.

    python3 bench/kplane_cost.py OUT BUILD[,BUILD...] [ROUNDS] [MODES]

As root, from the repository root; here with LD_LIBRARY_PATH=.output/fakes (the test
double), on a GPU machine with its driver. MODES: comma-separated (default all five).
Prints a table per mode (medians over the rounds, min-max) and writes OUT/kplane.json.
KPLANE_SCALE scales the calls a window (tests/integration/test_trace.py runs it short).
The CPU machine's uprobe trap is not a GPU machine's: judge costs there.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpfstats  # noqa: E402

N = {"launch": 20000, "copy": 20000, "getppid": 200000, "read": 200000, "pingpong": 20000}
SCALE = float(os.environ.get("KPLANE_SCALE", "1"))  # (the test's short runs)
N = {k: max(100, int(v * SCALE)) for k, v in N.items()}
WINDOWS = 3


def build(out):
    exe = os.path.join(out, "kplane_cost")
    libs = os.environ.get("LD_LIBRARY_PATH")
    cmd = ["gcc", "-O2", "-I" + os.path.join(HERE, "..", "tests", "fakes"),
           os.path.join(HERE, "kplane_cost.c"), "-o", exe] + (["-L" + libs] if libs else []) + \
        ["-lcuda", "-lpthread"]
    subprocess.run(cmd, check=True)
    return exe


def programs():
    out = {}
    for name, ns, runs in bpfstats.programs():
        r, n = out.get(name, (0, 0))
        out[name] = (r + runs, n + ns)
    return out


def wait_for(path, proc):
    while not os.path.exists(path):
        if proc.poll() is not None:
            sys.exit("kplane_cost: the loop ended early: %s" % proc.stderr.read()[-2000:])
        time.sleep(0.02)


def one(exe, out, mode, variant, gs):
    """One run: (ns a call, {program: (runs a call, ns a run)}, the loop's page faults a
    call)."""
    start, end, stop = (os.path.join(out, f) for f in ("start", "end", "stop"))
    for f in (start, end, stop):
        if os.path.exists(f):
            os.unlink(f)
    loop = [exe, mode, str(N[mode]), str(WINDOWS), start, end]
    rec = os.path.join(out, "rec")
    beside = None
    if variant == "traced":
        loop = [gs, "run", "-q", "-o", rec, "--"] + loop
    elif variant == "beside":
        beside = subprocess.Popen([gs, "run", "-q", "-o", rec, "--", "sh", "-c",
                                   "while [ ! -e %s ]; do sleep 0.1; done" % stop],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)  # (its programs loaded and attached)
    p = subprocess.Popen(loop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(start, p)
    s0 = programs()
    wait_for(end, p)
    s1 = programs()
    stdout, err = p.communicate(timeout=600)
    if beside:
        open(stop, "w").close()
        beside.wait(timeout=60)
    if p.returncode:
        sys.exit("kplane_cost: %s %s failed: %s" % (mode, variant, err[-2000:]))
    lines = stdout.splitlines()
    ns = statistics.median(float(x) for x in lines[0].split())
    calls = N[mode] * WINDOWS
    progs = {k: ((r - s0.get(k, (0, 0))[0]) / calls,
                 (n - s0.get(k, (0, 0))[1]) / max(1, r - s0.get(k, (0, 0))[0]))
             for k, (r, n) in s1.items() if r - s0.get(k, (0, 0))[0] >= calls // 100}
    return ns, progs, int(lines[1].split()[1]) / calls


def table(mode, runs, variants):
    print("\n%s (%d calls a window, %d windows a run; ns a call: median, min-max over the "
          "rounds)\n" % (mode, N[mode], WINDOWS))
    print("| variant | ns a call | the loop's page faults a call | programs: runs a call x "
          "ns a run |")
    print("|---|---|---|---|")
    for v in variants:
        rs = runs[v]
        ns = [r[0] for r in rs]
        names = sorted({k for r in rs for k in r[1]})
        progs = ", ".join("%s %.2f x %.0f" % (
            k, statistics.median(r[1][k][0] for r in rs if k in r[1]),
            statistics.median(r[1][k][1] for r in rs if k in r[1])) for k in names)
        print("| %s | %.1f (%.1f-%.1f) | %.3f | %s |" % (
            v, statistics.median(ns), min(ns), max(ns), statistics.median(r[2] for r in rs),
            progs or "-"))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    builds = [os.path.abspath(b) for b in sys.argv[2].split(",")]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    modes = sys.argv[4].split(",") if len(sys.argv) > 4 else list(N)
    exe = build(out)
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1\n")
    variants = ["untraced"] + ["%s %d" % (v, b) for b in range(len(builds))
                               for v in ("traced", "beside")]
    res = {"builds": builds, "rounds": rounds, "modes": {}}
    try:
        for mode in modes:
            runs = {v: [] for v in variants}
            for r in range(rounds):
                for v in variants[r % len(variants):] + variants[:r % len(variants)]:
                    kind, _, b = v.partition(" ")
                    runs[v].append(one(exe, out, mode, kind, builds[int(b)] if b else None))
            res["modes"][mode] = runs
            table(mode, runs, variants)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(was)
    print("\nbuilds: " + ", ".join("%d %s" % (i, b) for i, b in enumerate(builds)))
    with open(os.path.join(out, "kplane.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
