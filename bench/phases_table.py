"""The parts of the launches' calls, per mode (GPUSCOPE_AB_PHASES, src/inject/ab.c), from
the FILE.phases that bench/inject_ab.sh's processes leave (PHASES=1):

    python3 phases_table.py OUT/ab-WORKLOAD-1.mode.phases [...]

Per mode, summed over its windows: ns per launch of each part (the parts inside the
driver's calls are the driver's time; `ours` is the wrapper less the driver's launch call),
and per timed launch the wrapper's whole call and the driver's launch in it. By the
plane's own clock, with about 20-35 ns a reading in every part."""
import sys

PARTS = ["timed", "untimed", "real", "real_unt", "begin", "end", "ask", "lock", "query",
         "gate", "start_ev", "end_ev", "stack", "emit", "harvest", "locked", "unwind", "pywalk",
         "clock", "pause"]


def read(path):
    modes = {}
    for line in open(path):
        mode, *sums = line.split()
        if len(PARTS) - 2 <= len(sums) < len(PARTS):  # (before the "clock" or "pause" part)
            sums += ["0:0"] * (len(PARTS) - len(sums))
        if len(sums) != len(PARTS):
            continue
        m = modes.setdefault(mode, {p: [0, 0] for p in PARTS})
        for p, v in zip(PARTS, sums):
            n, ns = v.split(":")
            m[p][0] += int(n)
            m[p][1] += int(ns)
    return modes


def main():
    cols = ["ours", "begin", "ask", "lock", "locked", "query", "gate", "start_ev", "end",
            "end_ev", "stack", "unwind", "pywalk", "emit", "harvest", "clock", "pause"]
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
