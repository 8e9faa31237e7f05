"""The parts of the launches' calls, per mode (GPUSCOPE_AB_PHASES, src/inject/ab.c), from
the FILE.phases that bench/inject_ab.sh's processes leave (PHASES=1):

    python3 phases_table.py OUT/ab-WORKLOAD-1.mode.phases [...]
    python3 phases_table.py --iterations OUT WORKLOAD [...]
    python3 phases_table.py --stacks OUT/ab-WORKLOAD-1.mode.phases [...]

Per mode, summed over its windows: ns per launch of each part (the parts inside the
driver's calls are the driver's time; `ours` is the wrapper less the driver's launch call),
and per timed launch the wrapper's whole call and the driver's launch in it. By the
plane's own clock, with about 20-35 ns a reading in every part.

--iterations: per process of each WORKLOAD (OUT/WORKLOAD-N.json beside its phases), what
each mode added to the launching threads' time an iteration, from the parts: its kernel
launches an iteration (its windows' launches over their iterations, warm-up included) times
what each cost beyond untraced (ours, and the driver's launch call beyond its mean under
`off`, where CUPTI's part of it is), against `pass`'s median iteration. Summed over the
threads that launch: where they are not the iteration's critical path the step slows by
less; the windows' own ratios (bench/inject_ab.sh's table) measure that, with their noise.
Launches only: copies', sets' and other calls' wrappers are not in the parts."""
import json
import os
import statistics
import sys

PARTS = ["timed", "untimed", "real", "real_unt", "begin", "end", "ask", "lock", "query",
         "gate", "start_ev", "end_ev", "stack", "emit", "harvest", "locked", "unwind", "pywalk",
         "clock", "pause", "prime", "first", "after", "ctx", "pybegin", "stackrec"]


def read(path):
    modes = {}
    for line in open(path):
        mode, *sums = line.split()
        if len(PARTS) - 8 <= len(sums) < len(PARTS):  # (from before the last parts came)
            sums += ["0:0"] * (len(PARTS) - len(sums))
        if len(sums) != len(PARTS):
            continue
        m = modes.setdefault(mode, {p: [0, 0] for p in PARTS})
        for p, v in zip(PARTS, sums):
            n, ns = v.split(":")
            m[p][0] += int(n)
            m[p][1] += int(ns)
    return modes


def per_launch(m):
    """(launches, ours ns a launch, the driver's launch call ns a launch) of a mode's sums."""
    launches = m["timed"][0] + m["untimed"][0]
    if not launches:
        return 0, 0.0, 0.0
    ours = m["timed"][1] + m["untimed"][1] - m["real"][1] - m["real_unt"][1]
    return launches, ours / launches, (m["real"][1] + m["real_unt"][1]) / launches


def iterations(out, workloads):
    print("| workload | process | mode | launches an iteration | ours a launch | the driver's "
          "call beyond `off` | added an iteration | against `pass`'s iteration |")
    print("|---|---|---|---|---|---|---|---|")
    for w in workloads:
        n = 1
        while os.path.exists(os.path.join(out, "%s-%d.json" % (w, n))):
            proc = "%s-%d" % (w, n)
            n += 1
            phases = os.path.join(out, "ab-%s.mode.phases" % proc)
            lines = [l for l in open(os.path.join(out, proc + ".json")) if l.startswith("{")]
            if not lines or not os.path.exists(phases):
                continue
            d = json.loads(lines[-1])
            per_window = d.get("ab_iters") or 0
            passes = [sec for mode, sec, _ in d["ab"] if mode == "pass"]
            modes = read(phases)
            off = per_launch(modes["off"]) if "off" in modes else None
            for mode, m in modes.items():
                # (The last window's sums are never written: no switch after it.)
                windows = sum(1 for mw, _, _ in d["ab"][:-1] if mw == mode)
                launches, ours, driver = per_launch(m)
                if not (launches and windows and per_window and passes):
                    continue
                beyond = driver - off[2] if off and off[0] and mode != "off" else 0.0
                an_iter = launches / (windows * per_window)
                added = an_iter * (ours + beyond)
                print("| %s | %s | %s | %.1f | %.0f ns | %+.0f ns | %.0f ns | %+.2f%% |" % (
                    w, proc, mode, an_iter, ours, beyond, added,
                    100 * added / (1e9 * statistics.median(passes))))


def stacks(paths):
    """Per mode: the stacks taken (the unwinder's count), what one cost (its native frames,
    its Python frames, the whole stack part over the stacks), and the stack part a launch."""
    print("| file | mode | launches | stacks | unwind a stack | Python frames a stack (of it "
          "the last walk's pages read again) | the record | the stack part a stack "
          "| the stack part a launch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        for mode, m in read(path).items():
            launches = m["timed"][0] + m["untimed"][0]
            n = m["unwind"][0]
            if mode in ("start", "warmup") or not launches or not n:
                continue
            # (Files from before 2026-11-29's last parts have none of those: "-".)
            part = {p: "%.1f us" % (m[p][1] / m[p][0] / 1e3) if m[p][0] else "-"
                    for p in ("pybegin", "stackrec")}
            print("| %s | %s | %d | %d | %.1f us | %.1f us (%s) | %s | %.1f us | %.0f ns |" % (
                path.rsplit("/", 1)[-1], mode, launches, n, m["unwind"][1] / n / 1e3,
                m["pywalk"][1] / max(1, m["pywalk"][0]) / 1e3, part["pybegin"],
                part["stackrec"], m["stack"][1] / n / 1e3, m["stack"][1] / launches))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--iterations":
        iterations(sys.argv[2], sys.argv[3:])
        return
    if len(sys.argv) > 2 and sys.argv[1] == "--stacks":
        stacks(sys.argv[2:])
        return
    cols = ["ours", "begin", "ask", "lock", "locked", "query", "gate", "start_ev", "end",
            "end_ev", "stack", "unwind", "pywalk", "emit", "harvest", "clock", "pause", "prime",
            "first", "after", "ctx"]
    print("| file | mode | launches | timed | " + " | ".join(cols) +
          " | a timed launch: wrapper, driver's launch | untimed: wrapper, launch |")
    print("|---|---|---|---|" + "---|" * len(cols) + "---|---|")
    for path in sys.argv[1:]:
        for mode, m in read(path).items():
            if mode in ("start", "warmup"):  # (before the first window: not a mode's)
                continue
            launches = m["timed"][0] + m["untimed"][0]
            if not launches:
                continue
            ours = (m["timed"][1] + m["untimed"][1] - m["real"][1] - m["real_unt"][1])
            per = {p: m[p][1] / launches for p in PARTS}
            per["ours"] = ours / launches
            t, u = m["timed"][0] or 1, m["untimed"][0] or 1
            print("| %s | %s | %d | %d | " % (path.rsplit("/", 1)[-1], mode, launches,
                                             m["timed"][0]) +
                  " | ".join("%.0f" % per[c] for c in cols) +
                  " | %.0f, %.0f | %.0f, %.0f |" % (m["timed"][1] / t, m["real"][1] / t,
                                                    m["untimed"][1] / u, m["real_unt"][1] / u))


if __name__ == "__main__":
    main()
