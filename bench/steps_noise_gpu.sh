#!/bin/bash
# Issue 22's training-step targets read against the machine's own noise, in one device
# call: ResNet-50 and GPT-2 training steps inside one process (bench/inject_ab.sh), ROUNDS
# (default 21) rounds of MODES (default pass,pass2,off,10,all; pass2 is a second untraced
# control: its windows against pass's show how far two windows of one mode differ here),
# then the kernel uprobes attached and detached in turn (bench/attach_ab.py, ATTACH_ROUNDS
# rounds of ATTACH_S seconds, for ATTACH). From the repository root, carrying
# .output/static; root.
#   OUT=/tmp/sn bash bench/steps_noise_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuscope-steps-noise}
ROUNDS=${ROUNDS:-21}
. bench/gpu_env.sh
export ROUNDS
OUT=$OUT/inject WORKLOADS=${WORKLOADS:-resnet50 gpt2} MODES=${MODES:-pass,pass2,off,10,all} \
	PROCS=1 timeout "${AB_S:-300}" bash bench/inject_ab.sh >/dev/null 2>&1
cat "$OUT/inject/ab.txt"
mkdir -p "$OUT/uprobes"
for w in ${ATTACH:-resnet50 gpt2}; do
	timeout "${ATTACH_TIMEOUT:-150}" python3 bench/attach_ab.py run "$GS" "$OUT/uprobes" "$w" \
		"${ATTACH_ROUNDS:-7}" "${ATTACH_S:-5}" >>"$OUT/uprobes/attach.txt" \
		2>>"$OUT/uprobes/stderr.txt"
done
cat "$OUT/uprobes/attach.txt"
rm -f "$OUT/uprobes"/*.log
