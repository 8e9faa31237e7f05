"""Training steps found from the launch sequence alone (issue 20): a Python loop over the
CUDA test double with a known number of steps and one slow step (its data loader sleeps),
in both planes: the count, the kernel that marks them, each step's launches, and the slow
step with its cause (the launching thread asleep, from the OS plane)."""
import json
import os

import pytest

PYTHON = "/usr/bin/python3"
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "workloads", "py_steps.py")
STEPS, SLOW = 12, 7


@pytest.mark.parametrize("plane", [[], ["--inject"]], ids=["uprobes", "inject"])
def test_steps_and_the_slow_one(gs, tmp_path, plane):
    js = tmp_path / "s.json"
    gs.run(["run", "-q", "--json=%s" % js] + plane + ["--", PYTHON, SCRIPT, str(STEPS),
                                                      str(SLOW)], check_rc=0)
    steps = json.loads(js.read_text())["steps"]
    assert steps["count"] == STEPS and steps["how"] == "launch sequence", steps
    assert steps["anchor_kernel"] == "fwdKernel"
    assert [s["launches"] for s in steps["list"]] == [5] * STEPS
    # The slow step is the longest, over the 80 ms its loader slept, and explained by it.
    durations = [s["duration_ns"] for s in steps["list"]]
    slow = steps["list"][SLOW]
    assert slow["slow"] and max(durations) == slow["duration_ns"] >= 80e6, durations
    assert "asleep in clock_nanosleep()" in slow["cause"], slow
    assert steps["slow"] >= 1 and steps["median_ns"] < 40e6
    # The GPU's busy and idle time make the step (in-process timing only).
    assert steps["gpu_timed"] == (plane == ["--inject"])
    for s in steps["list"]:
        if steps["gpu_timed"]:
            assert s["gpu_ns"] > 0 and s["gpu_ns"] + s["gpu_idle_ns"] == s["duration_ns"]
        else:
            assert s["gpu_ns"] is None
    # Where each step's time went: parts that make its duration. The data loader's sleep
    # is the thread blocked outside CUDA calls: 2 ms a step, 80 ms in the slow one.
    for s in steps["list"]:
        parts = s["parts"]
        assert sum(v or 0 for v in parts.values()) == s["duration_ns"], s
        assert (parts["compute"] is None) == (not steps["gpu_timed"])
        assert parts["nccl"] == 0 and parts["copies"] == 0
        assert parts["sync"] > 0 and parts["host"] > 0
        if s["index"] != STEPS - 1:  # (the last ends with its wait for the GPU)
            assert parts["data"] >= (79e6 if s is slow else 1.9e6), (s, steps["list"])
    if steps["gpu_timed"]:
        assert all(s["parts"]["compute"] > 0 for s in steps["list"])
    # (The rest is the thread's own work and, on a loaded machine, its wait for a CPU once
    # woken: 2-7.5 ms seen with three CPU hogs on two CPUs.)
    assert max(slow["parts"], key=lambda k: slow["parts"][k] or 0) == "data", slow
    assert slow["parts"]["data"] > 0.8 * slow["duration_ns"], slow
    assert steps["parts"]["data"] == sum(s["parts"]["data"] for s in steps["list"])


def test_wait_for_another_launching_thread_is_not_data(gsr, tmp_path):
    """A loop that waits while another thread launches its backward pass (5 ms apart, as
    PyTorch's autograd engine thread does): that wait is the host's work, not a wait for
    data; the loader's 2 ms sleep is."""
    js = tmp_path / "s.json"
    gsr.run(["run", "-q", "--json=%s" % js, "--", PYTHON, SCRIPT, str(STEPS), str(SLOW), "0",
             "thread"], check_rc=0)
    steps = json.loads(js.read_text())["steps"]
    assert steps["count"] == STEPS and steps["anchor_kernel"] == "fwdKernel", steps
    for s in steps["list"][:-1]:
        parts = s["parts"]
        assert sum(v or 0 for v in parts.values()) == s["duration_ns"]
        assert parts["host"] >= 14e6, s  # (the backward thread's 15 ms)
        if s["index"] != SLOW:
            assert 1.9e6 <= parts["data"] < 5e6, s


