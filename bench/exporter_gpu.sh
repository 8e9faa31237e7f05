#!/bin/sh
# gpuscope exporter on a GPU machine while PyTorch trains (the issue's proof). Writes into
# $OUT: the agent's /metrics once a second (metrics-N.txt), nvidia-smi's readings at the same
# rate (smi.csv), the workload's facts, and the agent's own CPU/RSS from /proc.
#
#   OUT=dir sh bench/exporter_gpu.sh [SECONDS] [GPUSCOPE]
set -u
SECS=${1:-30}
G=${2:-.output/static/gpuscope}
PY=${PY:-/opt/torch/.venv/bin/python3}
PORT=19491
mkdir -p "$OUT"
$G exporter --listen 127.0.0.1:$PORT --interval 1 2> "$OUT/exporter.log" &
AGENT=$!
sleep 2
curl -s 127.0.0.1:$PORT/metrics > "$OUT/metrics-idle.txt"
nvidia-smi --query-gpu=index,timestamp,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu,clocks.sm,clocks.mem,pstate --format=csv,nounits -lms 1000 > "$OUT/smi.csv" &
SMI=$!
# A training loop of the size the tests use: ResNet-50 steps for SECS seconds.
$PY - "$SECS" > "$OUT/facts.json" 2> "$OUT/train.err" <<'PYEOF' &
import json, sys, time, os
import torch, torchvision
secs = float(sys.argv[1])
m = torchvision.models.resnet50().cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(64, 3, 224, 224, device="cuda")
y = torch.randint(0, 1000, (64,), device="cuda")
steps, t0 = 0, time.time()
while time.time() - t0 < secs:
    opt.zero_grad(); torch.nn.functional.cross_entropy(m(x), y).backward(); opt.step()
    steps += 1
    if steps == 5:
        torch.cuda.synchronize()
        facts = {"pid": os.getpid(), "reserved": torch.cuda.memory_reserved()}
torch.cuda.synchronize()
facts.update(steps=steps, seconds=time.time() - t0, max_reserved=torch.cuda.max_memory_reserved())
print(json.dumps(facts))
PYEOF
TRAIN=$!
i=0
while kill -0 $TRAIN 2>/dev/null; do
  curl -s -o "$OUT/metrics-$i.txt" 127.0.0.1:$PORT/metrics
  grep -E "^(VmRSS|VmHWM)" /proc/$AGENT/status | tr '\n' ' ' >> "$OUT/agent-status.txt"
  awk '{print " utime", $14, "stime", $15}' /proc/$AGENT/stat >> "$OUT/agent-status.txt"
  i=$((i + 1))
  sleep 1
done
sleep 2
curl -s 127.0.0.1:$PORT/metrics > "$OUT/metrics-after.txt"
# where the agent's resident memory is: private vs file-backed, and by mapping
cat /proc/$AGENT/smaps_rollup > "$OUT/agent-smaps-rollup.txt"
awk '/^[0-9a-f]+-[0-9a-f]+ /{f=($6==""?"[anon]":$6)} /^Rss:/{r[f]+=$2} END{for(f in r) if(r[f]>=64) printf "%8d kB %s\n", r[f], f}' \
	/proc/$AGENT/smaps | sort -rn > "$OUT/agent-rss-by-mapping.txt"
kill $SMI
kill -TERM $AGENT
wait $AGENT
echo "exporter exit: $?" >> "$OUT/exporter.log"
getconf CLK_TCK > "$OUT/clk_tck.txt"
# (the device tool brings back a limited number of files)
tar -C "$OUT" -czf "$OUT/metrics.tar.gz" $(cd "$OUT" && ls metrics-[0-9]*.txt) && rm -f "$OUT"/metrics-[0-9]*.txt
