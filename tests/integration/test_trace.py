"""Real eBPF against the CUDA, runtime and NCCL test doubles: every count, byte and name
in the report must equal the workload's own ground truth (tests/workloads/truth.h)."""
import json
import os
import re
import struct
import shutil
import signal
import subprocess

import pytest

import gsrec
import gsreport
from conftest import needs_root, wait_for, kill_quietly

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = needs_root


def assert_matches(truth, report, ignore=()):
    diffs = gsreport.compare(truth, report, ignore=ignore)
    assert not diffs, "\n".join(diffs)


def test_driver_api_every_family(gs):
    report, truth, _ = gs.trace(["wl_driver"])
    assert_matches(truth, report)
    # Spot checks that a broken flattening could not hide.
    assert report["kernels"]["launches"] == 143
    assert report["kernels"]["by_api"]["cuLaunchKernel_ptsz"] == 20  # tail call counted once
    assert report["copies"]["HtoD"]["bytes"] == 3 * 2**20 + 4096 + 2 * 65536 + 64000
    assert report["copies"]["HtoD"]["empty"] == 1  # a call of zero bytes: no copy made
    # cuMemcpyDtoHAsync from cuMemHostAlloc'd memory (XLA's): host to host, as CUPTI says.
    assert report["copies"]["HtoH"]["count"] == 1
    # A set captured into the graph: a call, run at each of the graph's 4 launches.
    ms = report["copies"]["memset"]
    assert (ms["captured"], ms["captured_bytes"], ms["graph_runs"], ms["graph_bytes"]) == \
        (1, 4096, 4, 4 * 4096)
    assert report["memory"]["outstanding"]["bytes"] == {
        "device": 2**20 + 128 * 1024 + 2 * 2**20, "managed": 65536, "host": 2 * 2**20}
    names = {k["name"]: k for k in report["kernels"]["list"]}
    assert names["_Z5scalePfif"]["graph_runs"] == 12  # 3 captured x 4 graph launches
    assert names["_Z5scalePfif"]["captured"] == 3
    assert names["_Z6vecAddPKfS0_Pfi"]["display"] == \
        "vecAdd(float const*, float const*, float*, int)"
    assert names["triton_poi_fused_add_0"]["cluster"] is True
    assert names["_Z9reduceSumPKfPfi"]["cooperative"] is True
    assert names["triton_poi_fused_add_0"]["shapes"][0] == {
        "grid": [32, 2, 1], "block": [128, 1, 1], "shared_mem": 1024, "count": 6}
    errors = {(e["api"], e["result"]): e for e in report["errors"]}
    assert errors[("cuMemAlloc_v2", 2)]["name"] == "CUDA_ERROR_OUT_OF_MEMORY"
    assert report["drops"]["total"] == 0


@pytest.mark.parametrize("plane", ["kernel", "inject"])
def test_graphs_built_with_the_graph_api(gs, plane):
    """XLA's graphs: kernel nodes added (by CUfunction, by CUkernel, by cuGraphAddNode), a
    child graph, an instantiated graph's node set, a graph's node set and the instantiated
    graph updated, one of its kernel nodes disabled (runs nothing) and enabled again, a clone, a conditional node (its body not counted, said so): each
    kernel's runs as the instantiated graphs held them when launched. XLA's traced command
    buffer: launches captured into a graph it made (cuStreamBeginCaptureToGraph), that
    graph a child node, the instantiated graph's child node set to a new trace
    (cuGraphExecChildGraphNodeSetParams): the replays run the trace of their time. Then a
    module unloaded and its function's handle given to the next module's function (XLA's
    autotuning): kOld keeps its 3 launches, kNew has its 5."""
    report, truth, _ = gs.trace(["wl_graphapi"], opts=["--inject"] if plane == "inject" else [])
    assert_matches(truth, report)
    names = {k["name"]: k for k in report["kernels"]["list"]}
    assert {n: names[n]["graph_runs"] for n in ("kA", "kB", "kC")} == \
        {"kA": 17, "kB": 20, "kC": 30}
    assert report["kernels"]["graph_launches"] == 17
    assert report["kernels"]["runs_in_graphs"] == 67
    assert report["kernels"]["graph_launches_conditional"] == 1


