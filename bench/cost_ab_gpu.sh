#!/bin/bash
# Issue 22's cost table, every figure from inside one process (between processes the lent
# GPU machines vary 10-35%): bench/inject_ab.sh for the in-process plane's modes ("all":
# every kernel by CUPTI, the default; "pairs": by event pairs), the PyTorch profiler (in
# processes of its own: it takes CUPTI for good) and "pass2", a second untraced window a
# round, whose ratio to "pass" is the noise floor a cost is read against; bench/attach_ab.py
# for the kernel uprobes (attached and detached in turn). From the repository root on the
# GPU machine, carrying .output/static; root.
#   OUT=/tmp/cost PART=loops bash bench/cost_ab_gpu.sh   # tiny ops, CuPy, the C loop (~7 min)
#   OUT=/tmp/cost PART=steps bash bench/cost_ab_gpu.sh   # ResNet-50, GPT-2 (~9 min)
#   OUT=/tmp/cost PART=gpusteps bash bench/cost_ab_gpu.sh   # the same bound by the GPU (~6 min)
# ROUNDS (default 41 for the loops, 81 for the steps): a loop's window is 20,000 launches
# (80-200 ms), a step's one step (AB_ITERS=1); until 2026-11-30 the loops ran 7 rounds,
# whose medians moved by more than the targets' margins between runs (pass2 against pass:
# 0.72-1.55x a window). On these guests two steps next to each other differ by less than
# two windows of 8 steps a second apart (bench/step_noise.py: GPT-2, 3.6% against 10.7%),
# so one-step windows decide in a minute what 8-step windows did not in five
# (cost-2026-11-30c.md). Their batches (64, 8) leave these guests' steps bound by the
# launching threads, where every host-side ns shows; PART=gpusteps runs batches of 256 and 32
# (WORKLOAD_BATCH), steps bound by the GPU, where it hides: 31 rounds, the uprobes 5. Writes $OUT/cost.txt: per workload and mode, the median over processes of each
# process's median ratio to its untraced ("pass") windows, the time added per iteration,
# and the same ratio of the loop thread's CPU time (what the guest's host stole is not in
# it).
set -u
OUT=${OUT:-/tmp/gpuscope-cost-ab}
PART=${PART:-loops}
if [ "$PART" = steps ]; then
	ROUNDS=${ROUNDS:-81} UPROBE_ROUNDS=7
elif [ "$PART" = gpusteps ]; then
	ROUNDS=${ROUNDS:-31} UPROBE_ROUNDS=5
else
	ROUNDS=${ROUNDS:-41}
fi
. bench/gpu_env.sh
export ROUNDS
if [ "$PART" = steps ] || [ "$PART" = gpusteps ]; then
	export AB_ITERS=${AB_ITERS:-1}
	for w in resnet50 gpt2; do
		if [ "$PART" = gpusteps ]; then
			WORKLOAD_BATCH=256
			[ $w = gpt2 ] && WORKLOAD_BATCH=32
			export WORKLOAD_BATCH
		fi
		OUT=$OUT/inject-$w WORKLOADS=$w MODES=pass,pass2,off,10,all,profiler PROCS=1 \
			timeout 230 bash bench/inject_ab.sh >/dev/null 2>&1
		mkdir -p "$OUT/uprobes"
		timeout 100 python3 bench/attach_ab.py run "$GS" "$OUT/uprobes" $w "$UPROBE_ROUNDS" 3 \
			>"$OUT/uprobes/attach-$w.txt" 2>"$OUT/uprobes/stderr-$w.txt"
	done
else
	OUT=$OUT/inject WORKLOADS="tinyops cupy" MODES=pass,pass2,off,10,pairs,all,profiler PROCS=1 \
		timeout 260 bash bench/inject_ab.sh >/dev/null 2>&1
	OUT=$OUT/cloop WORKLOADS=cloop MODES=pass,pass2,off,10,pairs,all PROCS=1 \
		timeout 60 bash bench/inject_ab.sh >/dev/null 2>&1
	mkdir -p "$OUT/uprobes"
	timeout 130 python3 bench/attach_ab.py run "$GS" "$OUT/uprobes" tinyops 13 3 \
		>"$OUT/uprobes/attach-tinyops.txt" 2>"$OUT/uprobes/stderr-tinyops.txt"
fi
rm -f "$OUT/uprobes"/*.log
python3 bench/cost_table.py "$OUT" | tee "$OUT/cost.txt"