def test_step_function(gsr, tmp_path):
    """--step=FUNC: the steps are FUNC's calls. After 12 training steps the program runs 100
    evaluation steps: the launch sequence alone finds the training loop (its last step
    holding the evaluation), --step=evaluate the evaluation's, --step=train_step exactly
    the training steps; the same from a recording with report --step; a function no stack
    held says so."""
    rec, js = tmp_path / "s.gsrec", tmp_path / "s.json"
    args = ["--", PYTHON, SCRIPT, str(STEPS), str(SLOW), "100"]
    gsr.run(["run", "-q", "--stacks", "1", "-o", str(rec), "--json=%s" % js,
             "--step=train_step"] + args, check_rc=0)
    steps = json.loads(js.read_text())["steps"]
    assert steps["count"] == STEPS and steps["how"] == "step function", steps
    assert steps["step_function"] == "train_step" and steps["step_function_seen"]
    assert steps["anchor_kernel"] == "fwdKernel"
    assert [s["launches"] for s in steps["list"]] == [5] * STEPS
    # (The slow step, the slowest; a loaded machine may make another one slow too.)
    durations = [s["duration_ns"] for s in steps["list"]]
    assert steps["list"][SLOW]["slow"] and max(durations) == durations[SLOW] >= 80e6

    def report(*extra):
        p = gsr.run(["report", "--json"] + list(extra) + [str(rec)], check_rc=0)
        return json.loads(p.stdout)["steps"]
    auto = report()
    assert auto["count"] == STEPS and auto["anchor_kernel"] == "fwdKernel"
    assert auto["how"] == "launch sequence" and auto["step_function"] is None
    assert [s["launches"] for s in auto["list"]] == [5] * (STEPS - 1) + [105]
    again = report("--step", "train_step")
    assert [s["duration_ns"] for s in again["list"]] == \
        [s["duration_ns"] for s in steps["list"]]
    ev = report("--step=evaluate")
    assert ev["count"] == 100 and ev["anchor_kernel"] == "evalKernel"
    assert [s["launches"] for s in ev["list"]] == [1] * 100
    assert report("--step=main.evaluate")["count"] == 0  # (a qualified name must match)
    none = report("--step=no_such_function")
    assert none["count"] == 0 and not none["step_function_seen"]
    p = gsr.run(["report", "--step=no_such_function", str(rec)], check_rc=0)
    assert "--step=no_such_function: no launch stack with Python frames held it" in p.stdout


@pytest.mark.parametrize("bad", ["", "a b", "x;y", ".f", "f" * 101])
def test_step_function_bad(gs, tmp_path, bad):
    p = gs.run(["run", "--step", bad, "--", "true"])
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert "--step wants a Python function's name" in p.stderr


def test_no_loop_no_steps(gsr, tmp_path):
    """A program that launches no loop says none (the null of the JSON)."""
    js = tmp_path / "n.json"
    gsr.run(["run", "-q", "--json=%s" % js, "--", gsr.wl("wl_stack")], check_rc=0)
    steps = json.loads(js.read_text())["steps"]
    assert steps["count"] == 0 and steps["how"] is None and steps["list"] == []


def test_step_track(gsr, tmp_path):
    """The trace's step track: a slice a step, as long as the report's step."""
    js, chrome = tmp_path / "s.json", tmp_path / "s.trace.json"
    gsr.run(["run", "-q", "--inject", "--json=%s" % js, "--chrome", str(chrome), "--", PYTHON,
             SCRIPT, str(STEPS), str(SLOW)], check_rc=0)
    steps = json.loads(js.read_text())["steps"]["list"]
    trace = json.loads(chrome.read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    slices = sorted((e for e in events if e.get("cat") == "step"), key=lambda e: e["ts"])
    assert [e["name"] for e in slices] == ["step %d" % i for i in range(STEPS)]
    for e, s in zip(slices, steps):
        assert abs(e["dur"] * 1000 - s["duration_ns"]) < 1000 and e["args"]["launches"] == 5
        parts = {k[5:-3]: v for k, v in e["args"].items() if k.startswith("part_")}
        assert parts == s["parts"], (parts, s["parts"])
