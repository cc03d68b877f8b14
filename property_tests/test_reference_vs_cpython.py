"""Differential tests: the reference pipeline (reference.compiler + reference.interp) against
CPython (property_tests.oracle) on generated programs and near misses.

Well-typed programs must give the same stdout and the same exception name (or none).
Near misses must give the exception jaxcc promises for them; where CPython reports a
SyntaxError/IndentationError at compile time, jaxcc must report the same class at the
same line. ``--slow`` (JAXCC_SLOW=1) runs 10x more examples.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings

from jaxcc import isa
from jaxcc.errors import EXCEPTION_NAME, Code
from jaxcc.limits import Limits
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.interp import run_program
from jaxcc.testing import ERROR_CLASSES, near_misses, programs
from property_tests import oracle
from property_tests.limits import HOST as LIMITS

SLOW = os.environ.get("JAXCC_SLOW") == "1"
SCALE = 10 if SLOW else 1

SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Result(NamedTuple):
    stdout: str
    error: str | None
    line: int
    compile_time: bool


def run_reference(source: str, limits: Limits = LIMITS) -> Result:
    """Compile and run with the reference pipeline; errors named as CPython names them."""
    c = compile_source(source, limits)
    code = int(c.error.code)
    if code != Code.OK:
        return Result("", EXCEPTION_NAME[Code(code)], int(c.error.line), True)
    r = run_program(c.program, limits)
    out = isa.format_output(r.out_kind, r.out_val, r.n_out)
    status = int(r.status)
    if status == Code.OK:
        return Result(out, None, 0, False)
    if status == Code.UNBOUND_LOCAL and int(r.fn) == 0:
        # an unbound module variable is a NameError in CPython
        return Result(out, "NameError", int(r.line), False)
    return Result(out, EXCEPTION_NAME[Code(status)], int(r.line), False)


def check_program(source: str, limits: Limits = LIMITS):
    """Same stdout and exception name as CPython; returns the shared outcome."""
    want = oracle.run_detailed(source, limits)
    got = run_reference(source, limits)
    assert want.error != "TimeoutError", f"program too long for the oracle:\n{source}"
    assert (got.stdout, got.error) == (want.stdout, want.error), (
        f"\n--- program\n{source}--- CPython: {want}\n--- jaxcc:   {got}"
    )
    return got


@settings(max_examples=250 * SCALE, **SETTINGS)
@given(programs())
def test_programs_match_cpython(source):
    check_program(source)


@settings(max_examples=60 * SCALE, **SETTINGS)
@given(programs(max_functions=5, fuel=4, depth=3, max_statements=5, formatting=False))
def test_bigger_programs_match_cpython(source):
    check_program(source)


# Both sides count frames (the module body is one) and output items the same way, so a
# tiny max_depth and max_output give RecursionError and OutputLimitError (with the
# output printed before it) that must agree too.
TIGHT = LIMITS._replace(max_output=12, max_depth=3)


@settings(max_examples=80 * SCALE, **SETTINGS)
@given(programs())
def test_programs_match_cpython_at_tight_limits(source):
    check_program(source, TIGHT)


COMPILE_TIME = {"SyntaxError", "IndentationError"}
RUN_TIME = (
    {ERROR_CLASSES[k] for k in ERROR_CLASSES}
    - COMPILE_TIME
    - {
        "TypeError",
        "UnsupportedError",
    }
)


@settings(max_examples=150 * SCALE, **SETTINGS)
@given(near_misses())
def test_near_misses(example):
    check_near_miss(*example)


@settings(max_examples=100 * SCALE, **SETTINGS)
@given(near_misses(context=True))
def test_near_misses_in_context(example):
    check_near_miss(*example)


def check_near_miss(source: str, expected: str):
    got = run_reference(source)
    assert got.error == expected, f"\n--- program\n{source}--- expected {expected}, jaxcc: {got}"
    want = oracle.run_detailed(source, LIMITS)
    if want.compile_time:
        # CPython finds it while compiling: same class, same line
        assert (got.error, got.line) == (want.error, want.line), (
            f"\n--- program\n{source}--- CPython: {want}\n--- jaxcc:   {got}"
        )
    elif expected in RUN_TIME and expected != "NameError":
        assert (got.stdout, got.error) == (want.stdout, want.error), (
            f"\n--- program\n{source}--- CPython: {want}\n--- jaxcc:   {got}"
        )


# Fixed programs that once disagreed (or nearly did): kept as plain tests.
REGRESSIONS = [
    "print(-7 // 2, -7 % 2, 7 % -2, -7 % -2)\n",
    "x = True\nx &= False\nprint(x)\n",
    "print(True + True)\n",
    "print(1 < 2 < 3, 3 > 2 > 2)\n",
    "def f(n):\n    if n <= 0:\n        return 0\n    return 1 + f(n - 1)\nprint(f(126))\nprint(f(127))\n",
]


@pytest.mark.parametrize("source", REGRESSIONS)
def test_regressions(source):
    check_program(source)


# Near misses that once disagreed (source, exception name): kept as plain tests.
NEAR_MISS_REGRESSIONS = [
    ("x = (0 + 1))\n", "SyntaxError"),  # was reported at EOF (line 2), not at the ')'
    ("print(5))\ny = 1\n", "SyntaxError"),
    ("x = 1\nglobal x\n", "SyntaxError"),  # assigned before global declaration
    ("global x\nx = 1\n", "UnsupportedError"),
    ("if 1:\n        x = 1\n    y = 2\n", "IndentationError"),
    (
        "def f(n, b):\n    if n <= 0:\n        return 0\n    x = b and True\n"
        "    return f(n - 1, b)\n",
        "TypeError",
    ),  # b has no typed input: an int
]


@pytest.mark.parametrize("source, expected", NEAR_MISS_REGRESSIONS)
def test_near_miss_regressions(source, expected):
    check_near_miss(source, expected)
