"""Memory analyses on planted problems (tests/workloads/wl_memory.c): a leak among sites that
do not leak, out-of-memory failures from exhaustion and from fragmentation, a VMM allocator, a
stream-ordered pool; the memory map as SVG, checked structurally and drawn by a real
renderer; the findings in Perfetto and in the exporter."""
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import OUT
from pftrace import Trace

MIB = 1 << 20
SVG = "{http://www.w3.org/2000/svg}"
SMALL = {"FAKECUDA_MEM": str(64 * MIB)}  # a 64 MiB device: quick to fill
NVML = os.path.join(OUT, "fakes", "libnvidia-ml.so.1")


def sites(report):
    return {s["where"].split(" < ")[0]: s for s in report["memory"]["sites"]}


@pytest.mark.parametrize("plane", ["uprobe", "inject"])
def test_planted_leak_is_found_and_only_it(gs, plane):
    opts = ["--inject"] if plane == "inject" else []
    report, truth, p = gs.trace(["wl_memory", "leak"], opts=opts, env_extra=SMALL)
    mem = report["memory"]
    assert mem["sites_are_stacks"]
    assert mem["suspected_leaks"] == 1, [(s["where"], s["leak"]) for s in mem["sites"]]
    s = sites(report)
    leak = s["leak_site"]
    assert leak["where"].startswith("leak_site < leak < main")
    assert leak["leak"]["suspected"] and leak["leak"]["confidence"] >= 0.999
    assert leak["outstanding_bytes"] == truth["leak:bytes"]
    assert leak["outstanding_count"] == leak["allocations"] == truth["leak:count"]
    # 64 KiB every 8 ms or so (naps run long on a loaded machine): 8 MiB/s at most.
    assert 1 * MIB < leak["leak"]["growth_bytes_per_s"] < 10 * MIB
    assert leak["leak"]["window_samples"] >= 8
    assert [e["size"] for e in leak["oldest_live"]] == [64 << 10] * 3
    times = [e["time_s"] for e in leak["oldest_live"]]
    assert times == sorted(times)
    # A cache that grew and stayed, a single step: outstanding, but not leaks.
    assert not s["warmup_site"]["leak"]["suspected"]
    assert s["warmup_site"]["outstanding_bytes"] == truth["warmup:bytes"]
    assert not s["step_site"]["leak"]["suspected"]
    assert s["step_site"]["outstanding_bytes"] == truth["step:bytes"]
    # The steady one frees what it allocates: nothing outstanding, not listed or not suspected.
    assert "steady_site" not in s or not s["steady_site"]["leak"]["suspected"]
    assert mem["sites_total"] == 4


def test_leak_in_the_text_report(gsr):
    p = gsr.run(["run", "--", gsr.wl("wl_memory"), "leak"], env=gsr.env(**SMALL))
    assert p.returncode == 0, p.stderr
    text = p.stderr
    assert "Memory analyses" in text and "1 suspected leak " in text
    line = [ln for ln in text.splitlines() if ln.startswith("  LEAK pid ")]
    assert len(line) == 1 and "leak_site < leak < main" in line[0]
    assert "warmup_site < leak < main" in text  # outstanding by site


def test_growth_that_ends_is_reported_as_such(gs):
    """A site that grows as a leak does, then frees it all (a list kept until a function
    returns): not a leak at the end, but shown, with the growth as it was when suspected."""
    report, truth, p = gs.trace(["wl_memory", "grow", "linger"], env_extra=SMALL)
    mem = report["memory"]
    assert mem["suspected_leaks"] == 0
    assert mem["grew_then_stopped_sites"] == 1
    g = sites(report)["grow_site"]
    assert g["where"].startswith("grow_site < grow < main")
    assert not g["leak"]["suspected"] and g["outstanding_bytes"] == 0
    assert g["peak_bytes"] == truth["grow:bytes"]
    e = g["leak"]["earlier"]
    assert e["confidence"] >= 0.999 and e["window_samples"] >= 8
    assert 1 * MIB < e["growth_bytes_per_s"] < 10 * MIB
    assert g["leak"]["first_suspected_s"] <= e["last_suspected_s"]
    assert e["window_from_s"] < e["window_to_s"] <= e["last_suspected_s"] + 1e-6


