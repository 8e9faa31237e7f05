"""The device code a program loads, read by the in-process plane (`run --inject
--device-code`): PTX text, fatbins (plain, zstd, LZ; directly and through cudart's wrapper),
cubins; which kernels have PTX (device-side probes can go in) and which SASS only; corrupt
images reported, the program untouched. Fatbins are built here with nvcc."""
import json
import os
import shutil
import struct
import subprocess

import pytest

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
pytestmark = pytest.mark.skipif(not os.path.exists(NVCC), reason="nvcc is not installed")

KERNELS = r"""
__device__ int helper(int x) { return x * 3; }
__global__ void k_add(int *p) { p[threadIdx.x] += helper(threadIdx.x); }
__global__ void k_mul(float *p, float s) { p[threadIdx.x] *= s; }
"""
SASS_ONLY = r"""
__global__ void only_sass(int *p) { p[threadIdx.x] = 7; }
"""
ADD, MUL, SASS = "_Z5k_addPi", "_Z5k_mulPff", "_Z9only_sassPi"


@pytest.fixture(scope="module")
def code(tmp_path_factory):
    d = tmp_path_factory.mktemp("devcode")
    (d / "k.cu").write_text(KERNELS)
    (d / "s.cu").write_text(SASS_ONLY)
    both = ["-gencode", "arch=compute_75,code=compute_75",
            "-gencode", "arch=compute_90,code=sm_90"]

    def nvcc(out, *args):
        subprocess.run([NVCC] + list(args) + ["-o", str(d / out)], check=True,
                       capture_output=True)
        return d / out

    f = {
        "ptx": nvcc("k.ptx", "-ptx", "-arch=compute_75", str(d / "k.cu")),
        "both": nvcc("both.fatbin", "-fatbin", "--compress-mode=none", *both, str(d / "k.cu")),
        "zstd": nvcc("zstd.fatbin", "-fatbin", *both, str(d / "k.cu")),
        "lz": nvcc("lz.fatbin", "-fatbin", "--compress-mode=speed", *both, str(d / "k.cu")),
        "sass": nvcc("sass.fatbin", "-fatbin", "--compress-mode=none",
                     "-gencode", "arch=compute_90,code=sm_90", str(d / "s.cu")),
        "cubin": nvcc("k.cubin", "-cubin", "-arch=sm_90", str(d / "k.cu")),
        "sass2": nvcc("sass2.fatbin", "-fatbin", "-gencode", "arch=compute_80,code=sm_80",
                      "-gencode", "arch=compute_90,code=sm_90", str(d / "s.cu")),
    }
    # A fatbin whose first entry claims more bytes than its container has: the driver (the
    # double) takes it; the parser must say why it cannot read it.
    b = bytearray(f["both"].read_bytes())
    hsize = struct.unpack_from("<H", b, 6)[0]
    struct.pack_into("<Q", b, hsize + 8, 1 << 40)
    f["corrupt"] = d / "corrupt.fatbin"
    f["corrupt"].write_bytes(bytes(b))
    return f


def run(gs, tmp_path, ways, opts=("--inject", "--device-code")):
    """The run's text report (stderr) and JSON (the same recording, reported again)."""
    rec = tmp_path / "r.gsrec"
    js = tmp_path / "r.json"
    truth = tmp_path / "truth.json"
    p = gs.run(["run", "-o", str(rec)] + list(opts) + ["--", gs.wl("wl_devcode")] + ways,
               env=gs.env(GS_TRUTH=truth))
    q = gs.run(["report", str(rec), "--json=%s" % js])
    assert q.returncode == 0, q.stderr
    return p, json.loads(js.read_text()), json.loads(truth.read_text())


