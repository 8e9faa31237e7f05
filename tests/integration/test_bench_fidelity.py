"""bench/fidelity.py's comparison (issue 22's fidelity table), checked on the test double: a
CUPTI-style trace written from wl_driver's own truth (what the GPU ran: calls less the one of
zero bytes and the set captured into the graph, plus what the graph's four launches ran)
must compare equal with gpuscope's report, row by row; a kernel execution or a copy taken
out of the trace must show as a difference."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import fidelity  # noqa: E402

GRAPH_LAUNCHES = 4  # wl_driver: its captured graph's launches
CAPTURED_SET = 4096  # the set captured into it
DIRS = {"HtoD": "HtoD", "DtoH": "DtoH", "DtoD": "DtoD", "HtoH": "HtoH", "peer": "PtoP"}


def trace_from_truth(truth, report):
    """Kineto's trace format: kernels (graph runs correlated with a graph launch call),
    copies with their bytes, sets."""
    display = {k["name"]: k["display"] for k in report["kernels"]["list"]}
    ev = [{"cat": "cuda_runtime", "name": "cudaGraphLaunch", "args": {"correlation": 1}},
          {"cat": "cuda_driver", "name": "cuLaunchKernel", "args": {"correlation": 2}}]
    ts = 0
    for key, n in truth.items():
        if not key.startswith("launch:"):
            continue
        name = key[len("launch:"):]
        graph = truth.get("captured:" + name, 0) * GRAPH_LAUNCHES
        for i in range(n - truth.get("captured:" + name, 0) + graph):
            ts += 10
            ev.append({"cat": "kernel", "name": display[name], "ts": ts, "dur": 1,
                       "args": {"correlation": 1 if i < graph else 2}})
    for d, cupti in DIRS.items():
        count, nbytes = truth.get("copy:%s:count" % d, 0), truth.get("copy:%s:bytes" % d, 0)
        if d == "HtoD":
            count -= 1  # (a call of zero bytes: nothing for CUPTI)
        for i in range(count):
            ev.append({"cat": "gpu_memcpy", "name": "Memcpy %s (x -> y)" % cupti,
                       "args": {"bytes": nbytes if i == 0 else 0}})
    sets = truth["copy:memset:count"] - 1 + GRAPH_LAUNCHES
    ev += [{"cat": "gpu_memset", "name": "Memset (Device)"}] * sets
    return {"traceEvents": ev}


def write_run(d, report, trace, pid):
    os.makedirs(d, exist_ok=True)
    json.dump(report, open(os.path.join(d, "report.json"), "w"))
    json.dump(trace, open(os.path.join(d, "cupti-wl.json"), "w"))
    json.dump({"pid": pid}, open(os.path.join(d, "facts-wl.json"), "w"))


def test_fidelity_table_compares_row_by_row(gs, tmp_path):
    report, truth, _ = gs.trace(["wl_driver"])
    pid = report["session"]["target_pid"]
    trace = trace_from_truth(truth, report)
    write_run(tmp_path / "same", report, trace, pid)
    rows = fidelity.compare(str(tmp_path / "same"), "uprobe")["rows"]
    assert rows["names_differing"] == [], rows
    for key, (want, got) in ((k, v) for k, v in rows.items() if k != "names_differing"):
        assert (got >= want) if key.endswith("(>=)") else (got == want), (key, want, got)
    assert rows["kernels"][0] == report["kernels"]["launches"] - 3 + 3 * GRAPH_LAUNCHES
    assert rows["graph kernels"] == [12, 12]
    assert rows["memsets"][0] == truth["copy:memset:count"] - 1 + GRAPH_LAUNCHES
    assert rows["copies HtoD"][1][0] == truth["copy:HtoD:count"] - 1
    # One kernel execution and one copy fewer on CUPTI's side: both rows differ.
    ev = trace["traceEvents"]
    ev.remove(next(e for e in ev if e["cat"] == "kernel" and e["args"]["correlation"] == 2))
    ev.remove(next(e for e in ev if e["cat"] == "gpu_memcpy" and "DtoH" in e["name"]))
    write_run(tmp_path / "fewer", report, trace, pid)
    rows = fidelity.compare(str(tmp_path / "fewer"), "uprobe")["rows"]
    assert rows["kernels"][0] == rows["kernels"][1] - 1
    assert rows["names"][1] == rows["names"][0] - 1 and len(rows["names_differing"]) == 1
    assert rows["copies DtoH"][0][0] == rows["copies DtoH"][1][0] - 1
