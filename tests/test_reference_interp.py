"""The reference interpreter on hand-assembled bytecode: every opcode, every status,
every InvalidBytecode cause, and random garbage programs (which must never raise)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxcc import isa
from jaxcc.errors import Code, Value
from jaxcc.isa import Op
from jaxcc.limits import Limits
from jaxcc.reference.interp import run_batch, run_program
from property_tests.limits import VM_SMALL

SLOW = os.environ.get("JAXCC_SLOW") == "1"
N_EX = 300 if SLOW else 40
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
SMALL = VM_SMALL


class Rel(int):
    """A jump target relative to the start of its function (resolved by asm)."""


def fn(body, nparams=0, nlocals=None, maxstack=8, rettype=isa.T_INT):
    """One function: body is a list of (op, arg[, line]) or bare ops."""
    return dict(body=body, nparams=nparams, nlocals=nparams if nlocals is None else nlocals,
                maxstack=maxstack, rettype=rettype)  # fmt: skip


def asm(*funcs, pad_code=2, pad_funcs=1, n_code=None, n_funcs=None) -> isa.Program:
    """Assemble functions (function 0 first) into one unbatched Program."""
    code, entries = [], []
    for f in funcs:
        entries.append(len(code))
        for ins in f["body"]:
            ins = ins if isinstance(ins, tuple) else (ins, 0)
            op, arg, *line = ins
            arg = entries[-1] + arg if isinstance(arg, Rel) else arg
            code.append((int(op), int(arg), line[0] if line else 1))
    n_i, n_f = len(code) + pad_code, len(funcs) + pad_funcs
    arrs = {k: np.zeros(n_i, np.int32) for k in ("op", "arg", "line")}
    for i, (o, a, ln) in enumerate(code):
        arrs["op"][i], arrs["arg"][i], arrs["line"][i] = o, a, ln
    tab = {k: np.zeros(n_f, np.int32) for k in ("entry", "nparams", "nlocals", "maxstack", "ret")}
    for i, f in enumerate(funcs):
        tab["entry"][i] = entries[i]
        tab["nparams"][i] = f["nparams"]
        tab["nlocals"][i] = f["nlocals"]
        tab["maxstack"][i] = f["maxstack"]
        tab["ret"][i] = f["rettype"]
    return isa.Program(
        op=arrs["op"], arg=arrs["arg"], line=arrs["line"],
        n_code=np.int32(len(code) if n_code is None else n_code),
        fn_entry=tab["entry"], fn_nparams=tab["nparams"], fn_nlocals=tab["nlocals"],
        fn_maxstack=tab["maxstack"], fn_rettype=tab["ret"],
        n_funcs=np.int32(len(funcs) if n_funcs is None else n_funcs),
    )  # fmt: skip


def run(*funcs, limits=SMALL, entry=0, args=(), **kw) -> isa.RunResult:
    return run_program(asm(*funcs, **kw), limits, entry, args)


def out(r) -> str:
    return isa.format_output(r.out_kind, r.out_val, r.n_out)


RET0 = [(Op.LOAD_CONST, 0), Op.RETURN_VALUE]


# --- arithmetic, against Python on int32 -------------------------------------------------


def py_binary(op: Op, a: int, b: int):
    """(status, detail, value) that CPython semantics + the int32 rule give."""
    if op in (Op.FLOORDIV, Op.MOD) and b == 0:
        return Code.ZERO_DIVISION, 0, 0
    if op == Op.POW and b < 0:
        return Code.VALUE, Value.NEGATIVE_POWER, 0
    if op in (Op.LSHIFT, Op.RSHIFT) and b < 0:
        return Code.VALUE, Value.NEGATIVE_SHIFT, 0
    if op == Op.POW and abs(a) > 1 and b > 64:
        return Code.OVERFLOW, 0, 0  # avoid building a huge int in the test itself
    if op == Op.LSHIFT and a != 0 and b > 64:
        return Code.OVERFLOW, 0, 0
    f = {
        Op.ADD: lambda: a + b, Op.SUB: lambda: a - b, Op.MUL: lambda: a * b,
        Op.FLOORDIV: lambda: a // b, Op.MOD: lambda: a % b, Op.POW: lambda: a**b,
        Op.LSHIFT: lambda: a << b, Op.RSHIFT: lambda: a >> b, Op.AND: lambda: a & b,
        Op.OR: lambda: a | b, Op.XOR: lambda: a ^ b, Op.MIN: lambda: min(a, b),
        Op.MAX: lambda: max(a, b), Op.LT: lambda: int(a < b), Op.LE: lambda: int(a <= b),
        Op.GT: lambda: int(a > b), Op.GE: lambda: int(a >= b), Op.EQ: lambda: int(a == b),
        Op.NE: lambda: int(a != b),
    }[op]  # fmt: skip
    v = f()
    if not INT_MIN <= v <= INT_MAX:
        return Code.OVERFLOW, 0, 0
    return Code.OK, 0, v


def run_binary(op, a, b):
    body = [(Op.LOAD_CONST, a), (Op.LOAD_CONST, b), (op, 0, 7), Op.RETURN_VALUE]
    return run(fn(body, maxstack=2))


EDGE = [INT_MIN, INT_MIN + 1, -65536, -7, -2, -1, 0, 1, 2, 3, 7, 31, 32, 33, 46341, INT_MAX]
int32s = st.one_of(st.sampled_from(EDGE), st.integers(INT_MIN, INT_MAX), st.integers(-40, 40))


@pytest.mark.parametrize("op", isa.BINARY_OPS)
def test_binary_edges(op):
    for a in EDGE:
        for b in EDGE:
            r = run_binary(op, a, b)
            status, detail, value = py_binary(op, a, b)
            assert (int(r.status), int(r.detail)) == (status, detail), (op, a, b)
            assert int(r.result) == value
            if status != Code.OK:
                assert (int(r.pc), int(r.line), int(r.steps)) == (2, 7, 3)


@settings(deadline=None, max_examples=N_EX)
@given(st.sampled_from(isa.BINARY_OPS), int32s, int32s)
def test_binary_random(op, a, b):
    r = run_binary(op, a, b)
    status, detail, value = py_binary(op, a, b)
    assert (int(r.status), int(r.detail), int(r.result)) == (status, detail, value)


def test_pow_and_shift_big_exponents_are_fast():
    t = time.time()
    assert int(run_binary(Op.POW, 3, INT_MAX).status) == Code.OVERFLOW
    assert int(run_binary(Op.POW, -1, INT_MAX).result) == -1
    assert int(run_binary(Op.POW, 0, 0).result) == 1
    assert int(run_binary(Op.POW, -2, 31).result) == INT_MIN
    assert int(run_binary(Op.POW, 2, 31).status) == Code.OVERFLOW
    assert int(run_binary(Op.LSHIFT, 1, INT_MAX).status) == Code.OVERFLOW
    assert int(run_binary(Op.LSHIFT, 0, INT_MAX).result) == 0
    assert int(run_binary(Op.LSHIFT, -1, 31).result) == INT_MIN
    assert int(run_binary(Op.RSHIFT, -5, INT_MAX).result) == -1
    assert int(run_binary(Op.RSHIFT, 5, 32).result) == 0
    assert time.time() - t < 1.0


@pytest.mark.parametrize("a", EDGE)
def test_unary(a):
    for op, f in [(Op.NEG, lambda x: -x), (Op.ABS, abs), (Op.INVERT, lambda x: ~x),
                  (Op.NOT, lambda x: int(not x))]:  # fmt: skip
        r = run(fn([(Op.LOAD_CONST, a), (op, 0, 3), Op.RETURN_VALUE], maxstack=1))
        v = f(a)
        if INT_MIN <= v <= INT_MAX:
            assert (int(r.status), int(r.result)) == (Code.OK, v)
        else:
            assert (int(r.status), int(r.line), int(r.pc)) == (Code.OVERFLOW, 3, 1)


# --- locals, stack ops, jumps --------------------------------------------------------------


def test_locals_and_unbound():
    body = [(Op.LOAD_CONST, 5), (Op.STORE_VAR, 1), (Op.LOAD_VAR, 1), (Op.LOAD_VAR, 0, 4),
            Op.ADD, Op.RETURN_VALUE]  # fmt: skip
    r = run(fn(body, nlocals=2, maxstack=2))
    assert (int(r.status), int(r.pc), int(r.line), int(r.fn)) == (Code.UNBOUND_LOCAL, 3, 4, 0)
    body[3] = (Op.LOAD_VAR, 1)
    assert int(run(fn(body, nlocals=2, maxstack=2)).result) == 10


def test_stack_ops():
    body = [(Op.LOAD_CONST, 1), (Op.LOAD_CONST, 2), (Op.LOAD_CONST, 3), Op.DUP_TOP, Op.ADD,
            (Op.POP_N, 1), Op.POP_TOP, (Op.POP_N, 0), Op.NOP, Op.RETURN_VALUE]  # fmt: skip
    r = run(fn(body, maxstack=4))
    assert (int(r.status), int(r.result), int(r.steps)) == (Code.OK, 1, 10)


def test_conditional_jumps():
    def pick(op, cond):
        body = [(Op.LOAD_CONST, cond), (op, Rel(4)), (Op.LOAD_CONST, 10), Op.RETURN_VALUE,
                (Op.LOAD_CONST, 20), Op.RETURN_VALUE]  # fmt: skip
        return int(run(fn(body, maxstack=2)).result)

    assert (pick(Op.JUMP_IF_FALSE, 0), pick(Op.JUMP_IF_FALSE, 3)) == (20, 10)
    assert (pick(Op.JUMP_IF_TRUE, 0), pick(Op.JUMP_IF_TRUE, -1)) == (10, 20)
    # the *_OR_POP jumps keep the item when taken, pop it when falling through
    assert (pick(Op.JUMP_IF_FALSE_OR_POP, 0), pick(Op.JUMP_IF_FALSE_OR_POP, 7)) == (20, 10)
    assert (pick(Op.JUMP_IF_TRUE_OR_POP, 0), pick(Op.JUMP_IF_TRUE_OR_POP, 7)) == (10, 20)

    body = [(Op.LOAD_CONST, 7), (Op.JUMP_IF_TRUE_OR_POP, Rel(3)), Op.RETURN_VALUE, Op.RETURN_VALUE]
    assert int(run(fn(body, maxstack=1)).result) == 7
    body = [(Op.LOAD_CONST, 0), (Op.JUMP_IF_FALSE_OR_POP, Rel(3)), Op.RETURN_VALUE, Op.RETURN_VALUE]
    assert int(run(fn(body, maxstack=1)).result) == 0


def range_sum(a, b, c, limits=SMALL):
    """sum(range(a, b, c)) compiled by hand: slot 0 = total, slot 1 = loop var."""
    body = [
        (Op.LOAD_CONST, 0), (Op.STORE_VAR, 0),
        (Op.LOAD_CONST, a), (Op.LOAD_CONST, b), (Op.LOAD_CONST, c),
        (Op.FOR_RANGE, Rel(12), 9),  # 5
        (Op.STORE_VAR, 1), (Op.LOAD_VAR, 0), (Op.LOAD_VAR, 1), Op.ADD, (Op.STORE_VAR, 0),
        (Op.JUMP, Rel(5)),
        (Op.LOAD_VAR, 0), Op.RETURN_VALUE,  # 12
    ]  # fmt: skip
    return run(fn(body, nlocals=2, maxstack=5), limits=limits)


@settings(deadline=None, max_examples=N_EX)
@given(st.integers(-30, 30), st.integers(-30, 30), st.integers(-7, 7))
def test_for_range(a, b, c):
    r = range_sum(a, b, c)
    if c == 0:
        assert (int(r.status), int(r.detail), int(r.line)) == (
            Code.VALUE, Value.RANGE_STEP_ZERO, 9)  # fmt: skip
    else:
        assert (int(r.status), int(r.result)) == (Code.OK, sum(range(a, b, c)))


def test_for_range_at_int32_edges():
    # c + step overflows: the stored next value becomes stop, the loop ends normally
    r = range_sum(INT_MAX - 2, INT_MAX, 2)
    assert (int(r.status), int(r.result)) == (Code.OK, INT_MAX - 2)
    r = range_sum(INT_MIN + 1, INT_MIN, -3)
    assert (int(r.status), int(r.result)) == (Code.OK, INT_MIN + 1)
    r = range_sum(INT_MAX - 1, INT_MAX, INT_MAX)
    assert (int(r.status), int(r.result)) == (Code.OK, INT_MAX - 1)


def test_for_range_break_pops_three():
    body = [(Op.LOAD_CONST, 0), (Op.LOAD_CONST, 100), (Op.LOAD_CONST, 1),
            (Op.FOR_RANGE, Rel(7)), (Op.STORE_VAR, 0), (Op.POP_N, 3), (Op.JUMP, Rel(7)),
            (Op.LOAD_VAR, 0), Op.RETURN_VALUE]  # fmt: skip
    r = run(fn(body, nlocals=1, maxstack=4))
    assert (int(r.status), int(r.result)) == (Code.OK, 0)


# --- calls, recursion ------------------------------------------------------------------------

FIB = fn(
    [(Op.LOAD_VAR, 0), (Op.LOAD_CONST, 2), Op.LT, (Op.JUMP_IF_FALSE, Rel(6)), (Op.LOAD_VAR, 0),
     Op.RETURN_VALUE, (Op.LOAD_VAR, 0), (Op.LOAD_CONST, 1), Op.SUB, (Op.CALL, 1),
     (Op.LOAD_VAR, 0), (Op.LOAD_CONST, 2), Op.SUB, (Op.CALL, 1), Op.ADD, Op.RETURN_VALUE],
    nparams=1, maxstack=3,
)  # fmt: skip


def test_calls_fib_and_entry_args():
    main = fn([(Op.LOAD_CONST, 15), (Op.CALL, 1), (Op.PRINT_INT, 1), Op.PRINT_NEWLINE,
               Op.POP_TOP, *RET0], maxstack=2, rettype=isa.T_NONE)  # fmt: skip
    big = SMALL._replace(max_steps=100_000, max_depth=20)
    r = run(main, FIB, limits=big)
    assert (int(r.status), out(r), int(r.fn)) == (Code.OK, "610\n", 0)
    r = run(main, FIB, limits=big, entry=1, args=[10])
    assert (int(r.status), int(r.result), int(r.n_out), int(r.fn)) == (Code.OK, 55, 0, 1)
    # missing args are 0, extra args ignored
    assert int(run(main, FIB, limits=big, entry=1).result) == 0
    assert int(run(main, FIB, limits=big, entry=1, args=[7, 99]).result) == 13


def test_call_binds_params_and_unbinds_locals():
    # f(a) reads its local slot 1 (unbound) after an earlier call left a value there
    f = fn([(Op.LOAD_VAR, 0), (Op.LOAD_CONST, 0), (Op.JUMP_IF_TRUE, Rel(5)), (Op.LOAD_VAR, 1, 6),
            Op.RETURN_VALUE, (Op.STORE_VAR, 1), (Op.LOAD_VAR, 1), Op.RETURN_VALUE],
           nparams=1, nlocals=2, maxstack=2)  # fmt: skip
    main = fn([(Op.LOAD_CONST, 1), (Op.CALL, 1), Op.POP_TOP, (Op.LOAD_CONST, 0), (Op.CALL, 1),
               Op.RETURN_VALUE], maxstack=1)  # fmt: skip
    r = run(main, f)
    assert (int(r.status), int(r.fn), int(r.line)) == (Code.UNBOUND_LOCAL, 1, 6)


def countdown(depth_limit, maxstack_main=1, nlocals=1, maxstack=2):
    """f(n): return 0 if n == 0 else f(n - 1); main calls f(n0) with n0 from args."""
    f = fn([(Op.LOAD_VAR, 0), (Op.JUMP_IF_TRUE, Rel(4)), (Op.LOAD_CONST, 0), Op.RETURN_VALUE,
            (Op.LOAD_VAR, 0), (Op.LOAD_CONST, 1), Op.SUB, (Op.CALL, 1, 5), Op.RETURN_VALUE],
           nparams=1, nlocals=nlocals, maxstack=maxstack)  # fmt: skip
    main = fn([(Op.LOAD_VAR, 0), (Op.CALL, 1), Op.RETURN_VALUE], nparams=1,
              maxstack=maxstack_main)  # fmt: skip
    return main, f


def test_recursion_limit_exact():
    lim = SMALL._replace(max_depth=6)
    # main + f(4) .. f(0) = 6 frames: fine; f(5) needs 7
    assert int(run(*countdown(6), limits=lim, args=[4]).status) == Code.OK
    r = run(*countdown(6), limits=lim, args=[5])
    assert (int(r.status), int(r.fn), int(r.line)) == (Code.RECURSION, 1, 5)


def test_recursion_when_frame_does_not_fit_stack():
    # each f frame needs nlocals(1) + maxstack(2) = 3 slots from its fp; its fp is the
    # caller's first operand slot (the argument becomes slot 0 in place), so f(n) at
    # fp 1 calls f(n - 1) at fp 2, ..., f(0) at fp n + 1: fits while n + 1 + 3 <= 10
    lim = SMALL._replace(max_stack=10, max_depth=100)
    assert int(run(*countdown(0), limits=lim, args=[6]).status) == Code.OK
    r = run(*countdown(0), limits=lim, args=[7])
    assert int(r.status) == Code.RECURSION
    # the entry frame itself must fit
    lim = SMALL._replace(max_stack=1)
    assert int(run(fn(RET0, maxstack=1), limits=lim).status) == Code.OK
    r = run(fn(RET0, maxstack=2), limits=lim)
    assert (int(r.status), int(r.steps)) == (Code.RECURSION, 0)
    r = run(fn(RET0, maxstack=1), limits=SMALL._replace(max_depth=0))
    assert int(r.status) == Code.RECURSION


# --- output, assert, timeout ----------------------------------------------------------------


def test_print_depth_and_kinds():
    body = [(Op.LOAD_CONST, 3), (Op.LOAD_CONST, 1), (Op.LOAD_CONST, -4), (Op.PRINT_INT, 3),
            (Op.PRINT_BOOL, 2), (Op.PRINT_INT, 1), Op.PRINT_NEWLINE, (Op.PRINT_BOOL, 1),
            Op.PRINT_NEWLINE, (Op.POP_N, 3), *RET0]  # fmt: skip
    r = run(fn(body, maxstack=3))
    assert (int(r.status), out(r)) == (Code.OK, "3 True -4\nTrue\n")
    assert list(r.out_kind[:6]) == [isa.OUT_INT, isa.OUT_BOOL, isa.OUT_INT, isa.OUT_NEWLINE,
                                    isa.OUT_BOOL, isa.OUT_NEWLINE]  # fmt: skip
    assert r.out_kind.shape == r.out_val.shape == (SMALL.max_output,)
    assert not r.out_kind[6:].any() and not r.out_val[6:].any()


def test_output_limit():
    lim = SMALL._replace(max_output=5)
    body = [(Op.LOAD_CONST, 1), (Op.PRINT_INT, 1), Op.PRINT_NEWLINE, (Op.PRINT_INT, 1),
            Op.PRINT_NEWLINE, (Op.PRINT_INT, 1, 9), (Op.PRINT_INT, 1, 10), *RET0]  # fmt: skip
    r = run(fn(body, maxstack=2), limits=lim)
    assert (int(r.status), int(r.n_out), int(r.line), int(r.pc)) == (Code.OUTPUT_LIMIT, 5, 10, 6)
    assert out(r) == "1\n1\n1"
    del body[6]
    assert int(run(fn(body, maxstack=2), limits=lim).status) == Code.OK


def test_assert():
    body = [(Op.LOAD_CONST, 2), Op.ASSERT, (Op.LOAD_CONST, 0), (Op.ASSERT, 0, 4), *RET0]
    r = run(fn(body, maxstack=1))
    assert (int(r.status), int(r.line), int(r.pc), int(r.steps)) == (Code.ASSERTION, 4, 3, 4)


def test_timeout_exact():
    body = [Op.NOP, Op.NOP, Op.NOP, *RET0]  # 5 instructions
    assert int(run(fn(body), limits=SMALL._replace(max_steps=5)).status) == Code.OK
    r = run(fn(body), limits=SMALL._replace(max_steps=4))
    assert (int(r.status), int(r.steps), int(r.pc)) == (Code.TIMEOUT, 4, 4)
    # an infinite loop stops at the budget
    r = run(fn([(Op.JUMP, 0)]), limits=SMALL)
    assert (int(r.status), int(r.steps)) == (Code.TIMEOUT, SMALL.max_steps)


def test_timeout_before_bad_argument_but_after_bad_pc():
    lim = SMALL._replace(max_steps=1)
    r = run(fn([Op.NOP, (Op.LOAD_VAR, 5)]), limits=lim)
    assert int(r.status) == Code.TIMEOUT
    r = run(fn([Op.NOP, (99, 0)]), limits=lim)
    assert (int(r.status), int(r.steps)) == (Code.INVALID_BYTECODE, 1)


# --- InvalidBytecode, cause by cause ------------------------------------------------------------

INVALID_CASES = {
    "falls off the end": [fn([Op.NOP])],
    "opcode too big": [fn([(isa.N_OPS, 0)])],
    "negative opcode": [fn([(-1, 0)])],
    "slot negative": [fn([(Op.LOAD_VAR, -1), Op.RETURN_VALUE], nlocals=2)],
    "slot >= nlocals": [fn([(Op.LOAD_CONST, 1), (Op.STORE_VAR, 2), *RET0], nlocals=2)],
    "jump target past n_code": [fn([(Op.JUMP, 3), *RET0])],
    "jump target negative": [fn([(Op.LOAD_CONST, 1), (Op.JUMP_IF_TRUE, -1), *RET0])],
    "untaken jump's target is still checked": [fn([(Op.LOAD_CONST, 1),
                                                   (Op.JUMP_IF_FALSE, 99), *RET0])],
    "function id too big": [fn([(Op.CALL, 1), Op.RETURN_VALUE])],
    "function id negative": [fn([(Op.CALL, -1), Op.RETURN_VALUE])],
    "print depth 0": [fn([(Op.LOAD_CONST, 1), (Op.PRINT_INT, 0), *RET0])],
    "print depth too big": [fn([(Op.LOAD_CONST, 1), (Op.PRINT_BOOL, 2), *RET0])],
    "print depth reaches locals": [fn([(Op.LOAD_CONST, 1), (Op.STORE_VAR, 0),
                                       (Op.PRINT_INT, 1), *RET0], nlocals=1)],
    "pop count negative": [fn([(Op.POP_N, -1), *RET0])],
    "pop count too big": [fn([(Op.LOAD_CONST, 1), (Op.POP_N, 2), *RET0])],
    "underflow binary": [fn([(Op.LOAD_CONST, 1), Op.ADD, Op.RETURN_VALUE])],
    "underflow return": [fn([Op.RETURN_VALUE])],
    "underflow for_range": [fn([(Op.LOAD_CONST, 1), (Op.LOAD_CONST, 1), (Op.FOR_RANGE, 0)])],
    "underflow call args": [fn([(Op.LOAD_CONST, 1), (Op.CALL, 1), Op.RETURN_VALUE]),
                            fn(RET0, nparams=2)],
    "overflow maxstack": [fn([(Op.LOAD_CONST, 1), (Op.LOAD_CONST, 1), Op.ADD, Op.RETURN_VALUE],
                             maxstack=1)],
    "overflow dup": [fn([(Op.LOAD_CONST, 1), Op.DUP_TOP, Op.RETURN_VALUE], maxstack=1)],
    "overflow for_range room for 4": [fn([(Op.LOAD_CONST, 5), (Op.LOAD_CONST, 1),
                                          (Op.LOAD_CONST, 1), (Op.FOR_RANGE, 4), *RET0],
                                         maxstack=3)],
    "overflow call result": [fn([(Op.CALL, 1), Op.RETURN_VALUE], maxstack=0), fn(RET0)],
    "callee nparams < 0": [fn([(Op.CALL, 1), Op.RETURN_VALUE]), fn(RET0, nparams=-1, nlocals=0)],
    "callee nlocals < nparams": [fn([(Op.LOAD_CONST, 1), (Op.CALL, 1), Op.RETURN_VALUE]),
                                 fn(RET0, nparams=1, nlocals=0)],
    "callee maxstack < 0": [fn([(Op.CALL, 1), Op.RETURN_VALUE]), fn(RET0, maxstack=-1)],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(INVALID_CASES))
def test_invalid_bytecode(case):
    r = run(*INVALID_CASES[case])
    assert int(r.status) == Code.INVALID_BYTECODE, case
    assert int(r.result) == 0


def test_invalid_callee_entry_and_tables():
    p = asm(fn([(Op.CALL, 1), Op.RETURN_VALUE]), fn(RET0))
    for bad_entry in (-1, int(p.n_code), 10**9):
        q = p._replace(fn_entry=np.array([0, bad_entry, 0], np.int32))
        assert int(run_program(q, SMALL).status) == Code.INVALID_BYTECODE
    # entry function out of range, or malformed
    assert int(run_program(p, SMALL, entry=2).status) == Code.INVALID_BYTECODE
    assert int(run_program(p, SMALL, entry=-5).status) == Code.INVALID_BYTECODE
    q = p._replace(fn_maxstack=np.array([-1, 8, 0], np.int32))
    r = run_program(q, SMALL)
    assert (int(r.status), int(r.steps)) == (Code.INVALID_BYTECODE, 0)
    # n_code beyond the arrays is clipped; n_code <= 0 leaves nothing valid
    q = p._replace(n_code=np.int32(10**6))
    assert int(run_program(q, SMALL).status) == Code.OK
    for n in (0, -3):
        r = run_program(p._replace(n_code=np.int32(n)), SMALL)
        assert (int(r.status), int(r.line)) == (Code.INVALID_BYTECODE, 0)
    q = p._replace(n_funcs=np.int32(10**6))
    assert int(run_program(q, SMALL, entry=2).status) == Code.INVALID_BYTECODE  # entry past 0 pads


def test_invalid_reports_pc_line_fn():
    main = fn([(Op.LOAD_CONST, 1), (Op.CALL, 1, 2), Op.RETURN_VALUE])
    f = fn([(Op.LOAD_VAR, 0, 11), (Op.JUMP, 99, 12)], nparams=1)
    r = run(main, f)
    assert (int(r.status), int(r.pc), int(r.line), int(r.fn), int(r.steps)) == (
        Code.INVALID_BYTECODE, 4, 12, 1, 4)  # fmt: skip
    r = run(fn([Op.NOP, Op.NOP]))  # runs to pc 2 == n_code
    assert (int(r.status), int(r.pc), int(r.line), int(r.steps)) == (Code.INVALID_BYTECODE, 2, 0, 2)


# --- garbage never raises, batches agree with lanes ---------------------------------------------

i32 = st.integers(INT_MIN, INT_MAX)
small = st.integers(-3, 12)
field = st.one_of(small, small, i32)


@st.composite
def garbage_programs(draw, n_i=12, n_f=3):
    ops = draw(st.lists(st.one_of(st.integers(-2, isa.N_OPS + 1), i32), min_size=n_i,
                        max_size=n_i))  # fmt: skip
    return isa.Program(
        op=np.array(ops, np.int32),
        arg=np.array(draw(st.lists(field, min_size=n_i, max_size=n_i)), np.int32),
        line=np.array(draw(st.lists(i32, min_size=n_i, max_size=n_i)), np.int32),
        n_code=np.int32(draw(field)),
        **{k: np.array(draw(st.lists(field, min_size=n_f, max_size=n_f)), np.int32)
           for k in ("fn_entry", "fn_nparams", "fn_nlocals", "fn_maxstack", "fn_rettype")},
        n_funcs=np.int32(draw(field)),
    )  # fmt: skip


@settings(deadline=None, max_examples=N_EX * 5)
@given(garbage_programs(), field, st.lists(i32, max_size=3))
def test_garbage_never_raises(p, entry, args):
    lim = Limits(max_stack=32, max_depth=4, max_output=4, max_steps=200)
    r = run_program(p, lim, entry, args)
    assert int(r.status) in (set(range(Code.ZERO_DIVISION, Code.INVALID_BYTECODE + 1)) | {0})
    assert 0 <= int(r.steps) <= lim.max_steps
    assert 0 <= int(r.n_out) <= lim.max_output
    assert r.out_kind.shape == (lim.max_output,)
    assert all(isinstance(v, np.int32) for v in (r.status, r.pc, r.line, r.result, r.steps))


@settings(deadline=None, max_examples=N_EX)
@given(st.lists(garbage_programs(), min_size=1, max_size=4), st.lists(i32, max_size=2))
def test_batch_equals_lanes(progs, args):
    batch = isa.Program(*(np.stack(f) for f in zip(*progs, strict=True)))
    lim = Limits(max_stack=32, max_depth=4, max_output=4, max_steps=200)
    rb = run_batch(batch, lim, entry=None, args=np.array([args] * len(progs), np.int64))
    for i, p in enumerate(progs):
        r1 = run_program(p, lim, 0, args)
        for name, a, b in zip(isa.RunResult._fields, rb, r1, strict=True):
            np.testing.assert_array_equal(np.asarray(a)[i], b, err_msg=name)


def test_run_batch_entry_and_shapes():
    main = fn([(Op.LOAD_CONST, 3), (Op.CALL, 1), Op.RETURN_VALUE])
    p = asm(main, FIB)
    batch = isa.Program(*(np.stack([f, f]) for f in p))
    r = run_batch(batch, SMALL._replace(max_steps=10_000), entry=np.array([0, 1]),
                  args=np.array([[0], [6]]))  # fmt: skip
    assert list(r.result) == [2, 8]
    assert r.out_kind.shape == (2, SMALL.max_output) and r.status.dtype == np.int32


def test_trace_sees_every_started_instruction():
    seen = []
    body = [(Op.LOAD_CONST, 4), (Op.LOAD_CONST, 5), Op.ADD, Op.RETURN_VALUE]
    r = run_program(asm(fn(body, maxstack=2)), SMALL, trace=lambda *a: seen.append(a))
    assert int(r.steps) == len(seen) == 4
    assert seen[2] == (0, 2, Op.ADD, 0, [4, 5])
    lanes = []
    p = asm(fn(body, maxstack=2))
    batch = isa.Program(*(np.stack([f, f]) for f in p))
    run_batch(batch, SMALL, trace=lambda lane, *a: lanes.append(lane))
    assert lanes == [0] * 4 + [1] * 4
