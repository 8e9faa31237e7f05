"""Timelines: Perfetto traces (decoded with protoc against tests/proto/perfetto_subset.proto)
and Chrome JSON traces of the test-double workloads."""
import collections
import json
import os

import pytest

from pftrace import Trace

GPU_ENV = {"FAKECUDA_KERNEL_NS": "200000", "FAKECUDA_GBPS": "1", "FAKECUDA_DEVICES": "2",
           "GPUSCOPE_FIRST_GATE_US": "20000", "GPUSCOPE_WATCHDOG_US": "10000"}  # (test_inject)


def traced(gs, tmp_path, workload, opts=(), env=None):
    pf, ch = tmp_path / "t.pftrace", tmp_path / "t.json"
    report, truth, _ = gs.trace(workload, opts=list(opts) + ["--perfetto", str(pf),
                                                             "--chrome", str(ch)],
                                env_extra=env)
    return report, truth, Trace(str(pf)), json.loads(ch.read_text())


def thread_slices(t, pid):
    return t.on(lambda tr: tr["kind"] == "thread" and tr["pid"] == pid)


def assert_apart(work):
    """One stream runs one thing at a time: no two slices of a track overlap."""
    by_track = collections.defaultdict(list)
    for s in work:
        by_track[s["track"]].append(s)
    for ss in by_track.values():
        ss.sort(key=lambda s: s["ts"])
        assert all(a["ts"] + a["dur"] <= b["ts"] for a, b in zip(ss, ss[1:]))


def gpu_slices(t):
    gpus = {u for u, tr in t.tracks.items() if tr["name"].startswith("GPU ")}
    return t.on(lambda tr: tr["parent"] in gpus)


def test_perfetto_cuda_calls_gpu_work_flows_and_counters(gs, tmp_path):
    report, truth, t, _ = traced(gs, tmp_path, ["wl_gputime", "--devices", "2"],
                                 ["--inject"], GPU_ENV)
    pid = report["session"]["target_pid"]
    # One process track named after the program, its thread under it.
    procs = [tr for tr in t.tracks.values() if tr["kind"] == "process"]
    assert [(p["pid"], p["name"]) for p in procs] == [(pid, "wl_gputime")]
    threads = [tr for tr in t.tracks.values() if tr["kind"] == "thread"]
    assert all(tr["parent"] == procs[0]["uuid"] and tr["pid"] == pid for tr in threads)
    # Every launch call is a slice on its thread, with its kernel's full name.
    calls = thread_slices(t, pid)
    launches = [s for s in calls if s["name"].startswith("cuLaunch")]
    assert len(launches) == report["kernels"]["launches"] == 27 + 15
    assert collections.Counter(s["args"]["kernel"] for s in launches) == {"busy": 27,
                                                                          "idle": 15}
    assert len([s for s in calls if s["name"] == "cuGraphLaunch"]) == 2
    # GPU work on its device's stream tracks: one slice per GPU record, none overlapping.
    assert sorted(tr["name"] for tr in t.tracks.values() if tr["name"].startswith("GPU ")) \
        == ["GPU 0", "GPU 1"]
    work = gpu_slices(t)
    assert len(work) == report["gpu"]["records"]
    kernels = collections.Counter(s["name"] for s in work if s["cat"] == "kernel")
    assert kernels == {"busy": 24, "idle": 15, "graph": 2}  # 3 captured launches never ran
    assert len([s for s in work if s["cat"] == "gpu_memcpy"]) == 1
    assert_apart(work)
    # The slices' durations are the report's: the idle kernel's 15 times, summed.
    idle = [k for k in report["kernels"]["list"] if k["name"] == "idle"][0]["gpu"]
    assert sum(s["dur"] for s in work if s["name"] == "idle") == idle["total_ns"]
    # A flow from each launch or copy call to its GPU work, and none dangling.
    out = {f: s for s in calls for f in s["flow_out"]}
    into = [f for s in work for f in s["flow_in"]]
    assert len(into) == len(work) and set(into) == set(out)
    for s in work:
        src = out[s["flow_in"][0]]
        assert src["ts"] <= s["ts"] and s["args"]["launching thread"] in (
            tr["tid"] for tr in threads)
    # Device memory in use as a counter of the process per GPU, in bytes, ending where the
    # report ends; its peak is the report's, and the workload's (device 1's memory was
    # allocated with its context set current, device 0's with its context pushed over it).
    p = report["processes"][0]
    per_dev = {d["device"]: d for d in p["devices"]}
    assert sorted(per_dev) == [0, 1]
    for dev in (0, 1):
        mem = [u for u, tr in t.tracks.items() if tr["name"] == "device memory in use (GPU %d)" % dev]
        assert len(mem) == 1 and t.tracks[mem[0]]["unit"] == "UNIT_SIZE_BYTES"
        assert t.tracks[mem[0]]["parent"] == procs[0]["uuid"]
        values = [v for _, v in sorted(t.counters[mem[0]])]
        assert values[-1] == per_dev[dev]["outstanding_bytes"] == truth["mem:dev%d:end" % dev]
        assert max(values) == per_dev[dev]["peak_bytes"] == truth["mem:dev%d:peak" % dev]
    assert p["peak_bytes"]["device"] == truth["mem:dev0:peak"] + truth["mem:dev1:peak"]
    # Copy bandwidth from the timed copy: bytes over its GPU time, then 0.
    bw = [u for u, tr in t.tracks.items() if tr["name"] == "copy HtoD GB/s"]
    copy = [s for s in work if s["cat"] == "gpu_memcpy"][0]
    assert sorted(t.counters[bw[0]]) == [(copy["ts"], (1 << 20) / copy["dur"]),
                                         (copy["ts"] + copy["dur"], 0.0)]


