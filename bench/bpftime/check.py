"""What bench/device_gpu.sh's probe left, against what vec_add's launches imply:
    check.py ABI.json PLAIN.out PROBE.txt LAUNCHES GRID BLOCK
prints a JSON verdict per map and helper (want, got, ok)."""
import json
import struct
import sys


def main():
    js, plain, probed = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), \
        open(sys.argv[3]).read()
    launches, grid, block = map(int, sys.argv[4:7])
    threads = grid * block
    by = {m["name"]: m for m in js["maps"]}
    out = {}

    def one(name, want, got):
        out[name] = {"want": want, "got": got, "ok": want == got}

    def entries(name):
        ctx = by[name]["contexts"]
        return ctx[0]["entries"] if ctx else []

    line = [ln for ln in plain.splitlines() if ln.startswith("vec_add:")]
    one("output unchanged", line, [ln for ln in probed.splitlines() if ln.startswith("vec_add:")])
    # the kernel's printf, reading the program's d_N and scale (set by cudaMemcpyToSymbol)
    said = "vectorAdd: N %d, scale 2.0" % threads
    one("kernel's printf lines, plain", [said] * launches,
        [ln for ln in plain.splitlines() if ln.startswith("vectorAdd:")])
    one("kernel's printf lines, probed", [said] * launches,
        [ln for ln in probed.splitlines() if ln.startswith("vectorAdd:")])
    one("every launch instrumented", True,
        "%d launches ran instrumented, 0 the original code" % launches in probed)
    calls = {e["key"]: e["threads"] for e in entries("calls")}
    # 1502: every thread's slot of key 0 counts its launches, of key 1 ten times that
    one("1502 threads with calls", threads, len(calls.get(0, {})))
    one("1502 key 0 per thread", [launches], sorted(set(calls.get(0, {}).values())))
    one("1502 key 1 per thread", [10 * launches], sorted(set(calls.get(1, {}).values())))
    lanes = {e["key"]: e["threads"] for e in entries("lanes")}.get(0, {})
    one("1512 lane of each thread", True,
        all(v == int(t) % 32 for t, v in lanes.items()) and len(lanes) == threads - threads // 32)
    counts = {e["key"]: e["value"] for e in entries("counts")}
    one("1503 atomic count = grid x block x launches", threads * launches, counts.get(0))
    where = {e["key"]: e["value"] for e in entries("where")}
    one("1513 an SM id and a warp id were written", True, 0 in where or 1 in where)
    blocks = {e["key"]: e["value"] for e in entries("blocks")}
    one("1501 block x -> grid x", {b: grid for b in range(grid)}, blocks)
    ev = by["events"]
    recs = [struct.unpack("<3Q", bytes.fromhex(r["data"])) for r in ev["records"]]
    one("1527 records + drops = threads x launches", threads * launches,
        len(recs) + ev["drops"])
    pids = {r[0] for r in recs}
    one("14 pid_tgid: the process in both halves", True,
        len(pids) == 1 and all(p >> 32 == p & 0xffffffff for p in pids))
    one("512 device ordinal", [0], sorted({r[1] for r in recs}))
    xs = {}
    for r in recs:
        xs[r[2]] = xs.get(r[2], 0) + 1
    one("1527 one record per thread and launch (thread x + y*bx over one block)",
        {x: launches * grid for x in range(block)} if not ev["drops"] else "drops",
        xs if not ev["drops"] else "drops")
    out["drops"] = ev["drops"]
    pr = by.get("gs_print", {"records": [], "drops": 0})
    texts = sorted({r["text"] for r in pr["records"]})
    # cuda__print: thread 5 of block 2 prints two lines and puts one, at each exit
    one("6/501 lines printed", 3 * launches, len(pr["records"]) + pr["drops"])
    one("6/501 their text", ["-7  |00ab|q|%", "done %d"],
        [t for t in texts if not t.startswith("block 2 thread 5 on SM ")])
    one("6 with the SM id", True, any(t.startswith("block 2 thread 5 on SM ") for t in texts))
    out["all_ok"] = all(v["ok"] for v in out.values() if isinstance(v, dict))
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
