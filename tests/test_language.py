"""The language through the reference pipeline (reference.compiler + reference.interp):
every run-time error, every compile-time error class, every unsupported construct and
the edge cases of docs/language.md. Where CPython can run the program, the expected
outcome is also checked against CPython (property_tests.oracle), so these tables are
differential tests too.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from jaxcc import isa
from jaxcc.errors import EXCEPTION_NAME, Code, Limit, Syntax, Type, Unsupported, Value
from jaxcc.limits import DEFAULT, Limits
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.interp import run_program
from property_tests import oracle


class Run(NamedTuple):
    stdout: str
    error: str | None  # exception name as CPython names it
    code: int  # errors.Code
    detail: int
    line: int


def run(source: str, limits: Limits = DEFAULT) -> Run:
    c = compile_source(source, limits)
    code = int(c.error.code)
    if code != Code.OK:
        return Run("", EXCEPTION_NAME[Code(code)], code, int(c.error.detail), int(c.error.line))
    r = run_program(c.program, limits)
    out = isa.format_output(r.out_kind, r.out_val, r.n_out)
    status = int(r.status)
    if status == Code.OK:
        return Run(out, None, 0, 0, 0)
    name = EXCEPTION_NAME[Code(status)]
    if status == Code.UNBOUND_LOCAL and int(r.fn) == 0:
        name = "NameError"  # as CPython reports it at module level
    return Run(out, name, status, int(r.detail), int(r.line))


def src(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def check_cpython(source: str, stdout: str, error: str | None, limits: Limits = DEFAULT):
    assert oracle.run(source, limits) == (stdout, error), "the test's expectation is not CPython's"


# ------------------------------------------------------------------ run-time errors

RUNTIME = [
    # (source, stdout, Code, detail, line)
    (src("print(1)", "x = 0", "print(5 // x)"), "1\n", Code.ZERO_DIVISION, 0, 3),
    (src("x = 0", "print(5 % x)"), "", Code.ZERO_DIVISION, 0, 2),
    (src("x = 7", "x //= 0"), "", Code.ZERO_DIVISION, 0, 2),
    (src("x = 2147483647", "print(x + 1)"), "", Code.OVERFLOW, 0, 2),
    (src("x = -2147483647 - 1", "print(x - 1)"), "", Code.OVERFLOW, 0, 2),
    (src("x = 65536", "print(x * x)"), "", Code.OVERFLOW, 0, 2),
    (src("x = -2147483647 - 1", "print(x // -1)"), "", Code.OVERFLOW, 0, 2),
    (src("x = -2147483647 - 1", "print(-x)"), "", Code.OVERFLOW, 0, 2),
    (src("x = -2147483647 - 1", "print(abs(x))"), "", Code.OVERFLOW, 0, 2),
    (src("print(1 << 31)"), "", Code.OVERFLOW, 0, 1),
    (src("print(2147483647 + 1)"), "", Code.OVERFLOW, 0, 1),
    (src("print(abs(-2 ** 31))"), "", Code.OVERFLOW, 0, 1),  # 2 ** 31 itself overflows
    (src("print(abs(-2147483648))"), "", Code.OVERFLOW, 0, 1),
    (src("print(-(-2147483648))"), "", Code.OVERFLOW, 0, 1),
    (src("print(-2147483648 // -1)"), "", Code.OVERFLOW, 0, 1),
    (src("print(-2147483648 % -1, -2147483648 // 1)"), "0 -2147483648\n", Code.OK, 0, 0),
    (src("print(2 ** 31)"), "", Code.OVERFLOW, 0, 1),
    (src("x = 3", "x **= 21"), "", Code.OVERFLOW, 0, 2),
    (src("print(1 << -1)"), "", Code.VALUE, Value.NEGATIVE_SHIFT, 1),
    (src("x = -3", "print(8 >> x)"), "", Code.VALUE, Value.NEGATIVE_SHIFT, 2),
    (src("print(2 ** -1)"), "", Code.VALUE, Value.NEGATIVE_POWER, 1),
    (
        src("s = 0", "for i in range(1, 5, s):", "    print(i)"),
        "",
        Code.VALUE,
        Value.RANGE_STEP_ZERO,
        2,
    ),  # fmt: skip
    (src("def f(n):", "    return f(n + 1)", "print(f(0))"), "", Code.RECURSION, 0, 2),
    (
        src("def f(a):", "    if a > 9:", "        v = 1", "    return v", "print(f(1))"),
        "",
        Code.UNBOUND_LOCAL,
        0,
        4,
    ),  # fmt: skip
    (
        src("def f():", "    for i in range(0):", "        pass", "    return i", "print(f())"),
        "",
        Code.UNBOUND_LOCAL,
        0,
        4,
    ),  # fmt: skip
    (src("def f(a):", "    v += a", "    v = 0", "f(1)"), "", Code.UNBOUND_LOCAL, 0, 2),
    (src("print(2)", "assert 1 == 2", "print(3)"), "2\n", Code.ASSERTION, 0, 2),
    (src("assert 0"), "", Code.ASSERTION, 0, 1),
    (src("x = 5", "assert x < 3 and x > 1"), "", Code.ASSERTION, 0, 2),
]


@pytest.mark.parametrize("source, stdout, code, detail, line", RUNTIME)
def test_runtime_errors(source, stdout, code, detail, line):
    got = run(source)
    assert (got.stdout, got.code, got.detail, got.line) == (stdout, code, detail, line), got
    check_cpython(source, stdout, EXCEPTION_NAME[code] if code != Code.OK else None)


def test_unbound_module_variable_is_name_error():
    source = src("if False:", "    z = 1", "print(2)", "print(z)")
    got = run(source)
    assert (got.stdout, got.code, got.error, got.line) == ("2\n", Code.UNBOUND_LOCAL,
                                                          "NameError", 4)  # fmt: skip
    check_cpython(source, "2\n", "NameError")


def test_timeout_and_output_limit():
    got = run(src("x = 0", "while True:", "    x += 1"), Limits(max_steps=1000))
    assert got.code == Code.TIMEOUT
    got = run(src("for i in range(10):", "    print(i)"), Limits(max_output=7))
    assert got.code == Code.OUTPUT_LIMIT and got.stdout.startswith("0\n1\n2\n")


def test_recursion_at_the_limit():
    rec = src("def f(n):", "    if n <= 0:", "        return 0", "    return 1 + f(n - 1)",
              "print(f({}))")  # fmt: skip
    limits = Limits(max_depth=50)
    # the module body is a frame: f(48) makes 49 more, f(49) one too many
    assert run(rec.format(48), limits)[:2] == ("48\n", None)
    assert run(rec.format(49), limits)[:2] == ("", "RecursionError")
    check_cpython(rec.format(48), "48\n", None, limits)
    check_cpython(rec.format(49), "", "RecursionError", limits)
    # at the default limit (128 frames)
    assert run(rec.format(126))[:2] == ("126\n", None)
    assert run(rec.format(127))[:2] == ("", "RecursionError")


# ------------------------------------------------------------------ compile-time errors

COMPILE = [
    # (source, Code, detail or None (any), line)
    (src("x = 1", "if x > 1", "    print(x)"), Code.SYNTAX, Syntax.EXPECTED_COLON, 2),
    (src("def f(a)", "    return a"), Code.SYNTAX, Syntax.EXPECTED_COLON, 1),
    (src("x = 1", "print((x + 1)"), Code.SYNTAX, None, 2),
    (src("x = (1 + 2))"), Code.SYNTAX, Syntax.UNMATCHED_PAREN, 1),
    (src("x = 1 2"), Code.SYNTAX, None, 1),
    (src("x = 1 +"), Code.SYNTAX, None, 1),
    (src("x = 1", "x + 1 = 2"), Code.SYNTAX, None, 2),
    (src("1 = x"), Code.SYNTAX, None, 1),
    (src("x = 007"), Code.SYNTAX, Syntax.INVALID_DECIMAL, 1),
    (src("x = 1 $ 2"), Code.SYNTAX, None, 1),
    (src("print(1)", "return 5"), Code.SYNTAX, Syntax.RETURN_OUTSIDE_FUNCTION, 2),
    (src("if 1:", "    break"), Code.SYNTAX, Syntax.BREAK_OUTSIDE_LOOP, 2),
    (src("def f():", "    continue"), Code.SYNTAX, Syntax.CONTINUE_OUTSIDE_LOOP, 2),
    (src("def f(a, a):", "    return a"), Code.SYNTAX, Syntax.DUPLICATE_ARGUMENT, 1),
    (src("x = 1", "    y = 2"), Code.INDENTATION, Syntax.UNEXPECTED_INDENT, 2),
    (src("if 1:", "        x = 1", "    y = 2"), Code.INDENTATION, Syntax.UNINDENT_MISMATCH, 3),
    (src("if 1:", "print(1)"), Code.INDENTATION, Syntax.EXPECTED_INDENT, 2),
    (src("x = 1", "x = True"), Code.TYPE, Type.MIXED, 2),
    (src("x = True", "x += 1"), Code.TYPE, Type.MIXED, 2),
    (src("x = 1", "y = x or True"), Code.TYPE, Type.MIXED, 2),
    (src("x = 1", "y = 2 if x else False"), Code.TYPE, Type.MIXED, 2),
    (src("print(min(1, True))"), Code.TYPE, Type.MIXED, 1),
    (src("def f(a):", "    return a", "print(f(1))", "print(f(True))"), Code.TYPE, Type.MIXED, 4),
    (src("def f(a: bool):", "    return a", "print(f(1))"), Code.TYPE, Type.ANNOTATION_MISMATCH, 3),
    (
        src("def f(a):", "    if a:", "        return 1", "    return True"),
        Code.TYPE,
        Type.RETURN_MISMATCH,
        4,
    ),  # fmt: skip
    (
        src("def f(a):", "    if a:", "        return 1", "print(f(1))"),
        Code.TYPE,
        Type.RETURN_MISMATCH,
        1,
    ),  # fmt: skip
    (src("def f():", "    print(1)", "x = f()"), Code.TYPE, Type.NONE_VALUE, 3),
    (src("def f():", "    print(1)", "print(f())"), Code.TYPE, Type.NONE_VALUE, 3),
    (src("def f():", "    return", "if f():", "    pass"), Code.TYPE, Type.NONE_VALUE, 3),
    (src("x = None"), Code.TYPE, Type.NONE_VALUE, 1),
    (src("def f(a):", "    return a", "print(f(1, 2))"), Code.TYPE, Type.ARITY, 3),
    (src("def f(a, b):", "    return a", "print(f(1))"), Code.TYPE, Type.ARITY, 3),
    # a parameter only passed on to itself has no typed input: it is an int
    (
        src(
            "def f(n, b):",
            "    if n <= 0:",
            "        return 0",
            "    x = b and True",
            "    return f(n - 1, b)",
        ),
        Code.TYPE,
        Type.MIXED,
        4,
    ),  # fmt: skip
    (src("print(abs(1, 2))"), Code.TYPE, Type.BUILTIN_ARITY, 1),
    (src("print(max(1))"), Code.TYPE, Type.BUILTIN_ARITY, 1),
    (src("print(y)"), Code.NAME, None, 1),
    (src("print(f(1))", "def f(a):", "    return a"), Code.NAME, None, 1),
    (src("def f(a):", "    return a + q", "print(f(1))"), Code.NAME, None, 2),
    (src("x = 2147483648"), Code.LIMIT, Limit.INT_LITERAL, 1),
]


@pytest.mark.parametrize("source, code, detail, line", COMPILE)
def test_compile_errors(source, code, detail, line):
    got = run(source)
    assert (got.code, got.line) == (code, line), got
    if detail is not None:
        assert got.detail == detail, got
    if code in (Code.SYNTAX, Code.INDENTATION):
        out = oracle.run_detailed(source)
        assert (out.error, out.line) == (got.error, got.line), out


def test_limit_errors():
    assert run("x = 1\n" * 10, Limits(max_source_bytes=32)).code == Code.LIMIT
    many = "".join(f"def f{i}():\n    return {i}\n" for i in range(40))
    got = run(many)
    assert (got.code, got.detail) == (Code.LIMIT, Limit.FUNCTIONS)


ANY = -1  # any Unsupported detail

UNSUPPORTED = [
    ("x = 'abc'", Unsupported.STRING),
    ("x = 1.5", Unsupported.FLOAT),
    ("x = 2j", Unsupported.IMAGINARY),
    ("x = 3 / 2", Unsupported.TRUE_DIVISION),
    ("x = 6\nx /= 2", Unsupported.TRUE_DIVISION),
    ("x = [1, 2]", Unsupported.SUBSCRIPT),
    ("x = 1\nprint(x.real)", Unsupported.ATTRIBUTE),
    ("x = {1: 2}", Unsupported.DICT_SET),
    ("x = 1 @ 2", Unsupported.MATMUL),
    ("print((x := 1))", Unsupported.WALRUS),
    ("...", Unsupported.ELLIPSIS),
    ("# caf\u00e9\nx = 1", Unsupported.NON_ASCII),
    ("class C:\n    pass", Unsupported.KEYWORD),
    ("f = lambda a: a", Unsupported.KEYWORD),
    ("import math", Unsupported.KEYWORD),
    ("try:\n    pass\nexcept:\n    pass", Unsupported.KEYWORD),
    ("x = 1\ndel x", Unsupported.KEYWORD),
    ("x = 1, 2", Unsupported.TUPLE),
    ("a, b = 1, 2", Unsupported.TUPLE),
    ("a = b = 1", Unsupported.CHAINED_ASSIGNMENT),
    ("def f(a):\n    return a\nprint(f(a=1))", Unsupported.KEYWORD_ARGUMENT),
    ("print(1, flush=True)", Unsupported.KEYWORD_ARGUMENT),
    ("def f(*a):\n    return 1", Unsupported.STAR_ARGUMENT),
    ("def f(a=1):\n    return a", Unsupported.DEFAULT_ARGUMENT),
    (
        "def d(f):\n    return f\n@d\ndef g():\n    return 1",
        Unsupported.MATMUL,
    ),  # '@' is an unsupported token
    ("def f():\n    def g():\n        return 1\n    return 2", Unsupported.NESTED_FUNCTION),
    ("for i in range(3):\n    pass\nelse:\n    pass", Unsupported.LOOP_ELSE),
    ("while False:\n    pass\nelse:\n    pass", Unsupported.LOOP_ELSE),
    ("x = 1\ndef f():\n    return x\nprint(f())", Unsupported.GLOBAL_VARIABLE),
    ("def f(a: str):\n    return 1", Unsupported.ANNOTATION),
    ("x: int = 1", Unsupported.ANNOTATED_ASSIGNMENT),
    ("for i in 5:\n    pass", Unsupported.FOR_TARGET),
    ("def f():\n    return 1\nx = 1\nprint(x(2))", Unsupported.CALL_TARGET),
    ("x = 1\nprint(x is x)", Unsupported.KEYWORD),  # 'is' is not a keyword of the subset
    ("x = 1\nprint(x in x)", Unsupported.COMPARISON),
    ("x = len(1)", None),  # an unknown builtin: NameError or BUILTIN, see below
    ("global x\nx = 1", Unsupported.KEYWORD),
    ("x = 1\nglobal x", None),  # CPython: SyntaxError (assigned before global declaration)
    ("def f():\n    return 1, 2", Unsupported.TUPLE),
    ("assert 1, 2", ANY),
    ("x = int(3)", Unsupported.BUILTIN),
    ("x = range(3)", Unsupported.BUILTIN),
    ("abs = 1", Unsupported.BUILTIN),
    ("def f(print):\n    return 1", Unsupported.BUILTIN),
    ("def f():\n    return 1\ndef f():\n    return 2", Unsupported.REDEFINITION),
    ("print = 1", Unsupported.BUILTIN),
    ("def f():\n    return 1\nx = f", Unsupported.FUNCTION_VALUE),
]


@pytest.mark.parametrize("source, detail", UNSUPPORTED)
def test_unsupported(source, detail):
    got = run(source + "\n")
    if detail is None:
        assert got.error in ("UnsupportedError", "NameError", "SyntaxError"), got
        if got.error == "SyntaxError":
            assert oracle.run_detailed(source + "\n").error == "SyntaxError"
        return
    if detail == ANY:
        assert got.error == "UnsupportedError", got
        return
    assert (got.error, got.detail) == ("UnsupportedError", detail), got


# ------------------------------------------------------------------ edge cases

EDGES = [
    ("print(-7 // 2, 7 // -2, -7 // -2, 7 // 2)", "-4 -4 3 3\n"),
    ("print(-7 % 2, 7 % -2, -7 % -2, 7 % 2, -6 % 3)", "1 -1 -1 1 0\n"),
    ("print(1 < 2 < 3, 1 < 3 < 2, 3 > 2 > 2, 1 == 1 != 2)", "True False False True\n"),
    ("def f(a):\n    print(a)\n    return a\nprint(f(1) < f(2) < f(0) < f(3))", "1\n2\n0\nFalse\n"),
    ("def f(a):\n    print(a)\n    return a\nprint(f(0) and f(1), f(2) or f(3))", "0\n2\n0 2\n"),
    (
        "def t(a: bool) -> bool:\n    print(a)\n    return a\nprint(t(True) or t(False))",
        "True\nTrue\n",
    ),
    ("print(0 or 5, 3 and 0, 2 and 3, 0 or 0)", "5 0 3 0\n"),
    ("for i in range(5, 0, -2):\n    print(i)", "5\n3\n1\n"),
    ("for i in range(0, -3, -1):\n    print(i)", "0\n-1\n-2\n"),
    ("for i in range(3, 3):\n    print(i)\nprint(7)", "7\n"),
    ("for i in range(-2):\n    print(i)\nprint(8)", "8\n"),
    ("for i in range(3):\n    i = 10\n    print(i)", "10\n10\n10\n"),
    ("for i in range(2147483645, 2147483647):\n    print(i)", "2147483645\n2147483646\n"),
    ("for i in range(-2147483647, -2147483647 - 1, -1):\n    print(i)", "-2147483647\n"),
    ("print(2147483647)\nprint(-2147483647 - 1)", "2147483647\n-2147483648\n"),
    ("print(-2147483648, -(2147483648))", "-2147483648 -2147483648\n"),
    ("print(0x7fffffff, 0o17, 0b101, 1_000)", "2147483647 15 5 1000\n"),
    ("print(-1 >> 40, -1 >> 31, 1 >> 31, -8 >> 1)", "-1 -1 0 -4\n"),
    ("print(1 << 30, -1 << 31)", "1073741824 -2147483648\n"),
    ("print(~0, ~-1, ~2147483647, -5 & 3, -5 | 3, -5 ^ 3)", "-1 0 -2147483648 3 -5 -8\n"),
    ("print(2 ** 30, (-2) ** 31, 0 ** 0, (-1) ** 2147483647)", "1073741824 -2147483648 1 -1\n"),
    ("print(-2 ** 2, 2 ** 3 ** 2)", "-4 512\n"),
    ("print(True, False)\nprint(not 0, not 5)", "True False\nTrue False\n"),
    ("print()\nprint()", "\n\n"),
    ("print(True + True)", "2\n"),
    ("print(True & True, True | False, True ^ True, True & 3)", "True True False 1\n"),
    ("x = True\nx &= False\nprint(x)", "False\n"),
    ("x = True\nx |= True\nx ^= False\nprint(x)", "True\n"),
    ("print(-True, +True, ~False, abs(True), True * 7)", "-1 1 -1 1 7\n"),
    ("print(min(3, 1, 2), max(3, 1, 2), min(True, False), max(-1, -5))", "1 3 False -1\n"),
    ("print(abs(-5), abs(5), abs(-2147483647))", "5 5 2147483647\n"),
    ("x = 5 if 0 else 6\ny = True if 1 else False\nprint(x, y)", "6 True\n"),
    ("x = 1; y = 2; print(x + y);", "3\n"),
    ("if 1: print(1); print(2)\nelse: print(3)", "1\n2\n"),
    ("def f(n): return n * 2\nprint(f(4))", "8\n"),
    ("x = (1 +\n     2)\nprint(x \\\n  + 1)", "4\n"),
    ("c = 0\nwhile True:\n    c += 1\n    if c > 3:\n        break\nprint(c)", "4\n"),
    (
        "c = 0\nwhile c < 10:\n    c += 1\n    if c % 2:\n        continue\n    print(c)\n    if c >= 6:\n        break",
        "2\n4\n6\n",
    ),
    (
        "for i in range(3):\n    for j in range(3):\n        if j == 1:\n            break\n        print(i, j)",
        "0 0\n1 0\n2 0\n",
    ),
    (
        "def f(n):\n    for i in range(10):\n        if i == n:\n            return i * 10\n    return -1\nprint(f(3), f(20))",
        "30 -1\n",
    ),
    (
        "def f(n) -> int:\n    c = 0\n    while True:\n        c += 1\n        if c > n:\n            return c\nprint(f(4))",
        "5\n",
    ),
    (
        "def f(a, b):\n    if a:\n        return b\n    else:\n        return -b\nprint(f(0, 3), f(1, 3))",
        "-3 3\n",
    ),
    (
        "def f(n):\n    if n <= 1:\n        return n\n    return f(n - 1) + f(n - 2)\nprint(f(15))",
        "610\n",
    ),
    ("def g():\n    print(7)\ndef f():\n    return g()\nf()", "7\n"),
    ("def f() -> None:\n    return None\nf()\nprint(1)", "1\n"),
    ("def f():\n    return print(5)\nf()", "5\n"),
    (
        "def f(a: bool, b: int) -> bool:\n    return a and b > 0\nprint(f(True, 1), f(False, 1))",
        "True False\n",
    ),
    ("def f(a):\n    a += 1\n    return a\nx = 5\nprint(f(x), x)", "6 5\n"),
    ("x = 1\ndef f():\n    x = 2\n    return x\nprint(f(), x)", "2 1\n"),
    (
        "x = 3\nx -= 5\nx *= -4\nx //= 3\nx %= 5\nx **= 2\nx <<= 2\nx >>= 1\nx |= 1\nx ^= 2\nx &= 7\nprint(x)",
        "3\n",
    ),
    ("assert True\nassert 3\nprint(1)", "1\n"),
    ("x = 5\nx\n1 + 2\nprint(x)", "5\n"),
    ("def f(unused):\n    return 1\nprint(f(2))", "1\n"),
    ("if 0:\n    pass\nelif 2:\n    print(2)\nelse:\n    print(3)", "2\n"),
]


@pytest.mark.parametrize("source, stdout", EDGES)
def test_edge_cases(source, stdout):
    source += "\n"
    check_cpython(source, stdout, None)
    got = run(source)
    assert (got.stdout, got.error) == (stdout, None), got
