#!/bin/bash
# bench/carry_plane.cu under `gpuscope run --inject`, with carriers (GPUSCOPE_CARRY=1) and
# with gated pairs, 1 and 20 us kernels (1000n: 1 us, not waited for, 10 us apart), two
# processes each: what the events read less the
# kernel's own span ($OUT/cp/table.md). From the repository root on the GPU machine, carrying
# .output/static; root.
set -u
mkdir -p $OUT/cp && nvcc -O2 -arch=sm_90 bench/carry_plane.cu -o $OUT/cp/carry_plane || exit 1
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
for ns in 1000 20000 1000n; do for mode in carry pairs; do for rep in 1 2; do
  if [ $mode = carry ]; then export GPUSCOPE_CARRY=1; else unset GPUSCOPE_CARRY; fi
  .output/static/gpuscope run -q --inject -o $OUT/cp/$mode-$ns-$rep.gsrec -- $OUT/cp/carry_plane 300 ${ns%n} \
    ${ns//[0-9]/} > $OUT/cp/$mode-$ns-$rep.json
done; done; done
unset GPUSCOPE_CARRY
python3 - <<'PY' | tee $OUT/cp/table.md
import glob, json, os, statistics, sys
sys.path.insert(0, "tests/integration")
import gsrec
out = os.environ["OUT"] + "/cp"
print("| NS | mode | run | kernel's span (median) | events' reading (median) | excess | carried |")
print("|---|---|---|---|---|---|---|")
for ns in ("1000", "20000", "1000n"):
    for mode in ("carry", "pairs"):
        for rep in (1, 2):
            stem = "%s/%s-%s-%d" % (out, mode, ns, rep)
            span = json.load(open(stem + ".json"))["span_median_ns"]
            k = sorted((r for r in gsrec.gpu_records(stem + ".gsrec") if r["kind"] == 1),
                       key=lambda r: r["start"])[-300:]
            raw = statistics.median(r["end"] - r["start"] for r in k)
            print("| %s | %s | %d | %.0f | %.0f | %.0f | %d |" % (
                ns, mode, rep, span, raw, raw - span, sum(bool(r["flags"] & 128) for r in k)))
PY
rm -f $OUT/cp/*.gsrec $OUT/cp/carry_plane
