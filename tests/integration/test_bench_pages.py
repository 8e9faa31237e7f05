"""bench/launch_pages.sh: the pages of the in-process plane's own that a launch touches (on the
GPU guests each one whose translation the program's work has pushed out costs ~45 ns). The
launch path's code is at the start of .text (two pages), the data every call reads in gs_hot (one),
with the GOT (thread-local offsets, calls into the C library) and the ring's: five. Counts
from valgrind's trace of the test double, not times."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import OUT, ROOT


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a_launch_touches_five_pages_of_ours():
    p = subprocess.run(["bash", "bench/launch_pages.sh"], cwd=ROOT, capture_output=True,
                       text=True, timeout=600,
                       env=dict(os.environ, BUILDS=os.path.join(OUT, "gpuscope")))
    assert p.returncode == 0, p.stderr[-3000:]
    m = re.search(r"(\d+) launches; pages of gpuscope's touched by at least 90% of them: (\d+)",
                  p.stdout)
    assert m, p.stdout
    assert int(m.group(1)) >= 300
    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in p.stdout.splitlines() if re.match(r"\| [0-9a-f]+ \|", line)]
    assert len(rows) == int(m.group(2)) <= 5, p.stdout
    code = [r for r in rows if ".text" in r[1]]
    # (The wrapper, gs_call and the ring's producer among them, and nothing else's code.)
    assert len(code) <= 2 and all(r[1] == ".text" for r in code), p.stdout
    named = ", ".join(r[2] for r in code)
    for fn in ("gs_wrap_CU_LAUNCH_KERNEL", "gs_call", "shmring_reserve"):
        assert fn in named, p.stdout
    data = [r for r in rows if "gs_hot" in r[1]]
    assert len(data) == 1 and "gs_real_fn" in data[0][2] and "gs_descs" in data[0][2], p.stdout
