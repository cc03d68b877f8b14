"""`jaxcc run` with the JAX VM in slices: each file printed as soon as it (and every file
before it) has finished, --timeout ending a runaway program with a TimeoutError that
names the limit, Ctrl-C (SIGINT) printing what finished and exiting with 130.

The command runs as a subprocess (``python -m jaxcc``) whose output is read line by line
with the time each line arrived. The reference compiler (``--compiler python``) keeps
start-up short; the VM under test is the JAX one (the default).
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from jaxcc import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
_IMPORTED = time.monotonic()  # after jaxcc.cli's import, at the test run's collection

QUICK = "print(1)\n"
LOOP = "t = 0\nfor i in range(200):\n    t += i\nprint(t)\n"
RUNAWAY = "while True:\n    pass\n"


def write(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


class Proc:
    """A `python -m jaxcc run ...` subprocess; its stdout and stderr lines with arrival times."""

    def __init__(self, *argv: str):
        self.p = subprocess.Popen(
            [sys.executable, "-m", "jaxcc", "run", "--compiler", "python", *argv],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )  # fmt: skip
        self.out: list[tuple[float, str]] = []
        self.err: list[tuple[float, str]] = []
        self._threads = [threading.Thread(target=self._read, args=(f, lines), daemon=True)
                         for f, lines in ((self.p.stdout, self.out), (self.p.stderr, self.err))]  # fmt: skip
        for t in self._threads:
            t.start()

    @staticmethod
    def _read(f, lines) -> None:
        for line in iter(f.readline, ""):
            lines.append((time.monotonic(), line))

    def wait_for_stdout(self, n: int, limit_s: float = 120.0) -> None:
        t0 = time.monotonic()
        while len(self.out) < n:
            assert self.p.poll() is None, f"exited early: {self.text(self.err)}"
            assert time.monotonic() - t0 < limit_s, "no output"
            time.sleep(0.05)

    def finish(self, limit_s: float = 180.0) -> tuple[int, float]:
        """(exit status, time it exited)."""
        try:
            rc = self.p.wait(limit_s)
        finally:
            if self.p.poll() is None:
                self.p.kill()
        t = time.monotonic()
        for th in self._threads:
            th.join(10)
        return rc, t

    @staticmethod
    def text(lines) -> str:
        return "".join(s for _, s in lines)


def test_finished_files_print_before_a_runaway_times_out(tmp_path):
    a, b = write(tmp_path, "a.py", QUICK), write(tmp_path, "b.py", LOOP)
    inf = write(tmp_path, "inf.py", RUNAWAY)
    p = Proc(a, b, inf, "--timeout", "4")
    rc, t_end = p.finish()
    out, err = p.text(p.out), p.text(p.err)
    assert (rc, out) == (1, "1\n19900\n"), err
    assert err.splitlines()[-1] == (
        "TimeoutError: still running after 4 s of run time (limit --timeout 4; raise it "
        "with --timeout SECONDS, or 0 for no limit)"
    )
    assert f'File "{inf}", line ' in err
    # both finished files were printed while the runaway still ran (4 s of run time)
    assert t_end - p.out[-1][0] > 2.0, (t_end, p.out)


def test_json_in_input_order_holding_back_later_files(tmp_path):
    a, c = write(tmp_path, "a.py", QUICK), write(tmp_path, "c.py", LOOP)
    inf = write(tmp_path, "inf.py", RUNAWAY)
    p = Proc("--json", a, inf, c, "--timeout", "3")
    rc, t_end = p.finish()
    rows = [(t, json.loads(s)) for t, s in p.out]
    assert rc == 1 and [r["file"] for _, r in rows] == [a, inf, c]
    assert rows[0][1] == {"file": a, "stdout": "1\n", "error": None, "exit": 0}
    assert t_end - rows[0][0] > 1.5  # a.py printed at once
    assert rows[1][1]["error"] == {
        "type": "TimeoutError",
        "message": "still running after 3 s of run time (limit --timeout 3; raise it with "
        "--timeout SECONDS, or 0 for no limit)",
        "line": 1,
    }
    assert rows[2][1]["stdout"] == "19900\n" and rows[2][1]["error"] is None
    assert rows[2][0] >= rows[1][0] > rows[0][0]  # c.py waited for inf.py


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_prints_what_finished_and_exits_130(tmp_path):
    a, c = write(tmp_path, "a.py", QUICK), write(tmp_path, "c.py", LOOP)
    inf = write(tmp_path, "inf.py", RUNAWAY)
    p = Proc(a, inf, c, "--timeout", "0")  # no time limit: only Ctrl-C ends it
    p.wait_for_stdout(1)  # a.py is out: the VM is running in slices
    time.sleep(1.0)
    t_sig = time.monotonic()
    p.p.send_signal(signal.SIGINT)
    rc, t_end = p.finish(limit_s=60)
    out, err = p.text(p.out), p.text(p.err)
    # c.py had finished too (held back behind inf.py): printed at the interrupt
    assert (rc, out) == (130, "1\n19900\n"), err
    assert err.splitlines()[-1] == f"KeyboardInterrupt (not finished: {inf})"
    assert "Traceback" not in err
    assert t_end - t_sig < 30  # stopped between slices, not at the step budget


def test_step_budget_message_names_the_option(tmp_path, capsys):
    loop = write(tmp_path, "loop.py", "n = 0\nwhile True:\n    n += 1\n")
    for vm in ("python", "jax"):
        status = cli.main(["run", "--compiler", "python", "--vm", vm, loop, "--max-steps", "1000"])
        out, err = capsys.readouterr()
        assert (status, out) == (1, "")
        assert err.splitlines()[-1] == (
            "TimeoutError: step budget exhausted (limit --max-steps 1000 instructions; "
            "raise it with --max-steps N)"
        )


def test_entry_call_times_out_after_the_module_body(tmp_path, capsys):
    f = write(tmp_path, "e.py", "print(5)\n\n\ndef spin(n: int) -> int:\n"
              "    while True:\n        n = n + 0\n\n\ndef sq(n: int) -> int:\n"
              "    return n * n\n")  # fmt: skip
    base = ["run", "--compiler", "python", f, "--entry"]
    assert cli.main([*base, "sq", "--args", "7"]) == 0
    assert capsys.readouterr() == ("5\n49\n", "")
    status = cli.main([*base, "spin", "--args", "1", "--timeout", "1"])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "5\n")
    assert err.splitlines()[-1].startswith("TimeoutError: still running after 1 s of run time")
    assert "in spin" in err


def test_timeout_option():
    ns = cli.build_parser().parse_args(["run", "x.py"])
    assert ns.timeout is None  # the default limit: cli.DefaultTimeout
    d = cli.DefaultTimeout(most=20.0, end_s=28.0, least=5.0, start=100.0)
    assert d.seconds(103.0) == 20.0  # a quick start: the most run time
    assert d.seconds(115.0) == 13.0  # a slow one: the run still ends 28 s after the start
    assert d.seconds(126.0) == 5.0  # never fewer than `least` seconds
    assert cli.DefaultTimeout().most == cli.DEFAULT_TIMEOUT > 0
    # the process's start, on this clock: at most collection's length before this module's
    # import (not "now": under pytest-xdist a worker may reach this test much later)
    assert 0 <= _IMPORTED - cli._T_START < 600
    # the process's first run counts from the process's start, a later one from its call
    first, later = cli._FIRST_RUN[0], time.monotonic()
    start = cli._run_start()
    assert start == cli._T_START if first else start >= later
    assert cli._run_start() >= later
    with pytest.raises(SystemExit, match="--timeout must be >= 0"):
        cli.main(["run", "x.py", "--timeout", "-1"])


def test_default_timeout_after_a_slow_start(tmp_path):
    # a start 100 s ago: the default gives the programs its least run time (1 s here),
    # ends the runaway with a TimeoutError that says how the default is made, and the
    # quick file beside it is unaffected
    a, inf = write(tmp_path, "a.py", QUICK), write(tmp_path, "inf.py", RUNAWAY)
    d = cli.DefaultTimeout(most=20.0, end_s=28.0, least=1.0, start=time.monotonic() - 100)
    t0 = time.monotonic()
    ra, rinf = cli.run_files([a, inf], compiler="python", timeout=d)
    assert time.monotonic() - t0 < 15.0  # 1 s of run time, not 20
    assert (ra.stdout, ra.error) == ("1\n", None)
    assert rinf.error.type == "TimeoutError"
    assert rinf.error.message == (
        "still running after 1 s of run time (the default limit ends a run 28 s after jaxcc "
        "started, with 1 to 20 s of run time; raise it with --timeout SECONDS, or 0 for no "
        "limit)"
    )
