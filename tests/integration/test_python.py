"""Python frames in stacks (issue 20), in-process plane: a Python program (Debian's python3)
calls the CUDA test double through ctypes from known functions, a generator and a thread;
its stacks carry the exact Python lines in place of the interpreter's frames, its memory
sites are named by them, and a recording replays them with no process. A program that
claims a Python version with no known layout is said to be so and keeps native stacks;
one whose interpreter state is garbage runs on untouched."""
import json
import os
import re
import subprocess
import time

import pytest
from conftest import kill_quietly, wait_for

PYTHON = "/usr/bin/python3"
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "workloads", "py_cuda.py")


def marks():
    """`# CALL name` lines of the script: name -> 'qualname (file:line)' for lookups."""
    out = {}
    for n, line in enumerate(open(SCRIPT), 1):
        m = re.search(r"# CALL (\S+)", line)
        if m:
            out[m.group(1)] = n
    return out


def frame(func, mark):
    return "%s (%s:%d)" % (func, os.path.abspath(SCRIPT), marks()[mark])


def folded(path):
    out = {}
    for line in open(path).read().splitlines():
        stack, count = line.rsplit(" ", 1)
        out[stack] = int(count)
    return out


def python_version():
    return subprocess.run([PYTHON, "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True, check=True).stdout.strip()


def pyframes(stack):
    """The Python frames of a folded stack, outermost first."""
    return [f for f in stack.split(";") if re.search(r" \(.*\.py:\d+\)$", f)]


def chain(*frames):
    return ";".join(frames)


@pytest.fixture
def traced(gs, tmp_path):
    """The script under --inject, every launch's stack taken: folded, JSON and recording."""
    paths = {k: tmp_path / ("p." + k) for k in ("folded", "json", "gsr")}
    gs.run(["run", "-q", "--inject", "--stacks", "1", "--folded", str(paths["folded"]),
            "--json=%s" % paths["json"], "-o", str(paths["gsr"]), "--", PYTHON,
            os.path.abspath(SCRIPT), "--launches", "3"], check_rc=0)
    return gs, paths


def test_exact_python_frames(traced):
    gs, paths = traced
    lines = folded(paths["folded"])
    module, main = frame("<module>", "module"), frame("main", "main")
    step, launch = frame("Model.step", "step"), frame("launch", "launch")
    # The interpreter's frames are replaced by the lines they ran, outermost first; the
    # native frames of the call (ctypes) between the script and the driver are kept.
    want = chain(module, main, step, launch)
    got = {s: c for s, c in lines.items() if want in s}
    assert len(got) == 1, lines
    s, c = next(iter(got.items()))
    # Outside the script's frames only native ones (named or not, as the symboliser got to
    # them before the process ended): the interpreter's start, ctypes, libffi.
    assert c == 3 and pyframes(s) == [module, main, step, launch] and \
        s.startswith("python3;") and s.endswith(";cuLaunchKernel;pyKernel"), s
    # A generator's frame sits below the loop that drives it.
    gen = [s for s in lines if chain(frame("batches", "batches"),
                                     frame("allocate", "allocate")) in s]
    assert len(gen) == 1 and lines[gen[0]] == 2 and frame("main", "main-gen") in gen[0] and \
        gen[0].endswith("cuMemAlloc_v2"), lines
    # The failed allocation, and the thread's launch under threading's own frames.
    assert [c for s, c in lines.items() if chain(main.replace(
        ":%d)" % marks()["main"], ":%d)" % marks()["main-fail"]),
        frame("too_big", "too_big")) in s] == [1], lines
    worker = [s for s in lines if frame("worker", "worker") + ";" in s]
    assert len(worker) == 1 and "Thread.run (" in worker[0] and \
        worker[0].endswith(";cuLaunchKernel;pyKernel"), lines


def test_python_record_and_sites(traced):
    gs, paths = traced
    report = json.loads(paths["json"].read_text())
    (proc,) = report["processes"]
    assert proc["python"] == {"version": python_version(), "frames": "read", "in_place": True}
    mem = report["memory"]
    alloc = [s for s in mem["sites"] if s["outstanding_bytes"] == 2 << 20]
    assert len(alloc) == 1 and alloc[0]["where"].startswith(
        " < ".join([frame("allocate", "allocate"), frame("batches", "batches"),
                    frame("main", "main-gen")])), mem["sites"]
    (oom,) = mem["ooms"]
    assert oom["where"].startswith(frame("too_big", "too_big") + " < "), oom["where"]


def test_gpu_time_by_python_line(traced):
    """Each launch at the innermost Python frame of its stack, with its GPU time as the
    kernel table counts it: the double runs the main thread's kernels 5 us, the worker's
    25 us. (A launch the GPU figures leave out -- the machine descheduled its call -- is
    counted but not timed, in both.)"""
    gs, paths = traced
    report = json.loads(paths["json"].read_text())
    lines = report["python_lines"]
    (kernel,) = report["kernels"]["list"]
    assert lines["lines"] == 2 and lines["launches"] == 4, lines
    assert lines["timed"] == kernel["gpu"]["timed"] and lines["timed"] >= 3, (lines, kernel)
    assert lines["gpu_ns"] == kernel["gpu"]["total_ns"], (lines, kernel)
    by = {l["where"]: l for l in lines["top"]}
    worker, launch = by[frame("worker", "worker")], by[frame("launch", "launch")]
    assert worker["launches"] == 1 and launch["launches"] == 3
    for line, ns in ((worker, 25000), (launch, 5002)):
        assert abs(line["gpu_ns"] - line["timed"] * ns) <= 2000 * line["timed"], line
    if worker["timed"]:
        assert lines["top"][0] is not launch and lines["top"][0]["where"] == worker["where"]


def test_replay_names_python_frames(traced, tmp_path):
    """The names are in the recording: the replay's folded stacks are the live run's."""
    gs, paths = traced
    again = tmp_path / "again.folded"
    gs.run(["report", str(paths["gsr"]), "--folded", str(again)], check_rc=0)
    assert folded(again) == folded(paths["folded"])


def test_text_report_says_python(gsr):
    p = gsr.run(["run", "--inject", "--stacks", "1", "--", PYTHON, os.path.abspath(SCRIPT)],
                check_rc=0)
    assert "  python %s (1 process): Python frames in stacks, in place of the " \
        "interpreter's" % python_version() in p.stderr, p.stderr
    table = p.stderr.split("\nPython lines (")[1].split("\n\n")[0].splitlines()
    assert table[0].startswith("the innermost Python frame of each launch whose stack was "
                               "taken: 4 launches, "), table
    rows = {row.split()[-2] + " " + row.split()[-1]: row.split()[0] for row in table[2:]}
    assert rows == {frame("worker", "worker"): "1", frame("launch", "launch"): "3"}, table


@pytest.mark.parametrize("plane", ["inject", "kernel", "kernel-classic"])
def test_stack_rate(gs, tmp_path, plane):
    """Without --stacks: a launch's stack is due every 64th launch of a thread, but
    taken only while the thread keeps to 20 a second (at most 10 at once; inject/stacks.c).
    The launches skipped are counted: taken + skipped = due, exactly (the main thread's
    20,000 launches, then the worker's one, then 5,000 in a thread that is still there when
    the program ends, and 5,000 more in the main thread, the program's last calls: their
    skips come after the threads' last stacks, and are recorded at exit). Allocations' and
    failures' stacks are always taken. With --stacks 64, every due stack is taken. The
    kernel probes keep to the same rate (bpf/cuda.bpf.c, with uprobe sessions and
    without), but count their 64 per CPU: due is the launches' count / 64, and up to one
    more a CPU."""
    n, tail = 20000, 5000
    due = (n + tail + 63) // 64 + 1 + (tail + 63) // 64
    env = gs.env(GPUSCOPE_NO_UPROBE_SESSION="1") if plane == "kernel-classic" else None
    for opts, limited in (([], True), (["--stacks", "64"], False)):
        paths = {k: tmp_path / ("b%d.%s" % (limited, k)) for k in ("folded", "json")}
        gs.run(["run", "-q"] + (["--inject", "--gpu-time=off"] if plane == "inject" else []) +
               opts + ["--folded", str(paths["folded"]), "--json=%s" % paths["json"], "--",
                       PYTHON, os.path.abspath(SCRIPT), "--launches", str(n), "--tail",
                       str(tail)], env=env, check_rc=0)
        lines = folded(paths["folded"])
        report = json.load(open(paths["json"]))
        taken = sum(c for s, c in lines.items() if ";cuLaunchKernel" in s)
        skipped = report["drops"]["stacks_skipped"]
        if plane == "inject":
            assert taken + skipped == due, (taken, skipped, due)
        else:
            launches = report["kernels"]["launches"]
            assert launches == n + 2 * tail + 1, launches
            assert 0 <= taken + skipped - (launches + 63) // 64 <= os.cpu_count(), (
                taken, skipped, launches)
        assert (skipped > due // 2) if limited else skipped == 0, (taken, skipped)
        assert sum(c for s, c in lines.items() if s.endswith(";cuMemAlloc_v2")) == 3, lines
        assert report["drops"]["stacks_taken"] == taken + 3


def test_time_rate(gs, tmp_path):
    """--inject --gpu-time=N: every Nth launch of a kernel on a thread is due for GPU
    timing, but a thread times at most GPUSCOPE_TIME_RATE a second (1,000 unless set; 10
    at once), its first launch of each kernel always (inject/gputime.c). Every due launch
    left untimed is counted, by why: timed + capped + lost = due, exactly (at N = 2, the
    main thread's launches and the worker's one; with those whose gate the watchdog had to
    open under load, counted apart). Capped: the rate, 100 a second here.
    With GPUSCOPE_TIME_RATE=0 and GPUSCOPE_TIME_BUDGET=0 every due launch is timed while
    the double's 200 ns kernels keep up; 20,000 launches of 100 us kernels queue 2 s of
    work, more pairs than the pool of 8,192 events holds: lost. The text report says both
    (from a recording). The budget: what timing costs a thread, at most 2,500 ppm of its
    time by default; with the double's events recorded in 50 us each, a timed launch costs
    its thread at least 100 us, paid for over 40 ms, so in a run of E seconds at most
    E / 0.04 + 2 are timed (the first launch and the budget's 40 ms ahead), and capped."""
    for rate, kernel_ns, n, why in (("100", "200", 10000, "capped"), ("0", "200", 10000, None),
                                     ("0", "100000", 20000, "lost"),
                                     ("0", "200", 10000, "budget")):
        due = n // 2 + 1
        js, rec = tmp_path / ("r%s.json" % why), tmp_path / ("r%s.gsrec" % why)
        env = dict(gs.env(), GPUSCOPE_TIME_RATE=rate, FAKECUDA_KERNEL_NS=kernel_ns,
                   GPUSCOPE_TIME_BUDGET="0")
        if why == "budget":
            del env["GPUSCOPE_TIME_BUDGET"]
            env["FAKECUDA_EVENT_CALL_NS"] = "50000"
        t0 = time.monotonic()
        gs.run(["run", "--inject", "--gpu-time=2", "--json=%s" % js, "-o", str(rec), "--",
                PYTHON, os.path.abspath(SCRIPT), "--launches", str(n)], env=env, check_rc=0)
        elapsed = time.monotonic() - t0
        report = json.load(open(js))
        k = {k["name"]: k for k in report["kernels"]["list"]}["pyKernel"]
        capped, lost = report["drops"]["gpu_time_capped"], report["drops"]["gpu_time_lost"]
        # (A pair whose gate the watchdog opened, on a loaded machine, has no start: counted.)
        unknown = k["gpu"]["start_unknown"]
        assert unknown <= report["drops"]["gates_forced"], (k["gpu"], report["drops"])
        assert k["launches"] == n + 1 and k["gpu"]["timed"] + unknown + capped + lost == due, (
            k, capped, lost)
        if why == "budget":
            assert 2 <= k["gpu"]["timed"] <= elapsed / 0.04 + 2, (k["gpu"], elapsed)
            why = "capped"
        assert (capped > due // 2) if why == "capped" else capped == 0, (k["gpu"], capped)
        assert (lost > 0) == (why == "lost"), (k["gpu"], lost)
        p = gs.run(["report", str(rec)], check_rc=0)
        text = p.stdout + p.stderr
        assert ("%d launches were due for GPU timing but left untimed, to keep" % capped
                in text) == (why == "capped"), text
        assert ("%d launches and copies were due for GPU timing but left untimed for want"
                % lost in text) == (why == "lost"), text


def test_unknown_version_keeps_native_stacks(gs, tmp_path):
    out, js = tmp_path / "o.folded", tmp_path / "o.json"
    gs.run(["run", "-q", "--inject", "--json=%s" % js, "--", gs.wl("wl_pyfake"), "old"],
           check_rc=0)
    p = gs.run(["run", "--inject", "--stacks", "1", "--folded", str(out), "--",
                gs.wl("wl_pyfake"), "old"], check_rc=0)
    assert "python 3.9.18 (1 process): no known layout for this version: native stacks " \
        "only" in p.stderr, p.stderr
    assert json.loads(js.read_text())["processes"][0]["python"] == \
        {"version": "3.9.18", "frames": "unsupported", "in_place": False}
    lines = folded(out)
    assert sum(lines.values()) == 20 and all(" (" not in s for s in lines), lines


@pytest.mark.parametrize("state", [False, True])
@pytest.mark.parametrize("plane", ["inject", "kernel"])
def test_thread_without_python_takes_the_waiting_threads_frames(gs, tmp_path, plane, state):
    """A thread with no Python state that launches while a Python thread waits for it (as
    PyTorch's autograd engine runs the backward pass while loss.backward() waits): its
    stacks go on with the Python frames the waiting thread has then, after a mark; the
    Python line of its launches is the wait's. (The Python thread that launched last before
    it, the worker, is gone by then: the main thread's frames are taken.) state: the thread
    has a Python state with no frames, as PyTorch's engine threads have: the same."""
    out, js = tmp_path / "e.folded", tmp_path / "e.json"
    engine = gs.wl("libwl_engine.so")
    gs.run(["run", "-q", "--stacks", "1", "--folded", str(out), "--json=%s" % js] +
           (["--inject"] if plane == "inject" else []) +
           ["--", PYTHON, os.path.abspath(SCRIPT), "--pause", "0.3", "--engine", engine] +
           (["--engine-state"] if state else []), check_rc=0)
    lines = folded(out)
    (stack,) = [k for k in lines if ";engine_thread;cuLaunchKernel;pyKernel" in k]
    module, main, back = frame("<module>", "module"), frame("main", "main-backward"), \
        frame("backward", "backward")
    assert lines[stack] == 2 and pyframes(stack) == [module, main, back], stack
    assert ";".join([back, "[on a thread without Python]"]) in stack, stack
    assert "start_thread;engine_thread;cuLaunchKernel" in stack, stack
    by = {l["where"]: l for l in json.loads(js.read_text())["python_lines"]["top"]}
    assert by[back]["launches"] == 2 and "[on a thread without Python]" not in by, by


@pytest.mark.parametrize("minor", [13, 14])
@pytest.mark.parametrize("plane", ["inject", "kernel"])
def test_313_and_314_layouts_are_read_from_the_process(gs, tmp_path, minor, plane):
    """3.13 and later describe their layout in _PyRuntime (_Py_DebugOffsets); a synthetic
    interpreter of each (wl_pynew.c: its own offsets, found nowhere else; 3.14's tagged code
    references; two evaluations) is walked in both planes: each evaluation's frames in place of
    its native frame. Each evaluation's entry frame is on the C stack, as CPython keeps it:
    the in-process plane reads those in place, in the launching thread's own stack, not by
    a call (inject/pyframes.c, own_stack)."""
    out, js = tmp_path / "n.folded", tmp_path / "n.json"
    p = gs.run(["run", "-q", "--stacks", "1", "--folded", str(out), "--json=%s" % js] +
               (["--inject"] if plane == "inject" else []) +
               ["--", gs.wl("python3.%d-fake" % minor)],
               env=gs.env(GPUSCOPE_INJECT_DEBUG="1"), check_rc=0)
    if plane == "inject":
        # (At the 16th walk: two entry frames a walk.)
        reads = re.findall(r"gpuscope python: 16 walks: (\d+) reads in place", p.stderr)
        assert reads and int(reads[0]) >= 32, p.stderr[-2000:]
    lines = folded(out)
    (stack,) = [k for k in lines if k.endswith(";cuLaunchKernel;pyKernel")]
    assert lines[stack] == 20
    assert stack.split(";")[-6:-2] == ["main", "<module> (fake_train.py:3)",
                                       "train (fake_train.py:12)",
                                       "Trainer.step (fake_train.py:45)"], stack
    assert "_PyEval_EvalFrameDefault" not in stack
    (proc,) = json.loads(js.read_text())["processes"]
    assert proc["python"] == {"version": "3.%d.0" % minor, "frames": "read", "in_place": True}


def test_walks_read_again_by_one_call(gs, tmp_path):
    """The in-process plane: a thread's walk begins by reading again, by one call, the
    pages its last walk read from (inject/pyframes_read.c): a loop's stacks from one place
    then cost one process_vm_readv each (the thread's state and its data stack), where the
    first costs more. And the stacks are still the loop's."""
    out = tmp_path / "w.folded"
    p = gs.run(["run", "-q", "--inject", "--gpu-time=off", "--stacks", "1", "--folded",
                str(out), "--", PYTHON, os.path.abspath(SCRIPT), "--launches", "40"],
               env=gs.env(GPUSCOPE_INJECT_DEBUG="1"), check_rc=0)
    said = re.findall(r"gpuscope python: (16|32) walks: \d+ reads in place, (\d+) by a call "
                      r"\((\d+) pages in windows; (\d+) walks begun by the last one's\)",
                      p.stderr)
    assert len(said) == 2, p.stderr[-2000:]
    (_, _, pages16, _), (_, calls, pages, again) = [[int(x) for x in s] for s in said]
    assert again == 31 and calls <= 32 + 3, said
    # (Walks 17 to 32 read again only the pages read from, not whole windows of 4 pages: the
    # thread's state's and its data stack's.)
    assert pages - pages16 <= 16 * 3, said
    lines = folded(out)
    assert sum(c for s, c in lines.items()
               if s.endswith(";cuLaunchKernel;pyKernel") and frame("main", "main") in s) == 40


def test_garbage_interpreter_state_harms_nothing(gs, tmp_path):
    out = tmp_path / "g.folded"
    p = gs.run(["run", "--inject", "--stacks", "1", "--folded", str(out), "--",
                gs.wl("wl_pyfake"), "garbage"], check_rc=0)
    assert "wl_pyfake: 20 launches" in p.stdout
    lines = folded(out)
    assert sum(c for s, c in lines.items() if s.endswith("cuLaunchKernel;leafKernel")) == 20


def test_layout_matches_the_headers():
    """The 3.11 layout the walker reads against Debian's CPython headers."""
    binary = os.path.join(os.path.dirname(__file__), "..", "..", ".output", "unit", "pylayout")
    assert os.path.exists(binary), "not built (make unit)"
    p = subprocess.run([binary], capture_output=True, text=True)
    assert p.returncode == 0 and "3.11 layout: 20 fields as the headers have them" in p.stdout, \
        p.stdout


def test_kernel_probes_walk_python_frames(gs, tmp_path):
    """Without --inject: the kernel's walker reads the thread's frames (found in the
    interpreter's thread list by its id) and gpuscope names them from the process's memory.
    (--pause: the walker is set up when the program opens the driver library, which gpuscope
    learns of moments later; and names are read while the process lives.)"""
    out, js = tmp_path / "k.folded", tmp_path / "k.json"
    gs.run(["run", "-q", "--stacks", "1", "--folded", str(out), "--json=%s" % js, "--",
            PYTHON, os.path.abspath(SCRIPT), "--pause", "0.3"], check_rc=0)
    lines = folded(out)
    module, main = frame("<module>", "module"), frame("main", "main")
    launches = {s: c for s, c in lines.items() if s.endswith(";cuLaunchKernel;pyKernel")}
    assert launches.get(next((s for s in launches if pyframes(s) == [
        module, main, frame("Model.step", "step"), frame("launch", "launch")]), None)) == 3, \
        lines
    worker = [s for s in launches if frame("worker", "worker") in s]
    assert len(worker) == 1 and pyframes(worker[0])[-1] == frame("worker", "worker"), lines
    (proc,) = json.loads(js.read_text())["processes"]
    assert proc["python"]["version"] == python_version() and proc["python"]["frames"] == "read"


def test_attach_walks_python_frames(gsr, tmp_path):
    """gpuscope attach to a running Python program: its frames from the first stack."""
    gate, out = tmp_path / "gate", tmp_path / "a.folded"
    prog = subprocess.Popen([PYTHON, os.path.abspath(SCRIPT), "--wait", str(gate), "--pause",
                             "0.5"], env=gsr.env())
    try:
        wait_for(str(gate) + ".ready")
        att = subprocess.Popen([gsr.binary, "attach", "-p", str(prog.pid), "-d", "2", "-q",
                                "--stacks", "1", "--folded", str(out)], env=gsr.env(),
                               stderr=subprocess.PIPE, text=True)
        line = att.stderr.readline()  # (its probes are in place)
        assert "attached to pid" in line, line
        gate.touch()
        assert prog.wait(timeout=30) == 0
        _, err = att.communicate(timeout=60)
        assert att.returncode == 0, err
    finally:
        kill_quietly(prog)
    lines = folded(out)
    steps = [s for s in lines if pyframes(s)[-2:] == [frame("Model.step", "step"),
                                                      frame("launch", "launch")]]
    assert len(steps) == 1 and lines[steps[0]] == 3, lines


EXC = os.path.join(os.path.dirname(__file__), "..", "workloads", "py_exc.py")


def exc_line(text):
    """The line of py_exc.py that holds text."""
    return next(n for n, line in enumerate(open(EXC), 1) if text in line)


@pytest.mark.parametrize("plane", [[], ["--inject"]], ids=["uprobes", "inject"])
def test_python_exceptions(gs, tmp_path, plane):
    """Raised exceptions counted by type and site; the one carrying a CUDA error and the
    uncaught ones (in a thread, in main: exit status 1) as findings with their Python stack;
    the same from the recording."""
    js, rec = tmp_path / "e.json", tmp_path / "e.gsrec"
    p = gs.run(["run", "-q", "--py-exceptions", "-o", str(rec), "--json=%s" % js] + plane +
               ["--", PYTHON, os.path.abspath(EXC), "25", "thread", "main"])
    assert p.returncode == 1, p.stderr  # (the program's: its uncaught KeyError)
    x = json.loads(js.read_text())["python_exceptions"]
    path = os.path.abspath(EXC)
    sites = {(s["type"], s["site"]): s["count"] for s in x["top"]}
    assert sites[("ValueError", "parse (%s:%d)" % (path, exc_line('raise ValueError')))] == 25
    assert sites[("RuntimeError", "launch_fails (%s:%d)" %
                  (path, exc_line("raise RuntimeError")))] == 1
    assert sites[("KeyError", "lookup (%s:%d)" % (path, exc_line("return table[key]")))] == 3
    # (Every raise counted at its site: the top 20 sites hold them all, or there are more.)
    assert x["raised"] >= 28
    assert x["raised"] == sum(s["count"] for s in x["top"]) or x["sites"] > len(x["top"])
    top = next(s for s in x["top"] if s["type"] == "ValueError")
    assert top["text"] == "bad record 0"
    f = x["findings"]
    assert [(y["kind"], y["type"]) for y in f] == [
        ("CUDA error", "RuntimeError"), ("uncaught", "KeyError"), ("uncaught", "KeyError")], f
    assert f[0]["text"] == "CUDA error: an illegal memory access was encountered"
    assert f[0]["stack"] == "launch_fails (%s:%d) < main (%s:%d) < <module> (%s:%d)" % (
        path, exc_line("raise RuntimeError"), path, exc_line("        launch_fails()"), path,
        exc_line("    main()"))
    lookup = "lookup (%s:%d)" % (path, exc_line("return table[key]"))
    thread, main = f[1], f[2]
    assert thread["tid"] != thread["pid"] and thread["stack"].startswith(lookup + " < Thread.run")
    assert main["tid"] == main["pid"] and main["text"] == "missing"
    # (Its frame in main is first seen as the process exits: where the line can no longer
    # be read, the code's name comes from an earlier frame of it, with the line "?".)
    assert re.match(re.escape(lookup + " < main (%s:" % path) + r"(%d|\?)\)" %
                    exc_line("lookup({})"), main["stack"]), main
    # (The recording holds the records; the report needs no process.)
    again = json.loads(gs.run(["report", "--json", str(rec)], check_rc=0).stdout)
    assert again["python_exceptions"] == x
    text = gs.run(["report", str(rec)], check_rc=0).stdout
    assert "Python exceptions (" in text and "finding (uncaught)" in text


def test_raise_counts_when_the_trace_ends_first(gsr, tmp_path):
    """attach --py-exceptions to a process that raises, and detach while it still runs: the
    kernel's counts of its raises are taken at the trace's end."""
    gate, js = tmp_path / "gate", tmp_path / "a.json"
    prog = subprocess.Popen([PYTHON, os.path.abspath(EXC), "40", "wait=%s" % gate, "hold"],
                            env=gsr.env(), stdout=subprocess.DEVNULL)
    try:
        wait_for(str(gate) + ".ready")
        att = subprocess.Popen([gsr.binary, "attach", "-p", str(prog.pid), "-d", "2", "-q",
                                "--py-exceptions", "--json=%s" % js], env=gsr.env(),
                               stderr=subprocess.PIPE, text=True)
        line = att.stderr.readline()
        assert "attached to pid" in line, line
        gate.touch()
        _, err = att.communicate(timeout=60)
        assert att.returncode == 0, err
        assert prog.poll() is None  # (still running: its counts came at the trace's end)
    finally:
        kill_quietly(prog)
    x = json.loads(js.read_text())["python_exceptions"]
    sites = {(s["type"], s["site"]): s["count"] for s in x["top"]}
    path = os.path.abspath(EXC)
    assert sites[("ValueError", "parse (%s:%d)" % (path, exc_line("raise ValueError")))] == 40


def test_uncaught_python_exceptions_by_default(gsr, tmp_path):
    """Without --py-exceptions raises are not probed (each would cost a uprobe hit), but
    an uncaught exception is still found, with its traceback's frames."""
    js = tmp_path / "e.json"
    p = gsr.run(["run", "-q", "--json=%s" % js, "--", PYTHON, os.path.abspath(EXC), "5",
                 "thread", "main"])
    assert p.returncode == 1, p.stderr
    x = json.loads(js.read_text())["python_exceptions"]
    assert x["raised"] == 0 and x["top"] == []
    path = os.path.abspath(EXC)
    lookup = "lookup (%s:%d)" % (path, exc_line("return table[key]"))
    assert [(f["kind"], f["type"], f["stack"].split(" < ")[0]) for f in x["findings"]] == \
        [("uncaught", "KeyError", lookup)] * 2, x["findings"]


def test_python_exceptions_none_without_stacks(gsr, tmp_path):
    """--stacks off reads no Python frames: no exception probes either."""
    js = tmp_path / "e.json"
    gsr.run(["run", "-q", "--stacks", "off", "--py-exceptions", "--json=%s" % js, "--", PYTHON,
             EXC, "3"], check_rc=0)
    x = json.loads(js.read_text())["python_exceptions"]
    assert x["raised"] == 0 and x["findings"] == []
