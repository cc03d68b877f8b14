"""Tests of jaxcc.testing (the public strategies) and of property_tests.oracle.

The strategies must make what their docstrings promise: programs() parse, run under
CPython within the oracle's budget and raise only the run-time errors they put in on
purpose; where they raise nothing, plain CPython (no int32 rewriting) prints the same.
near_misses() examples fail in the promised way under CPython where CPython can tell.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os

import pytest
from hypothesis import HealthCheck, given, seed, settings

from jaxcc.limits import Limits
from jaxcc.testing import ERROR_CLASSES, near_misses, programs
from property_tests import oracle

SCALE = 10 if os.environ.get("JAXCC_SLOW") == "1" else 1
SETTINGS = dict(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

# what a generated program may raise (on purpose: see programs()' docstring)
PROGRAM_ERRORS = {
    None,
    "ZeroDivisionError",
    "OverflowError",
    "ValueError",
    "NameError",
    "UnboundLocalError",
    "AssertionError",
}


def plain_exec(source: str) -> str:
    """stdout of the source under unmodified CPython."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(source, "<plain>", "exec"), {"__name__": "__main__"})
    return buf.getvalue()


@settings(max_examples=80 * SCALE, **SETTINGS)
@given(programs())
def test_programs_parse_and_run(source):
    ast.parse(source)
    out = oracle.run_detailed(source, timeout=5.0)
    assert out.error in PROGRAM_ERRORS, (source, out)
    if out.error is None:
        # values stayed in int32, so CPython's own arithmetic prints the same
        assert plain_exec(source) == out.stdout


@settings(max_examples=30 * SCALE, **SETTINGS)
@given(programs(max_functions=5, fuel=4, depth=3, max_statements=6, unbound_reads=False))
def test_bigger_programs_terminate(source):
    out = oracle.run_detailed(source, timeout=5.0)
    assert out.error in PROGRAM_ERRORS - {"NameError", "UnboundLocalError"}, (source, out)


@settings(max_examples=30 * SCALE, **SETTINGS)
@given(programs(formatting=False))
def test_unformatted_is_ast_unparse(source):
    assert ast.unparse(ast.parse(source)) + "\n" == source


RUNTIME = {"ZeroDivisionError", "OverflowError", "ValueError", "RecursionError",
           "UnboundLocalError", "AssertionError"}  # fmt: skip


@settings(max_examples=150 * SCALE, **SETTINGS)
@given(near_misses())
def test_near_misses_fail_as_promised(example):
    check_near_miss(*example)


@settings(max_examples=60 * SCALE, **SETTINGS)
@given(near_misses(context=True))
def test_near_misses_in_context_fail_as_promised(example):
    check_near_miss(*example)


def check_near_miss(source, expected):
    assert expected in ERROR_CLASSES.values()
    out = oracle.run_detailed(source, timeout=5.0)
    if expected in ("SyntaxError", "IndentationError"):
        assert out.compile_time and out.error == expected, (source, out)
        return
    assert not out.compile_time, (source, out)  # every other near miss is valid Python
    if expected in RUNTIME:
        assert out.error == expected, (source, out)
    elif expected == "NameError" and not out.compile_time:
        # an unknown name, or a module variable read while unbound
        assert out.error == "NameError", (source, out)


@pytest.mark.parametrize("cls", sorted(ERROR_CLASSES))
def test_near_misses_one_class(cls):
    @settings(max_examples=10, database=None, **SETTINGS)
    @given(near_misses([cls]))
    def inner(example):
        assert example[1] == ERROR_CLASSES[cls]

    inner()


def test_in_context_inserts_only_where_a_logical_line_starts():
    """A statement at column 0 after ``x = 1; \\`` and a newline is on x's logical line
    (the formatter emits such lines): a compound snippet put there was a SyntaxError in
    CPython where the test expected the snippet's own error. Every insertion point of
    such a program must give a program that compiles."""
    from jaxcc.testing import _in_context

    class Pick:  # the insertion point i of those offered
        def __init__(self, i):
            self.i, self.offered = i, 0

        def pick(self, seq):
            self.offered = len(seq)
            return seq[self.i]

    prog = "x = 1;  \\\ny = 2\ndef f(a):\n    return a\n# c\n\nz = 3; w = 4\n"
    snippet = "for q in range(3):\n    print(q)\n"
    first = Pick(0)
    _in_context(first, prog, snippet, "any")
    # before x, before def, before the comment's z, at the end (not before y, nor w)
    assert first.offered == 4
    for i in range(first.offered):
        compile(_in_context(Pick(i), prog, snippet, "any"), "<context>", "exec")


def test_near_misses_rejects_unknown_class():
    with pytest.raises(ValueError):
        near_misses(["no_such_class"])


def _collect(n: int) -> list[str]:
    seen: list[str] = []

    @seed(12345)
    @settings(max_examples=n, database=None, **SETTINGS)
    @given(programs())
    def inner(source):
        seen.append(source)

    inner()
    return seen