def test_names_asked_at_launch(gs, tmp_path):
    """GPUSCOPE_NAME_AT_LAUNCH=1 (a check of the names gpuscope gives launches where the
    driver gives handles out again, as for XLA's autotuning modules): before each launch
    the in-process plane asks the driver the launched function's name and records it when
    the thread has not seen it for that handle; the counts stay the truth's."""
    rec, truth = tmp_path / "r.gsrec", tmp_path / "truth.json"
    gs.run(["run", "-q", "-o", str(rec), "--inject", "--", gs.wl("wl_graphapi")],
           env=gs.env(GS_TRUTH=truth, GPUSCOPE_NAME_AT_LAUNCH="1"), check_rc=0)
    at_launch, asked, launches = {}, set(), 0
    for r in gsrec.records(str(rec)):
        if r["type"] == gsrec.EV_KNAME:
            handle, _, _, api, length, _ = struct.unpack_from("<QQQHHB", r["body"])
            if api == LAUNCH_API:
                at_launch[handle] = r["body"][32:32 + length].decode()
                asked.add(at_launch[handle])
        elif r["type"] == 1 and struct.unpack_from("<H", r["body"], 16)[0] == LAUNCH_API:
            launches += 1
            handle, = struct.unpack_from("<Q", r["body"], 24)
            assert handle in at_launch, "launch of %#x with no name asked first" % handle
    # kA and kC, kOld, then kNew under kOld's handle.
    assert launches == 11 and asked == {"kA", "kC", "kOld", "kNew"}
    js = tmp_path / "r.json"
    gs.run(["report", "--json=%s" % js, str(rec)], check_rc=0)
    assert_matches(json.loads(truth.read_text()), json.loads(js.read_text()))


LAUNCH_API = 1  # cuLaunchKernel (include/gpuscope/api.h)


def test_graph_nodes_past_the_limit_are_said(gsr):
    """A graph of 2^20 + 10 kernel nodes: what gpuscope does not keep is counted and said,
    never run-counted wrongly (in-process plane: a million node calls, a ring that holds
    their records)."""
    report, truth, _ = gsr.trace(["wl_graphapi", "limit"],
                                 opts=["--inject", "--buffer-size=256M"])
    assert_matches(truth, report)
    assert report["kernels"]["runs_in_graphs"] == 0
    rep = gsr.run(["run", "--inject", "--buffer-size=256M", "--", gsr.wl("wl_graphapi"), "limit"],
                  check_rc=0)
    assert "1048586 graph kernel nodes past gpuscope's limit (2^20 a process) were not " \
        "kept: their runs are not counted" in rep.stderr, rep.stderr


def test_threads(gs):
    report, truth, _ = gs.trace(["wl_driver", "--threads", "4", "--loops", "2"])
    assert_matches(truth, report)
    assert truth["launches"] == 2 * 100 + 10 + 20 + 6 + 2 + 3 + 2 + 4 * 50


def test_children_forked_and_exec(gs):
    report, truth, _ = gs.trace(["wl_driver", "--fork", "3", "--exec-child"])
    assert_matches(truth, report, ignore=("peak:",))
    procs = report["processes"]
    assert len(procs) == 5
    children = [p for p in procs if p["pid"] != report["session"]["target_pid"]]
    assert sorted(p["launches"] for p in children) == [7, 7, 7, 7]
    assert all(p["exited"] and p["exit_status"] == 0 for p in children)
    assert all(p["traced_from_start"] for p in procs)


def test_no_follow_traces_the_command_only(gsr):
    report, truth, _ = gsr.trace(["wl_driver", "--fork", "2"], opts=["--no-follow"])
    assert len(report["processes"]) == 1
    assert report["session"]["follow_children"] is False
    # The parent's own work only: the truth minus the children's mini runs.
    assert report["kernels"]["launches"] == truth["launches"] - 2 * 7


def test_isolate_same_numbers_without_children(gsr):
    report, truth, _ = gsr.trace(["wl_driver", "--threads", "2"], opts=["--isolate"])
    assert_matches(truth, report)


def test_runtime_dlopens_driver(gs):
    report, truth, _ = gs.trace(["wl_runtime", "--loops", "2"])
    assert_matches(truth, report)
    # (The machine's own CUDA toolkit libraries may be probed as well: not these.)
    kinds = sorted(lib["kind"] for lib in report["libraries"]
                   if os.path.dirname(lib["path"]) == gs.fakes)
    assert kinds == ["libcuda", "libcudart", "libnccl"]


def test_static_runtime_local_symbols(gs):
    report, truth, _ = gs.trace(["wl_static"])
    assert_matches(truth, report)
    exe = [lib for lib in report["libraries"] if lib["kind"] == "executable"]
    assert len(exe) == 1 and exe[0]["path"].endswith("wl_static")
    assert exe[0]["functions"] == 2


def test_nccl(gs):
    report, truth, _ = gs.trace(["wl_nccl"])
    assert_matches(truth, report)
    comms = report["nccl"]["communicators"]
    assert sorted((c["rank"], c["nranks"]) for c in comms) == [(0, 1), (0, 2), (1, 2)]
    assert all(c["destroyed"] for c in comms)
    assert [e for e in report["errors"] if e["api"] == "ncclBroadcast"][0]["name"] == \
        "ncclInvalidArgument"


