#!/bin/bash
# NCCL entry points that call each other count once (issue 22, d88c98b): PyTorch's
# dist.broadcast calls ncclBcast, which calls ncclBroadcast (an H100 run counted each
# broadcast twice). One rank (world size 1) on one GPU: 10 broadcasts and 10 all-reduces,
# traced by the uprobe plane and by --inject; the calls each op got in the JSON report.
# From the repository root on the GPU machine, carrying .output/static. Results in
# $OUT/nccl.json and $OUT/nccl-*.txt.
set -u
OUT=${OUT:-/tmp/gpuscope-nccl}
. bench/gpu_env.sh
w=$(mktemp -d)
cat >"$w/bc.py" <<'PY'
import os

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29541")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
x = torch.ones(1 << 20, device="cuda")
for _ in range(10):
    dist.broadcast(x, 0)
for _ in range(10):
    dist.all_reduce(x)
torch.cuda.synchronize()
dist.destroy_process_group()
print("nccl work done", float(x[0]))
PY
for mode in uprobes inject; do
	flags=$([ $mode = inject ] && echo --inject)
	"$GS" run $flags --no-os --json="$w/$mode.json" -- python3 "$w/bc.py" >"$OUT/nccl-$mode.txt" 2>&1
	echo "rc=$?" >>"$OUT/nccl-$mode.txt"
done
python3 - "$w" >"$OUT/nccl.json" <<'PY'
import json, os, sys
res = {"want": {"broadcast": 10, "all_reduce": 10}}
for mode in ("uprobes", "inject"):
    try:
        ops = json.load(open(os.path.join(sys.argv[1], mode + ".json")))["nccl"]["ops"]
        res[mode] = {k: v["calls"] for k, v in ops.items()}
    except Exception as e:
        res[mode] = "no report: %s" % e
print(json.dumps(res, indent=1))
PY
cat "$OUT/nccl.json"
