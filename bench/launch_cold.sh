#!/bin/bash
# What one launch call gains under the in-process plane's modes when the program's work
# between launches has evicted the plane's data (bench/launch_cold.c), for one or more
# builds of gpuscope compared side by side: PROCS processes per build and sweep, the builds'
# processes interleaved (A B A B ...), each process ROUNDS rounds of one window per mode of
# MODES (ab.c), the order turned each round. Per build, sweep and mode: each round's window
# against that round's "pass" window (added ns a launch, by the means of the windows'
# middle 80% of calls and by their means), median (min-max) over all rounds of all
# processes.
# From the repository root; on a GPU machine, or here on the test double
# (LD_LIBRARY_PATH=.output/fakes). BUILDS: a space-separated list of gpuscope binaries
# (default .output/static/gpuscope). On a GPU the driver's call varies between windows by
# more than the plane adds (0.5-1 us on the H200 guests): PHASES=1 times the plane's own
# parts of each call too (ab.c), and a second table gives per build the wrapper's time less
# the driver's call ("ours"), per process, which that noise does not reach (its own
# readings, ~20-35 ns each, included). PAGES (default 0): a line in each of that many pages
# touched between launches as well (launch_cold.c), which empties the TLB, not the caches.
#   OUT=/tmp/lc BUILDS=".output/static/gpuscope /tmp/old/gpuscope" SWEEPS="0 1024 8192" \
#     PROCS=3 ROUNDS=7 bash bench/launch_cold.sh
set -u
OUT=${OUT:-/tmp/gpuscope-launch-cold}
BUILDS=${BUILDS:-.output/static/gpuscope}
SWEEPS=${SWEEPS:-0 1024 8192}
MODES=${MODES:-pass,off}
PROCS=${PROCS:-3}
ROUNDS=${ROUNDS:-7}
N=${N:-4000}
mkdir -p "$OUT"
LIBS=${LD_LIBRARY_PATH:+-L$LD_LIBRARY_PATH}
# shellcheck disable=SC2086
gcc -O2 -Itests/fakes bench/launch_cold.c -o "$OUT/launch_cold" $LIBS -lcuda ||
	exit 1
for s in $SWEEPS; do
	for ((i = 1; i <= PROCS; i++)); do
		b=0
		for gs in $BUILDS; do
			b=$((b + 1))
			f="$OUT/ab-$s-$b-$i.mode"
			echo pass >"$f"
			GPUSCOPE_AB_FILE=$f env ${PHASES:+GPUSCOPE_AB_PHASES=1} "$gs" run -q --inject --gpu-time=off -o "$OUT/rec" -- \
				"$OUT/launch_cold" "$f" "$MODES" "$ROUNDS" "$N" "$s" "${PAGES:-0}" \
				>"$OUT/cold-$s-$b-$i.json" 2>"$OUT/cold-$s-$b-$i.err"
			rm -rf "$f" "$f.tmp" "$OUT/rec"
			[ -f "$f.phases" ] && mv "$f.phases" "$OUT/phases-$s-$b-$i"
		done
	done
done
k=0
for gs in $BUILDS; do echo "build $((++k)): $("$gs" --version)"; done | tee "$OUT/builds.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/cold.txt"
import glob, json, os, re, statistics, sys

out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "cold-*.json"))):
    s, b, _ = re.match(r"cold-(\d+)-(\d+)-(\d+)\.json", os.path.basename(path)).groups()
    lines = [l for l in open(path) if l.startswith("{") and l.rstrip().endswith("}")]
    if not lines:
        print("%s: no result (%s)" % (path, open(path[:-5] + ".err").read().strip()[-200:]))
        continue
    rounds = {}
    for w in json.loads(lines[-1])["windows"]:
        rounds.setdefault(w["round"], {})[w["mode"]] = w
    for r in rounds.values():
        for m, w in r.items():
            e = rows.setdefault((int(s), int(b), m), {"tmean": [], "mean": [], "abs": []})
            e["abs"].append(w["tmean"])
            if "pass" in r:
                e["tmean"].append(w["tmean"] - r["pass"]["tmean"])
                e["mean"].append(w["mean"] - r["pass"]["mean"])


def mmm(v):
    return "%+.0f (%+.0f..%+.0f)" % (statistics.median(v), min(v), max(v)) if v else ""


print("| sweep KiB | build | mode | windows | call ns (the middle 80%'s mean, median) "
      "| added a launch: by the middle 80%'s means | by means |")
print("|---|---|---|---|---|---|---|")
for (s, b, m), e in sorted(rows.items()):
    print("| %d | %d | %s | %d | %.0f | %s | %s |" % (
        s, b, m, len(e["abs"]), statistics.median(e["abs"]), mmm(e["tmean"]), mmm(e["mean"])))
sys.path.insert(0, "bench")
import phases_table  # noqa: E402

parts = {}
for path in sorted(glob.glob(os.path.join(out, "phases-*"))):
    s, b, _ = re.match(r"phases-(\d+)-(\d+)-(\d+)$", os.path.basename(path)).groups()
    for m, sums in phases_table.read(path).items():
        launches, ours, _ = phases_table.per_launch(sums)
        if launches and m != "pass":
            e = parts.setdefault((int(s), int(b), m), {"ours": [], "emit": [], "stack": []})
            e["ours"].append(ours)
            e["emit"].append(sums["emit"][1] / launches)
            e["stack"].append(sums["stack"][1] / launches)
if parts:
    print()
    print("| sweep KiB | build | mode | processes | ours a launch, ns: median (min-max) "
          "| of it the record | the stack part |")
    print("|---|---|---|---|---|---|---|")
    for (s, b, m), e in sorted(parts.items()):
        print("| %d | %d | %s | %d | %.0f (%.0f-%.0f) | %.0f | %.0f |" % (
            s, b, m, len(e["ours"]), statistics.median(e["ours"]), min(e["ours"]),
            max(e["ours"]), statistics.median(e["emit"]), statistics.median(e["stack"])))
PY