def test_library_found_through_runpath(gsr):
    # No LD_LIBRARY_PATH: libcuda is found only through the executable's $ORIGIN RUNPATH.
    env = gsr.env()
    del env["LD_LIBRARY_PATH"]
    truth_path = gsr.tmp / "t.json"
    env["GS_TRUTH"] = str(truth_path)
    rep = gsr.tmp / "r.json"
    gsr.run(["run", "-q", "--json=%s" % rep, "--", gsr.wl("rpath/bin/wl_driver_rpath")],
            env=env, check_rc=0)
    report = json.loads(rep.read_text())
    assert_matches(json.loads(truth_path.read_text()), report)
    assert any(lib["path"].endswith("rpath/bin/../lib/libcuda.so.1")
               for lib in report["libraries"])


def test_library_loaded_later_is_found(gsr, tmp_path):
    # A copy of libcuda nobody could know of beforehand, dlopen'ed by path after a pause.
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    shutil.copy(os.path.join(gsr.fakes, "libcuda.so.1"), hidden / "libcuda.so.1")
    report, truth, p = gsr.trace(["wl_dlopen", str(hidden / "libcuda.so.1")])
    assert_matches(truth, report)
    assert any(lib["path"] == str(hidden / "libcuda.so.1") for lib in report["libraries"])


def test_replay_gives_the_same_report(gsr, tmp_path):
    rec = tmp_path / "trace.gsrec"
    live_json = tmp_path / "live.json"
    env = gsr.env(GS_TRUTH=tmp_path / "t.json")
    live = gsr.run(["run", "-q", "-o", str(rec), "--", gsr.wl("wl_driver"), "--fork", "1"],
                   env=env, check_rc=0)
    gsr.run(["run", "-q", "-o", str(tmp_path / "2.gsrec"), "--json=%s" % live_json, "--",
             gsr.wl("wl_nccl")], env=env, check_rc=0)
    replay_text = gsr.run(["report", str(rec)], check_rc=0)
    assert live.stderr == replay_text.stdout
    replay_json = gsr.run(["report", "--json", str(tmp_path / "2.gsrec")], check_rc=0)
    assert replay_json.stdout == live_json.read_text()
    as_format = gsr.run(["report", "--format", "json", str(tmp_path / "2.gsrec")], check_rc=0)
    assert as_format.stdout == replay_json.stdout


def test_text_report_sections(gsr):
    p = gsr.run(["run", "-q", "--", gsr.wl("wl_driver")],
                env=gsr.env(GS_TRUTH=gsr.tmp / "t.json"), check_rc=0)
    text = p.stderr
    for section in ("Kernels", "Memory", "Copies and sets", "Synchronisation", "Errors",
                    "Events"):
        assert "\n%s" % section in text, text
    assert "vecAdd(float const*, float const*, float*, int)" in text
    assert "cuMemAlloc_v2                CUDA_ERROR_OUT_OF_MEMORY (2): 1" in text
    assert "0 dropped because the ring buffer was full" in text


def test_exit_status_is_the_commands(gsr):
    p = gsr.run(["run", "-q", "--", "sh", "-c", "exit 7"])
    assert p.returncode == 7
    assert "exited with status 7" in p.stderr
    p = gsr.run(["run", "-q", "--", "sh", "-c", "kill -TERM $$"])
    assert p.returncode == 128 + signal.SIGTERM
    assert "killed by signal 15" in p.stderr


def attach_after_names(gs, tmp_path, args=(), env_extra=None, opts=(), linger=False):
    """wl_driver looks its kernels up, then waits; gpuscope attaches; the rest runs:
    (report, truth, gpuscope's stderr). With linger, the workload stays until gpuscope has
    detached (attach -d 2): names are read from a process still there."""
    gate, done, stay = (tmp_path / n for n in ("gate", "gate.done", "stay"))
    truth = tmp_path / "truth.json"
    rep = tmp_path / "r.json"
    for f in (gate, tmp_path / "gate.ready", done, stay):
        if f.exists():
            f.unlink()
    env = gs.env(GS_TRUTH=truth, **(env_extra or {}))
    wl = subprocess.Popen([gs.wl("wl_driver"), "--wait", str(gate)] + list(args) +
                          (["--linger", str(stay)] if linger else []), env=env)
    try:
        wait_for(str(gate) + ".ready")
        tracer = subprocess.Popen([gs.binary, "attach", "-p", str(wl.pid), "-q",
                                   "--json=%s" % rep] + (["-d", "2"] if linger else []) +
                                  list(opts), env=env, stderr=subprocess.PIPE, text=True)
        said = wait_for_attached(tracer)
        gate.write_text("go")
        if linger:
            wait_for(str(done))
        _, err = tracer.communicate(timeout=60)
        assert tracer.returncode == 0, err
        stay.write_text("go")
        assert wl.wait(timeout=60) == 0
    finally:
        kill_quietly(wl)
    return json.loads(rep.read_text()), json.loads(truth.read_text()), said + err


