"""The opcode table is consistent, and its producers and consumers agree with it:
INFO covers Op, decode_tables has one entry per opcode, the reference compiler emits
only arguments of each opcode's declared ArgKind, and dis knows every opcode."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from jaxcc import isa
from jaxcc.dis import format_dis, get_instructions
from jaxcc.errors import Code
from jaxcc.isa import INFO, ArgKind, Op
from jaxcc.reference.compiler import compile_source, stack_depths
from jaxcc.testing import programs
from property_tests.limits import HOST as BIG


def test_info_covers_every_opcode():
    assert set(INFO) == set(Op)
    assert [int(op) for op in Op] == list(range(len(Op)))  # dense, from 0
    assert isa.N_OPS == len(Op)
    for op, info in INFO.items():
        assert isinstance(info.arg, ArgKind)
        assert info.pops >= 0 and info.pushes >= 0
        assert info.jumps == (info.arg == ArgKind.TARGET), op


def test_decode_tables():
    t = isa.decode_tables()
    assert set(t) == {"arg_kind", "pops", "pushes", "jumps"}
    for name, arr in t.items():
        assert arr.shape == (len(Op),), name
    assert t["arg_kind"].dtype == np.int32 and t["jumps"].dtype == np.bool_
    for op in Op:
        assert t["arg_kind"][op] == INFO[op].arg
        assert t["pops"][op] == INFO[op].pops
        assert t["pushes"][op] == INFO[op].pushes
        assert t["jumps"][op] == INFO[op].jumps


def test_op_groups():
    assert set(isa.BINARY_OPS) == {
        Op.ADD, Op.SUB, Op.MUL, Op.FLOORDIV, Op.MOD, Op.POW, Op.LSHIFT, Op.RSHIFT, Op.AND,
        Op.OR, Op.XOR, Op.MIN, Op.MAX, Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE,
    }  # fmt: skip
    assert set(isa.JUMP_OPS) == {op for op in Op if INFO[op].arg == ArgKind.TARGET}
    for op in isa.UNARY_OPS:
        assert INFO[op][:3] == (ArgKind.NONE, 1, 1)


def reachable(prog, start: int) -> set[int]:
    """The instructions control reaches from a function's entry: the pcs the reference
    compiler's abstract walk (``stack_depths``, which fn_maxstack is the maximum over) visits."""
    op, arg = prog.op.tolist(), prog.arg.tolist()
    return set(stack_depths(op, arg, start, lambda g: int(prog.fn_nparams[g])))


def check_args(prog):
    """Every argument the compiler emitted is of its opcode's ArgKind. A DEPTH or COUNT is
    bounded by fn_maxstack only where control reaches it: fn_maxstack is the maximum over
    the reachable instructions, and code after a ``return`` is emitted but never runs
    (found by Hypothesis: ``return -+6`` followed by a two-value ``print``)."""
    n_code, n_funcs = int(prog.n_code), int(prog.n_funcs)
    entries = prog.fn_entry[:n_funcs].tolist() + [n_code]
    for fid in range(n_funcs):
        nlocals = int(prog.fn_nlocals[fid])
        live = reachable(prog, entries[fid])
        for pc in range(entries[fid], entries[fid + 1]):
            op, a = Op(int(prog.op[pc])), int(prog.arg[pc])
            kind = INFO[op].arg
            if kind == ArgKind.NONE:
                assert a == 0
            elif kind == ArgKind.SLOT:
                assert 0 <= a < nlocals
            elif kind == ArgKind.TARGET:
                assert 0 <= a < n_code
            elif kind == ArgKind.FUNC:
                assert 0 <= a < n_funcs
            elif kind in (ArgKind.DEPTH,):
                assert 1 <= a and (pc not in live or a <= int(prog.fn_maxstack[fid]))
            elif kind == ArgKind.COUNT:
                assert 0 <= a and (pc not in live or a <= int(prog.fn_maxstack[fid]))


EVERY_OP_SOURCE = """
def f(a, b):
    return a + b - a * b // 3 % 5 ** 2 << 1 >> 1 & 7 | 8 ^ 9
def g(n):
    for i in range(n):
        if i == 2:
            break
    while n > 0:
        n -= 1
        if n < 1 or n <= 2 and n >= 0:
            continue
    return min(n, 2) + max(n, 3) + abs(-n) + ~n
x = f(1, 2) != g(3)
assert 0 < g(4) > -1
print(x, not x, g(1))
g(2)
"""


def test_compiler_emits_every_opcode_it_can():
    c = compile_source(EVERY_OP_SOURCE)
    assert c.error.code == Code.OK, c.debug.message
    check_args(c.program)
    used = {Op(int(o)) for o in c.program.op[: int(c.program.n_code)]}
    # never emitted by the templates: NOP (padding), DUP_TOP, JUMP_IF_TRUE, the
    # compare-and-branch opcodes and LOAD_VAR2 (only the optimizer makes those)
    assert set(Op) - used == {Op.NOP, Op.DUP_TOP, Op.JUMP_IF_TRUE, *isa.COMPARE_JUMP_OPS,
                              Op.LOAD_VAR2}  # fmt: skip


def test_dead_code_after_return_is_checked_only_for_its_kinds():
    # the function's reachable code needs one operand; the print after its return two
    src = "def f(p, q):\n    return 6\n    print(p * q, p + q)\n    return 1\nprint(f(1, 2))\n"
    c = compile_source(src, BIG)
    assert c.error.code == Code.OK, c.debug.message
    p, entries = c.program, c.program.fn_entry[:2].tolist() + [int(c.program.n_code)]
    assert int(p.fn_maxstack[1]) == 1
    live = reachable(p, entries[1])
    dead = [pc for pc in range(entries[1], entries[2]) if pc not in live]
    assert [Op(int(p.op[pc])) for pc in sorted(live)] == [Op.LOAD_CONST, Op.RETURN_VALUE]
    assert any(Op(int(p.op[pc])) == Op.PRINT_INT and int(p.arg[pc]) == 2 for pc in dead)
    check_args(p)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(programs())
def test_generated_args_match_kinds(src):
    c = compile_source(src, BIG)
    assert c.error.code == Code.OK, c.debug.message
    check_args(c.program)


@pytest.mark.parametrize("op", list(Op))
def test_dis_knows_every_opcode(op):
    # a hand-assembled one-function program holding just this opcode (with a valid arg)
    arg = {ArgKind.NONE: 0, ArgKind.CONST: -7, ArgKind.SLOT: 0, ArgKind.TARGET: 0,
           ArgKind.FUNC: 0, ArgKind.DEPTH: 1, ArgKind.COUNT: 1, ArgKind.SLOT2: 0}[INFO[op].arg]  # fmt: skip
    z = np.zeros(4, np.int32)
    prog = isa.Program(
        op=np.array([op, 0, 0, 0], np.int32), arg=np.array([arg, 0, 0, 0], np.int32),
        line=np.array([1, 0, 0, 0], np.int32), n_code=np.int32(1),
        fn_entry=z, fn_nparams=z, fn_nlocals=np.array([1, 0, 0, 0], np.int32),
        fn_maxstack=z, fn_rettype=np.array([isa.T_NONE, 0, 0, 0], np.int32), n_funcs=np.int32(1),
    )  # fmt: skip
    (ins,) = get_instructions(prog)
    assert ins.opname == op.name and ins.opcode == op
    assert (ins.arg is None) == (INFO[op].arg == ArgKind.NONE)
    assert op.name in format_dis(prog)
