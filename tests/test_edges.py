"""Edges a new user meets, on both compilers (``--compiler jax --vm jax`` and ``--compiler
python --vm python``): the same exception, message and line as ``python FILE`` where CPython
raises one, the same output where it runs, and the two paths agree on every field.

Each path compiles and runs all the cases as one batch (``jaxcc run --json``), so the JAX
path compiles its few shapes once.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys

import pytest

from jaxcc import cli


def _nest_ifs(n: int) -> str:
    return "".join(" " * i + "if True:\n" for i in range(n)) + " " * n + "print(1)\n"


def _parens(n: int) -> str:
    return "x = " + "(" * n + "1" + ")" * n + "\nprint(x)\n"


CASES = {
    # CPython's limits (3.11+): 200 open brackets, 99 indented blocks, 4300 decimal digits
    "parens_200": _parens(200),
    "parens_201": _parens(201),
    "parens_201_after_syntax_error": "x = = 1\n" + _parens(201),  # the tokenizer's wins
    "brackets_201": "x = " + "(" * 200 + "[1]" + ")" * 200 + "\n",  # '[' counts too
    "parens_200_over_lines": "x = (\n" + "(" * 199 + "1" + ")" * 200 + "\nprint(x)\n",
    "indent_99": _nest_ifs(99),
    "indent_100": _nest_ifs(100),
    "indent_100_after_syntax_error": "x = = 1\n" + _nest_ifs(100),  # the parser's wins
    "digits_4300": "x = 0\nif x:\n    y = " + "7" * 4300 + "\nprint(x)\n",  # never runs
    "digits_5000": "x = 1\ny = " + "7" * 5000 + "\nprint(y)\n",
    "digits_5000_underscores": "y = 1 + " + "7_" * 4300 + "7\n",  # 4301 digits
    "digits_zeros": "y = " + "0" * 5000 + "\nprint(y)\n",  # no significant digit
    "digits_after_syntax_error": "x = = 1\ny = " + "7" * 5000 + "\n",
    "digits_before_syntax_error": "y = " + "7" * 5000 + "\nx = = 1\n",
    "nul_byte": "x = 1\ny = \0\nprint(x)\n",
    "nul_byte_line_1": "x = 1  # \0\n",
    "nul_after_syntax_error": "x = = 1\ny = 2\n\0\n",  # the null byte's line wins
    "nul_after_unexpected_indent": "x = 1\n    y = 2\n\0\n",  # the indent wins
    "nul_in_brackets": "x = (\n\0\n",
    "byte_order_mark": "\ufeffx = 1\nprint(x)\n",
    "byte_order_mark_error": "\ufeffx = zz\n",  # the name is read at its column
    "modulo_by_zero": "x = 0\nprint(7 % x)\n",
    "aug_modulo_by_zero": "x = 7\nx %= 0\n",
    "floordiv_by_zero": "x = 0\nprint(7 // x)\n",
    # outside the subset (CPython runs them): the reference compiler's messages
    "bool_call": "x = bool(1)\nprint(x)\n",
    "int_call": "print(1, int (2))\n",
    "defined_twice": "def f():\n    return 1\n\n\ndef f():\n    return 2\n\n\nprint(f())\n",
}

# cases that CPython runs and jaxcc rejects: (type, message, line)
OUTSIDE = {
    "bool_call": ("UnsupportedError", "unsupported builtin 'bool'", 1),
    "int_call": ("UnsupportedError", "unsupported builtin 'int'", 1),
    "digits_4300": ("LimitError", "program exceeds the limit int32", 3),  # ints are int32
    "defined_twice": ("UnsupportedError", "function 'f' defined twice", 5),
}


def cpython(path: str) -> dict:
    """What ``python FILE`` does, as the fields of ``jaxcc run --json``."""
    p = subprocess.run([sys.executable, path], capture_output=True, text=True, check=False)
    error = None
    if p.returncode != 0:
        last = p.stderr.strip().splitlines()[-1]
        typ, _, msg = last.partition(": ")
        line = int(re.findall(r'File ".*", line (\d+)', p.stderr)[-1])
        error = {"type": typ, "message": msg, "line": line}
    return {"stdout": p.stdout, "error": error}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("edges")
    out = {}
    for name, text in CASES.items():
        p = d / f"{name}.py"
        p.write_bytes(text.encode("utf-8"))
        out[name] = str(p)
    return out


@pytest.fixture(scope="module")
def results(files) -> dict:
    """backend -> case -> the fields ``jaxcc run --json`` prints for it."""
    out = {}
    for backend in ("python", "jax"):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            cli.main(["run", "--json", "--compiler", backend, "--vm", backend, *files.values()])
        rows = [json.loads(line) for line in buf.getvalue().splitlines()]
        by_path = {r.pop("file"): r for r in rows}
        out[backend] = {name: by_path[path] for name, path in files.items()}
    return out


@pytest.mark.parametrize("backend", ["python", "jax"])
def test_edges_like_cpython(files, results, backend):
    bad = []
    for name, path in files.items():
        got = results[backend][name]
        if name in OUTSIDE:
            typ, msg, line = OUTSIDE[name]
            want = {"type": typ, "message": msg, "line": line}
            if got["error"] != want:
                bad.append((name, got["error"], want))
            continue
        want = cpython(path)
        if (got["stdout"], got["error"]) != (want["stdout"], want["error"]):
            bad.append((name, got, want))
    assert not bad, "\n".join(map(str, bad))


def test_both_paths_agree(results):
    for name in CASES:
        assert results["jax"][name] == results["python"][name], name


def test_byte_order_mark_keeps_function_names():
    # the JAX compiler's host-side names (run-time errors say "in f") skip it too
    from jaxcc import compiler

    for src in ("\ufeffdef f(x):\n    return x\n", b"\xef\xbb\xbfdef f(x):\n    return x\n"):
        _, _, debug = compiler.compile_many([src])
        assert debug[0].fn_names == ("<module>", "f")
        assert debug[0].local_names == ((), ("x",))
