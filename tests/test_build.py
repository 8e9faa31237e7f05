"""The pieces built by make test: unit tests (plain and ASan/UBSan), fuzz targets over
their seeds and past crashes plus a timed run, the formatting check, the static build."""
import glob
import os
import subprocess

import pytest

from conftest import OUT, ROOT

FUZZ_SECONDS = int(os.environ.get("GS_FUZZ_SECONDS", "20"))
UNIT = sorted(glob.glob(os.path.join(OUT, "unit", "test_*")) +
              glob.glob(os.path.join(OUT, "unit-asan", "test_*")))
FUZZ = sorted(glob.glob(os.path.join(OUT, "fuzz", "fuzz_*")))


@pytest.mark.parametrize("binary", UNIT, ids=[os.path.relpath(u, OUT) for u in UNIT])
def test_unit(binary):
    p = subprocess.run([binary], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, GS_OUTPUT=OUT))
    assert p.returncode == 0, p.stdout + p.stderr


def test_unit_tests_exist():
    assert len(UNIT) >= 12, "make unit first"
    assert len(FUZZ) >= 4, "make fuzz first"


@pytest.mark.parametrize("binary", FUZZ, ids=[os.path.basename(f) for f in FUZZ])
def test_fuzz(binary, tmp_path):
    name = os.path.basename(binary)[len("fuzz_"):]
    seeds = os.path.join(ROOT, "tests", "fuzz", "seeds", name)
    regressions = sorted(glob.glob(os.path.join(ROOT, "tests", "fuzz", "regressions",
                                                name + "-*")))
    if regressions:
        p = subprocess.run([binary] + regressions, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr[-4000:]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    p = subprocess.run([binary, "-max_total_time=%d" % FUZZ_SECONDS, "-rss_limit_mb=2048",
                        "-artifact_prefix=%s/" % tmp_path, str(corpus), seeds],
                       capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    assert p.returncode == 0, p.stderr[-4000:]


def test_clang_format():
    p = subprocess.run(["make", "-s", "format-check"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_static_build_runs_without_libraries():
    p = subprocess.run(["make", "-s", "static"], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    binary = os.path.join(OUT, "static", "gpuscope")
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True)
    assert "not a dynamic executable" in ldd.stdout + ldd.stderr
    p = subprocess.run([binary, "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("gpuscope ")
