"""Call stacks of launches, allocations and failed calls: captured by the return probes,
named while the process lives (symbol records in the stream), folded for flame graphs,
attached to the calls' slices in traces."""
import json

from pftrace import Trace


def folded(text):
    out = {}
    for line in text.splitlines():
        stack, count = line.rsplit(" ", 1)
        out[stack] = int(count)
    return out


def test_known_call_chain(gs, tmp_path):
    out, pf = tmp_path / "s.folded", tmp_path / "s.pftrace"
    gs.run(["run", "-q", "--stacks", "1", "--folded", str(out), "--perfetto", str(pf), "--",
            gs.wl("wl_stack")], check_rc=0)
    lines = folded(out.read_text())
    chain = ";main;outer;middle;inner;"
    launch = [s for s in lines if s.endswith(chain + "cuLaunchKernel;leafKernel")]
    failed = [s for s in lines if s.endswith(chain + "cuMemAlloc_v2")]
    assert len(launch) == 1 and lines[launch[0]] == 1, lines
    assert len(failed) == 1 and lines[failed[0]] == 1, lines
    assert all(s.startswith("wl_stack;") for s in lines)
    # On the trace: the calls' slices carry their stacks, innermost first.
    t = Trace(str(pf))
    stacks = {s["name"]: s["args"]["stack"] for s in t.slices if "stack" in s["args"]}
    assert stacks["cuLaunchKernel"].startswith("inner\nmiddle\nouter\nmain")
    assert stacks["cuMemAlloc_v2"].startswith("inner\nmiddle\nouter\nmain")


def test_in_process_plane_unwinds(gs, tmp_path):
    """--inject: the library takes the stacks with the unwinder (call frame information, not
    frame pointers), down to the program's entry: by its kept rules, not by backtrace()
    (src/inject/unwind.c; what it does not keep, tests/unit/test_unwind.c)."""
    out = tmp_path / "i.folded"
    p = gs.run(["run", "-q", "--inject", "--stacks", "1", "--folded", str(out), "--",
                gs.wl("wl_stack")], env=gs.env(GPUSCOPE_UNWIND_VERIFY=1), check_rc=0)
    said = [l for l in p.stderr.splitlines() if "gpuscope-inject: " in l]
    assert len(said) == 2 and said[0].endswith(", 0 by backtrace()"), p.stderr
    assert int(said[0].split("stacks: ")[1].split()[0]) >= 2, said
    assert said[1] == "gpuscope-inject: unwind: 0 of those by the rules not as by backtrace()"
    lines = folded(out.read_text())
    chain = ";main;outer;middle;inner;"
    assert [c for s, c in lines.items() if s.endswith(chain + "cuLaunchKernel;leafKernel")
            and s.startswith("wl_stack;_start;")] == [1], lines
    assert [c for s, c in lines.items() if s.endswith(chain + "cuMemAlloc_v2")] == [1], lines


def test_in_process_plane_stops_where_a_jit_made_code(gs, tmp_path):
    """--inject: a frame in code with no call frame information (a JIT's trampoline) ends the
    stack there, as it ends backtrace()'s (GPUSCOPE_UNWIND_VERIFY compares every stack with
    it): the trampoline is the stack's last frame, named from the perf map."""
    out = tmp_path / "ij.folded"
    p = gs.run(["run", "-q", "--inject", "--stacks", "1", "--folded", str(out), "--",
                gs.wl("wl_stack"), "--jit"], env=gs.env(GPUSCOPE_UNWIND_VERIFY=1), check_rc=0)
    assert "gpuscope-inject: unwind: 0 of those by the rules not as by backtrace()" in \
        p.stderr, p.stderr
    lines = folded(out.read_text())
    assert lines == {"wl_stack;py::jit_trampoline:demo.py;inner;cuLaunchKernel;leafKernel": 1,
                     "wl_stack;py::jit_trampoline:demo.py;inner;cuMemAlloc_v2": 1}, lines


def test_jit_frames_from_the_perf_map(gsr, tmp_path):
    """Code a JIT made (CPython's -X perf trampolines) is named from /tmp/perf-PID.map."""
    out = tmp_path / "j.folded"
    gsr.run(["run", "-q", "--stacks", "1", "--folded", str(out), "--", gsr.wl("wl_stack"),
             "--jit"], check_rc=0)
    lines = folded(out.read_text())
    chain = ";main;outer;middle;py::jit_trampoline:demo.py;inner;"
    assert [c for s, c in lines.items() if s.endswith(chain + "cuLaunchKernel;leafKernel")] \
        == [1], lines


def test_sampling_and_replay(gsr, tmp_path):
    """Every 10th launch (per CPU), every allocation and every failed call; the recording
    replays to the same folded stacks."""
    rec, out = tmp_path / "d.gsrec", tmp_path / "d.folded"
    report, truth, _ = gsr.trace(["wl_driver"], opts=["--stacks", "10", "-o", str(rec),
                                                      "--folded", str(out)])
    lines = folded(out.read_text())
    launches = sum(c for s, c in lines.items() if ";cuLaunch" in s or ";cuGraphLaunch" in s)
    k = report["kernels"]
    total = k["launches"] + k["graph_launches"]
    ncpu = len(open("/proc/cpuinfo").read().split("processor")) - 1
    assert total // 10 - ncpu <= launches <= total // 10 + ncpu
    allocs = sum(c for s, c in lines.items() if s.endswith(";cuMemAlloc_v2"))
    failed = sum(e["count"] for e in report["errors"] if e["api"] == "cuMemAlloc_v2")
    assert allocs == truth["alloc:cuMemAlloc_v2"] + failed
    replay = gsr.run(["report", str(rec), "--format", "folded"], check_rc=0).stdout
    assert replay == out.read_text()


def test_no_stacks(gsr, tmp_path):
    out = tmp_path / "n.folded"
    gsr.run(["run", "-q", "--stacks", "off", "--folded", str(out), "--", gsr.wl("wl_stack")],
            check_rc=0)
    assert out.read_text() == ""
    for bad in ("0", "x"):
        p = gsr.run(["run", "--stacks", bad, "--", "true"])
        assert p.returncode == 1 and p.stderr.strip().splitlines() == [
            "gpuscope: --stacks wants a positive N (every Nth launch) or off, not '%s'" % bad]
    p = gsr.run(["run", "--folded", str(tmp_path / "no" / "dir"), "--", "true"])
    assert p.returncode == 2 and "cannot write the folded stacks to" in p.stderr
