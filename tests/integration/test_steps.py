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
    # The parts: the GPU's busy and idle time make the step (in-process timing only).
    assert steps["gpu_timed"] == (plane == ["--inject"])
    for s in steps["list"]:
        if steps["gpu_timed"]:
            assert s["gpu_ns"] > 0 and s["gpu_ns"] + s["gpu_idle_ns"] == s["duration_ns"]
        else:
            assert s["gpu_ns"] is None


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