def test_attach_names_read_from_the_driver(gs, tmp_path):
    """Kernels looked up before the attach: each handle's name read, at its first launch,
    from where driver 580 keeps it in the handle's object (the double does the same), taken
    only if it is a symbol's name; never guessed."""
    rec = tmp_path / "attach.gsrec"
    report, t, said = attach_after_names(gs, tmp_path, opts=["-o", str(rec)], linger=True)
    assert "names of kernels looked up before now are read from the driver's memory" in said
    k = report["kernels"]
    # Every launch after the attach is seen, each under its name: five handles (vecAdd's
    # kernel and its function handle, scale, reduceSum, the Triton one), five names read.
    assert k["launches"] == t["launches"]
    assert k["unnamed"] == 0 and k["named_from_driver"] == 5, k
    assert {x["name"]: x["launches"] for x in k["list"]} == {
        key.split(":", 1)[1]: v for key, v in t.items() if key.startswith("launch:")}
    # The names are records of the recording: its report names them too, and says how.
    p = gs.run(["report", str(rec)], check_rc=0)
    assert "5 kernel handles whose lookups were not seen (made before tracing began, or by " \
        "cuKernelGetFunction, not probed on this driver) are named from the driver's " \
        "objects" in p.stdout, p.stdout
    assert "have no name" not in p.stdout
    assert report["session"]["mode"] == "attach"
    assert all(lib["late"] for lib in report["libraries"])
    # Allocations made before the attach are freed after it: counted, not guessed.
    assert report["memory"]["untracked_frees"] == 0
    # The two unified-addressing copies use a malloc'ed buffer allocated before the attach:
    # gpuscope cannot tell host from device memory there and says so.
    assert report["copies"]["HtoD"]["count"] == t["copy:HtoD:count"] - 1
    assert report["copies"]["DtoH"]["count"] == t["copy:DtoH:count"] - 1
    assert report["copies"]["unknown"]["count"] == 2
    # Where the driver's object holds no symbol's name (another driver's layout), or with
    # GPUSCOPE_NO_DRIVER_NAMES=1, the five stay unnamed.
    for env in ({"FAKECUDA_DRIVER_NAMES": "none"}, {"GPUSCOPE_NO_DRIVER_NAMES": "1"}):
        report, t, said = attach_after_names(gs, tmp_path, env_extra=env)
        assert ("names of kernels looked up before now are unknown" in said) == \
            ("GPUSCOPE_NO_DRIVER_NAMES" in env), said
        k = report["kernels"]
        assert k["unnamed"] == 5 and k["unnamed_launches"] == t["launches"], (env, k)
        assert k["named_from_driver"] == 0
        assert all(x["name"] is None and x["display"].startswith("unknown kernel 0x")
                   for x in k["list"])
        assert report["session"]["target_lost"] is True


def test_attach_names_checked_against_lookups(gs, tmp_path):
    """Each name looked up after the attach is checked against what the driver's object
    says: equal, counted; another symbol's name there (the double's FAKECUDA_DRIVER_NAMES=
    other), the reading stops in that process at the first, said by -v. The names looked
    up are the report's either way, and a function of a kernel looked up since (its alias)
    is not read."""
    said = "names looked up since, against the driver's: "
    for args, env, checks in (
            (["--kinds", "3", "2"], {}, "3 agreed, 0 differed"),
            (["--kinds", "3", "2"], {"FAKECUDA_DRIVER_NAMES": "other"}, "0 agreed, 1 differed"),
            (["--kfunc-kinds", "3", "2"], {}, "3 agreed, 0 differed")):
        report, t, err = attach_after_names(gs, tmp_path, args, env, ["-v"], linger=True)
        assert said + checks in err, (args, env, err)
        assert ("names no longer read from the driver in this process" in err) == bool(env)
        assert "0 names read from the driver" in err, err
        k = report["kernels"]
        assert k["unnamed"] == 0 and k["named_from_driver"] == 0, k
        assert {x["name"]: x["launches"] for x in k["list"]} == {
            "kind_%03d" % i: 2 for i in range(3)}


def driver_named(gs, tmp_path, version):
    """The double's libcuda in a directory of its own, as a driver's file is named
    (libcuda.so.VERSION; libcuda.so.1 a link to it): the environment that finds it first."""
    d = tmp_path / ("driver-" + version)
    d.mkdir(parents=True)
    shutil.copy(os.path.join(gs.fakes, "libcuda.so.1"), d / ("libcuda.so." + version))
    os.symlink("libcuda.so." + version, d / "libcuda.so.1")
    return {"LD_LIBRARY_PATH": "%s:%s" % (d, gs.fakes)}


KFUNC_UNPROBED = "cuKernelGetFunction not probed: the functions it gives are named from the " \
    "driver's objects"