def test_perfetto_strings_are_interned_once(gsr, tmp_path):
    """A kernel launched 100 times has its name in the file once per string table."""
    report, truth, t, _ = traced(gsr, tmp_path, ["wl_driver"], ["--inject"])
    assert max(t.intern_counts.values()) == 1
    raw = (tmp_path / "t.pftrace").read_bytes()
    assert report["kernels"]["list"][0]["launches"] >= 100
    # As whole strings (length-prefixed): the name, and the argument. (A finding's text may
    # also name it, on a loaded machine, inside a longer string.)
    name = b"vecAdd(float const*, float const*, float*, int)"
    assert raw.count(bytes([len(name)]) + name) == 2
    assert t.intern_counts[("name", name.decode())] == 1
    assert t.intern_counts[("value", name.decode())] == 1


def test_perfetto_launch_instants_without_gpu_times(gs, tmp_path):
    """Kernel probes see launches, not GPU times: each launch that runs is an instant on a
    track of its stream; launches captured into a graph are not (they do not run)."""
    report, truth, t, _ = traced(gs, tmp_path, ["wl_driver"])
    assert not [tr for tr in t.tracks.values() if tr["name"].startswith("GPU ")]
    instants = [i for i in t.instants if i["cat"] == "kernel"]
    k = report["kernels"]
    assert len(instants) == k["launches"] - 3 + k["graph_launches"]  # (3 captured)
    assert all(t.tracks[i["track"]]["name"].startswith("launches on stream ") for i in instants)
    assert not gpu_slices(t)


def test_perfetto_nccl_track(gs, tmp_path):
    report, truth, t, _ = traced(gs, tmp_path, ["wl_nccl"])
    nccl = t.on(lambda tr: tr["name"] == "NCCL")
    calls = sum(v for k, v in truth.items() if k.startswith("nccl:") and k.endswith(":count"))
    assert len(nccl) == calls
    ar = [s for s in nccl if s["name"] == "all_reduce"]
    assert ar and all(s["cat"] == "collective_comm" and "comm" in s["args"] for s in ar)
    bad = [s for s in nccl if s["name"] == "broadcast" and "error" in s["args"]]
    assert [s["args"]["error"] for s in bad] == ["ncclInvalidArgument"]


def test_replayed_recording_gives_the_same_trace(gsr, tmp_path):
    rec, live = tmp_path / "t.gsrec", tmp_path / "live.pftrace"
    gsr.run(["run", "-q", "-o", str(rec), "--perfetto", str(live), "--chrome",
             str(tmp_path / "live.json"), "--inject", "--", gsr.wl("wl_gputime")],
            env=gsr.env(**GPU_ENV), check_rc=0)
    gsr.run(["report", str(rec), "--perfetto", str(tmp_path / "re.pftrace"), "--chrome",
             str(tmp_path / "re.json")], check_rc=0)
    assert (tmp_path / "re.pftrace").read_bytes() == live.read_bytes()
    assert (tmp_path / "re.json").read_bytes() == (tmp_path / "live.json").read_bytes()
    out = gsr.run(["report", str(rec), "--format", "chrome"], check_rc=0).stdout
    assert out.encode() == live.with_suffix(".json").read_bytes()