def test_growth_that_ends_in_the_text_report(gsr):
    p = gsr.run(["run", "--", gsr.wl("wl_memory"), "grow"], env=gsr.env(**SMALL))
    assert p.returncode == 0, p.stderr
    text = p.stderr
    assert "0 suspected leaks" in text
    assert "1 site grew as a leak does for a while, then stopped" in text
    line = [ln for ln in text.splitlines() if ln.startswith("  GREW pid ")]
    assert len(line) == 1 and "grow_site < grow < main" in line[0]


def test_sites_through_one_wrapper(gsr, tmp_path):
    """Two callers allocating through one wrapper: the labels start alike; the JSON has each
    whole stack, and the memory map's legend shows where they part."""
    rec = tmp_path / "w.gsrec"
    js = tmp_path / "w.json"
    p = gsr.run(["run", "-q", "--json=%s" % js, "-o", str(rec), "--", gsr.wl("wl_memory"),
                 "wrapped", "linger"], env=gsr.env(**SMALL))
    assert p.returncode == 0, p.stderr
    mem = json.loads(js.read_text())["memory"]
    by = {s["outstanding_bytes"]: s for s in mem["sites"]}
    assert by[4 * MIB]["stack"].startswith("alloc_wrapper < wrapped_a < main")
    assert by[2 * MIB]["stack"].startswith("alloc_wrapper < wrapped_b < main")
    assert by[4 * MIB]["where"].startswith("alloc_wrapper < wrapped_a")
    svg = tmp_path / "w.svg"
    p = gsr.run(["report", str(rec), "--memory-map", str(svg)])
    assert p.returncode == 0, p.stderr
    texts = [t.text or "" for t in ET.parse(svg).getroot().iter(SVG + "text")]
    legend = [t for t in texts if t.startswith("#")]
    assert any(t.startswith("#") and "... < wrapped_a < main" in t for t in legend), legend
    assert any("... < wrapped_b < main" in t for t in legend), legend


def test_memory_map_time_axis_starts_at_the_first_allocation(gsr, tmp_path):
    """A program that spends a while before allocating (a Python program's imports): the
    time axis starts with its first allocation; times stay relative to the trace's start."""
    svg = tmp_path / "late.svg"
    p = gsr.run(["run", "-q", "--memory-map", str(svg), "--", gsr.wl("wl_memory"), "linger",
                 "linger", "linger", "linger", "wrapped", "linger"], env=gsr.env(**SMALL))
    assert p.returncode == 0, p.stderr
    texts = [t.text or "" for t in ET.parse(svg).getroot().iter(SVG + "text")]
    head = [t for t in texts if "allocations recorded over" in t][0]
    first = float(head.split("time from the first allocation, at ")[1].split(" s")[0])
    assert first >= 0.8, head
    ticks = [float(t[:-2]) for t in texts if t.endswith(" s") and t[:-2].replace(".", "").isdigit()]
    assert ticks and min(ticks) >= first - 1e-9 and ticks == sorted(ticks), ticks
    assert "-0 s" not in texts


def test_oom_from_exhaustion(gs):
    report, truth, _ = gs.trace(["wl_memory", "exhaust", "linger"], env_extra=SMALL)
    mem = report["memory"]
    assert mem["out_of_memory"] == 1 and len(mem["ooms"]) == 1
    o = mem["ooms"][0]
    assert o["cause"] == "exhaustion"
    assert o["api"] == "cuMemAlloc_v2" and o["device"] == 0
    assert o["requested_bytes"] == truth["exhaust:requested"]
    assert o["process_device_bytes"] == o["process_all_devices_bytes"] == truth["exhaust:live"]
    assert o["free_between_allocations_bytes"] == 0 and o["largest_free_range_bytes"] == 0
    assert o["nvml_free_bytes"] is None  # (no NVML here)
    assert o["where"].startswith("block_site < fill < exhaust")
    assert o["top_sites"][0]["where"].startswith("block_site < fill < exhaust")
    assert o["top_sites"][0]["bytes"] == truth["exhaust:live"]
    assert "failed: exhaustion" in o["text"]


