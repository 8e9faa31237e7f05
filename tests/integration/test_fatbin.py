"""The fatbin parser (src/ptx/fatbin.c) through `gpuscope fatbin`, on fatbins and programs
built here with nvcc in every compression mode (zstd, the older LZ style, none), and on
corrupted ones. No root needed."""
import os
import re
import shutil
import subprocess

import pytest

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
pytestmark = pytest.mark.skipif(not os.path.exists(NVCC), reason="nvcc is not installed")

KERNELS = r"""
__global__ void vecAdd(const float *a, const float *b, float *c, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }
__global__ void scale(float *a, int n, float s)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }
"""
GENCODE = ["-gencode", "arch=compute_80,code=sm_80",
           "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
MODES = {"default": "zstd", "size": "zstd", "speed": "lz", "none": "none"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("fatbins")
    src = d / "k.cu"
    src.write_text(KERNELS)
    out = {}
    for mode in MODES:
        f = d / ("k-%s.fatbin" % mode)
        subprocess.run([NVCC, "-fatbin", "--compress-mode=%s" % mode] + GENCODE +
                       ["-o", str(f), str(src)], check=True, capture_output=True)
        out[mode] = f
    # Two PTX versions of one kernel set: compute_75 (the oldest CUDA 13 has) and compute_90.
    f = d / "k-two-ptx.fatbin"
    subprocess.run([NVCC, "-fatbin", "-gencode", "arch=compute_75,code=compute_75",
                    "-gencode", "arch=compute_90,code=compute_90", "-o", str(f), str(src)],
                   check=True, capture_output=True)
    out["two-ptx"] = f
    # A program: its .nv_fatbin section.
    app = d / "app.cu"
    app.write_text(KERNELS + "int main() { return 0; }\n")
    subprocess.run([NVCC, "-gencode", "arch=compute_90,code=[sm_90,compute_90]", "-o",
                    str(d / "app"), str(app)], check=True, capture_output=True)
    out["app"] = d / "app"
    out["dir"] = d
    return out


def raw(gs, args):
    """stdout as bytes (a cubin is not text)."""
    p = subprocess.run([gs.binary] + args, capture_output=True, env=gs.env(), timeout=60)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def entries(gs, path):
    p = gs.run(["fatbin", str(path)])
    assert p.returncode == 0, p.stderr
    rows = [ln.split() for ln in p.stdout.splitlines()[2:]]
    return [{"kind": r[1], "arch": r[2], "version": r[3], "comp": r[4], "stored": int(r[5]),
             "size": int(r[6]), "container": int(r[7])} for r in rows]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_entries_in_every_compression_mode(gs, built, mode):
    e = entries(gs, built[mode])
    assert [(x["kind"], x["arch"]) for x in e] == [("elf", "sm_80"), ("elf", "sm_90"),
                                                   ("ptx", "sm_90")]
    ptx = e[2]
    assert ptx["comp"] == MODES[mode] and ptx["version"] == "9.0"
    if MODES[mode] != "none":
        assert ptx["stored"] < ptx["size"]
    # --compress-mode=size compresses the cubins too.
    assert all(x["comp"] == ("zstd" if mode == "size" else "none") for x in e[:2])


def test_same_ptx_and_cubins_whatever_the_compression(gs, built):
    ptx = {m: gs.run(["fatbin", str(built[m]), "--ptx-for", "90"]).stdout for m in MODES}
    assert len(set(ptx.values())) == 1
    text = ptx["none"]
    assert text.lstrip().startswith(".version 9.0") and ".target sm_90" in text
    assert "\0" not in text
    assert re.search(r"\.visible \.entry _Z6vecAddPKfS0_Pfi\(", text)
    assert re.search(r"\.visible \.entry _Z5scalePfif\(", text)
    for i in (0, 1):
        elf = {m: raw(gs, ["fatbin", str(built[m]), "--extract", str(i)])[1]
               for m in ("size", "none")}
        assert elf["size"] == elf["none"] and elf["none"].startswith(b"\x7fELF")


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="ptxas is not installed")
def test_extracted_ptx_assembles(gs, built, tmp_path):
    p = gs.run(["fatbin", str(built["speed"]), "--ptx-for", "90"])
    (tmp_path / "k.ptx").write_text(p.stdout)
    r = subprocess.run([PTXAS, "-arch=sm_90", str(tmp_path / "k.ptx"), "-o",
                        str(tmp_path / "k.cubin")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_ptx_picked_for_the_device(gs, built):
    """The highest PTX not above the device: compute_90 for sm_90 and sm_100, compute_75 for
    sm_80; none for sm_70."""
    e = entries(gs, built["two-ptx"])
    assert sorted(x["arch"] for x in e if x["kind"] == "ptx") == ["sm_75", "sm_90"]
    for sm, target in ((90, "sm_90"), (100, "sm_90"), (80, "sm_75"), (75, "sm_75")):
        p = gs.run(["fatbin", str(built["two-ptx"]), "--ptx-for", str(sm)])
        assert p.returncode == 0 and (".target %s" % target) in p.stdout, sm
    p = gs.run(["fatbin", str(built["two-ptx"]), "--ptx-for", "70"])
    assert p.returncode != 0 and "no PTX for sm_70 or below" in p.stderr


def test_a_programs_nv_fatbin_section(gs, built):
    e = entries(gs, built["app"])
    # The device-link image (a container of its own) and the kernels' container.
    assert {x["container"] for x in e} == {0, 1}
    assert [x["kind"] for x in e].count("ptx") == 1
    p = gs.run(["fatbin", "/bin/true"])
    assert p.returncode != 0 and "no .nv_fatbin section" in p.stderr


def corrupt(data, at, new):
    return data[:at] + new + data[at + len(new):]


def test_corrupted_fatbins(gs, built, tmp_path):
    good = built["size"].read_bytes()
    zstd_at = good.index(b"\x28\xb5\x2f\xfd")
    lz = built["speed"].read_bytes()
    ptx_hdr = lz.rindex(b"\x01\x00\x01\x01")  # the PTX entry's kind and version bytes
    cases = {
        "empty-ish": b"\0" * 64,
        "truncated": good[:len(good) // 2],
        "container-too-big": corrupt(good, 8, (1 << 40).to_bytes(8, "little")),
        "entry-header-too-small": corrupt(good, 16 + 4, (8).to_bytes(4, "little")),
        "zstd-garbage": corrupt(good, zstd_at + 8, b"\xff" * 64),
        "zstd-bomb": corrupt(good, 16 + 56, (1 << 40).to_bytes(8, "little")),
        "lz-garbage": corrupt(lz, ptx_hdr + 80 + 4, b"\xf0\xff\xff\xff\xff\xff\xff\xff"),
    }
    for name, data in cases.items():
        f = tmp_path / (name + ".fatbin")
        f.write_bytes(data)
        for args in ([], ["--ptx-for", "90"], ["--extract", "0"]):
            rc, _, err = raw(gs, ["fatbin", str(f)] + args)
            assert rc in (0, 2), (name, args, rc, err)
            assert "AddressSanitizer" not in err and "runtime error" not in err
            if rc:
                assert len(err.strip().splitlines()) == 1, (name, err)
    # Those that cannot be read say why.
    for name, want in (("empty-ish", "not a fatbin"), ("truncated", "do not fit"),
                       ("container-too-big", "do not fit"),
                       ("entry-header-too-small", "do not fit"),
                       ("zstd-bomb", "decompresses to")):
        p = gs.run(["fatbin", str(tmp_path / (name + ".fatbin"))])
        assert p.returncode == 2 and want in p.stderr, (name, p.stderr)
    rc, _, err = raw(gs, ["fatbin", str(tmp_path / "zstd-garbage.fatbin"), "--extract", "0"])
    assert rc == 2 and "zstd" in err
    p = gs.run(["fatbin", str(tmp_path / "lz-garbage.fatbin"), "--ptx-for", "90"])
    assert p.returncode == 2 and "corrupt LZ" in p.stderr


def test_bad_usage(gs, built, tmp_path):
    for args, want in ((["fatbin"], "which file?"),
                       (["fatbin", "/nonexistent"], "cannot open"),
                       (["fatbin", str(tmp_path)], "not a regular"),
                       (["fatbin", str(built["none"]), "--ptx-for", "x"], "compute capability"),
                       (["fatbin", str(built["none"]), "--extract", "99"], "no entry 99"),
                       (["fatbin", str(built["none"]), "--ptx-for", "90", "--extract", "0"],
                        "not both")):
        p = gs.run(args)
        assert p.returncode != 0 and want in p.stderr, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1
