"""The reference compiler: every compile error class at its position (CPython's where
CPython errors too), well-formed bytecode (valid arguments and jump targets, exact
fn_maxstack by an independent stack-depth walk), the code templates, and a dozen
hand-written programs run by the reference interpreter against CPython's exec."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxcc import isa
from jaxcc.errors import EXCEPTION_NAME, Code, Limit, Syntax, Type, Unsupported
from jaxcc.isa import INFO, ArgKind, Op
from jaxcc.limits import DEFAULT, Limits
from jaxcc.reference.compiler import compile_many, compile_source
from jaxcc.reference.interp import run_program
from jaxcc.testing import programs
from property_tests.limits import HOST as BIG

SCALE = 10 if os.environ.get("JAXCC_SLOW") == "1" else 1


def cpython_syntax_error(src: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(src, "<t>", "exec")
        except SyntaxError as e:
            return e
    return None


# --- compile errors -----------------------------------------------------------------------

S, IND, U, T, N, L = (
    Code.SYNTAX,
    Code.INDENTATION,
    Code.UNSUPPORTED,
    Code.TYPE,
    Code.NAME,
    Code.LIMIT,
)

# (source, code, detail, line, col)
ERRORS = [
    # CPython's own compile errors (positions checked against CPython below)
    ("return 1\n", S, Syntax.RETURN_OUTSIDE_FUNCTION, 1, 0),
    ("x = 1\nif x:\n    break\n", S, Syntax.BREAK_OUTSIDE_LOOP, 3, 4),
    ("while True:\n    pass\ncontinue\n", S, Syntax.CONTINUE_OUTSIDE_LOOP, 3, 0),
    ("def f(a, b, a):\n    return a\n", S, Syntax.DUPLICATE_ARGUMENT, 1, 12),
    ("x = (1 +\n", S, Syntax.UNEXPECTED_EOF, 1, 4),
    ("x = (0 + 1))\n", S, Syntax.UNMATCHED_PAREN, 1, 11),
    ("if x\n    pass\n", S, Syntax.EXPECTED_COLON, 1, 4),
    ("x = 1 +\n", S, Syntax.INVALID, 1, 7),
    ("x = 007\n", S, Syntax.INVALID_DECIMAL, 1, 4),
    ("x = 0b12\n", S, Syntax.INVALID_NUMBER, 1, 7),
    ("x = 1 $ 2\n", S, Syntax.INVALID, 1, 6),
    ("x = 1 \u00d7 2\n", S, Syntax.INVALID_CHARACTER, 1, 6),
    ("x = 1 + \\ 2\n", S, Syntax.BAD_CONTINUATION, 1, 9),
    ("1 = x\n", S, Syntax.CANNOT_ASSIGN, 1, 0),
    (" x = 1\n", IND, Syntax.UNEXPECTED_INDENT, 1, 0),
    ("if True:\npass\n", IND, Syntax.EXPECTED_INDENT, 2, 0),
    ("if True:\n    x = 1\n  y = 2\n", IND, Syntax.UNINDENT_MISMATCH, 3, 7),
    # outside the subset
    ("x = 1.5\n", U, Unsupported.FLOAT, 1, 4),
    ("x = 2j\n", U, Unsupported.IMAGINARY, 1, 4),
    ("x = 'a'\n", U, Unsupported.STRING, 1, 4),
    ("x = 7 / 2\n", U, Unsupported.TRUE_DIVISION, 1, 6),
    ("x = [1]\n", U, Unsupported.SUBSCRIPT, 1, 4),
    ("x = {}\n", U, Unsupported.DICT_SET, 1, 4),
    ("x = 1\ny = x.real\n", U, Unsupported.ATTRIBUTE, 2, 5),
    ("import os\n", U, Unsupported.KEYWORD, 1, 0),
    ("x = 1\nif x is 1:\n    pass\n", U, Unsupported.KEYWORD, 2, 5),
    ("x = 1, 2\n", U, Unsupported.TUPLE, 1, 4),
    ("x = y = 1\n", U, Unsupported.CHAINED_ASSIGNMENT, 1, 0),
    ("def f(a=1):\n    return a\n", U, Unsupported.DEFAULT_ARGUMENT, 1, 8),
    ("def f(*a):\n    return 1\n", U, Unsupported.STAR_ARGUMENT, 1, 7),
    (
        "def f(a):\n    def g():\n        return 1\n    return a\n",
        U,
        Unsupported.NESTED_FUNCTION,
        2,
        4,
    ),
    ("while False:\n    pass\nelse:\n    pass\n", U, Unsupported.LOOP_ELSE, 3, 0),
    ("def f(a: str):\n    return 1\n", U, Unsupported.ANNOTATION, 1, 9),
    ("def f(a: None):\n    return 1\n", U, Unsupported.ANNOTATION, 1, 9),
    ("x: int = 1\n", U, Unsupported.ANNOTATED_ASSIGNMENT, 1, 0),
    ("for i in 5:\n    pass\n", U, Unsupported.FOR_TARGET, 1, 9),
    ("x = 1\nx(2)\n", U, Unsupported.CALL_TARGET, 2, 0),
    ("x = 1\nif 1 in x:\n    pass\n", U, Unsupported.COMPARISON, 2, 3),
    ("print(1, sep=2)\n", U, Unsupported.KEYWORD_ARGUMENT, 1, 9),
    ("x = 1\ndef f():\n    return x\n", U, Unsupported.GLOBAL_VARIABLE, 3, 11),
    ("def f():\n    return 1\ny = f\n", U, Unsupported.FUNCTION_VALUE, 3, 4),
    ("def f():\n    return 1\nf = 2\n", U, Unsupported.FUNCTION_VALUE, 3, 0),
    ("x = range(3)\n", U, Unsupported.BUILTIN, 1, 4),
    ("x = int(3)\n", U, Unsupported.BUILTIN, 1, 4),
    ("y = abs\n", U, Unsupported.BUILTIN, 1, 4),
    ("print = 3\n", U, Unsupported.BUILTIN, 1, 0),
    ("def min(a, b):\n    return a\n", U, Unsupported.BUILTIN, 1, 0),
    ("def f():\n    return 1\ndef f():\n    return 2\n", U, Unsupported.REDEFINITION, 3, 0),
    ("x = 1  # é\n", U, Unsupported.NON_ASCII, 1, 9),
    # names
    ("x = y\n", N, 0, 1, 4),
    ("x = len(3)\n", N, 0, 1, 4),
    ("print(f(1))\ndef f(a):\n    return a\n", N, 0, 1, 6),
    ("def f():\n    return g()\n", N, 0, 2, 11),
    # types
    ("x = True\nx = 1\n", T, Type.MIXED, 2, 0),
    ("x = 1\nx = x < 2\n", T, Type.MIXED, 2, 0),
    ("x = True\nx += 1\n", T, Type.MIXED, 2, 0),
    ("b = True\nb &= 1\n", T, Type.MIXED, 2, 0),
    ("b = 1 < 2\nb |= True\nb ^= 3\n", T, Type.MIXED, 3, 0),
    ("x = True\nfor x in range(2):\n    pass\n", T, Type.MIXED, 2, 4),
    ("x = 1 if True else False\n", T, Type.MIXED, 1, 4),
    ("x = 1 and True\n", T, Type.MIXED, 1, 4),
    ("x = max(1, 2, True)\n", T, Type.MIXED, 1, 4),
    ("def f(a):\n    return a\nf(1)\nf(True)\n", T, Type.MIXED, 4, 2),
    ("def f(a):\n    a = True\n    return a\nf(1)\n", T, Type.MIXED, 4, 2),
    ("def f(a: int):\n    return a\nf(True)\n", T, Type.ANNOTATION_MISMATCH, 3, 2),
    ("def f() -> bool:\n    return 1\n", T, Type.ANNOTATION_MISMATCH, 2, 4),
    ("def f() -> None:\n    return 1\n", T, Type.ANNOTATION_MISMATCH, 2, 4),
    ("def f(a):\n    if a:\n        return 1\n    return True\n", T, Type.RETURN_MISMATCH, 4, 4),
    ("def f(a):\n    if a:\n        return 1\n    return\n", T, Type.RETURN_MISMATCH, 4, 4),
    ("def f(a):\n    if a:\n        return 1\n", T, Type.RETURN_MISMATCH, 1, 0),
    ("def f() -> int:\n    pass\n", T, Type.RETURN_MISMATCH, 1, 0),
    (
        "def f(a):\n    while True:\n        if a:\n            break\n        return 1\n",
        T,
        Type.RETURN_MISMATCH,
        1,
        0,
    ),
    ("def f(a):\n    return a\nf(1, 2)\n", T, Type.ARITY, 3, 0),
    ("def f(a):\n    return a\nf()\n", T, Type.ARITY, 3, 0),
    ("print(abs(1, 2))\n", T, Type.BUILTIN_ARITY, 1, 6),
    ("print(min(1))\n", T, Type.BUILTIN_ARITY, 1, 6),
    ("for i in range():\n    pass\n", T, Type.BUILTIN_ARITY, 1, 9),
    ("for i in range(1, 2, 3, 4):\n    pass\n", T, Type.BUILTIN_ARITY, 1, 9),
    ("x = print(1)\n", T, Type.NONE_VALUE, 1, 4),
    ("x = None\n", T, Type.NONE_VALUE, 1, 4),
    ("def g():\n    pass\nx = 1 + g()\n", T, Type.NONE_VALUE, 3, 8),
    ("def g():\n    pass\nprint(g())\n", T, Type.NONE_VALUE, 3, 6),
    ("def g():\n    pass\nif g():\n    pass\n", T, Type.NONE_VALUE, 3, 3),
    ("def g(a):\n    return a\ng(print(1))\n", T, Type.NONE_VALUE, 3, 2),
    ("x = 1\nif x == None:\n    pass\n", T, Type.NONE_VALUE, 2, 8),
    ("x = 1\nx = print() or x\n", T, Type.NONE_VALUE, 2, 4),
    # limits
    ("x = 2147483648\n", L, Limit.INT_LITERAL, 1, 4),
    ("x = 5 - 2147483648\n", L, Limit.INT_LITERAL, 1, 8),
    ("x = 99999999999\n", L, Limit.INT_LITERAL, 1, 4),
]


@pytest.mark.parametrize("src,code,detail,line,col", ERRORS)
def test_compile_errors(src, code, detail, line, col):
    c = compile_source(src)
    got = (Code(c.error.code), c.error.detail, c.error.line, c.error.col)
    assert got == (code, detail, line, col), c.debug.message
    assert int(c.program.n_code) == 0 and int(c.program.n_funcs) == 0
    e = cpython_syntax_error(src)
    if code in (Code.SYNTAX, Code.INDENTATION):
        # CPython errors too: same class, line and column
        assert e is not None
        assert EXCEPTION_NAME[code] == ("IndentationError" if isinstance(e, IndentationError)
                                        else "SyntaxError")  # fmt: skip
        assert (e.lineno, e.offset - 1) == (line, col)
    else:
        assert e is None  # CPython compiles it; jaxcc rejects it at compile time


LIMIT_CASES = [
    ("x = 1\n" * 10, Limits(max_source_bytes=50), Limit.SOURCE_BYTES, (1, 0)),
    ("x = 1\n" * 10, Limits(max_tokens=20), Limit.TOKENS, (6, 0)),
    ("x = 1\n" * 10, Limits(max_nodes=12), Limit.NODES, None),
    ("if 1:\n if 1:\n  if 1:\n   pass\n", Limits(max_indent=2), Limit.INDENT_DEPTH, None),
    ("x = 1\n" * 10, Limits(max_code=16), Limit.CODE, (9, 0)),
    (
        "".join(f"def f{i}():\n    return {i}\n" for i in range(5)),
        Limits(max_funcs=4),
        Limit.FUNCTIONS,
        (7, 0),
    ),  # fmt: skip
    ("".join(f"x{i} = {i}\n" for i in range(10)), Limits(max_locals=8), Limit.LOCALS, (1, 0)),
    ("print(" + "1 + (" * 12 + "1" + ")" * 12 + ")\n", Limits(max_stack=10), Limit.STACK, (1, 0)),
]


@pytest.mark.parametrize("src,limits,detail,pos", LIMIT_CASES)
def test_limits(src, limits, detail, pos):
    c = compile_source(src, limits)
    assert (Code(c.error.code), c.error.detail) == (Code.LIMIT, detail)
    if pos is not None:
        assert (c.error.line, c.error.col) == pos
    assert compile_source(src).error.code == Code.OK  # fine under the defaults


def test_error_program_is_padding():
    c = compile_source("x = y\n", DEFAULT)
    for f in c.program:
        assert not np.any(np.asarray(f))
    assert c.program.op.shape == (DEFAULT.max_code,)
    assert c.program.fn_entry.shape == (DEFAULT.max_funcs,)


# --- well-formed bytecode -------------------------------------------------------------

CORPUS = [
    "pass\n",
    "",
    "# only a comment\n",
    "x = 1\nprint(x, x > 0, not x)\n",
    "print()\n",
    "x = -2147483648\nprint(x, -(2147483647) - 1)\n",
    "a = 3\nb = 5\nprint(a < b < 7 <= 7 != 8, 1 < 2 > 3)\n",
    "a = 1\nprint(a and 2 and 3, a or 2, not a or a > 0, (a > 0) and (a < 2))\n",
    "a = 1\nprint(a if a > 0 else -a, min(a, 2, 3), max(a, 0), abs(-a), +a, ~a, -a)\n",
    "for i in range(3):\n    for j in range(i, 10, 2):\n        if j == 4:\n            break\n"
    "        if j == 2:\n            continue\n        print(i, j)\n",
    "i = 0\nwhile i < 10:\n    i += 1\n    if i % 3 == 0:\n        continue\n    if i > 7:\n"
    "        break\n    print(i)\n",
    "def f(a, b):\n    return a * b + a // b - a % b\nprint(f(7, 3))\n",
    "def f(n):\n    if n <= 1:\n        return n\n    return f(n - 1) + f(n - 2)\nprint(f(10))\n",
    "def p(x):\n    print(x)\np(1)\nprint(1 < 2)\n",
    "def g(a: bool) -> bool:\n    return not a\nprint(g(True), g(1 < 0))\n",
    "def h():\n    while True:\n        return 5\nprint(h())\n",
    "def h(n):\n    for i in range(n):\n        if i == 3:\n            return i\n    return -1\n"
    "print(h(10), h(2))\n",
    "def h(n):\n    if n:\n        return print(n)\n    return\nh(1)\n",
    "x = 5\nx <<= 2\nx >>= 1\nx **= 2\nx //= 3\nx %= 7\nx &= 6\nx |= 1\nx ^= 3\nx -= 1\n"
    "x *= 2\nprint(x)\n",
    "b = True\nb &= False\nb |= True\nb ^= True\nprint(b, True & True, True | 0)\n",
    "assert 1 < 2\nx = 3\nassert x\n",
    "def f(a):\n    return a < a + 1 < a + 2\nprint(f(1), 0 < f(1) < 2)\n",
    "def f():\n    pass\nf()\nNone\n5\n",
]


def check_well_formed(prog: isa.Program):
    n_code, n_funcs = int(prog.n_code), int(prog.n_funcs)
    op, arg, line = prog.op.tolist(), prog.arg.tolist(), prog.line.tolist()
    entries = prog.fn_entry[:n_funcs].tolist()
    assert entries[0] == 0 and entries == sorted(entries)
    bounds = entries + [n_code]
    # padding
    assert not any(op[n_code:]) and not any(arg[n_code:]) and not any(line[n_code:])
    for f in isa.Program._fields[4:9]:
        assert not np.any(np.asarray(getattr(prog, f))[n_funcs:])
    for fid in range(n_funcs):
        lo, hi = bounds[fid], bounds[fid + 1]
        nlocals = int(prog.fn_nlocals[fid])
        nparams = int(prog.fn_nparams[fid])
        assert 0 <= nparams <= nlocals
        assert int(prog.fn_rettype[fid]) in (isa.T_INT, isa.T_BOOL, isa.T_NONE)
        # every function ends with the implicit `return None`
        assert (op[hi - 2], arg[hi - 2], op[hi - 1]) == (Op.LOAD_CONST, 0, Op.RETURN_VALUE)
        depth = _walk(prog, fid)
        peak = 0
        for pc in range(lo, hi):
            o = Op(op[pc])
            a = arg[pc]
            kind = INFO[o].arg
            assert line[pc] >= 1
            if kind == ArgKind.NONE:
                assert a == 0
            elif kind == ArgKind.SLOT:
                assert 0 <= a < nlocals
            elif kind == ArgKind.TARGET:
                assert lo <= a < hi  # jumps stay inside their function
            elif kind == ArgKind.FUNC:
                assert 1 <= a < n_funcs
            elif kind == ArgKind.CONST:
                assert -(2**31) <= a < 2**31
            if pc in depth:
                d = depth[pc]
                if kind == ArgKind.DEPTH:
                    assert 1 <= a <= d
                if kind == ArgKind.COUNT:
                    assert 0 <= a <= d
                pops = (
                    int(prog.fn_nparams[a])
                    if o == Op.CALL
                    else a
                    if o == Op.POP_N
                    else INFO[o].pops
                )
                pushes = 1 if o == Op.CALL else INFO[o].pushes
                peak = max(peak, d, d - pops + pushes)
        assert int(prog.fn_maxstack[fid]) == peak, f"function {fid}"


def _walk(prog, fid):
    """Depth before each reachable instruction, by a plain worklist (independent of the
    compiler's own walk); asserts consistent depths at merges and no underflow."""
    op, arg = prog.op.tolist(), prog.arg.tolist()
    nparams = prog.fn_nparams.tolist()
    start = int(prog.fn_entry[fid])
    depth = {start: 0}
    todo = [start]
    while todo:
        pc = todo.pop()
        d = depth[pc]
        o, a = Op(op[pc]), arg[pc]
        pops = nparams[a] if o == Op.CALL else a if o == Op.POP_N else INFO[o].pops
        pushes = 1 if o == Op.CALL else INFO[o].pushes
        assert d >= pops, f"underflow at {pc}"
        if o == Op.JUMP:
            nxt = [(a, d)]
        elif o in (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE):
            nxt = [(pc + 1, d - 1), (a, d - 1)]
        elif o in (Op.JUMP_IF_FALSE_OR_POP, Op.JUMP_IF_TRUE_OR_POP):
            nxt = [(pc + 1, d - 1), (a, d)]
        elif o == Op.FOR_RANGE:
            nxt = [(pc + 1, d + 1), (a, d - 3)]
        elif o == Op.RETURN_VALUE:
            nxt = []
        else:
            nxt = [(pc + 1, d - pops + pushes)]
        for p, nd in nxt:
            if p in depth:
                assert depth[p] == nd, f"inconsistent depth at {p}"
            else:
                depth[p] = nd
                todo.append(p)
    return depth


@pytest.mark.parametrize("src", CORPUS)
def test_corpus_well_formed(src):
    c = compile_source(src)
    assert c.error.code == Code.OK, c.debug.message
    check_well_formed(c.program)


@settings(max_examples=40 * SCALE, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(programs())
def test_generated_programs_well_formed(src):
    c = compile_source(src, BIG)
    assert c.error.code == Code.OK, (src, c.error, c.debug.message)
    check_well_formed(c.program)


def test_compile_many_batches():
    srcs = ["print(1)\n", "x = y\n", "def f(a):\n    return a\nprint(f(2))\n"]
    prog, err, dbg = compile_many(srcs, DEFAULT)
    assert prog.op.shape == (3, DEFAULT.max_code) and prog.fn_entry.shape == (3, DEFAULT.max_funcs)
    assert err.code.tolist() == [Code.OK, Code.NAME, Code.OK]
    assert all(np.asarray(x).dtype == np.int32 for x in (*prog, *err))
    for i, s in enumerate(srcs):
        one = compile_source(s)
        for a, b in zip(prog, one.program, strict=True):
            assert np.array_equal(np.asarray(a)[i], b)
    assert dbg[2].fn_names == ("<module>", "f") and dbg[2].local_names[1] == ("a",)


# --- code templates -------------------------------------------------------------------


def ops(src, fid=0):
    c = compile_source(src)
    assert c.error.code == Code.OK, c.debug.message
    p = c.program
    lo = int(p.fn_entry[fid])
    hi = int(p.fn_entry[fid + 1]) if fid + 1 < int(p.n_funcs) else int(p.n_code)
    return [
        (Op(o).name, a) for o, a in zip(p.op[lo:hi].tolist(), p.arg[lo:hi].tolist(), strict=True)
    ]


END = [("LOAD_CONST", 0), ("RETURN_VALUE", 0)]


def test_template_chain():
    assert ops("a = 1\nb = 2\nc = 3\nx = a < b < c\n")[6:] == [
        ("LOAD_VAR", 0), ("LOAD_VAR", 1), ("STORE_VAR", 4), ("LOAD_VAR", 4), ("LT", 0),
        ("JUMP_IF_FALSE_OR_POP", 15), ("LOAD_VAR", 4), ("LOAD_VAR", 2), ("LT", 0),
        ("STORE_VAR", 3), *END,
    ]  # fmt: skip


def test_template_for_break_continue():
    assert ops("for i in range(5):\n    if i:\n        break\n    continue\n") == [
        ("LOAD_CONST", 0), ("LOAD_CONST", 5), ("LOAD_CONST", 1), ("FOR_RANGE", 11),
        ("STORE_VAR", 0), ("LOAD_VAR", 0), ("JUMP_IF_FALSE", 9), ("POP_N", 3), ("JUMP", 11),
        ("JUMP", 3), ("JUMP", 3), *END,
    ]  # fmt: skip


def test_template_print_and_expression_statements():
    assert ops("print(1, True)\nprint()\n5\n") == [
        ("LOAD_CONST", 1), ("LOAD_CONST", 1), ("PRINT_INT", 2), ("PRINT_BOOL", 1),
        ("PRINT_NEWLINE", 0), ("POP_N", 2), ("PRINT_NEWLINE", 0), ("POP_N", 0),
        ("LOAD_CONST", 5), ("POP_TOP", 0), *END,
    ]  # fmt: skip


def test_template_functions_and_builtins():
    src = "def f(a, b):\n    return min(a, b, 3)\nx = f(1, 2)\nprint(abs(x), max(x, 4))\n"
    assert ops(src, 1) == [
        ("LOAD_VAR", 0), ("LOAD_VAR", 1), ("MIN", 0), ("LOAD_CONST", 3), ("MIN", 0),
        ("RETURN_VALUE", 0), *END,
    ]  # fmt: skip
    assert ops(src)[:4] == [("LOAD_CONST", 1), ("LOAD_CONST", 2), ("CALL", 1), ("STORE_VAR", 0)]


def test_template_and_or_ifexp_unary():
    assert ops("a = 1\nx = a and 2 or 3\ny = 4 if a else 5\nz = -a + +a - ~a\n")[2:] == [
        ("LOAD_VAR", 0), ("JUMP_IF_FALSE_OR_POP", 5), ("LOAD_CONST", 2),
        ("JUMP_IF_TRUE_OR_POP", 7), ("LOAD_CONST", 3), ("STORE_VAR", 1),
        ("LOAD_VAR", 0), ("JUMP_IF_FALSE", 12), ("LOAD_CONST", 4), ("JUMP", 13),
        ("LOAD_CONST", 5), ("STORE_VAR", 2),
        ("LOAD_VAR", 0), ("NEG", 0), ("LOAD_VAR", 0), ("ADD", 0), ("LOAD_VAR", 0),
        ("INVERT", 0), ("SUB", 0), ("STORE_VAR", 3), *END,
    ]  # fmt: skip


def test_slots_and_debug_info():
    c = compile_source("def f(a, b):\n    y = a > 0\n    x = b\n    y = 1 < a < 2\n    return y\n"
                       "f(1, 2)\n")  # fmt: skip
    assert c.debug.fn_names == ("<module>", "f")
    assert c.debug.local_names[1] == ("a", "b", "y", "x", "$cmp")
    assert c.program.fn_nlocals[:2].tolist() == [0, 5]
    assert c.program.fn_nparams[:2].tolist() == [0, 2]
    assert c.program.fn_rettype[:2].tolist() == [isa.T_NONE, isa.T_BOOL]


def test_line_table():
    c = compile_source("x = 1\n\ny = (x +\n     2)\nprint(y)\n")
    p = c.program
    assert p.line[: int(p.n_code)].tolist() == [1, 1, 3, 4, 3, 3, 5, 5, 5, 5, 5, 5]


def test_param_types_inferred():
    c = compile_source("def f(a, b, c):\n    return a\nprint(f(True, 1, 1 < 2))\n"
                       "def g(n):\n    return 1\n")  # fmt: skip
    assert c.error.code == Code.OK
    assert c.debug.param_types[1] == (isa.T_BOOL, isa.T_INT, isa.T_BOOL)
    assert c.debug.param_types[2] == (isa.T_INT,)  # never called: int
    assert c.program.fn_rettype[1] == isa.T_BOOL


# --- running: the reference interpreter against CPython ---------------------------------

RUN_PROGRAMS = {
    "gcd": "def gcd(a, b):\n    while b != 0:\n        t = b\n        b = a % b\n        a = t\n"
    "    return a\nprint(gcd(12, 18), gcd(17, 5), gcd(-12, 18))\n",
    "primes": "def is_prime(n: int) -> bool:\n    if n < 2:\n        return False\n"
    "    for d in range(2, n):\n        if d * d > n:\n            break\n"
    "        if n % d == 0:\n            return False\n    return True\n"
    "count = 0\nfor i in range(60):\n    if is_prime(i):\n        print(i)\n        count += 1\n"
    "print(count)\n",
    "collatz": "def collatz(n):\n    steps = 0\n    while n != 1:\n"
    "        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        steps += 1\n    return steps\n"
    "for i in range(1, 30, 4):\n    print(i, collatz(i))\n",
    "recursion": "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n"
    "def ack(m, n):\n    if m == 0:\n        return n + 1\n    if n == 0:\n        return ack(m - 1, 1)\n"
    "    return ack(m - 1, ack(m, n - 1))\nprint(fib(15), ack(2, 3))\n",
    "chains": "for a in range(-2, 3):\n    for b in range(-1, 2):\n"
    "        print(a < b < 1, a <= b == 0 != a, -1 < a > b >= -1, a == b == 0)\n",
    "short_circuit": "def t(x):\n    print(x)\n    return x\n"
    "print(t(0) and t(1), t(2) or t(3), t(0) or t(0) or t(4), t(5) and t(6) and t(0))\n"
    "print(t(1) if t(0) else t(2), 1 < t(2) < t(3), 5 < t(4) < t(6))\n",
    "arith": "for a in range(-7, 8, 3):\n    for b in range(-3, 4, 2):\n"
    "        print(a // b, a % b, a * b, a - b, a & b, a | b, a ^ b, a << 2, a >> 1, ~a, -a, abs(a))\n"
    "print(2 ** 30, (-2) ** 31, 7 ** 0, 0 ** 0, -2147483647 - 1, 2147483647 >> 31, -1 >> 40)\n"
    "print(max(3, -4, 2), min(3, -4, 2), max(True, False), True + True, not 0, ~True)\n",
    "bools": "x = True\nx &= False\ny = 1 < 2\nprint(x, y, x | y, x ^ y, not y, y & True, 3 & True)\n",
    "zero_division": "x = 5\nprint(x)\nprint(x // (x - 5))\n",
    "modulo_by_zero": "def f(a):\n    return a % 0\nprint(1)\nprint(f(3))\n",
    "overflow_add": "x = 2147483647\nprint(x)\nx = x + 1\n",
    "overflow_mul": "x = 65536\nwhile True:\n    print(x)\n    x = x * x\n",
    "overflow_neg": "x = -2147483647 - 1\nprint(-x)\n",
    "overflow_pow": "print(2 ** 31)\n",
    "overflow_shift": "print(1 << 31)\n",
    "overflow_div": "x = -2147483647 - 1\nprint(x // -1)\n",
    "overflow_abs": "x = -2147483647 - 1\nprint(abs(x))\n",
    "negative_shift": "x = -1\nprint(1 << x)\n",
    "range_step_zero": "for i in range(1, 5, 0):\n    print(i)\n",
    "unbound_local": "def f(a):\n    if a:\n        y = 1\n    return y\nprint(f(1))\nprint(f(0))\n",
    "assertion": "x = 3\nassert x > 2\nprint(x)\nassert x > 5\nprint(0)\n",
    "recursion_error": "def f(n):\n    return f(n + 1)\nprint(f(0))\n",
}


def run_cpython(src: str):
    out = io.StringIO()
    line = 0
    old = sys.getrecursionlimit()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(src, "<prog>", "exec"), {})
        return out.getvalue(), None, 0
    except Exception as e:  # noqa: BLE001
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "<prog>":
                line = tb.tb_lineno
            tb = tb.tb_next
        return out.getvalue(), type(e).__name__, line
    finally:
        sys.setrecursionlimit(old)


def run_jaxcc(src: str, limits: Limits = DEFAULT):
    c = compile_source(src, limits)
    assert c.error.code == Code.OK, c.debug.message
    r = run_program(c.program, limits)
    text = isa.format_output(r.out_kind, r.out_val, r.n_out)
    status = int(r.status)
    if status == Code.OK:
        return text, None, 0
    return text, EXCEPTION_NAME[Code(status)], int(r.line)


@pytest.mark.parametrize("name", sorted(RUN_PROGRAMS))
def test_run_against_cpython(name):
    src = RUN_PROGRAMS[name]
    got = run_jaxcc(src)
    want = run_cpython(src)
    if name.startswith("overflow"):  # CPython has big ints: jaxcc stops where it leaves int32
        assert got[1] == "OverflowError"
        assert want[0].startswith(got[0])
        return
    if name == "negative_shift":  # CPython: ValueError('negative shift count') too
        assert want[1] == "ValueError"
    assert got == want


def test_run_negative_power_and_timeout():
    # CPython gives a float for 2 ** -1; jaxcc raises ValueError (no floats)
    assert run_jaxcc("x = -1\nprint(1)\nprint(2 ** x)\n") == ("1\n", "ValueError", 3)
    assert run_jaxcc("while True:\n    pass\n", Limits(max_steps=1000))[1] == "TimeoutError"


def test_examples_directory():
    """The example programs, where they compile, run as CPython runs them."""
    root = os.path.join(os.path.dirname(__file__), "..", "examples")
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if not name.endswith(".py"):
            continue
        with open(os.path.join(root, name)) as fh:
            src = fh.read()
        c = compile_source(src)
        e = cpython_syntax_error(src)
        if c.error.code != Code.OK:
            assert c.error.code in (Code.SYNTAX, Code.INDENTATION) and e is not None, name
            assert c.error.line == e.lineno
            continue
        check_well_formed(c.program)
        got, want = run_jaxcc(src, BIG._replace(max_steps=50_000_000)), run_cpython(src)
        if got[1] == "OverflowError":
            assert want[0].startswith(got[0]), name
        else:
            assert got == want, name


# --- robustness: any input gives an Error, never an exception ----------------------------

_PIECES = ["def ", "f", "(", ")", "a", ",", ":", "\n", "    ", "return ", "if ", "else", "while ",
           "for ", " in ", "range(", "print(", " and ", " or ", "not ", "True", "None", "1",
           "2147483648", "-", "+", "<", "==", "=", "+=", "break", "continue", "pass", " ",
           "#", ";", "\t", "x", "0x", "_", "**", "//", "1.5", "'", "[", "\\\n"]  # fmt: skip


@settings(max_examples=60 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_any_input_gives_an_error_or_well_formed_code(pieces):
    src = "".join(pieces)
    c = compile_source(src)
    assert isinstance(c.error.code, int) and c.error.code in set(Code)
    if c.error.code == Code.OK:
        check_well_formed(c.program)
    else:
        assert c.error.code in (Code.SYNTAX, Code.INDENTATION, Code.TYPE, Code.NAME,
                                Code.UNSUPPORTED, Code.LIMIT)  # fmt: skip
        e = cpython_syntax_error(src)
        if e is not None:  # CPython's syntax errors come first, at CPython's position
            assert (c.error.line, c.error.col) == (e.lineno, max((e.offset or 1) - 1, 0))


def test_deep_nesting():
    limits = DEFAULT._replace(max_source_bytes=65536, max_tokens=16384, max_nodes=16384,
                              max_code=16384)  # fmt: skip
    deep_chain = "x = " + "+".join(["1"] * 3000) + "\nprint(x)\n"  # deeper than Python's 1000
    c = compile_source(deep_chain, limits)
    assert c.error.code == Code.OK
    check_well_formed(c.program)
    assert run_jaxcc(deep_chain, limits) == ("3000\n", None, 0)
    c = compile_source("x = " + "-" * 8000 + "1\n", limits)  # CPython cannot parse it either
    assert (c.error.code, c.error.detail) == (Code.LIMIT, Limit.PARSE_DEPTH)
    assert sys.getrecursionlimit() < 20_000  # restored