def test_programs_have_variety():
    sources = _collect(150)
    text = "\n".join(sources)
    for needle in ("#", "\\\n", ";", "elif", "else:", "while True:", "print()", "range(",
                   "break", "continue", "return", "assert", " -> ", ": bool", "n - 1",
                   "**", "<<", ">>", "//", "%", " if ", " and ", " or ", "not ", "~",
                   "abs(", "min(", "max(", "True", "False"):  # fmt: skip
        assert needle in text, needle
    assert any(p in text for p in ("0x", "0X")) and any(p in text for p in ("0o", "0O"))
    assert any(p in text for p in ("0b", "0B")) and "_" in text
    nodes = [n for s in sources for n in ast.walk(ast.parse(s))]
    assert any(isinstance(n, ast.Compare) and len(n.ops) >= 2 for n in nodes)
    assert any(isinstance(n, ast.AugAssign) for n in nodes)
    assert any(isinstance(n, ast.BoolOp) and len(n.values) >= 3 for n in nodes)
    # indentation other than four spaces, one-line bodies
    lines = text.splitlines()
    assert any(line.startswith("  ") and not line.startswith("    ") for line in lines)
    assert any(line.startswith(("if ", "for ", "while ", "def ")) and not line.rstrip().endswith(":")
               and ":" in line for line in lines)  # fmt: skip


def test_programs_deterministic():
    assert _collect(20) == _collect(20)


# ------------------------------------------------------------------------ the oracle


@pytest.mark.parametrize(
    "source, stdout, error",
    [
        ("print(2147483647 + 1)", "", "OverflowError"),
        ("print(-2147483647 - 1)", "-2147483648\n", None),
        ("print((-2147483647 - 1) // -1)", "", "OverflowError"),
        ("print(abs(-2147483647 - 1))", "", "OverflowError"),
        ("x = -2147483647 - 1\nprint(-x)", "", "OverflowError"),
        ("print(1 << 31, 1)", "", "OverflowError"),
        ("print(1 << 30, -1 << 31, 0 << 100)", "1073741824 -2147483648 0\n", None),
        ("print(-1 >> 40, 5 >> 100)", "-1 0\n", None),
        ("print(1 >> -1)", "", "ValueError"),
        ("print(1 << -1)", "", "ValueError"),
        ("print(2 ** -1)", "", "ValueError"),
        ("print(3 ** 40)", "", "OverflowError"),
        ("print(2 ** 1000000000)", "", "OverflowError"),
        ("print((-2) ** 31, (-1) ** 41, 0 ** 0)", "-2147483648 -1 1\n", None),
        ("x = 2147483647\nx += 1", "", "OverflowError"),
        ("x = True\nx &= False\nprint(x)", "False\n", None),
        ("print(True + True, -True, ~True, +True)", "2 -1 -2 1\n", None),
        ("print()\nprint(1, True, 3)", "\n1 True 3\n", None),
        ("print(-7 // 2, -7 % 2, 7 % -2)", "-4 1 -1\n", None),
        ("print(1 // 0)", "", "ZeroDivisionError"),
        ("if False:\n    z = 1\nprint(z)", "", "NameError"),
        (
            "def g():\n    if False:\n        z = 1\n    return z\nprint(g())",
            "",
            "UnboundLocalError",
        ),
        ("print(1)\nassert 1 == 2", "1\n", "AssertionError"),
        ("for i in range(1, 5, 0):\n    print(i)", "", "ValueError"),
        ("while True:\n    pass", "", "TimeoutError"),
        ("return 5", "", "SyntaxError"),
        ("  x = 1", "", "IndentationError"),
    ],
)
def test_oracle_int32_semantics(source, stdout, error):
    assert oracle.run(source) == (stdout, error)


def test_oracle_recursion_limit_counts_frames():
    # the module body is frame 1: f(k) makes k + 1 more frames
    src = "def f(n):\n    if n <= 0:\n        return 0\n    return 1 + f(n - 1)\nprint(f({}))"
    limits = Limits(max_depth=10)
    assert oracle.run(src.format(8), limits) == ("8\n", None)
    assert oracle.run(src.format(9), limits) == ("", "RecursionError")


def test_oracle_output_limit():
    limits = Limits(max_output=5)
    assert oracle.run("print(1, 2)\nprint(3)", limits) == ("1 2\n3\n", None)
    assert oracle.run("print(1, 2)\nprint(3, 4)", limits) == ("1 2\n3 4", "OutputLimitError")


def test_oracle_compile_time_line():
    out = oracle.run_detailed("x = 1\nif x\n    print(x)\n")
    assert out == oracle.Outcome("", "SyntaxError", 2, True)


def test_oracle_budget_is_deterministic():
    src = "for i in range(100):\n    for j in range(100):\n        pass\nprint(1)"
    assert oracle.run(src, budget=20000) == ("1\n", None)
    assert oracle.run(src, budget=5000) == ("", "TimeoutError")