def test_every_way_of_loading(gs, tmp_path, code):
    p, r, truth = run(gs, tmp_path, [
        "data:%s:%s" % (code["ptx"], ADD),
        "library:%s:%s" % (code["both"], MUL),
        "wrapper:%s:%s" % (code["sass"], SASS),
        "fatbin:%s" % code["zstd"],
        "dataex:%s:%s" % (code["cubin"], ADD),
        "data:%s" % code["lz"],
        "bad:%s" % code["cubin"].with_suffix(".cu"),  # refused by the driver: not read
    ])
    assert p.returncode == 0, p.stderr
    d = r["device_code"]
    mods = d["modules"]
    assert d["modules_total"] == len(mods) == 6
    got = [(m["kind"], m["loaded_by"], m["ptx_arch"], m["sass_arch"], m["ptx_entries"],
            m["sass_entries"], m["kernels"], m["kernels_with_ptx"], m["error"]) for m in mods]
    assert got == [
        ("PTX", "cuModuleLoadData", 75, None, 1, 0, 2, 2, None),
        ("fatbin", "cuLibraryLoadData", 75, 90, 1, 1, 2, 2, None),
        ("fatbin", "cuLibraryLoadData", None, 90, 0, 1, 1, 0, None),  # through the wrapper
        ("fatbin", "cuModuleLoadFatBinary", 75, 90, 1, 1, 2, 2, None),  # zstd
        ("cubin", "cuModuleLoadDataEx", None, 90, 0, 1, 2, 0, None),
        ("fatbin", "cuModuleLoadData", 75, 90, 1, 1, 2, 2, None),  # LZ
    ], got
    assert mods[0]["bytes"] == os.path.getsize(code["ptx"])
    assert mods[1]["bytes"] == os.path.getsize(code["both"])
    # Three kernel names: two with PTX in some modules and SASS only in the cubin, one
    # SASS only everywhere.
    assert d["kernels"] == {"total": 3, "with_ptx": 0, "sass_only": 1, "mixed": 2}
    launched = {k["kernel"]: k for k in d["launched"]}
    assert launched[SASS]["has_ptx"] is False
    assert launched[SASS]["why"] == "SASS only: its module has no PTX for it"
    assert launched[SASS]["launches"] == 3
    assert launched[ADD]["modules_with_ptx"] == 4 and launched[ADD]["modules_without_ptx"] == 1
    assert launched[ADD]["has_ptx"] is False and "some of the modules" in launched[ADD]["why"]
    assert launched[ADD]["launches"] == 6 and launched[MUL]["launches"] == 3
    assert sum(k["launches"] for k in d["launched"]) == truth["launches"]
    text = p.stderr
    assert "Device code (read in-process; PTX is what device-side probes go in)" in text
    assert "6 modules loaded (4 fatbin, 1 PTX, 1 cubin, 0 unknown); 0 not fully read" in text
    line = [ln for ln in text.splitlines() if "only_sass(int*)" in ln and "SASS only" in ln]
    assert len(line) == 1 and line[0].strip().startswith("3 launches") and \
        line[0].rstrip().endswith("SASS only (sm_90)")


def test_modules_loaded_from_files(gsr, tmp_path, code):
    p, r, truth = run(gsr, tmp_path, ["file:%s:%s" % (code["both"], ADD),
                                      "libfile:%s:%s" % (code["ptx"], MUL)])
    assert p.returncode == 0, p.stderr
    got = [(m["kind"], m["loaded_by"], m["ptx_arch"], m["sass_arch"], m["kernels"],
            m["kernels_with_ptx"], m["bytes"]) for m in r["device_code"]["modules"]]
    assert got == [
        ("fatbin", "cuModuleLoad", 75, 90, 2, 2, os.path.getsize(code["both"])),
        ("PTX", "cuLibraryLoadFromFile", 75, None, 2, 2, os.path.getsize(code["ptx"])),
    ], got
    assert sum(k["launches"] for k in r["device_code"]["launched"]) == truth["launches"] == 6


def test_ptx_only_program(gs, tmp_path, code):
    p, r, _ = run(gs, tmp_path, ["library:%s:%s,%s" % (code["both"], ADD, MUL)])
    assert p.returncode == 0, p.stderr
    d = r["device_code"]
    assert d["kernels"] == {"total": 2, "with_ptx": 2, "sass_only": 0, "mixed": 0}
    assert all(k["has_ptx"] is True and k["why"] is None for k in d["launched"])
    assert "launched kernels that device-side probes cannot go in" not in p.stderr


def test_sass_for_several_architectures(gsr, tmp_path, code):
    p, r, _ = run(gsr, tmp_path, ["library:%s:%s" % (code["sass2"], SASS)])
    assert p.returncode == 0, p.stderr
    m = r["device_code"]["modules"][0]
    assert (m["sass_arch"], m["sass_arch_lowest"], m["sass_entries"]) == (90, 80, 2)
    line = [ln for ln in p.stderr.splitlines() if "only_sass(int*)" in ln and "SASS" in ln]
    assert line and line[0].rstrip().endswith("SASS only (sm_80-90)"), line


def test_corrupt_fatbin_is_reported_and_the_program_runs(gs, tmp_path, code):
    p, r, truth = run(gs, tmp_path, ["library:%s:%s" % (code["corrupt"], MUL),
                                     "wrapper:%s:%s" % (code["sass"], SASS)])
    assert p.returncode == 0, p.stderr
    assert truth["launches"] == 6
    mods = r["device_code"]["modules"]
    assert mods[0]["kind"] == "fatbin" and mods[0]["kernels"] == 0
    assert mods[0]["error"] == ("entry at 16: header of 80 and payload of 1099511627776 bytes "
                                "do not fit the container"), mods[0]["error"]
    assert mods[1]["kind"] == "fatbin" and mods[1]["error"] is None
    launched = {k["kernel"]: k for k in r["device_code"]["launched"]}
    assert launched[MUL]["has_ptx"] is None and "not read" in launched[MUL]["why"]
    assert "1 not fully read" in p.stderr


def test_off_unless_asked(gs, tmp_path, code):
    p, r, _ = run(gs, tmp_path, ["data:%s:%s" % (code["ptx"], ADD)], opts=("--inject",))
    assert p.returncode == 0, p.stderr
    assert "device_code" not in r
    p = gs.run(["run", "--device-code", "--", gs.wl("wl_devcode")])
    assert p.returncode == 1
    assert p.stderr.strip() == ("gpuscope: run: --device-code needs --inject (device code is "
                                "read in-process)")
