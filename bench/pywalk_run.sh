# shellcheck shell=bash
# Sourced by the benchmarks that read the kernel probes' statistics while bench/pywalk.py
# waits (bench/launch_parts_gpu.sh, bench/uprobe_cost_gpu.sh). pywalk_run BIN: BIN (a
# gpuscope) runs pywalk.py's $N launches at Python depth 1 in the background, and this
# returns once they are done (or the run ended early); the run's pid in $pid, for a wait.
pywalk_run() {
	rm -f "$OUT/ready"
	"$1" run -q --json=/dev/null -- python3 bench/pywalk.py "$N" 1 "$OUT/ready" &
	pid=$!
	while [ ! -e "$OUT/ready" ]; do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
}
