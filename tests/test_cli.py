"""The command line: usage errors exit 1 with one clear line, help shows examples, runtime
errors exit 2. None of this needs privileges."""
import os
import subprocess

import pytest

from conftest import BINARIES


def gs(*args):
    return subprocess.run([BINARIES["release"]] + list(args), capture_output=True, text=True,
                          timeout=30)


@pytest.mark.parametrize("args, message", [
    ((), "usage: gpuscope COMMAND"),
    (("frobnicate",), "gpuscope: unknown command 'frobnicate' (gpuscope --help lists them)"),
    (("run",), "gpuscope: run: no command given (gpuscope run [options] -- COMMAND ...)"),
    (("run", "--bogus", "--", "true"),
     "gpuscope: run: unknown option '--bogus' (see gpuscope run --help)"),
    (("run", "-o"), "gpuscope: run: option '-o' needs a value (see gpuscope run --help)"),
    (("attach", "-x"), "gpuscope: attach: unknown option '-x' (see gpuscope attach --help)"),
    (("run", "--buffer-size", "1000", "--", "true"),
     "gpuscope: --buffer-size wants a power of two between 4K and 1G, not '1000'"),
    (("run", "--buffer-size", "2G", "--", "true"),
     "gpuscope: --buffer-size wants a power of two between 4K and 1G, not '2G'"),
    (("run", "--top", "0", "--", "true"),
     "gpuscope: --top wants a positive number of kernels, not '0'"),
    (("run", "--format", "xml", "--", "true"),
     "gpuscope: --format wants text or json, not 'xml'"),
    (("attach",), "gpuscope: attach: which process? (gpuscope attach -p PID)"),
    (("attach", "-p", "abc"), "gpuscope: attach: -p wants a process ID, not 'abc'"),
    (("attach", "-p", "0"), "gpuscope: attach: -p wants a process ID, not '0'"),
    (("attach", "-p", "12", "extra"), "gpuscope: attach: unexpected argument 'extra'"),
    (("attach", "-p", "12", "-d", "-1"),
     "gpuscope: attach: -d wants a positive number of seconds, not '-1'"),
    (("report",), "gpuscope: report: which recording? (gpuscope report FILE)"),
    (("report", "a", "b"), "gpuscope: report: one recording at a time (gpuscope report FILE)"),
])
def test_usage_errors(args, message):
    p = gs(*args)
    assert p.returncode == 1
    assert p.stdout == ""
    assert p.stderr.startswith(message), p.stderr


@pytest.mark.parametrize("cmd", ["run", "attach", "report"])
def test_help_has_examples(cmd):
    p = gs(cmd, "--help")
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.startswith("usage: gpuscope %s" % cmd)
    assert "\nexamples:\n" in p.stdout


def test_top_level_help_and_version():
    p = gs("--help")
    assert p.returncode == 0
    for cmd in ("run", "attach", "report"):
        assert "\n  %s " % cmd in p.stdout
    p = gs("--version")
    assert p.returncode == 0 and p.stdout.startswith("gpuscope ")


def test_report_runtime_errors(tmp_path):
    p = gs("report", "/nonexistent.gsrec")
    assert p.returncode == 2
    assert p.stderr == "gpuscope: cannot open '/nonexistent.gsrec': No such file or directory\n"
    text = tmp_path / "notes.txt"
    text.write_text("not a recording\n" * 10)
    p = gs("report", str(text))
    assert p.returncode == 2
    assert "is not a gpuscope recording" in p.stderr