def test_oom_from_fragmentation(gs):
    report, truth, _ = gs.trace(["wl_memory", "fragment", "linger"], env_extra=SMALL)
    mem = report["memory"]
    ooms = mem["ooms"]
    # Filling the device fails once (exhaustion); the 2 MiB ask into the holes, the second.
    assert mem["out_of_memory"] == 2 and [o["cause"] for o in ooms] == \
        ["exhaustion", "fragmentation"]
    o = ooms[1]
    assert o["requested_bytes"] == truth["fragment:requested"]
    assert o["process_device_bytes"] == truth["fragment:live"]
    assert o["free_between_allocations_bytes"] == truth["fragment:holes"]
    assert o["largest_free_range_bytes"] == MIB
    assert o["where"].startswith("big_site < fragment < main")
    # Each hole is the free half of a 2 MiB page whose other half is live: stranded.
    assert o["stranded_bytes"] == truth["fragment:holes"]
    assert o["largest_stranded_bytes"] == MIB
    frag = [f for f in mem["fragmentation"] if f["device"] == 0][0]
    want = truth["fragment:holes"] / (truth["fragment:holes"] + truth["fragment:live"])
    assert abs(frag["worst"]["score"] - want) < 1e-3
    assert frag["worst"]["free_between_bytes"] == truth["fragment:holes"]
    assert frag["worst"]["stranded_bytes"] == truth["fragment:holes"]


def test_oom_with_nvml(gs, tmp_path):
    """NVML's reading of the device goes into the finding, and decides exhaustion."""
    script = tmp_path / "nvml.script"
    script.write_text("gpus 1\ngpu0.mem_total %d\ngpu0.mem_used %d\n" % (64 * MIB, 64 * MIB))
    report, truth, _ = gs.trace(["wl_memory", "linger", "exhaust"],
                                env_extra=dict(SMALL, GPUSCOPE_NVML=NVML,
                                               FAKENVML_SCRIPT=script))
    o = report["memory"]["ooms"][0]
    assert o["nvml_total_bytes"] == 64 * MIB and o["nvml_free_bytes"] == 0
    assert o["cause"] == "exhaustion" and "NVML: 64.0 MiB of 64.0 MiB used" in o["text"]


def test_vmm_and_pool_allocators(gs):
    report, truth, _ = gs.trace(["wl_memory", "vmm", "pool", "linger"], env_extra=SMALL)
    p = [x for x in report["processes"] if x["comm"] == "wl_memory"][0]
    a = p["device_memory_by_allocator"]
    assert a["vmm_physical_bytes"] == truth["vmm:physical"]
    assert a["vmm_mapped_bytes"] == truth["vmm:mapped"]
    assert a["vmm_reserved_bytes"] == truth["vmm:reserved"]
    assert a["pool_bytes"] == truth["pool:live"]
    assert a["pool_peak_bytes"] == truth["pool:peak"]
    # Its two cuMemCreate calls are two sites (two lines of the program); the one whose
    # memory was released holds nothing and is not listed.
    create = [x for x in report["memory"]["sites"] if x["api"] == "cuMemCreate"]
    assert len(create) == 1 and create[0]["where"].startswith("vmm < main")
    assert create[0]["outstanding_bytes"] == truth["vmm:physical"]
    assert create[0]["allocations"] == 1 and create[0]["frees"] == 0
    assert report["memory"]["sites_total"] == 6  # 2 VMM, 4 pool
    pooled = sum(x["outstanding_bytes"] for x in report["memory"]["sites"]
                 if x["api"] in ("cuMemAllocAsync", "cuMemAllocFromPoolAsync"))
    assert pooled == truth["pool:live"]


def svg_of(gs, tmp_path, args, env):
    rec = tmp_path / "m.gsrec"
    p = gs.run(["run", "-q", "-o", str(rec), "--", gs.wl("wl_memory")] + args,
               env=gs.env(**env))
    assert p.returncode == 0, p.stderr
    svg = tmp_path / "m.svg"
    p = gs.run(["report", str(rec), "--memory-map", str(svg)])
    assert p.returncode == 0, p.stderr
    return ET.parse(svg).getroot(), svg


def render(svg, tmp_path):
    png = tmp_path / "m.png"
    p = subprocess.run(["rsvg-convert", "-o", str(png), str(svg)], capture_output=True,
                       text=True)
    assert p.returncode == 0 and not p.stderr, p.stderr
    from PIL import Image
    return Image.open(png).convert("RGB")


