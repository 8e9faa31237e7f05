#!/bin/bash
# What each mode of the in-process plane costs, inside one process (issue 22): between
# processes these machines vary 10-35%, which hides a cost of a few percent. Each of
# WORKLOADS runs under `gpuscope run --inject` with GPUSCOPE_AB_FILE (src/inject/ab.c),
# ROUNDS rounds of one window per mode of MODES, the order turned each round, PROCS
# processes each. "pass" is the plane forwarding every call untouched (what is left of the
# preload: a call through our wrapper); "profiler" a window under the PyTorch profiler
# (not for cloop). Prints, per workload and mode, each round's window against its "pass"
# window: median ratio (min-max) and the time added per iteration (one launch in tinyops,
# cupy and cloop). GPU_TIME=chained starts the processes with chains, which then time
# "pairs" (chains are not switched); GPU_TIME=pairs starts them with event pairs (graphs
# get twins then, for "pairs" windows; "all" is CUPTI's); GS_OPTS adds options of gpuscope's; PHASES=1 also times
# the parts of the launches' calls per mode (bench/phases_table.py, $OUT/phases.txt), and
# from them what each mode added to the launching threads' time an iteration
# ($OUT/iterations.txt). From
# the repository root, carrying .output/static.
#   OUT=/tmp/ab ROUNDS=9 PROCS=2 WORKLOADS="tinyops cloop" MODES=pass,off,10,all \
#     bash bench/inject_ab.sh
set -u
OUT=${OUT:-/tmp/gpuscope-inject-ab}
. bench/gpu_env.sh
MODES=${MODES:-pass,off,10,all,profiler}
WORKLOADS=${WORKLOADS:-tinyops cloop cupy resnet50 gpt2}
case " $WORKLOADS " in
*" cloop "*) nvcc -O2 -arch=sm_90 bench/cloop.cu -o "$OUT/cloop" >>"$OUT/machine.txt" 2>&1 ;;
esac
# The PyTorch profiler takes CUPTI from the plane for good (kernels then timed with pairs
# for the rest of the process): where MODES has CUPTI's modes (all, cupti) too, the
# profiler's windows run in processes of their own (numbered after the others), against
# their own pass windows.
plain=$(echo ",$MODES," | sed 's/,profiler,/,/g; s/,profcuda,/,/g; s/^,//; s/,$//')
sets=("$MODES")
if [ "$plain" != "$MODES" ] && echo ",$MODES," | grep -qE ',(all|cupti),'; then
	sets=("$plain" "pass$(echo ",$MODES," | grep -oE ',prof(iler|cuda)' | tr -d '\n')")
fi
for w in $WORKLOADS; do
	for ((k = 0; k < ${#sets[@]}; k++)); do
		for ((i = 1; i <= ${PROCS:-2}; i++)); do
			n=$((k * ${PROCS:-2} + i))
			f="$OUT/ab-$w-$n.mode"
			# (Not a mode: the process warms up as it started, and the parts' sums of the
			# warm-up go out under this word, not under a mode's. Until 2026-11-29 this
			# was "all", and "all" rows of PHASES had the warm-up in them.)
			echo warmup >"$f"
			if [ "$w" = cloop ]; then
				m=$(echo ",${sets[k]}," | sed 's/,profiler,/,/g; s/,profcuda,/,/g; s/^,//; s/,$//')
				[ "$m" = pass ] && continue
				cmd=("$OUT/cloop" --ab "$f" "$m" "$ROUNDS")
			else
				cmd=(python3 bench/workload.py "$w" --ab "$f" "${sets[k]}" "$ROUNDS")
			fi
			rm -f "$f.phases"
			# shellcheck disable=SC2086
			GPUSCOPE_AB_FILE=$f env ${PHASES:+GPUSCOPE_AB_PHASES=1} "$GS" run -q --inject --gpu-time="${GPU_TIME:-all}" ${GS_OPTS:-} --json="$OUT/$w-$n-report.json" -- \
				"${cmd[@]}" >"$OUT/$w-$n.json" 2>"$OUT/$w-$n.err"
			rm -f "$f" "$f.tmp"
		done
	done
done
python3 - "$OUT" $WORKLOADS <<'PY' | tee "$OUT/ab.txt"
import glob, json, os, statistics, sys
out = sys.argv[1]


def against_pass(windows):
    """Per mode: each round's window against that round's pass window."""
    rounds = {}
    for mode, sec, r in windows:
        rounds.setdefault(r, {})[mode] = sec
    modes = []
    for r in rounds.values():
        modes += [m for m in r if m not in modes]
    for m in modes:
        both = [(r[m], r["pass"]) for r in rounds.values() if m in r and "pass" in r]
        if both:
            yield m, both


print("| workload | process | mode | per iteration (median) | against pass: median (min-max) "
      "| added per iteration | rounds | the thread's CPU time against pass | CPU added |")
print("|---|---|---|---|---|---|---|---|---|")
for w in sys.argv[2:]:
    for path in sorted(glob.glob(os.path.join(out, w + "-[0-9]*.json"))):
        if path.endswith("-report.json"):
            continue
        lines = [l for l in open(path) if l.startswith("{")]
        if not lines:
            print("| %s | %s | failed | | | | | | |" % (w, os.path.basename(path)))
            continue
        d = json.loads(lines[-1])
        cpu = dict(against_pass(d.get("ab_cpu", [])))
        for m, both in against_pass(d["ab"]):
            ratio = [a / b for a, b in both]
            added = [1e9 * (a - b) for a, b in both]
            t = statistics.median(a for a, _ in both)
            c = cpu.get(m)
            cr = [a / b for a, b in c] if c else None
            print("| %s | %s | %s | %s | %.3fx (%.3f-%.3f) | %+.0f ns | %d | %s | %s |" % (
                w, os.path.basename(path)[:-5], m,
                "%.2f ms" % (1e3 * t) if t > 1e-3 else "%.3f us" % (1e6 * t), statistics.median(ratio),
                min(ratio), max(ratio), statistics.median(added), len(both),
                "%.3fx (%.3f-%.3f)" % (statistics.median(cr), min(cr), max(cr)) if cr else "",
                "%+.0f ns" % statistics.median(1e9 * (a - b) for a, b in c) if c else ""))
PY
if [ -n "${PHASES:-}" ]; then
	python3 bench/phases_table.py "$OUT"/ab-*.mode.phases | tee "$OUT/phases.txt"
	# shellcheck disable=SC2086
	python3 bench/phases_table.py --iterations "$OUT" $WORKLOADS | tee "$OUT/iterations.txt"
fi