def test_kernel_functions_named_from_the_driver(gs, tmp_path):
    """On driver 580 (whose objects keep the names where gpuscope reads them),
    cuKernelGetFunction is not probed (cuDNN calls it before each launch: 131 probe hits a
    ResNet-50 step): each function is named at its first launch from its object, read by
    the launch's probe; each name looked up is checked against its object at the lookup's
    return. Another driver's file, or GPUSCOPE_DRIVER_NAMES=late, probes it as before;
    =all reads on any driver. An object whose name is not its lookup's stops the reading in
    that process: its functions are then unnamed, and -v says why."""
    args = ["wl_driver", "--kfunc-kinds", "5", "4"]
    want = {"kind_%03d" % i: 4 for i in range(5)}
    for i, (version, env, unprobed) in enumerate((
            ("580.65.06", {}, True), ("575.57.08", {}, False),
            ("580.65.06", {"GPUSCOPE_DRIVER_NAMES": "late"}, False),
            ("575.57.08", {"GPUSCOPE_DRIVER_NAMES": "all"}, True))):
        env = dict(driver_named(gs, tmp_path / str(i), version), **env)
        report, truth, p = gs.trace(args, opts=["-v"], env_extra=env)
        assert_matches(truth, report)
        k = report["kernels"]
        assert {x["name"]: x["launches"] for x in k["list"]} == want, (version, env)
        assert (KFUNC_UNPROBED in p.stderr) == unprobed, (version, env, p.stderr)
        assert k["named_from_driver"] == (5 if unprobed else 0), (version, env, k)
        # (The library's lookups, each checked at its return; none differs.)
        assert re.search(r"against the driver's: [1-9]\d* agreed, 0 differed", p.stderr) or \
            not unprobed, p.stderr
        # (A function left unprobed is not one the driver lacks: as many missing as in the
        # double's own file, which is probed too.)
        missing = {lib["path"]: lib["missing"] for lib in report["libraries"]
                   if lib["kind"] == "libcuda"}
        assert len(missing) == 2 and len(set(missing.values())) == 1, missing
    # (Another symbol's name, or none, where the library's first lookup returned.)
    for layout in ("other", "none"):
        env = dict(driver_named(gs, tmp_path / layout, "580.65.06"),
                   FAKECUDA_DRIVER_NAMES=layout)
        report, truth, p = gs.trace(args, opts=["-v"], env_extra=env)
        assert "names no longer read from the driver in this process" in p.stderr
        assert "0 names read from the driver, 0 not readable" in p.stderr, p.stderr
        k = report["kernels"]
        assert k["launches"] == truth["launches"] == k["unnamed_launches"] == 20, k
        assert k["named_from_driver"] == 0


@pytest.mark.parametrize("plane", ["kernel", "driver", "driver_classic", "inject"])
def test_kernel_functions_of_a_library_loaded_again(gs, plane):
    """A library's kernel launched by its function (cuKernelGetFunction before each launch),
    the library unloaded, another loaded whose kernel the driver gives the same kernel and
    function handles: kOld keeps its 3 launches, kNew has its 5, whether the function is
    named by its kernel's lookup (probed, or in process) or from its object (read again
    after the unload; by a uprobe session's return, or by a return probe at every launch
    where the kernel has no sessions)."""
    env = {"GPUSCOPE_DRIVER_NAMES": "all" if plane.startswith("driver") else "late"}
    if plane == "driver_classic":
        env["GPUSCOPE_NO_UPROBE_SESSION"] = "1"
    report, truth, _ = gs.trace(["wl_driver", "--kfunc-reload"],
                                opts=["--inject"] if plane == "inject" else [], env_extra=env)
    assert_matches(truth, report)
    assert {x["name"]: x["launches"] for x in report["kernels"]["list"]} == \
        {"kOld": 3, "kNew": 5}
    assert report["kernels"]["named_from_driver"] == (2 if plane.startswith("driver") else 0)


def test_attach_graph_made_before(gs, tmp_path):
    """A graph instantiated before the attach: its launches counted, the kernels it runs
    not (gpuscope never saw what it holds), and the report says so; a run from the start
    counts them and says nothing of it."""
    rec = tmp_path / "graph.gsrec"
    report, t, _ = attach_after_names(gs, tmp_path, ["--early-graph", "5"], opts=["-o", str(rec)])
    k = report["kernels"]
    assert (k["graph_launches"], k["graph_launches_unseen"], k["runs_in_graphs"]) == (5, 5, 0), k
    p = gs.run(["report", str(rec)], check_rc=0)
    assert "5 graph launches ran graphs made before tracing began: the kernels they ran are " \
        "not counted" in p.stdout, p.stdout
    report, t, _ = gs.trace(["wl_driver", "--early-graph", "5"])
    k = report["kernels"]
    assert (k["graph_launches"], k["graph_launches_unseen"], k["runs_in_graphs"]) == \
        (5, 0, t["graph_runs:_Z5scalePfif"]), k