@pytest.mark.skipif(not shutil.which("rsvg-convert"), reason="rsvg-convert is not installed")
def test_memory_map_of_failures_and_leaks(gsr, tmp_path):
    root, svg = svg_of(gsr, tmp_path, ["leak", "fragment", "linger"], SMALL)
    assert root.tag == SVG + "svg"
    panels = [g for g in root.iter(SVG + "g") if g.get("class") == "panel"]
    assert len(panels) == 1 and panels[0].get("data-gpu") == "0"
    fails = [g for g in root.iter(SVG + "g") if g.get("class") == "failure"]
    assert len(fails) == 2
    assert all("failed: cuMemAlloc_v2" in g.find(SVG + "title").text for g in fails)
    blocks = [r for r in root.iter(SVG + "rect") if r.get("class") == "alloc"]
    assert blocks and all(r.find(SVG + "title") is not None for r in blocks)
    # Never freed: outlined.
    assert any(r.get("stroke") for r in blocks)
    legend = " ".join(t.text or "" for t in root.iter(SVG + "text"))
    assert "leak_site < leak < main" in legend
    assert [p for p in root.iter(SVG + "polyline") if p.get("class") == "frag"]
    img = render(svg, tmp_path)
    assert img.size == (int(root.get("width")), int(root.get("height")))
    red = sum(1 for px in img.getdata() if px[0] > 180 and px[1] < 60 and px[2] < 60)
    assert red > 100  # the failure lines and markers are drawn


@pytest.mark.skipif(not shutil.which("rsvg-convert"), reason="rsvg-convert is not installed")
def test_memory_map_of_100k_allocations(gsr, tmp_path):
    root, svg = svg_of(gsr, tmp_path, ["many", "100000", "linger"], {})
    title = [t.text for t in root.iter(SVG + "text") if t.text and t.text.startswith("pid ")]
    assert len(title) == 1 and ": 100000 allocations," in title[0]
    rects = list(root.iter(SVG + "rect"))
    # Aggregated: far fewer elements than allocations, and a file that stays small.
    assert len(rects) < 30000
    assert os.path.getsize(svg) < 8 << 20
    assert [r for r in rects if r.get("class") == "cells"]
    img = render(svg, tmp_path)
    blue = sum(1 for px in img.getdata() if px[2] > px[0] + 40)
    assert blue > 50000  # the allocations cover much of the plot


def test_memory_map_bad_output_and_no_allocations(gsr, tmp_path):
    rec = tmp_path / "m.gsrec"
    p = gsr.run(["run", "-q", "-o", str(rec), "--", "/bin/true"])
    assert p.returncode == 0, p.stderr
    p = gsr.run(["report", str(rec), "--memory-map", "/nonexistent/dir/m.svg"])
    assert p.returncode != 0
    assert len(p.stderr.strip().splitlines()) == 1 and "memory map" in p.stderr
    svg = tmp_path / "empty.svg"
    p = gsr.run(["report", str(rec), "--memory-map", str(svg)])
    assert p.returncode == 0, p.stderr
    root = ET.parse(svg).getroot()
    assert "no device allocations were recorded" in " ".join(
        t.text or "" for t in root.iter(SVG + "text"))


def test_findings_in_perfetto(gsr, tmp_path):
    pf = tmp_path / "t.pftrace"
    p = gsr.run(["run", "-q", "--perfetto", str(pf), "--", gsr.wl("wl_memory"), "leak",
                 "fragment", "linger"], env=gsr.env(**SMALL))
    assert p.returncode == 0, p.stderr
    t = Trace(pf)
    names = [e["name"] for e in t.instants if e["cat"] == "finding"]
    assert names.count("out of memory") == 2
    assert names.count("suspected leak") == 1
    leak = [e for e in t.instants if e["name"] == "suspected leak"][0]
    assert leak["args"]["site"].startswith("leak_site < leak < main")
    oom = [e for e in t.instants if e["name"] == "out of memory"]
    assert [e["args"]["cause"] for e in oom] == ["exhaustion", "fragmentation"]
    assert oom[1]["args"]["requested"] == 2 * MIB
    frag = [u for u, tr in t.tracks.items() if tr["name"] == "fragmentation (GPU 0)"]
    assert frag and t.counters[frag[0]]
    # Half of the fill's pages free; the leak phase's 21.6 MiB, packed, count as live:
    # about 21 / (21 + 42) of the pages in use are free.
    assert 0.3 < max(v for _, v in t.counters[frag[0]]) < 0.36


def test_memory_map_from_a_live_run(gsr, tmp_path):
    """--memory-map on run: the same picture, without a recording."""
    svg = tmp_path / "live.svg"
    p = gsr.run(["run", "-q", "--memory-map", str(svg), "--", gsr.wl("wl_memory"), "fragment",
                 "linger"], env=gsr.env(**SMALL))
    assert p.returncode == 0, p.stderr
    root = ET.parse(svg).getroot()
    assert len([g for g in root.iter(SVG + "g") if g.get("class") == "failure"]) == 2
    assert [g for g in root.iter(SVG + "g") if g.get("class") == "panel"]
