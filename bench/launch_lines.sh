#!/bin/bash
# The lines of the in-process plane's code and data one launch reads when the program's own
# work has pushed them out of the caches (issue 22): bench/launch_cold.c on the test double,
# `--gpu-time=off`, SWEEP_KIB (default 512) written between launches, under cachegrind with
# caches small enough that each launch starts cold (4 KiB first level, 256 KiB last). Per
# launch, by function of gpuscope's sources: instructions, last-level misses of code, data
# read and data written. Counts, not times: the same on any machine, and exact from one run.
# The time a line costs depends on where the program's work left it (on the H200 guests,
# 2 MiB of L2 a core: mostly L2, ~4-5 ns a line). From the repository root, after
# `make all fakes`; BUILDS: gpuscope binaries (their own inject libraries beside them).
#   BUILDS=".output/gpuscope /tmp/old/.output/gpuscope" bash bench/launch_lines.sh
set -eu
SWEEP=${SWEEP:-512}
N=1000
. bench/launch_valgrind.sh launch_lines.sh
for gs in $BUILDS; do
	src=$(cd "$(dirname "$gs")/.." && pwd)/src
	echo off >"$OUT/mode"
	LD_LIBRARY_PATH=$PWD/.output/fakes GPUSCOPE_NVML=/nonexistent GPUSCOPE_AB_FILE=$OUT/mode \
		"$gs" run -q --inject --gpu-time=off -o "$OUT/rec" -- valgrind --tool=cachegrind \
		--cache-sim=yes --I1=4096,2,64 --D1=4096,2,64 --LL=262144,8,64 \
		--cachegrind-out-file="$OUT/cg.out" "$OUT/launch_cold" "$OUT/mode" off 1 "$N" "$SWEEP" \
		>"$OUT/run.json" 2>"$OUT/run.err" || { tail -5 "$OUT/run.err" >&2; exit 1; }
	echo "== $("$gs" --version): $((N + N / 10)) launches"
	python3 - "$OUT/cg.out" $((N + N / 10)) "$src" <<'PY'
import collections, sys
tot = collections.defaultdict(lambda: [0] * 9)
fl = fn = None
for line in open(sys.argv[1]):
    if line.startswith("fl="):
        fl = line[3:].strip()
    elif line.startswith("fn="):
        fn = line[3:].strip()
    elif line[:1].isdigit():
        v = [int(x) for x in line.split()[1:]]
        t = tot[(fl, fn)]
        for i, x in enumerate(v):
            t[i] += x
n, src = float(sys.argv[2]), sys.argv[3]
# (events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw)
rows = sorted(((k, v) for k, v in tot.items() if k[0].startswith(src)),
              key=lambda kv: -(kv[1][2] + kv[1][5] + kv[1][8]))
print("| function | instructions | code lines | data lines read | data lines written |")
print("|---|---|---|---|---|")
s = [0] * 9
for (f, fn), v in rows:
    s = [a + b for a, b in zip(s, v)]
    if v[2] + v[5] + v[8] >= 0.5 * n:
        print("| %s | %.0f | %.1f | %.1f | %.1f |" % (
            f[len(src) + 1:] + ":" + fn, v[0] / n, v[2] / n, v[5] / n, v[8] / n))
print("| all of gpuscope's | %.0f | %.1f | %.1f | %.1f |" % (s[0] / n, s[2] / n, s[5] / n, s[8] / n))
PY
done