def wait_for_attached(tracer):
    """What gpuscope said up to "attached to pid" (-v: its debug lines before it)."""
    said = ""
    while "attached to pid" not in said:
        line = tracer.stderr.readline()
        assert line, said
        said += line
    return said


def test_attach_duration(gsr, tmp_path):
    gate = tmp_path / "gate"
    wl = subprocess.Popen([gsr.wl("wl_driver"), "--wait", str(gate)], env=gsr.env())
    try:
        wait_for(str(gate) + ".ready")
        p = gsr.run(["attach", "-p", str(wl.pid), "-d", "0.5", "-q"], check_rc=0)
        assert "attached to pid %d" % wl.pid in p.stderr
        assert "gpuscope report: attached to pid %d ('wl_driver')" % wl.pid in p.stderr
        assert wl.poll() is None  # the target is untouched
    finally:
        kill_quietly(wl)


def test_live_status_line(gsr):
    # Not a terminal: one line a second, for logs.
    p = gsr.run(["run", "--json=/dev/null", "--", "sh", "-c", "sleep 2.6"], check_rc=0)
    lines = [l for l in p.stderr.splitlines() if "launches/s" in l]
    assert 2 <= len(lines) <= 3, p.stderr
    assert lines[0].startswith("gpuscope: 0 launches/s | 0 launches | device mem 0 B")
    assert "| drops 0" in lines[0]
    p = gsr.run(["run", "-q", "--json=/dev/null", "--", "sh", "-c", "sleep 1.5"], check_rc=0)
    assert "launches/s" not in p.stderr


@pytest.mark.parametrize("workload", ["wl_runtime", "wl_static"])
def test_runtime_registration_names_host_stubs(gsr, tmp_path, workload):
    """__cudaRegisterFunction names each host stub, __cudaGetKernel maps the driver handle
    to it: the second way to a name, besides the driver's own lookup."""
    import gsrec

    rec = tmp_path / "r.gsrec"
    gsr.run(["run", "-q", "-o", str(rec), "--json=/dev/null", "--", gsr.wl(workload)],
            env=gsr.env(GS_TRUTH=tmp_path / "t.json"), check_rc=0)
    stubs = {h: n for ns, h, n in gsrec.knames(rec) if ns == gsrec.NS_HOSTFN}
    assert sorted(stubs.values()) == ["_Z4axpyfPKfPf", "_Z6vecAddPKfS0_Pfi"]
    aliases = [a for a in gsrec.kaliases(rec) if a[2] == gsrec.NS_HOSTFN]
    assert len(aliases) == 75  # the workload asks once per launch
    assert {t for _, t, _ in aliases} == set(stubs)
    driver = {h: n for ns, h, n in gsrec.knames(rec) if ns == gsrec.NS_DRIVER}
    assert all(driver[h] == stubs[t] for h, t, _ in aliases)


def test_classic_uprobes_give_the_same_numbers(gsr):
    """Kernels before 6.6 have no multi-uprobe links: one perf-event uprobe per function.
    (Detaching those is slow on new kernels, ~0.1 s per probe, so this test takes a while.)"""
    report, truth, _ = gsr.trace(["wl_driver", "--threads", "2"],
                                 env_extra={"GPUSCOPE_NO_UPROBE_MULTI": "1"})
    assert_matches(truth, report)


def test_launches_by_uprobe_sessions_read_a_sample_of_results(gs):
    """Where the kernel has uprobe sessions, a launch is one probe hit, recorded at entry;
    its return (result, call time, stack) is read for each kernel's launches until one has
    succeeded, and at every Nth launch. Counts are exact either way; a first launch that
    fails is seen; --stacks 1 and the classic pair of probes read every result."""
    n = 3000
    burst = ["wl_driver", "--burst", str(n)]
    report, truth, _ = gs.trace(burst)
    assert_matches(truth, report)
    k = report["kernels"]
    unread = k["results_unread"]
    # Every 64th per CPU, and the first launches of each kernel on each CPU.
    assert n - n // 64 - 64 <= unread < n - n // 64 + 1, unread
    burst_kernel = max(k["list"], key=lambda x: x["launches"])
    assert burst_kernel["call_time_s"] > 0  # scaled from the calls whose return was seen
    for opts, env in (([], {"GPUSCOPE_NO_UPROBE_SESSION": "1"}), (["--stacks", "1"], {})):
        other, truth2, _ = gs.trace(burst, opts=opts, env_extra=env)
        assert_matches(truth2, other)
        assert other["kernels"]["results_unread"] == 0
        assert other["kernels"]["launches"] == k["launches"]
    # The whole scenario, whose one failing launch is its kernel's first: seen.
    report, truth, _ = gs.trace(["wl_driver"])
    assert_matches(truth, report)
    assert report["kernels"]["results_unread"] > 0


