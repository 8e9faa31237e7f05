"""Thousands of short CUDA processes in one run (issue 19, defect 4): every one is in the
report, and what gpuscope holds stays bounded by the processes alive -- its memory flat,
its file descriptors and the in-process plane's shared memory with it -- under a limit of
256 descriptors. (Release build only: the sanitisers' quarantine is memory by design.)"""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

N = 5000
STOPS = (1000, 5000)

SCRIPT = """#!/bin/sh
# N runs of PROG --mini one after another; at each STOP, its count in PROGRESS and a wait
# for PROGRESS.go.STOP.
n=$1; prog=$2; progress=$3; shift 3
i=0
while [ $i -lt $n ]; do
	"$prog" --mini >/dev/null || exit 1
	i=$((i+1))
	for s in "$@"; do
		if [ $i -eq $s ]; then
			echo $i > "$progress.tmp" && mv "$progress.tmp" "$progress"
			while [ ! -e "$progress.go.$s" ]; do sleep 0.05; done
		fi
	done
done
"""


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def shm_used_kb():
    st = os.statvfs("/dev/shm")
    return (st.f_blocks - st.f_bfree) * st.f_frsize // 1024


def many_short_processes(gsr, tmp_path, plane, n, stops):
    """gpuscope run over a script that starts n `wl_driver --mini` one after another, under
    ulimit -n 256; at each stop, what gpuscope holds. Returns (report, {stop: held}, the
    time it took)."""
    script = tmp_path / "many.sh"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    progress = tmp_path / "progress"
    report = tmp_path / "report.json"
    opts = ["--inject"] if plane == "inject" else []
    cmd = ["run", "-q", "--json=%s" % report] + opts + [
        "--", str(script), str(n), gsr.wl("wl_driver"), str(progress)] + [str(s) for s in stops]
    shm0 = shm_used_kb()
    shm_before = set(os.listdir("/dev/shm"))
    t0 = time.time()
    p = subprocess.Popen(["sh", "-c", 'ulimit -n 256 && exec "$0" "$@"', gsr.binary] + cmd,
                         env=gsr.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    seen = {}
    try:
        for stop in stops:
            deadline = time.time() + 1200
            while not (progress.exists() and progress.read_text().strip() == str(stop)):
                assert p.poll() is None, p.communicate()[1][-3000:]
                assert time.time() < deadline, "the processes did not reach %d" % stop
                assert shm_used_kb() - shm0 < 512 << 10, "shared memory keeps growing"
                time.sleep(0.1)
            time.sleep(1.5)  # (the last ones' records drained and retired)
            seen[stop] = {"rss": status_kb(p.pid, "VmRSS"),
                          "fds": len(os.listdir("/proc/%d/fd" % p.pid)),
                          "shm": shm_used_kb() - shm0}
            (tmp_path / ("progress.go.%d" % stop)).touch()
        _, err = p.communicate(timeout=300)
    finally:
        try:  # (the script too: its processes would go on without gpuscope)
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if p.returncode is None:
            p.communicate()
        for d in set(os.listdir("/dev/shm")) - shm_before:  # (what a killed run left)
            if d.startswith("gpuscope-"):
                shutil.rmtree(os.path.join("/dev/shm", d), ignore_errors=True)
    assert p.returncode == 0, err[-3000:]
    return json.loads(report.read_text()), seen, time.time() - t0


@pytest.mark.parametrize("plane", ["uprobe", "inject"])
def test_five_thousand_short_processes(gsr, tmp_path, plane):
    r, seen, _ = many_short_processes(gsr, tmp_path, plane, N, STOPS)
    minis = [q for q in r["processes"] if q["comm"] == "wl_driver"]
    assert len(minis) == N
    odd = [{k: q.get(k) for k in ("pid", "launches", "exited", "exit_code", "allocs")}
           for q in minis if not (q["launches"] == 7 and q["exited"])]
    assert not odd, (len(odd), odd[:5])
    assert r["kernels"]["launches"] == 7 * N
    assert r["drops"]["total"] == 0
    first, last = seen[STOPS[0]], seen[STOPS[1]]
    assert abs(last["rss"] - first["rss"]) <= 10 << 10, seen
    assert last["fds"] <= first["fds"] + 8, seen
    assert last["shm"] <= 64 << 10, seen  # (a few rings of the processes alive at most)