def test_output_by_extension(gsr, tmp_path):
    """-o FILE.pftrace writes a Perfetto trace, -o FILE.json a Chrome trace."""
    for name in ("x.pftrace", "x.json"):
        gsr.run(["run", "-q", "-o", str(tmp_path / name), "--", gsr.wl("wl_driver")],
                check_rc=0)
    assert Trace(str(tmp_path / "x.pftrace")).slices
    assert json.loads((tmp_path / "x.json").read_text())["traceEvents"]


def test_graph_kernels_by_cupti_on_the_timeline(gs, tmp_path):
    """--gpu-time=cupti: a graph's kernels are timed by the driver's records at every run,
    which no launch call of the program's is tied to: on their stream's track, with no flow
    in (none dangling either: the graph launch has none out), timed "by the driver's own
    timestamps"; the graph launches themselves are not timed as a whole."""
    report, truth, t, _ = traced(gs, tmp_path, ["wl_gputime", "--devices", "2"],
                                 ["--inject", "--gpu-time=cupti"], GPU_ENV)
    pid = report["session"]["target_pid"]
    work = gpu_slices(t)
    assert len(work) == report["gpu"]["records"]
    kernels = collections.Counter(s["name"] for s in work if s["cat"] == "kernel")
    assert kernels == {"busy": 24 + 2 * 3, "idle": 15}, kernels
    in_graphs = [s for s in work if "launching thread" not in s["args"]]
    assert len(in_graphs) == 6 and all(s["name"] == "busy" and not s["flow_in"]
                                       for s in in_graphs)
    assert all("CUPTI" in s["args"]["timing"] for s in work if s["cat"] == "kernel")
    calls = thread_slices(t, pid)
    out = {f for s in calls for f in s["flow_out"]}
    into = [f for s in work for f in s["flow_in"]]
    assert len(into) == len(work) - 6 and set(into) == out
    # (Records come later than a copy's pair after them: each still on its own time.)
    assert_apart(work)
    idle = [k for k in report["kernels"]["list"] if k["name"] == "idle"][0]["gpu"]
    assert sum(s["dur"] for s in work if s["name"] == "idle") == idle["total_ns"]