def test_many_kernels_each_read_once_a_cpu(gs):
    """Many kernels launched in turn (a training step's ~80, each often): each kernel's
    launches ask for their return until one has succeeded on that CPU, then only one launch
    in 64 of the CPU's. The kernels known on a CPU are kept eight to a set, by a mixed hash
    of the handle: with one to a slot, kernels that shared a slot asked for their returns at
    every launch, taking turns; with four, the five of a set did, in some runs (the handles
    are on the heap, whose place differs from run to run)."""
    k, rounds = 120, 40
    report, truth, _ = gs.trace(["wl_driver", "--kinds", str(k), str(rounds)])
    assert_matches(truth, report)
    n = k * rounds
    read = n - report["kernels"]["results_unread"]
    assert read <= n // 64 + k * os.cpu_count() + n // 50, read
    # The same with each function asked for before its launch (cuKernelGetFunction), 60
    # kernels: a thread keeps what its calls returned eight kernels to a set too (with one
    # to a slot, 1,084 of 2,400 calls went unread; with four, 1,870 or 2,057 in 4 runs of
    # 20, a set holding five; all but the two calls that learn each and every 64th: 2,244).
    k = 60
    report, truth, p = gs.trace(["wl_driver", "--kfunc-kinds", str(k), str(rounds)],
                                opts=["-v"])
    assert_matches(truth, report)
    unread = int(re.search(r"return was not asked for: (\d+)", p.stderr).group(1))
    assert unread >= k * rounds - 2 * k - k * rounds // 64 - 1, unread


