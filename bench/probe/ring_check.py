"""Checks `gpuscope probe --records 0 ringbuf.bpf.o -- kernels check` output
(bench/probe_gpu.sh ring): one record per block of every kernel in ring `blocks`, none
dropped, SMs below the device's count; in ring `warps`, records plus drops equal to
vector_add's warps. Prints what it found, exits 1 if a check failed."""
import collections
import re
import sys

text = open(sys.argv[1]).read()
sms = int(sys.argv[2]) if len(sys.argv) > 2 else 132
rings, cur = {}, None
for ln in text.splitlines():
    m = re.match(r"ring buffer (\w+) ", ln)
    if m:
        cur = rings.setdefault(m.group(1), {"recs": [], "n": None, "drops": None})
        continue
    f = ln.split()
    if cur is not None and len(f) == 7 and re.match(r"\d+\.\d+$", f[0]):
        w = [int(x, 16) for x in f[4:]]
        cur["recs"].append((float(f[0]), w[0] & 0xffffffff, w[0] >> 32, w[1] & 0xffffffff,
                            w[2]))
    m = re.match(r"\s+(\d+) records?, (\d+) dropped", ln)
    if m and cur is not None:
        cur["n"], cur["drops"] = int(m.group(1)), int(m.group(2))
ok = True


def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)


b = rings.get("blocks")
check(b is not None, "ring 'blocks' is in the output")
if b:
    per_kernel = collections.defaultdict(collections.Counter)
    for t, k, blk, sm, launch in b["recs"]:
        per_kernel[k][blk] += 1
    sizes = sorted(len(c) for c in per_kernel.values())
    check(sizes == [1] + [1024] * 6, "blocks per kernel %s (want tiny's 1 and 6 x 1024)" % sizes)
    check(all(n == 1 for c in per_kernel.values() for n in c.values()),
          "each block wrote exactly once")
    check(b["drops"] == 0 and b["n"] == len(b["recs"]),
          "%d records, %d dropped" % (b["n"], b["drops"]))
    used = {sm for _, _, _, sm, _ in b["recs"]}
    check(max(used) < sms, "SM ids 0..%d, %d SMs used (device has %d)" % (max(used), len(used), sms))
    ts = [r[0] for r in b["recs"]]
    check(0 < min(ts) <= max(ts) < 120, "times %.6f..%.6f s into the run" % (min(ts), max(ts)))
    launches = {r[4] for r in b["recs"]}
    check(len(launches) == 7, "7 launches seen (%s)" % sorted(launches))
w = rings.get("warps")
check(w is not None, "ring 'warps' is in the output")
if w:
    check(w["n"] + w["drops"] == 1024 * 256 // 32,
          "warps: %d records + %d dropped = %d (vector_add has 8192 warps)"
          % (w["n"], w["drops"], w["n"] + w["drops"]))
    check(len({(r[2], r[3]) for r in w["recs"]}) <= w["n"], "records distinct per block")
sys.exit(0 if ok else 1)
