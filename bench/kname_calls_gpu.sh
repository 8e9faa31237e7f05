#!/bin/bash
# Which of the kernel-name entry points a training step calls, and how often (issue 22: the
# kernel plane's KNAME family, an entry and a return probe each, ran ~131 times a ResNet-50
# step, budget-2026-11-29/d1). A tracefs uprobe on each (no gpuscope), counted by the
# kernel (uprobe_profile) over STEPS steps after a warm-up, per workload. From the
# repository root on the GPU machine; root. Writes $OUT/kname-calls.txt.
set -u
OUT=${OUT:-/tmp/gpuscope-kname}
. bench/gpu_env.sh
T=/sys/kernel/tracing
for w in ${WORKLOADS:-resnet50 gpt2}; do
	python3 - "$w" "${STEPS:-20}" "$OUT/ready" "$OUT/go" "$OUT/done" <<'PY' &
import ctypes, os, sys, time
sys.path.insert(0, "bench")
import torch, workload
w, steps, ready, go, done = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
step = {"resnet50": workload.resnet50_step, "gpt2": workload.gpt2_step}[w]()
for _ in range(5):
    step()
torch.cuda.synchronize()
maps = [l.split() for l in open("/proc/self/maps") if len(l.split()) >= 6]
with open(ready + ".tmp", "w") as f:
    for lib, names in (("libcuda.so", ["cuLibraryGetKernel", "cuModuleGetFunction",
                                       "cuKernelGetFunction", "cuLibraryGetKernelCount",
                                       "cuModuleLoadData", "cuLibraryLoadData"]),
                       ("libcudart.so", ["__cudaGetKernel", "__cudaRegisterFunction"])):
        path = next((m[5] for m in maps if lib in m[5]), None)
        if not path:
            continue
        h = ctypes.CDLL(path)
        for n in names:
            try:
                a = ctypes.cast(getattr(h, n), ctypes.c_void_p).value
            except AttributeError:
                continue
            for m in maps:
                lo, hi = (int(x, 16) for x in m[0].split("-"))
                if m[5] == path and lo <= a < hi:
                    f.write("%s %s 0x%x\n" % (n, path, a - lo + int(m[2], 16)))
os.rename(ready + ".tmp", ready)
while not os.path.exists(go):
    time.sleep(0.05)
for _ in range(steps):
    step()
torch.cuda.synchronize()
open(done, "w").close()
PY
	pid=$!
	while [ ! -e "$OUT/ready" ]; do sleep 0.2; kill -0 $pid 2>/dev/null || break; done
	echo >"$T/uprobe_events"
	while read -r n path off; do
		echo "p:kn/$n $path:$off" >>"$T/uprobe_events"
	done <"$OUT/ready"
	echo 1 >"$T/events/kn/enable"
	touch "$OUT/go"
	wait $pid
	{ echo "== $w, ${STEPS:-20} steps"; cat "$T/uprobe_profile"; } >>"$OUT/kname-calls.txt"
	echo 0 >"$T/events/kn/enable"
	echo >"$T/uprobe_events"
	rm -f "$OUT/ready" "$OUT/go" "$OUT/done"
done
cat "$OUT/kname-calls.txt"