def test_chrome_trace(gs, tmp_path):
    report, truth, t, ch = traced(gs, tmp_path, ["wl_gputime", "--devices", "2"],
                                  ["--inject"], GPU_ENV)
    ev = ch["traceEvents"]
    assert ch["displayTimeUnit"] == "ns"
    xs = [e for e in ev if e["ph"] == "X"]
    assert len(xs) == len(t.slices)
    assert all(e["dur"] >= 0 and isinstance(e["ts"], float) for e in xs)
    # GPU work as the PyTorch profiler lays it out: pid = device, a tid per stream.
    gpu = [e for e in xs if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert sorted({e["pid"] for e in gpu}) == [0, 1]
    names = {(e["pid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and
             e["name"] == "process_name"}
    assert (0, "GPU 0") in names and (1, "GPU 1") in names
    assert (report["session"]["target_pid"], "wl_gputime") in names
    # Launch-to-kernel flows: every "f" has its "s", on the kernel's start.
    s = {e["id"]: e for e in ev if e["ph"] == "s"}
    f = [e for e in ev if e["ph"] == "f"]
    assert len(f) == len(gpu) and all(e["id"] in s and e["bp"] == "e" for e in f)
    assert {e["cat"] for e in f} == {"ac2g"}
    counters = [e for e in ev if e["ph"] == "C" and e["name"] == "device memory in use (GPU 0)"]
    assert counters[-1]["args"]["value"] == truth["mem:dev0:end"]
    assert max(e["args"]["value"] for e in counters) == truth["mem:dev0:peak"]


def test_trace_output_errors(gsr, tmp_path):
    p = gsr.run(["run", "--perfetto", str(tmp_path / "no" / "such" / "dir.pftrace"), "--",
                 "true"])
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "gpuscope: cannot write the trace to '%s': No such file or directory"
        % (tmp_path / "no" / "such" / "dir.pftrace")]
    p = gsr.run(["run", "--perfetto", str(tmp_path / "a"), "--chrome", str(tmp_path / "a"),
                 "--", "true"])
    assert p.returncode == 2 and "cannot both go to" in p.stderr
    rec = tmp_path / "r.gsrec"
    gsr.run(["run", "-q", "-o", str(rec), "--", gsr.wl("wl_driver")], check_rc=0)
    p = gsr.run(["report", str(rec), "-o", str(tmp_path / "x.pftrace")])
    assert p.returncode == 1 and "--perfetto OUT" in p.stderr
    p = gsr.run(["report", str(rec), "--format", "chrome", "--json"])
    assert p.returncode == 1 and "not with --chrome or --json" in p.stderr
    # A damaged recording still gives a trace of what it holds, and says so.
    data = rec.read_bytes()
    cut = tmp_path / "cut.gsrec"
    cut.write_bytes(data[:len(data) // 2])
    p = gsr.run(["report", str(cut), "--perfetto", str(tmp_path / "cut.pftrace")])
    assert p.returncode == 2
    assert Trace(str(tmp_path / "cut.pftrace")).slices


@pytest.mark.parametrize("fmt", ["perfetto", "chrome"])
def test_trace_of_a_program_without_cuda(gsr, tmp_path, fmt):
    """(A 20 ms sleep: at least its system call and its time off the CPU.)"""
    out = tmp_path / ("t." + ("pftrace" if fmt == "perfetto" else "json"))
    gsr.run(["run", "-q", "--" + fmt, str(out), "--", "sleep", "0.02"], check_rc=0)
    # The OS plane's slices only (system calls, off-CPU time): no CUDA.
    if fmt == "perfetto":
        cats = {s["cat"] for s in Trace(str(out)).slices}
    else:
        cats = {e["cat"] for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"}
    assert cats and cats <= {"syscall", "off_cpu", "block_io"}
    assert os.path.getsize(out) > 0


def test_nvml_counters_on_the_gpu_tracks(gs, tmp_path):
    """NVML samples (the double's scripted values) become counters of each GPU, once a
    second, in both formats; --no-nvml leaves them out."""
    script = tmp_path / "nvml.script"
    script.write_text("gpus 2\ngpu0.util 42\ngpu0.mem_used 1073741824\ngpu0.power_mw 312500\n"
                      "gpu0.temp 61\ngpu0.sm_clock 1980\ngpu0.sm_active 55\ngpu1.util 7\n"
                      "gpu1.gpm 0\n")
    env = dict(GPUSCOPE_NVML=os.path.join(gs.fakes, "libnvidia-ml.so.1"),
               FAKENVML_SCRIPT=str(script))
    report, truth, t, ch = traced(gs, tmp_path, ["wl_driver"], ["--stacks", "off"],
                                  env)
    by_name = {t.tracks[u]["name"]: [v for _, v in sorted(c)] for u, c in t.counters.items()}
    util = by_name["GPU 0 utilization %"]
    assert len(util) >= 1 and set(util) == {42}
    assert set(by_name["GPU 0 memory used"]) == {1 << 30}
    assert set(by_name["GPU 0 power W"]) == {312.5}
    assert set(by_name["GPU 1 utilization %"]) == {7}
    assert "GPU 1 SM active" not in by_name  # (no GPM on GPU 1)
    gpu0 = [u for u, tr in t.tracks.items() if tr["name"] == "GPU 0"]
    mem = [u for u, tr in t.tracks.items() if tr["name"] == "GPU 0 memory used"][0]
    assert t.tracks[mem]["parent"] == gpu0[0] and t.tracks[mem]["unit"] == "UNIT_SIZE_BYTES"
    cs = [e for e in ch["traceEvents"] if e["ph"] == "C" and e["name"] == "GPU 0 utilization %"]
    assert cs and all(e["pid"] == 0 and e["args"]["value"] == 42 for e in cs)
    _, _, t2, _ = traced(gs, tmp_path, ["wl_driver"], ["--stacks", "off", "--no-nvml"],
                         env)
    assert not [tr for tr in t2.tracks.values() if tr["name"].startswith("GPU 0 util")]