def test_kernel_functions_asked_again_are_checked_at_the_launch(gs):
    """cuKernelGetFunction before each launch of the function it gives (cuDNN's way, 131 calls
    a ResNet-50 step): with uprobe sessions its return is asked for until the thread's last
    two calls for the kernel gave one function, then at every Nth call; the others' results
    are checked at the thread's next launch. The same thread asking in another context is
    read in full again; calls alternating between contexts, and a function asked for once a
    context and launched after, all in full; a result whose place is written over before
    the next launch, the next call in full. Every launch named, in both planes."""
    n = 200
    env = {"FAKECUDA_DEVICES": "2", "FAKECUDA_FUNC_PER_CONTEXT": "1"}
    args = ["wl_driver", "--kfunc", str(n)]
    # (Every 1000th call read in full, so that none but the first is, here: the second
    # context's function is learnt from the check at the launch, not from a sample.)
    report, truth, p = gs.trace(args, opts=["-v", "--stacks", "1000"], env_extra=env)
    assert_matches(truth, report)
    assert {k["name"]: k["launches"] for k in report["kernels"]["list"]} == {
        "_Z6vecAddPKfS0_Pfi": 3 * n, "_Z5scalePfif": 2 * n, "triton_poi_fused_add_0": n}
    said = "cuKernelGetFunction calls whose return was not asked for: "
    unread, rechecks = (int(x) for x in re.search(
        re.escape(said) + r"(\d+) \(found wanting at the next launch: (\d+)\)",
        p.stderr).groups())
    # The first context: all but two calls (one to learn, after the workload's own first
    # call, and the first sampled); the second: the first call, then all but two;
    # alternating: the first call; the place written over: every other call after the two
    # that learn the first context's function again. (Each checked and found wanting but
    # those of the first context.)
    assert (unread, rechecks) == (2 * n - 3 + (n - 2) // 2, 2 + (n - 2) // 2)
    # (Not probed, where the driver's objects name the functions: each context's named at
    # its first launch.)
    for opts, env2 in ((["-v"], {"GPUSCOPE_NO_UPROBE_SESSION": "1"}), (["--inject"], {}),
                       (["-v"], {"GPUSCOPE_DRIVER_NAMES": "all"})):
        other, truth2, p2 = gs.trace(args, opts=opts, env_extra=dict(env, **env2))
        assert_matches(truth2, other)
        assert sorted((k["name"], k["launches"]) for k in other["kernels"]["list"]) == \
            sorted((k["name"], k["launches"]) for k in report["kernels"]["list"])
        if "GPUSCOPE_NO_UPROBE_SESSION" in env2:
            assert said + "0 " in p2.stderr
        if "GPUSCOPE_DRIVER_NAMES" in env2:
            assert KFUNC_UNPROBED in p2.stderr and other["kernels"]["named_from_driver"] == 4


def test_kernel_functions_asked_again_are_recorded_once_in_process(gs, tmp_path):
    """In process, cuKernelGetFunction's every call is seen; a thread records each (function,
    kernel) pair once, not at each of cuDNN's calls before a launch: --kfunc's 803 calls
    (the workload's start asks once) give 4 pairs (vecAdd's and scale's functions in two
    contexts). An unload makes them new
    again: the library loaded again, whose kernel the driver gives the same handles, has its
    pair recorded again, and its launches their new name."""
    env = {"FAKECUDA_DEVICES": "2", "FAKECUDA_FUNC_PER_CONTEXT": "1"}
    rec = tmp_path / "kfunc.gsrec"
    report, truth, _ = gs.trace(["wl_driver", "--kfunc", "200"],
                                opts=["--inject", "-o", str(rec)], env_extra=env)
    assert_matches(truth, report)
    pairs = gsrec.kaliases(str(rec))
    assert len(pairs) == len(set(pairs)) == 4, pairs
    rec = tmp_path / "reload.gsrec"
    report, truth, _ = gs.trace(["wl_driver", "--kfunc-reload"],
                                opts=["--inject", "-o", str(rec)])
    assert_matches(truth, report)
    pairs = gsrec.kaliases(str(rec))
    # (The workload's start asks for vecAdd's function once.)
    assert len(pairs) == 3 and pairs[1] == pairs[2] != pairs[0], pairs
    assert {x["name"]: x["launches"] for x in report["kernels"]["list"]} == \
        {"kOld": 3, "kNew": 5}


def test_async_sets_are_read_as_launches(gs):
    """Asynchronous sets are uprobe sessions, as launches (PyTorch zeroes
    gradients with cuMemsetD32Async: 107 calls a GPT-2 step, each two probe hits before):
    a function's results are read until one has succeeded on the CPU, then at every Nth
    call; the others are recorded at entry. So the three failures before any success are
    seen; the three after are seen only if sampled, else recorded as made (bytes and all),
    as a launch's failure would be. Every other set goes through cuMemsetD32Async_ptsz,
    which jumps into cuMemsetD32Async: counted once. --stacks 1, no sessions, and the
    in-process plane read every result. (Asynchronous copies keep their returns: one from
    pageable memory blocks its caller, and the steps analysis reads that time.)"""
    args = ["wl_driver", "--sets", "400"]
    report, truth, _ = gs.trace(args)
    assert_matches(truth, report, ignore=("copy:memset:",))
    c = report["copies"]["memset"]
    seen = {(e["api"], e["result"]): e["count"] for e in report["errors"]}[
        ("cuMemsetD32Async", 1)]
    assert 3 <= seen <= 6 and c["failed"] == seen, c
    assert c["count"] == 400 + 6 - seen and c["bytes"] == 4096 * 400 + 64 * (6 - seen), c
    assert 400 - 2 * 2 * os.cpu_count() - 400 // 64 <= c["results_unread"] <= 403, c
    for opts, env in ((["--stacks", "1"], {}), ([], {"GPUSCOPE_NO_UPROBE_SESSION": "1"}),
                      (["--inject"], {})):
        report, truth, _ = gs.trace(args, opts=opts, env_extra=env)
        assert_matches(truth, report)
        c = report["copies"]["memset"]
        assert (c["results_unread"], c["failed"]) == (0, 6), (opts, env, c)


def test_kplane_cost_bench_runs_on_the_double(gs, tmp_path):
    """bench/kplane_cost.py (what the kernel plane's programs add to a launch, a copy, a
    system call and a switch; the GPU machines' numbers judge it) runs here, short: each mode
    has its untraced, traced and beside rows, and the traced rows name the programs that ran
    once a call: the launch's, a copy's entry and return, a system call's two, the switches'."""
    env = gs.env(KPLANE_SCALE="0.02")
    p = subprocess.run(["python3", "bench/kplane_cost.py", str(tmp_path / "kp"), gs.binary, "1",
                        "launch,copy,getppid,pingpong"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    rows, mode = {}, None
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if " (" in line and not cells:
            mode = line.split()[0]
        elif len(cells) == 4 and cells[0] in ("untraced", "traced 0", "beside 0"):
            rows[(mode, cells[0])] = cells
    modes = {"launch": ["launch_session"], "copy": ["call_enter", "ret_copy"],
             "getppid": ["os_sys_enter", "os_sys_exit"], "pingpong": ["os_switch", "os_wakeup"]}
    assert sorted(rows) == sorted((m, v) for m in modes
                                  for v in ("untraced", "traced 0", "beside 0")), p.stdout
    for (mode, variant), (_, ns, faults, progs) in rows.items():
        assert float(ns.split()[0]) > 0 and float(faults) >= 0, rows
        if variant == "untraced":
            assert progs == "-", rows
        elif variant == "traced 0":
            ran = dict(x.split(" ", 1) for x in progs.split(", "))
            for prog in modes[mode]:
                runs, ns = (float(x) for x in ran[prog].split(" x "))
                # (a round trip's wakeups and switches: at least one each, mostly two)
                assert runs >= (0.5 if mode == "pingpong" else 0.99) and ns > 0, (mode, progs)
