#!/bin/sh
# The chaos suite's ring-overflow row on a machine of more cores (the CI machine's two
# cannot make 2 M launches a second and drain them too): the same check as
# tests/chaos/test_chaos.py::test_ring_overflow_counted_exactly, without pytest.
#
#   bench/chaos_overflow.sh GPUSCOPE OUTPUT_DIR ROWS.jsonl [SECONDS [THREADS]]
#
# GPUSCOPE: a gpuscope binary (the static one travels); OUTPUT_DIR: the build's .output
# (fakes/ and workloads/ are used: the test double stands for the CUDA driver). Each plane
# runs wl_driver's burst asked at 2 M launches/s, from THREADS threads (4); seen + dropped
# must equal made. A row per
# plane is appended to ROWS.jsonl (tests/chaos/table.py's format). Exit 1 if any differs.
set -eu
gs=$1 out=$2 rows=$3 secs=${4:-60} threads=${5:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
rc=0
for plane in uprobe inject; do
	case $plane in
	uprobe) opts="--buffer-size 4096" ;;
	inject) opts="--inject --buffer-size 65536" ;;
	esac
	# shellcheck disable=SC2086
	LD_LIBRARY_PATH="$out/fakes" GS_TRUTH="$tmp/truth.json" GPUSCOPE_NVML=/nonexistent \
		"$gs" run -q $opts --json="$tmp/r.json" -- "$out/workloads/wl_driver" \
		--seconds "$secs" --rate 2000000 --threads "$threads" 2>"$tmp/err" || { cat "$tmp/err"; rc=1; continue; }
	python3 - "$tmp/r.json" "$tmp/truth.json" "$rows" "$plane" "$secs" "$(nproc)" "$threads" <<'EOF' || rc=1
import json, sys, time
r, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
rows, plane, secs, cores, threads = sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), "?")
made = t["launches"]
seen = r["kernels"]["launches"]
dropped = r["drops"]["by_type"].get("launch", 0)
events = r["session"]["events"] + r["drops"]["total"]
ok = seen + dropped == made
print("%s: made %d, seen %d, dropped %d: %s" % (plane, made, seen, dropped,
                                                 "exact" if ok else "LOST %d" % (made - seen - dropped)))
with open(rows, "a") as f:
    f.write(json.dumps({
        "scenario": "ring overflow (another machine: %d cores, %s)" % (cores, cpu),
        "plane": plane,
        "tried": "launches asked at 2 M/s by %d threads for %d s%s" % (
            threads, secs, ", a 4 KiB kernel ring" if plane == "uprobe"
            else ", a 64 KiB in-process ring"),
        "times": 1, "made": made, "kept": seen + dropped, "lost": made - seen - dropped,
        "notes": "%.2f M launches/s, %.2f M records/s made; %d launches dropped and counted"
                 % (made / secs / 1e6, events / secs / 1e6, dropped),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
sys.exit(0 if ok else 1)
EOF
done
exit $rc
