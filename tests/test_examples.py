"""Every examples/*.py through the CLI, on both paths (python/python, the reference, and
jax/jax, the on-device compiler and VM), against CPython.

For each example: CPython's stdout equals examples/NAME.out (the stdout before any error),
and `jaxcc run` prints exactly NAME.out and raises the exception CPython raises (by
name). The one deliberate difference is listed in DIVERGES: jaxcc's ints are int32.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from jaxcc import cli

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
FILES = sorted(EXAMPLES.glob("*.py"))

# example -> the exception jaxcc raises where CPython (unbounded ints) goes on
DIVERGES = {"overflow_error.py": "OverflowError"}


def test_there_are_examples():
    assert len(FILES) >= 8
    for f in FILES:
        assert f.with_suffix(".out").exists(), f


def _cpython(path: pathlib.Path) -> tuple[str, str | None]:
    """(stdout, exception name or None) of `python FILE`."""
    p = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    exc = None
    if p.returncode != 0:
        exc = p.stderr.strip().splitlines()[-1].split(":")[0]
    return p.stdout, exc


BACKENDS = ["python", "jax"]


@pytest.fixture(scope="module", params=BACKENDS)
def jaxcc_results(request):
    """All examples as one batch through `jaxcc run --json` (in-process), per backend."""
    import contextlib
    import io

    buf = io.StringIO()
    # --timeout 0: the default (up to 20 s of run time) holds the examples on an idle 2-core CPU
    # (12-16 s, docs/vm.md "Budgets"); a machine shared with other jobs can be several
    # times slower, and this test is about their output. The step budget still bounds them.
    with contextlib.redirect_stdout(buf):
        status = cli.main(["run", "--json", "--compiler", request.param, "--vm", request.param,
                           "--timeout", "0", *map(str, FILES)])  # fmt: skip
    rows = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [pathlib.Path(r["file"]).name for r in rows] == [f.name for f in FILES]
    assert status == int(any(r["exit"] for r in rows))
    return {pathlib.Path(r["file"]).name: r for r in rows}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_example(path, jaxcc_results):
    expected = path.with_suffix(".out").read_text()
    py_out, py_exc = _cpython(path)
    row = jaxcc_results[path.name]
    got_exc = row["error"]["type"] if row["error"] else None
    assert row["stdout"] == expected
    assert row["exit"] == int(got_exc is not None)
    if path.name in DIVERGES:
        assert py_out.startswith(expected) and py_out != expected
        assert py_exc is None
        assert got_exc == DIVERGES[path.name]
    else:
        assert py_out == expected
        assert got_exc == py_exc
    if got_exc is not None:
        assert row["error"]["line"] > 0


def test_error_examples_print_like_cpython():
    """The stderr of `python -m jaxcc run` for the error examples ends like CPython's."""
    for name in ("zero_division.py", "syntax_error.py"):
        path = EXAMPLES / name
        p = subprocess.run([sys.executable, "-m", "jaxcc", "run", str(path)], capture_output=True,
                           text=True, timeout=120, check=False, cwd=EXAMPLES.parent)  # fmt: skip
        q = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                           timeout=120, check=False)  # fmt: skip
        assert (p.returncode, q.returncode) == (1, 1)
        assert p.stdout == q.stdout
        ours, theirs = p.stderr.splitlines(), q.stderr.splitlines()
        assert ours[-1] == theirs[-1]  # exception name and message
        assert f'File "{path}"' in p.stderr
        # the source line of the innermost frame is shown
        assert ours[-2].strip() in [t.strip() for t in theirs]
