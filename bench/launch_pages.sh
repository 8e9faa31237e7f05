#!/bin/bash
# The pages of the in-process plane's own a launch touches (issue 22): on the GPU guests a
# page whose translation the program's work between launches has pushed out of the TLB
# costs ~45 ns (bench/guest_cpu.c; the CPU machine's ~5), whatever lines of it are cached.
# bench/launch_cold.c on the test double, `--gpu-time=off`, nothing written between
# launches, under valgrind's lackey (every instruction and data address); the trace is cut
# at each entry into the wrapper of cuLaunchKernel. Per build: the pages of the inject
# library (code, read-only data and GOT, data) and of the ring that at least 90% of the
# launches touch, with the functions and variables of gpuscope's found on them. Counts,
# not times: the same on every run. From the repository root, after `make all fakes`;
# BUILDS: gpuscope binaries (their own inject libraries beside them).
#   BUILDS=".output/gpuscope /tmp/old/.output/gpuscope" bash bench/launch_pages.sh
set -eu
N=300
. bench/launch_valgrind.sh launch_pages.sh
for gs in $BUILDS; do
	lib=$(dirname "$gs")/libgpuscope-inject.so
	echo off >"$OUT/mode"
	LD_LIBRARY_PATH=$PWD/.output/fakes GPUSCOPE_NVML=/nonexistent GPUSCOPE_AB_FILE=$OUT/mode \
		LAUNCH_COLD_MAPS=1 "$gs" run -q --inject --gpu-time=off -o "$OUT/rec" -- \
		valgrind --tool=lackey --trace-mem=yes --log-file="$OUT/trace.txt" \
		"$OUT/launch_cold" "$OUT/mode" off 1 "$N" 0 >"$OUT/run.json" 2>"$OUT/run.err" ||
		{ tail -5 "$OUT/run.err" >&2; exit 1; }
	echo "== $("$gs" --version)"
	python3 - "$OUT/trace.txt" "$OUT/run.err" "$lib" <<'PY'
import bisect, collections, re, subprocess, sys

trace, err, lib = sys.argv[1:4]
syms = []
for line in subprocess.run(["nm", "-S", "--defined-only", lib], capture_output=True,
                           text=True, check=True).stdout.splitlines():
    p = line.split()
    if len(p) == 4:
        syms.append((int(p[0], 16), int(p[1], 16), p[3]))
syms.sort()
starts = [s[0] for s in syms]
secs = []
for line in subprocess.run(["readelf", "-SW", lib], capture_output=True, text=True,
                           check=True).stdout.splitlines():
    m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
    if m and int(m.group(2), 16):
        secs.append((int(m.group(2), 16), int(m.group(3), 16), m.group(1)))
maps = []  # (lo, hi, file offset, path)
for line in open(err):
    if line.startswith("maps "):
        p = line[5:].split()
        lo, hi = (int(x, 16) for x in p[0].split("-"))
        maps.append((lo, hi, int(p[2], 16), p[5] if len(p) > 5 else ""))
base = min(lo - off for lo, hi, off, path in maps if path.endswith("libgpuscope-inject.so"))
ours = [(lo, hi, path) for lo, hi, off, path in maps
        if path.endswith("libgpuscope-inject.so") or path.endswith(".ring")]
# (and the library's .bss past its file: the anonymous mapping right after its last one)
end = max(hi for lo, hi, path in ours if path.endswith("libgpuscope-inject.so"))
ours += [(lo, hi, "libgpuscope-inject.so") for lo, hi, off, path in maps if lo == end and not path]
entry = base + [s[0] for s in syms if s[2] == "gs_wrap_CU_LAUNCH_KERNEL"][0]


def what(a):
    """(section or "ring", symbol) of an address of ours"""
    if not any(lo <= a < hi for lo, hi, path in ours if path.endswith("libgpuscope-inject.so")):
        return "ring", ""
    o = a - base
    sec = next((n for s, z, n in secs if s <= o < s + z), "?")
    i = bisect.bisect_right(starts, o) - 1
    sym = syms[i][2] if i >= 0 and o < syms[i][0] + max(syms[i][1], 1) else ""
    return sec, sym


launches, cur, seen = 0, None, collections.Counter()
names = collections.defaultdict(set)
for line in open(trace):
    m = re.match(r"\s*([ISLM])\s+([0-9a-f]+),", line)
    if not m:
        continue
    a = int(m.group(2), 16)
    if m.group(1) == "I" and a == entry:
        if cur is not None:
            seen.update(cur)
        launches += 1
        cur = set()
        continue
    if cur is not None and any(lo <= a < hi for lo, hi, _ in ours):
        page = a >> 12
        cur.add(page)
        sec, sym = what(a)
        names[page].add((sec, sym))
launches -= 1  # (the last one's segment runs to the program's end)
every = sorted(p for p, c in seen.items() if c >= 0.9 * launches)
print("%d launches; pages of gpuscope's touched by at least 90%% of them: %d" % (launches, len(every)))
print("| page | section | what of ours on it |")
print("|---|---|---|")
for p in every:
    secs_on = sorted({s for s, _ in names[p]})
    syms_on = sorted({n for _, n in names[p] if n})
    print("| %x | %s | %s |" % (p, ", ".join(secs_on), ", ".join(syms_on)[:200]))
PY
done
