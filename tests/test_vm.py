"""The JAX VM on hand-assembled bytecode: every opcode, every status, every InvalidBytecode
cause, checked against hand-derived values AND lane by lane against the reference
interpreter; jit vs eager, unbatched, vmap, batch isolation, one trace per shape, run_tests.

All hand cases are padded to one shape and run as ONE batch, so the VM compiles once.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcc import isa, vm
from jaxcc.errors import RUNTIME_CODES, Code, Value
from jaxcc.isa import Op
from jaxcc.reference.interp import run_program
from property_tests.limits import VM_SMALL

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
SMALL = VM_SMALL
I_PAD, F_PAD, A_PAD = 48, 4, 3
FIELDS = isa.RunResult._fields


class Rel(int):
    """A jump target relative to the start of its function (resolved by asm)."""


def fn(body, nparams=0, nlocals=None, maxstack=8):
    return dict(body=body, nparams=nparams, nlocals=nparams if nlocals is None else nlocals,
                maxstack=maxstack)  # fmt: skip


def asm(*funcs, n_code=None, n_funcs=None, table=None, i_pad=I_PAD, f_pad=F_PAD) -> isa.Program:
    """Assemble functions (function 0 first) into one unbatched Program of I_PAD x F_PAD.

    table: optional {fid: (entry, nparams, nlocals, maxstack)} overriding the table rows.
    """
    code, entries = [], []
    for f in funcs:
        entries.append(len(code))
        for k, ins in enumerate(f["body"]):
            ins = ins if isinstance(ins, tuple) else (ins, 0)
            op, a = ins
            a = entries[-1] + a if isinstance(a, Rel) else a
            code.append((int(op), int(a), 100 + len(code) + k * 0))
    assert len(code) <= i_pad and len(funcs) <= f_pad
    op, arg, line = (np.zeros(i_pad, np.int32) for _ in range(3))
    for i, (o, a, ln) in enumerate(code):
        op[i], arg[i], line[i] = o, a, ln
    tab = np.zeros((5, f_pad), np.int32)
    for i, f in enumerate(funcs):
        tab[:4, i] = entries[i], f["nparams"], f["nlocals"], f["maxstack"]
    for i, row in (table or {}).items():
        tab[:4, i] = row
    return isa.Program(
        op=op, arg=arg, line=line,
        n_code=np.int32(len(code) if n_code is None else n_code),
        fn_entry=tab[0], fn_nparams=tab[1], fn_nlocals=tab[2], fn_maxstack=tab[3],
        fn_rettype=tab[4], n_funcs=np.int32(len(funcs) if n_funcs is None else n_funcs),
    )  # fmt: skip


def stack_programs(progs):
    return isa.Program(
        *(np.stack([np.asarray(getattr(p, f)) for p in progs]) for f in isa.Program._fields)
    )


def pad_args(args):
    a = np.zeros(A_PAD, np.int32)
    a[: len(args)] = args
    return a


def lane(res, i):
    return isa.RunResult(*(np.asarray(f)[i] for f in res))


def assert_same(got, want, what=""):
    for name in FIELDS:
        g, w = np.asarray(getattr(got, name)), np.asarray(getattr(want, name))
        assert np.array_equal(g, w), f"{what}: {name}: vm {g} != reference {w}"


def out(r) -> str:
    return isa.format_output(r.out_kind, r.out_val, r.n_out)


RET0 = [(Op.LOAD_CONST, 0), Op.RETURN_VALUE]
LC = Op.LOAD_CONST

# ---------------------------------------------------------------------------------------
# hand cases: (name, program, entry, args, expected {field: value}, limits-independent)

CASES: list[tuple] = []


def case(name, *funcs, entry=0, args=(), expect=None, **kw):
    CASES.append((name, asm(*funcs, **kw), entry, tuple(args), expect or {}))


# every opcode on its normal path
case(
    "load_const_return",
    fn([(LC, 7), Op.RETURN_VALUE], maxstack=1),
    expect=dict(status=Code.OK, result=7, pc=1, steps=2, line=101),
)
case(
    "nop",
    fn([Op.NOP, Op.NOP, (LC, -3), Op.RETURN_VALUE], maxstack=1),
    expect=dict(status=Code.OK, result=-3, steps=4),
)
case(
    "store_load",
    fn(
        [(LC, 5), (Op.STORE_VAR, 0), (Op.LOAD_VAR, 0), (Op.LOAD_VAR, 0), Op.ADD, Op.RETURN_VALUE],
        nlocals=1,
        maxstack=2,
    ),
    expect=dict(status=Code.OK, result=10, steps=6),
)
case(
    "pop_dup_popn",
    fn(
        [
            (LC, 1),
            (LC, 2),
            (LC, 3),
            Op.POP_TOP,
            Op.DUP_TOP,
            (LC, 9),
            (Op.POP_N, 2),
            (Op.POP_N, 0),
            Op.RETURN_VALUE,
        ],
        maxstack=4,
    ),
    expect=dict(status=Code.OK, result=2, steps=9),
)
for _op, _x, _r in [
    (Op.NEG, 5, -5),
    (Op.NEG, INT_MAX, -INT_MAX),
    (Op.INVERT, 0, -1),
    (Op.INVERT, INT_MIN, INT_MAX),
    (Op.NOT, 0, 1),
    (Op.NOT, -4, 0),
    (Op.ABS, -9, 9),
    (Op.ABS, INT_MIN + 1, INT_MAX),
    (Op.ABS, 3, 3),
]:
    case(
        f"unary_{_op.name}_{_x}",
        fn([(LC, _x), _op, Op.RETURN_VALUE], maxstack=1),
        expect=dict(status=Code.OK, result=_r, steps=3),
    )
for _op in (Op.NEG, Op.ABS):
    case(
        f"unary_{_op.name}_overflow",
        fn([(LC, INT_MIN), _op, Op.RETURN_VALUE], maxstack=1),
        expect=dict(status=Code.OVERFLOW, pc=1, line=101, steps=2, result=0),
    )
# conditional jumps, both ways: push 1 for taken, 2 for not
for _op, _v, _taken in [
    (Op.JUMP_IF_FALSE, 0, True),
    (Op.JUMP_IF_FALSE, 7, False),
    (Op.JUMP_IF_TRUE, -1, True),
    (Op.JUMP_IF_TRUE, 0, False),
]:
    case(
        f"{_op.name}_{_v}",
        fn([(LC, _v), (_op, 4), (LC, 2), Op.RETURN_VALUE, (LC, 1), Op.RETURN_VALUE], maxstack=1),
        expect=dict(status=Code.OK, result=1 if _taken else 2, steps=4),
    )
for _op, _v, _taken in [
    (Op.JUMP_IF_FALSE_OR_POP, 0, True),
    (Op.JUMP_IF_FALSE_OR_POP, 5, False),
    (Op.JUMP_IF_TRUE_OR_POP, 5, True),
    (Op.JUMP_IF_TRUE_OR_POP, 0, False),
]:
    # taken keeps the item (returned); fall-through pops it, then 42 is returned
    case(
        f"{_op.name}_{_v}",
        fn([(LC, _v), (_op, 4), (LC, 42), Op.RETURN_VALUE, Op.RETURN_VALUE], maxstack=1),
        expect=dict(status=Code.OK, result=_v if _taken else 42, steps=3 if _taken else 4),
    )
case(
    "jump",
    fn([(Op.JUMP, 3), (LC, 1), Op.RETURN_VALUE, (LC, 2), Op.RETURN_VALUE], maxstack=1),
    expect=dict(status=Code.OK, result=2, steps=3),
)
# compare-and-branch (the optimizer's fused comparison + conditional jump): pop b, pop a,
# jump if a OP b; push 1 for taken, 2 for not. Each operator on less, equal, greater and
# the int32 extremes (no wrap-around in the comparison).
_CMP_JUMPS = {Op.JUMP_IF_LT: lambda a, b: a < b, Op.JUMP_IF_LE: lambda a, b: a <= b,
              Op.JUMP_IF_GT: lambda a, b: a > b, Op.JUMP_IF_GE: lambda a, b: a >= b,
              Op.JUMP_IF_EQ: lambda a, b: a == b, Op.JUMP_IF_NE: lambda a, b: a != b}  # fmt: skip
for _op, _f in _CMP_JUMPS.items():
    for _a, _b in [(1, 2), (2, 2), (3, 2), (INT_MIN, INT_MAX), (INT_MAX, INT_MIN), (-1, 0)]:
        case(
            f"{_op.name}_{_a}_{_b}",
            fn(
                [(LC, _a), (LC, _b), (_op, 5), (LC, 2), Op.RETURN_VALUE, (LC, 1), Op.RETURN_VALUE],
                maxstack=2,
            ),  # fmt: skip
            expect=dict(status=Code.OK, result=1 if _f(_a, _b) else 2, steps=5),
        )
    # both operands are popped on either path: the stack is empty after it
    case(
        f"{_op.name}_pops_both",
        fn([(LC, 7), (LC, 3), (LC, 4), (_op, 4), Op.RETURN_VALUE], maxstack=3),
        expect=dict(status=Code.OK, result=7, steps=5),
    )
# a loop counting to 10 with a compare-and-branch at the bottom (local 0 = i)
case(
    "compare_and_branch_loop",
    fn(
        [
            (LC, 0),
            (Op.STORE_VAR, 0),
            (Op.LOAD_VAR, 0),
            (LC, 1),
            Op.ADD,
            (Op.STORE_VAR, 0),
            (Op.LOAD_VAR, 0),
            (LC, 10),
            (Op.JUMP_IF_LT, 2),
            (Op.LOAD_VAR, 0),
            Op.RETURN_VALUE,
        ],
        nlocals=1,
        maxstack=2,
    ),  # fmt: skip
    expect=dict(status=Code.OK, result=10, steps=2 + 7 * 10 + 2),
)


def range_sum(start, stop, step, maxstack=5):
    """sum(range(start, stop, step)) with a FOR_RANGE loop; local 0 = total."""
    return fn([(LC, 0), (Op.STORE_VAR, 0), (LC, start), (LC, stop), (LC, step),
               (Op.FOR_RANGE, Rel(11)), (Op.LOAD_VAR, 0), Op.ADD, (Op.STORE_VAR, 0),
               (Op.JUMP, Rel(5)), Op.NOP, (Op.LOAD_VAR, 0), Op.RETURN_VALUE],
              nlocals=1, maxstack=maxstack)  # fmt: skip


for _a, _b, _c in [
    (0, 10, 1),
    (10, 0, -3),
    (5, 5, 1),
    (5, 0, 1),
    (-4, 9, 4),
    (INT_MAX - 5, INT_MAX, 2),
    (INT_MIN + 5, INT_MIN, -2),
]:
    _n = len(range(_a, _b, _c))
    _s = sum(range(_a, _b, _c))
    case(
        f"range_{_a}_{_b}_{_c}",
        range_sum(_a, _b, _c),
        expect=dict(
            status=Code.OK if INT_MIN <= _s <= INT_MAX else Code.OVERFLOW,
            result=_s if INT_MIN <= _s <= INT_MAX else 0,
            **({"steps": 5 + 5 * _n + 1 + 2} if INT_MIN <= _s <= INT_MAX else {}),
        ),
    )


# count the iterations (no sum to overflow): the range-overflow rule ends the loop
def range_count(start, stop, step):
    return fn([(LC, 0), (Op.STORE_VAR, 0), (LC, start), (LC, stop), (LC, step),
               (Op.FOR_RANGE, Rel(12)), Op.POP_TOP, (Op.LOAD_VAR, 0), (LC, 1), Op.ADD,
               (Op.STORE_VAR, 0), (Op.JUMP, Rel(5)), (Op.LOAD_VAR, 0), Op.RETURN_VALUE],
              nlocals=1, maxstack=5)  # fmt: skip


for _a, _b, _c in [
    (INT_MAX - 5, INT_MAX, 2),
    (INT_MAX - 5, INT_MAX, 10**9),
    (INT_MIN + 2, INT_MIN, -1),
    (INT_MIN, INT_MAX, 2**30),
    (INT_MAX, INT_MIN, INT_MIN),
]:
    _n = len(range(_a, _b, _c))
    case(
        f"range_count_{_a}_{_b}_{_c}",
        range_count(_a, _b, _c),
        expect=dict(status=Code.OK, result=_n, steps=5 + 7 * _n + 1 + 2),
    )
case(
    "range_step_zero",
    range_sum(0, 3, 0),
    expect=dict(status=Code.VALUE, detail=Value.RANGE_STEP_ZERO, pc=5, steps=6),
)
case(
    "range_needs_room_for_4",
    range_sum(0, 0, 1, maxstack=3),
    expect=dict(status=Code.INVALID_BYTECODE, pc=5, steps=6),
)
# break out of a range loop: POP_N 3 then JUMP
case(
    "range_break",
    fn(
        [
            (LC, 0),
            (LC, 100),
            (LC, 1),
            (Op.FOR_RANGE, 12),
            (Op.STORE_VAR, 0),
            (Op.LOAD_VAR, 0),
            (LC, 3),
            Op.EQ,
            (Op.JUMP_IF_TRUE, 10),
            (Op.JUMP, 3),
            (Op.POP_N, 3),
            (Op.JUMP, 13),
            (LC, -1),
            (Op.LOAD_VAR, 0),
            Op.RETURN_VALUE,
        ],
        nlocals=1,
        maxstack=5,
    ),
    expect=dict(status=Code.OK, result=3),
)

# calls
FACT = fn([(Op.LOAD_VAR, 0), (LC, 1), Op.LE, (Op.JUMP_IF_FALSE, Rel(6)), (LC, 1), Op.RETURN_VALUE,
           (Op.LOAD_VAR, 0), (Op.LOAD_VAR, 0), (LC, 1), Op.SUB, (Op.CALL, 1), Op.MUL,
           Op.RETURN_VALUE], nparams=1, maxstack=3)  # fmt: skip
case(
    "factorial_5",
    fn([(LC, 5), (Op.CALL, 1), Op.RETURN_VALUE], maxstack=1),
    FACT,
    expect=dict(status=Code.OK, result=120, fn=0, pc=2),
)
case(
    "factorial_entry_args",
    fn(RET0, maxstack=1),
    FACT,
    entry=1,
    args=(6,),
    expect=dict(status=Code.OK, result=720, fn=1),
)
case(
    "square_overflow",
    fn(RET0, maxstack=1),
    fn([(Op.LOAD_VAR, 0), Op.DUP_TOP, Op.MUL, Op.RETURN_VALUE], nparams=1, maxstack=2),
    entry=1,
    args=(46341,),
    expect=dict(status=Code.OVERFLOW, fn=1, pc=2 + 2, steps=3),
)
case(
    "recursion_depth",
    fn(RET0, maxstack=1),
    FACT,
    entry=1,
    args=(100,),
    expect=dict(status=Code.RECURSION, fn=1, pc=12),
)
# two args: f(a, b) = a - b; first pushed = slot 0
case(
    "call_arg_order",
    fn([(LC, 10), (LC, 3), (Op.CALL, 1), Op.RETURN_VALUE], maxstack=2),
    fn([(Op.LOAD_VAR, 0), (Op.LOAD_VAR, 1), Op.SUB, Op.RETURN_VALUE], nparams=2, maxstack=2),
    expect=dict(status=Code.OK, result=7, steps=8),
)
# a local bound in one call is unbound in the next call of the same function
_G = fn(
    [
        (Op.LOAD_VAR, 0),
        (Op.JUMP_IF_FALSE, Rel(4)),
        (LC, 7),
        (Op.STORE_VAR, 1),
        (Op.LOAD_VAR, 1),
        Op.RETURN_VALUE,
    ],
    nparams=1,
    nlocals=2,
    maxstack=1,
)
case(
    "unbound_after_rebind",
    fn([(LC, 1), (Op.CALL, 1), (LC, 0), (Op.CALL, 1), Op.ADD, Op.RETURN_VALUE], maxstack=2),
    _G,
    expect=dict(status=Code.UNBOUND_LOCAL, fn=1, pc=6 + 4),
)
case(
    "bound_when_both_store",
    fn([(LC, 1), (Op.CALL, 1), (LC, 1), (Op.CALL, 1), Op.ADD, Op.RETURN_VALUE], maxstack=2),
    _G,
    expect=dict(status=Code.OK, result=14),
)
case(
    "unbound_module_local",
    fn([(Op.LOAD_VAR, 0), Op.RETURN_VALUE], nlocals=1, maxstack=1),
    expect=dict(status=Code.UNBOUND_LOCAL, pc=0, steps=1),
)
case(
    "entry_params_bound_missing_args_zero",
    fn(RET0, maxstack=1),
    fn([(Op.LOAD_VAR, 0), (Op.LOAD_VAR, 2), Op.SUB, Op.RETURN_VALUE], nparams=3, maxstack=2),
    entry=1,
    args=(5,),
    expect=dict(status=Code.OK, result=5),
)
case(
    "frame_does_not_fit",
    fn([(Op.CALL, 1), Op.RETURN_VALUE], maxstack=1),
    fn(RET0, nlocals=40, maxstack=30),
    expect=dict(status=Code.RECURSION, pc=0, steps=1),
)
case(
    "entry_frame_does_not_fit",
    fn(RET0, nlocals=40, maxstack=30),
    expect=dict(status=Code.RECURSION, pc=0, steps=0),
)

# output
case(
    "print_kinds",
    fn(
        [
            (LC, 3),
            (LC, 0),
            (Op.PRINT_INT, 2),
            (Op.PRINT_BOOL, 1),
            (Op.PRINT_NEWLINE, 0),
            (Op.PRINT_BOOL, 2),
            Op.RETURN_VALUE,
        ],
        maxstack=2,
    ),
    expect=dict(status=Code.OK, result=0, n_out=4),
)
case(
    "output_limit",
    fn([(LC, 1), (Op.PRINT_INT, 1), (Op.JUMP, 1)], maxstack=1),
    expect=dict(
        status=Code.OUTPUT_LIMIT, n_out=SMALL.max_output, pc=1, steps=1 + 2 * SMALL.max_output + 1
    ),
)
case(
    "assert_ok",
    fn([(LC, 2), Op.ASSERT, (LC, 4), Op.RETURN_VALUE], maxstack=1),
    expect=dict(status=Code.OK, result=4),
)
case(
    "assert_fail",
    fn([(LC, 0), Op.ASSERT, (LC, 4), Op.RETURN_VALUE], maxstack=1),
    expect=dict(status=Code.ASSERTION, pc=1, line=101, steps=2),
)
case(
    "timeout",
    fn([Op.NOP, (Op.JUMP, 0)]),
    expect=dict(status=Code.TIMEOUT, steps=SMALL.max_steps, pc=0),
)

# run-time errors of binary ops (full coverage in test_binary_ops)
case(
    "zero_div",
    fn([(LC, 1), (LC, 0), Op.FLOORDIV, Op.RETURN_VALUE], maxstack=2),
    expect=dict(status=Code.ZERO_DIVISION, pc=2, steps=3),
)
case(
    "neg_shift",
    fn([(LC, 1), (LC, -1), Op.RSHIFT, Op.RETURN_VALUE], maxstack=2),
    expect=dict(status=Code.VALUE, detail=Value.NEGATIVE_SHIFT, pc=2),
)
case(
    "neg_pow",
    fn([(LC, 0), (LC, -1), Op.POW, Op.RETURN_VALUE], maxstack=2),
    expect=dict(status=Code.VALUE, detail=Value.NEGATIVE_POWER, pc=2),
)

# every InvalidBytecode cause
IB = Code.INVALID_BYTECODE
case(
    "bad_opcode",
    fn([(LC, 1), (len(Op), 0), Op.RETURN_VALUE], maxstack=1),
    expect=dict(status=IB, pc=1, steps=1, line=101),
)
case("bad_opcode_negative", fn([(-1, 0)]), expect=dict(status=IB, pc=0, steps=0))
case("fall_off_end", fn([Op.NOP]), expect=dict(status=IB, pc=1, steps=1, line=0))
case(
    "n_code_garbage",
    fn([(LC, 1), Op.RETURN_VALUE]),
    n_code=-5,
    expect=dict(status=IB, steps=0, line=0),
)
case("n_code_too_big", fn([Op.NOP]), n_code=10**6, expect=dict(status=IB, pc=I_PAD, steps=I_PAD))
case("slot_negative", fn([(Op.LOAD_VAR, -1)], nlocals=2), expect=dict(status=IB, steps=1))
case(
    "slot_too_big",
    fn([(LC, 1), (Op.STORE_VAR, 2)], nlocals=2, maxstack=1),
    expect=dict(status=IB, pc=1, steps=2),
)
case("target_negative", fn([(Op.JUMP, -1)]), expect=dict(status=IB, pc=0))
case(
    "target_too_big", fn([(LC, 1), (Op.JUMP_IF_TRUE, 2)], maxstack=1), expect=dict(status=IB, pc=1)
)
case(
    "target_checked_untaken",
    fn([(LC, 1), (Op.JUMP_IF_FALSE, 99)], maxstack=1),
    expect=dict(status=IB, pc=1),
)
# compare-and-branch on hostile bytecode: the same statuses as JUMP_IF_FALSE's (pc,
# steps, line included): its target is checked taken or not, and it needs two operands
for _op in (Op.JUMP_IF_FALSE, *_CMP_JUMPS):
    _k = isa.INFO[_op].pops
    _push = [(LC, 1)] * _k
    case(
        f"{_op.name}_target_too_big",
        fn([*_push, (_op, _k + 1)], maxstack=2),
        expect=dict(status=IB, pc=_k, steps=_k + 1, line=100 + _k),
    )
    case(
        f"{_op.name}_target_negative",
        fn([*_push, (_op, -1)], maxstack=2),
        expect=dict(status=IB, pc=_k, steps=_k + 1, line=100 + _k),
    )
    case(
        f"{_op.name}_target_huge_untaken",
        fn([(LC, 0)] * _k + [(_op, INT_MAX)], maxstack=2),
        expect=dict(status=IB, pc=_k, steps=_k + 1),
    )
    case(
        f"{_op.name}_underflow_empty",
        fn([(_op, 0)], maxstack=2),
        expect=dict(status=IB, pc=0, steps=1, line=100),
    )
    # one item fewer than it pops (for JUMP_IF_FALSE: the empty stack again)
    case(
        f"{_op.name}_underflow_short",
        fn([(LC, 1)] * (_k - 1) + [(_op, 0)], maxstack=2),
        expect=dict(status=IB, pc=_k - 1, steps=_k),
    )
    # the operands must be above the frame's locals (one operand and one local here)
    case(
        f"{_op.name}_underflow_into_locals",
        fn([(LC, 5), (Op.STORE_VAR, 0)] + [(LC, 1)] * (_k - 1) + [(_op, 0)], nlocals=1, maxstack=2),
        expect=dict(status=IB, pc=_k + 1, steps=_k + 2),
    )
case("func_bad", fn([(Op.CALL, 1)]), expect=dict(status=IB))
case("func_negative", fn([(Op.CALL, -1)]), expect=dict(status=IB))
case("print_depth_zero", fn([(LC, 1), (Op.PRINT_INT, 0)], maxstack=1), expect=dict(status=IB))
case("print_depth_deep", fn([(LC, 1), (Op.PRINT_BOOL, 2)], maxstack=1), expect=dict(status=IB))
case(
    "print_depth_into_locals",
    fn([(LC, 1), (Op.STORE_VAR, 0), (LC, 2), (Op.PRINT_INT, 2)], nlocals=1, maxstack=1),
    expect=dict(status=IB, pc=3),
)
case("popn_negative", fn([(Op.POP_N, -1)]), expect=dict(status=IB))
case("popn_too_many", fn([(LC, 1), (Op.POP_N, 2)], maxstack=1), expect=dict(status=IB, pc=1))
case("underflow_pop", fn([Op.POP_TOP]), expect=dict(status=IB))
case("underflow_add", fn([(LC, 1), Op.ADD], maxstack=1), expect=dict(status=IB, pc=1))
case(
    "underflow_into_locals",
    fn([(LC, 1), (Op.STORE_VAR, 0), Op.RETURN_VALUE], nlocals=1, maxstack=1),
    expect=dict(status=IB, pc=2),
)
case(
    "underflow_for_range",
    fn([(LC, 1), (LC, 1), (Op.FOR_RANGE, 0)], maxstack=3),
    expect=dict(status=IB, pc=2),
)
case(
    "underflow_call_args",
    fn([(LC, 1), (Op.CALL, 1)], maxstack=2),
    fn(RET0, nparams=2, maxstack=1),
    expect=dict(status=IB, pc=1),
)
case("overflow_push", fn([(LC, 1), (LC, 2)], maxstack=1), expect=dict(status=IB, pc=1, steps=2))
case("overflow_dup", fn([(LC, 1), Op.DUP_TOP], maxstack=1), expect=dict(status=IB, pc=1))
case(
    "overflow_call_result",
    fn([(LC, 1), (Op.CALL, 1)], maxstack=1),
    fn(RET0, nparams=0, maxstack=1),
    expect=dict(status=IB, pc=1),
)
for _name, _row in [
    ("np_negative", (0, -1, 0, 1)),
    ("nl_lt_np", (0, 1, 0, 1)),
    ("ms_negative", (0, 0, 0, -1)),
    ("entry_negative", (-1, 0, 0, 1)),
    ("entry_too_big", (4, 0, 0, 1)),
]:
    case(
        f"callee_{_name}",
        fn([(Op.CALL, 1), Op.RETURN_VALUE], maxstack=1),
        fn(RET0, maxstack=1),
        table={1: _row},
        expect=dict(status=IB, pc=0, steps=1),
    )
    case(
        f"entry_{_name}",
        fn(RET0, maxstack=1),
        fn(RET0, maxstack=1),
        table={1: _row},
        entry=1,
        expect=dict(status=IB, steps=0, fn=1, pc=_row[0]),
    )
case(
    "callee_huge_frame",
    fn([(Op.CALL, 1), Op.RETURN_VALUE], maxstack=1),
    fn(RET0),
    table={1: (0, 0, 2**30, 2**30)},
    expect=dict(status=Code.RECURSION),
)
case(
    "entry_huge_frame",
    fn(RET0),
    table={0: (0, 0, 2**30, 2**30)},
    expect=dict(status=Code.RECURSION, steps=0),
)
case("entry_id_bad", fn(RET0, maxstack=1), entry=3, expect=dict(status=IB, pc=0, fn=3))
case("entry_id_negative", fn(RET0, maxstack=1), entry=-7, expect=dict(status=IB, fn=-7))
case("n_funcs_zero", fn(RET0, maxstack=1), n_funcs=0, expect=dict(status=IB))
case(
    "n_funcs_garbage_clipped",
    fn(RET0, maxstack=1),
    n_funcs=10**9,
    expect=dict(status=Code.OK, result=0),
)
# JUMP 3 lands on CALL at index 3; callee code at 4..5 is outside n_code=4 -> malformed
case(
    "callee_outside_n_code",
    fn([(LC, 1), (Op.JUMP, 3), Op.NOP, (Op.CALL, 1)], maxstack=2),
    fn([(LC, 9), Op.RETURN_VALUE], maxstack=1),
    n_code=4,
    expect=dict(status=IB, pc=3),
)
# a CALL at the end of function 0 returns into the next function's code
case(
    "return_into_other_code",
    fn([(Op.JUMP, 2), Op.RETURN_VALUE, (Op.CALL, 1)], maxstack=1),
    fn([(LC, 9), Op.RETURN_VALUE], maxstack=1),
    expect=dict(status=IB, pc=3),
)

# LOAD_VAR2 (the optimizer's superinstruction, arg a | (b << 16)): push local a, then b, in
# one step; each case also runs as LOAD_VAR a; LOAD_VAR b ("<name>_split"), and
# test_load_var2_equals_two_load_vars checks the two agree in everything but pc and steps.
# UnboundLocalError: a is checked first; detail 1 says b was the unbound one.
LV2_PAIRS: list[str] = []


def lv2_case(name, body, expect, split_expect=None, *funcs, args=(), **kw):
    """The case with LOAD_VAR2 and its split twin (each (LOAD_VAR2, (a, b)) in ``body``
    becomes two LOAD_VARs); ``kw`` are fn()'s keywords of the first function."""

    def lv2(i):
        return isinstance(i, tuple) and i[0] == Op.LOAD_VAR2

    fused = [(Op.LOAD_VAR2, isa.pack_slots(*i[1])) if lv2(i) else i for i in body]
    split = []
    for i in body:
        split += [(Op.LOAD_VAR, i[1][0]), (Op.LOAD_VAR, i[1][1])] if lv2(i) else [i]
    case(name, fn(fused, **kw), *funcs, args=args, expect=expect)
    case(name + "_split", fn(split, **kw), *funcs, args=args, expect=split_expect or {})
    LV2_PAIRS.append(name)


_LV2 = Op.LOAD_VAR2
lv2_case(
    "load_var2",  # 5 - 3: a pushed first
    [(LC, 5), (Op.STORE_VAR, 1), (LC, 3), (Op.STORE_VAR, 2), (_LV2, (1, 2)), Op.SUB,
     Op.RETURN_VALUE],
    dict(status=Code.OK, result=2, steps=7), dict(status=Code.OK, result=2, steps=8),
    nparams=1, nlocals=3, maxstack=2,
)  # fmt: skip
lv2_case(
    "load_var2_same_slot_and_param",  # slot 0 is a parameter (bound by the entry)
    [(_LV2, (0, 0)), Op.MUL, (Op.STORE_VAR, 1), (_LV2, (1, 0)), Op.SUB, Op.RETURN_VALUE],
    dict(status=Code.OK, result=30, steps=6), None,
    args=(6,), nparams=1, nlocals=2, maxstack=2,
)  # fmt: skip
lv2_case(
    "load_var2_first_unbound",  # both unbound: a's error
    [(_LV2, (1, 0)), Op.ADD, Op.RETURN_VALUE],
    dict(status=Code.UNBOUND_LOCAL, detail=0, pc=0, steps=1, line=100),
    dict(status=Code.UNBOUND_LOCAL, detail=0, pc=0, steps=1, line=100),
    nlocals=2, maxstack=2,
)  # fmt: skip
lv2_case(
    "load_var2_second_unbound",
    [(LC, 4), (Op.STORE_VAR, 2), (_LV2, (2, 0)), Op.ADD, Op.RETURN_VALUE],
    dict(status=Code.UNBOUND_LOCAL, detail=1, pc=2, steps=3, line=102),
    dict(status=Code.UNBOUND_LOCAL, detail=0, pc=3, steps=4, line=103),
    nlocals=3, maxstack=2,
)  # fmt: skip
# a local bound in one call is unbound in the next (the second slot's stale serial)
lv2_case(
    "load_var2_unbound_after_rebind",
    [(LC, 1), (Op.CALL, 1), (LC, 0), (Op.CALL, 1), Op.ADD, Op.RETURN_VALUE],
    dict(status=Code.UNBOUND_LOCAL, detail=1, fn=1), None,
    fn([(Op.LOAD_VAR, 0), (Op.JUMP_IF_FALSE, Rel(4)), (LC, 7), (Op.STORE_VAR, 1),
        (Op.LOAD_VAR2, isa.pack_slots(0, 1)), Op.ADD, Op.RETURN_VALUE],
       nparams=1, nlocals=2, maxstack=2),
    maxstack=2,
)  # fmt: skip
case(
    "load_var2_bound_param_entry",
    fn(RET0, maxstack=1),
    fn([(_LV2, isa.pack_slots(1, 0)), Op.SUB, Op.RETURN_VALUE], nparams=2, maxstack=2),
    entry=1,
    args=(5, 9),
    expect=dict(status=Code.OK, result=4, steps=3),
)
# hostile LOAD_VAR2: each slot range-checked as LOAD_VAR's (check 3, before the unbound
# check 5), two pushes checked for overflow
for _name, _arg in [("lo_too_big", isa.pack_slots(2, 0)), ("hi_too_big", isa.pack_slots(0, 2)),
                    ("lo_huge", 0xFFFF), ("negative", -1), ("hi_negative", -(2**31) | 1),
                    ("unbound_lo_bad_hi", isa.pack_slots(1, 7))]:  # fmt: skip
    case(
        f"load_var2_slot_{_name}",
        fn([(_LV2, _arg), Op.ADD, Op.RETURN_VALUE], nlocals=2, maxstack=2),
        expect=dict(status=IB, pc=0, steps=1, line=100),
    )
case(
    "load_var2_overflow",
    fn([(LC, 1), (Op.STORE_VAR, 0), (_LV2, 0), Op.ADD, Op.RETURN_VALUE], nlocals=1, maxstack=1),
    expect=dict(status=IB, pc=2, steps=3),
)
case(
    "load_var2_overflow_one_on_stack",
    fn([(LC, 1), (Op.STORE_VAR, 0), (LC, 2), (_LV2, 0), Op.ADD, Op.ADD, Op.RETURN_VALUE],
       nlocals=1, maxstack=2),
    expect=dict(status=IB, pc=3, steps=4),
)  # fmt: skip
case(
    "load_var2_fits",
    fn([(LC, 1), (Op.STORE_VAR, 0), (LC, 2), (_LV2, 0), Op.ADD, Op.ADD, Op.RETURN_VALUE],
       nlocals=1, maxstack=3),
    expect=dict(status=Code.OK, result=4, steps=7),
)  # fmt: skip


def hand_inputs(cases=CASES):
    """(batch, entry, args) of the hand cases, one lane each."""
    batch = stack_programs([c[1] for c in cases])
    entry = np.array([c[2] for c in cases], np.int32)
    return batch, entry, np.stack([pad_args(c[3]) for c in cases])


@functools.cache
def hand_results():
    batch, entry, args = hand_inputs()
    got = jax.device_get(vm.run(batch, SMALL, entry=entry, args=args))
    want = [run_program(c[1], SMALL, c[2], c[3]) for c in CASES]
    return got, want


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c[0] for c in CASES])
def test_hand_case(i):
    got, want = hand_results()
    g = lane(got, i)
    name, _, _, _, expect = CASES[i]
    for field, value in expect.items():
        assert int(getattr(g, field)) == int(value), f"{name}: {field}"
    assert_same(g, want[i], name)
    assert int(g.status) != Code.RUNNING and 0 <= int(g.steps) <= SMALL.max_steps


@pytest.mark.parametrize("name", LV2_PAIRS)
def test_load_var2_equals_two_load_vars(name):
    """LOAD_VAR2 a, b against LOAD_VAR a; LOAD_VAR b, on both VMs: the same status, fn,
    result, output and, for UnboundLocalError, the same unbound slot (isa.failing_slot of
    the failing instruction and the detail); pc, steps and line differ (asm gives every
    instruction its own line; the optimizer fuses only two of the same line, and
    tests/test_optimize.py checks the line is kept), and so may the raw detail."""
    got, want = hand_results()
    names = [c[0] for c in CASES]
    i, j = names.index(name), names.index(name + "_split")
    for res in (lambda k: lane(got, k), lambda k: want[k]):
        a, b = res(i), res(j)
        for f in FIELDS:
            if f not in ("pc", "steps", "line", "detail"):
                assert np.array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f))), f

        def slot(r, k):
            p = CASES[k][1]
            return isa.failing_slot(p.op[int(r.pc)], p.arg[int(r.pc)], int(r.detail))

        if int(a.status) == Code.UNBOUND_LOCAL:
            assert slot(a, i) == slot(b, j)
        else:
            assert int(a.detail) == int(b.detail)


def test_hand_case_outputs():
    got, _ = hand_results()
    names = [c[0] for c in CASES]
    assert out(lane(got, names.index("print_kinds"))) == "3 False\nTrue"
    assert out(lane(got, names.index("output_limit"))) == " ".join(["1"] * SMALL.max_output)


def test_every_opcode_and_status_covered():
    """The hand cases exercise every opcode (binary ops also in test_binary_ops_exact) and
    end in every status: OK and each run-time error."""
    got, _ = hand_results()
    seen_ops = {int(o) for c in CASES for o in c[1].op[: int(c[1].n_code)] if 0 <= o < len(Op)}
    assert seen_ops | {int(o) for o in isa.BINARY_OPS} == set(range(len(Op)))
    statuses = set(np.asarray(got.status).tolist())
    assert statuses == {int(Code.OK)} | {int(c) for c in RUNTIME_CODES}


# ---------------------------------------------------------------------------------------
# binary ops against Python's exact arithmetic on edge values, one batch


EDGE = [INT_MIN, INT_MIN + 1, -(2**30), -65536, -46341, -7, -2, -1, 0, 1, 2, 3, 7, 31, 32,
        33, 46340, 46341, 65536, 2**30, INT_MAX - 1, INT_MAX]  # fmt: skip


def py_binary(op: Op, a: int, b: int):
    """(status, detail, value) by CPython semantics + the int32 rule."""
    if op in (Op.FLOORDIV, Op.MOD) and b == 0:
        return Code.ZERO_DIVISION, 0, 0
    if op == Op.POW and b < 0:
        return Code.VALUE, Value.NEGATIVE_POWER, 0
    if op in (Op.LSHIFT, Op.RSHIFT) and b < 0:
        return Code.VALUE, Value.NEGATIVE_SHIFT, 0
    if op == Op.POW and abs(a) > 1 and b > 64:
        return Code.OVERFLOW, 0, 0
    if op == Op.LSHIFT and a != 0 and b > 64:
        return Code.OVERFLOW, 0, 0
    v = {
        Op.ADD: lambda: a + b, Op.SUB: lambda: a - b, Op.MUL: lambda: a * b,
        Op.FLOORDIV: lambda: a // b, Op.MOD: lambda: a % b,
        Op.POW: lambda: a**b if abs(a) > 1 or b < 64 else a ** (b % 2 + 2 * (b > 0)),
        Op.LSHIFT: lambda: a << b, Op.RSHIFT: lambda: a >> b, Op.AND: lambda: a & b,
        Op.OR: lambda: a | b, Op.XOR: lambda: a ^ b, Op.MIN: lambda: min(a, b),
        Op.MAX: lambda: max(a, b), Op.LT: lambda: int(a < b), Op.LE: lambda: int(a <= b),
        Op.GT: lambda: int(a > b), Op.GE: lambda: int(a >= b), Op.EQ: lambda: int(a == b),
        Op.NE: lambda: int(a != b),
    }[op]()  # fmt: skip
    if not INT_MIN <= v <= INT_MAX:
        return Code.OVERFLOW, 0, 0
    return Code.OK, 0, v


def test_binary_ops_exact():
    triples = [(op, a, b) for op in isa.BINARY_OPS for a in EDGE for b in EDGE]
    progs = [asm(fn([(LC, a), (LC, b), op, Op.RETURN_VALUE], maxstack=2), i_pad=4, f_pad=1)
             for op, a, b in triples]  # fmt: skip
    got = jax.device_get(vm.run(stack_programs(progs), SMALL))
    for i, (op, a, b) in enumerate(triples):
        status, detail, value = py_binary(op, a, b)
        g = (int(got.status[i]), int(got.detail[i]), int(got.result[i]))
        assert g == (status, detail, value), (op.name, a, b)
        assert int(got.steps[i]) == (4 if status == Code.OK else 3)
        assert int(got.pc[i]) == (3 if status == Code.OK else 2)


# ---------------------------------------------------------------------------------------
# jit / eager / unbatched / vmap / isolation / traces / budget / run_tests


def sum_squares_program(n_pad=I_PAD):
    """Entry function 1: sum(i * i for i in range(n)) for its argument n."""
    body = [
        (LC, 0),
        (Op.STORE_VAR, 1),
        (LC, 0),
        (Op.LOAD_VAR, 0),
        (LC, 1),
        (Op.FOR_RANGE, Rel(14)),
        (Op.STORE_VAR, 2),
        (Op.LOAD_VAR, 1),
        (Op.LOAD_VAR, 2),
        (Op.LOAD_VAR, 2),
        Op.MUL,
        Op.ADD,
        (Op.STORE_VAR, 1),
        (Op.JUMP, Rel(5)),
        (Op.LOAD_VAR, 1),
        (Op.PRINT_INT, 1),
        (Op.PRINT_NEWLINE, 0),
        Op.RETURN_VALUE,
    ]
    return asm(fn(RET0, maxstack=1), fn(body, nparams=1, nlocals=3, maxstack=6), i_pad=n_pad)


def hostile_programs(n, seed):
    """Garbage, infinite loops, deep recursion, output spam, unbound reads."""
    rng = np.random.default_rng(seed)
    progs = []
    for k in range(n):
        kind = k % 5
        if kind == 0:  # random garbage everywhere, including the tables and sizes
            p = isa.Program(
                op=rng.integers(-3, len(Op) + 3, I_PAD).astype(np.int32),
                arg=rng.choice([-1, 0, 1, 2, 3, 5, 40, INT_MIN, INT_MAX], I_PAD).astype(np.int32),
                line=rng.integers(-9, 9, I_PAD).astype(np.int32),
                n_code=np.int32(rng.integers(-2, I_PAD + 3)),
                fn_entry=rng.integers(-1, I_PAD + 1, F_PAD).astype(np.int32),
                fn_nparams=rng.integers(-1, 4, F_PAD).astype(np.int32),
                fn_nlocals=rng.integers(-1, 6, F_PAD).astype(np.int32),
                fn_maxstack=rng.integers(-1, 10, F_PAD).astype(np.int32),
                fn_rettype=np.zeros(F_PAD, np.int32),
                n_funcs=np.int32(rng.integers(-1, F_PAD + 2)),
            )
        elif kind == 1:
            p = asm(fn([Op.NOP, (Op.JUMP, 0)]))
        elif kind == 2:  # f() calls f() forever
            p = asm(
                fn([(Op.CALL, 1), Op.RETURN_VALUE], maxstack=1),
                fn([(Op.CALL, 1), Op.RETURN_VALUE], nlocals=3, maxstack=1),
            )
        elif kind == 3:
            p = asm(
                fn([(LC, 7), (Op.PRINT_BOOL, 1), (Op.PRINT_NEWLINE, 0), (Op.JUMP, 1)], maxstack=1)
            )
        else:
            p = asm(fn([(LC, 1), (Op.STORE_VAR, 1), (Op.LOAD_VAR, 0)], nlocals=4, maxstack=1))
        progs.append(p)
    return progs


def test_isolation_from_hostile_lanes():
    good = [sum_squares_program() for _ in range(4)]
    n_arg = [0, 3, 10, 40]
    alone = vm.run(stack_programs(good), SMALL, entry=np.ones(4, np.int32),
                   args=np.array([[n] for n in n_arg], np.int32))  # fmt: skip
    hostile = hostile_programs(12, seed=1)
    mixed_progs = hostile[:3] + good[:2] + hostile[3:9] + good[2:] + hostile[9:]
    where_good = [3, 4, 11, 12]
    entry = np.array([2] * 16, np.int32)  # hostile lanes start wherever entry 2 is
    args = np.array([[99]] * 16, np.int32)
    for j, i in enumerate(where_good):
        entry[i], args[i] = 1, n_arg[j]
    mixed = jax.device_get(vm.run(stack_programs(mixed_progs), SMALL, entry=entry, args=args))
    alone = jax.device_get(alone)
    for j, i in enumerate(where_good):
        assert_same(lane(mixed, i), lane(alone, j), f"lane {i}")
        assert int(alone.result[j]) == sum(k * k for k in range(n_arg[j]))
    assert not np.any(mixed.status == Code.RUNNING)
    assert np.all(mixed.steps <= SMALL.max_steps)
    for i, p in enumerate(mixed_progs):
        assert_same(lane(mixed, i), run_program(p, SMALL, int(entry[i]), args[i]), f"lane {i}")


def test_unbatched_vmap_jit_eager_agree():
    p = sum_squares_program()
    batch = stack_programs([p] * 3)
    entry = np.ones(3, np.int32)
    args = np.array([[5], [7], [0]], np.int32)
    ref = jax.device_get(vm.run(batch, SMALL, entry=entry, args=args))
    assert list(ref.result) == [30, 91, 0]
    one = jax.device_get(vm.run(p, SMALL, entry=1, args=np.array([7], np.int32)))
    assert_same(one, lane(ref, 1), "unbatched")
    vm_batch = jax.vmap(lambda q, e, a: vm.run(q, SMALL, entry=e, args=a))(batch, entry, args)
    assert_same(jax.device_get(vm_batch), ref, "vmap")
    jitted = jax.jit(lambda q, e, a: vm.run(q, SMALL, entry=e, args=a))(batch, entry, args)
    assert_same(jax.device_get(jitted), ref, "jit")
    # eager (no jit at all: slow per op, so a 4-step program and one step per iteration)
    # eager (no jit at all; each op is dispatched on its own, so keep it short)
    tiny = stack_programs([asm(fn([(LC, -6), Op.RETURN_VALUE], maxstack=1))])
    with jax.disable_jit():
        eager = vm.run(tiny, SMALL, inner_steps=1)
    want = jax.device_get(vm.run(tiny, SMALL))
    assert int(want.result[0]) == -6
    assert_same(jax.device_get(eager), want, "eager")


def lane_batch(res, i):
    return isa.RunResult(*(np.asarray(f)[i : i + 1] for f in res))


def test_one_trace_per_shape():
    f = jax.jit(chex.assert_max_traces(lambda q, a: vm.run(q, SMALL, entry=a[:, 0] * 0 + 1,
                                                          args=a), n=1))  # fmt: skip
    batch = stack_programs([sum_squares_program()] * 2)
    r1 = f(batch, jnp.array([[3], [4]], jnp.int32))
    r2 = f(batch, jnp.array([[5], [6]], jnp.int32))
    assert list(np.asarray(r1.result)) == [5, 14] and list(np.asarray(r2.result)) == [30, 55]
    with pytest.raises(AssertionError):  # a new shape is a new trace
        f(stack_programs([sum_squares_program()] * 3), jnp.array([[3], [4], [5]], jnp.int32))


def test_budget_per_lane():
    batch = stack_programs([sum_squares_program()] * 3)
    entry = np.ones(3, np.int32)
    args = np.array([[10], [10], [10]], np.int32)
    full = vm.run(batch, SMALL, entry=entry, args=args)
    need = int(full.steps[0])
    r = jax.device_get(vm.run(batch, SMALL, entry=entry, args=args,
                              budget=np.array([need, need - 1, 10**9], np.int32)))  # fmt: skip
    assert list(r.status) == [Code.OK, Code.TIMEOUT, Code.OK]
    assert list(r.steps) == [need, need - 1, need]
    r = jax.device_get(vm.run(batch, SMALL, entry=entry, args=args,
                              budget=np.array([0, -5, 1], np.int32)))  # fmt: skip
    assert list(r.status) == [Code.TIMEOUT] * 3 and list(r.steps) == [0, 0, 1]
    assert list(r.pc) == [2, 2, 3]  # stopped before instruction 1 (or 2) of function 1


def test_inner_steps_do_not_change_results():
    got, _ = hand_results()
    batch = stack_programs([c[1] for c in CASES])
    entry = np.array([c[2] for c in CASES], np.int32)
    args = np.stack([pad_args(c[3]) for c in CASES])
    r = vm.run(batch, SMALL, entry=entry, args=args, inner_steps=3, unroll=3)
    assert_same(jax.device_get(r), got, "inner_steps=3")


def test_run_tests():
    square_sum = sum_squares_program()
    broken = asm(fn(RET0, maxstack=1),
                 fn([(Op.LOAD_VAR, 0), (Op.LOAD_VAR, 0), Op.MUL, Op.RETURN_VALUE], nparams=1,
                    maxstack=2))  # fmt: skip
    looping = asm(fn(RET0, maxstack=1), fn([(Op.JUMP, Rel(0))], nparams=1))
    batch = stack_programs([square_sum, broken, looping])
    ns = np.array([0, 1, 2, 3], np.int32)
    args = np.broadcast_to(ns[None, :, None], (3, 4, 1))
    expected = np.broadcast_to(np.array([sum(k * k for k in range(n)) for n in ns],
                                        np.int32)[None], (3, 4))  # fmt: skip
    passed, per_case = vm.run_tests(batch, np.ones(3, np.int32), args, expected, SMALL)
    assert list(np.asarray(passed)) == [True, False, False]
    # broken: n*n vs sum: 0 == 0 and 1 != 0? sum(range(1)) = 0, 1*1 = 1; 4 vs 1; 9 vs 5
    assert np.asarray(per_case).tolist() == [
        [0, 0, 0, 0],
        [0, vm.WRONG_RESULT, vm.WRONG_RESULT, vm.WRONG_RESULT],
        [Code.TIMEOUT] * 4,
    ]
    budget = np.full((3, 4), 50, np.int32)
    _, per_case = vm.run_tests(batch, np.ones(3, np.int32), args, expected, SMALL, budget=budget)
    assert np.asarray(per_case)[2].tolist() == [Code.TIMEOUT] * 4


def test_trace():
    p = sum_squares_program()
    rows, res = vm.trace(p, SMALL, entry=1, args=np.array([3], np.int32), n_steps=64)
    full = jax.device_get(vm.run(p, SMALL, entry=1, args=np.array([3], np.int32)))
    n = int(full.steps)  # 5 + 9 * 3 + 1 + 4 = 37
    assert n == 37
    assert_same(jax.device_get(res), full, "trace end state")
    ops = np.asarray(rows.op)
    assert ops[0] == Op.LOAD_CONST and ops[5] == Op.FOR_RANGE and ops[n - 1] == Op.RETURN_VALUE
    assert np.all(np.asarray(rows.status)[:n] == Code.RUNNING)
    assert np.all(np.asarray(rows.status)[n:] == Code.OK)
    # the FOR_RANGE rows see the loop counter's next value in slot sp - 3 ... and top = step
    assert list(np.asarray(rows.top)[[5, 14, 23]]) == [1, 1, 1]
    # the trace stops with the program: every row after it is the stopped registers, as
    # stepping a stopped lane leaves them
    for f, col in zip(vm.Trace._fields, jax.device_get(rows), strict=True):
        assert np.all(col[n:] == col[n]), f
    # cut short: every row running, and the end state says so
    rows8, res8 = jax.device_get(
        vm.trace(p, SMALL, entry=1, args=np.array([3], np.int32), n_steps=8)
    )
    assert np.all(rows8.status == Code.RUNNING) and int(res8.status) == Code.RUNNING
    assert int(res8.steps) == 8
    for f, col in zip(vm.Trace._fields, rows8, strict=True):
        assert np.array_equal(col, np.asarray(getattr(rows, f))[:8]), f


def test_scalar_entry_args_budget_broadcast():
    batch = stack_programs([sum_squares_program()] * 3)
    r = jax.device_get(vm.run(batch, SMALL, entry=1, args=np.array([4], np.int32), budget=500))
    assert list(r.result) == [14, 14, 14] and list(r.status) == [Code.OK] * 3


def test_shrink_gives_identical_results():
    # 16 lanes with very different run times (n = 0 .. 60) and some hostile ones
    progs = [sum_squares_program() for _ in range(12)] + hostile_programs(4, seed=3)
    entry = np.array([1] * 12 + [0] * 4, np.int32)
    args = np.array([[n] for n in [0, 60, 1, 2, 30, 3, 4, 5, 50, 6, 7, 8]] + [[1]] * 4, np.int32)
    batch = stack_programs(progs)
    plain = jax.device_get(vm.run(batch, SMALL, entry=entry, args=args))
    shrunk = jax.device_get(vm.run(batch, SMALL, entry=entry, args=args, shrink=3))
    assert_same(shrunk, plain, "shrink=3")
    assert int(plain.result[1]) == sum(k * k for k in range(60))
    # by other factors (the loop's: one level of 8), and more levels than the batch allows
    # (16 -> 4 -> 1 lanes, then no third level)
    for levels, by in [(1, 8), (3, 4)]:
        r = vm.run(batch, SMALL, entry=entry, args=args, shrink=levels, shrink_by=by)
        assert_same(jax.device_get(r), plain, f"shrink={levels} by {by}")
    with pytest.raises(ValueError, match="shrink_by"):
        vm.run(batch, SMALL, entry=entry, args=args, shrink=1, shrink_by=1)


def test_run_tests_shrink_gives_identical_verdicts():
    # run_tests' lanes (program, case) with run times from 0 to about 600 steps
    batch = stack_programs([sum_squares_program()] * 4)
    ns = np.array([[0, 90, 3, 1], [5, 0, 2, 60], [1, 2, 3, 4], [0, 0, 0, 0]], np.int32)
    expected = np.vectorize(lambda n: sum(k * k for k in range(n)))(ns).astype(np.int32)
    expected[2, 1] += 1  # one wrong answer
    args = ns[:, :, None]
    budget = np.full((4, 4), 1000, np.int32)
    budget[1, 3] = 20  # one timeout
    ref = vm.run_tests(batch, np.ones(4, np.int32), args, expected, SMALL, budget=budget)
    got = vm.run_tests(batch, np.ones(4, np.int32), args, expected, SMALL, budget=budget,
                       shrink=1, shrink_by=8)  # fmt: skip
    assert np.array_equal(np.asarray(got[1]), np.asarray(ref[1]))
    assert np.array_equal(np.asarray(got[0]), np.asarray(ref[0]))
    assert np.asarray(ref[1])[2, 1] == vm.WRONG_RESULT and np.asarray(ref[1])[1, 3] == Code.TIMEOUT


def test_one_lane_steps_like_a_lane_of_a_batch():
    """A state of one lane is stepped without vmap (``vm._stepper``'s flat path: dynamic
    slices and dynamic-update-slices of the lane's memory instead of the gather and the
    scatter). Every hand case and hostile program, run alone, ends (and is, after a few
    steps) in exactly the registers and memory words of its lane in a batch."""
    progs = [c[1] for c in CASES] + hostile_programs(10, seed=3)
    n = len(progs)
    rng = np.random.default_rng(11)
    entry = np.array([c[2] for c in CASES] + list(rng.integers(-1, 3, n - len(CASES))), np.int32)
    args = np.stack([pad_args(c[3]) for c in CASES]
                    + [rng.integers(-3, 9, A_PAD).astype(np.int32) for _ in range(n - len(CASES))])  # fmt: skip
    batch = stack_programs(progs)
    for steps in (5, None):
        many = vm.advance(vm.start(batch, SMALL, entry, args), SMALL, steps).lanes
        many = jax.device_get(many)
        for i, p in enumerate(progs):
            one = vm.advance(vm.start(p, SMALL, entry[i], args[i]), SMALL, steps).lanes
            one = jax.device_get(one)
            assert one.regs.shape[0] == 1
            for field in vm.Packed._fields:
                if field != "pid":  # the batch's lane i runs program i, the lone lane 0
                    g, w = np.asarray(getattr(one, field))[0], np.asarray(getattr(many, field))[i]
                    assert np.array_equal(g, w), f"lane {i} ({steps} steps): {field}"


def test_read_mem_clamps_like_dynamic_slice():
    """The step's one 6-pair gather reads exactly what three lax.dynamic_slice calls read,
    clamped windows (start < 0, start past the end) included."""
    rng = np.random.default_rng(7)
    mem = jnp.asarray(rng.integers(-100, 100, (11, 2)), jnp.int32)
    read = jax.jit(lambda m, a, b, c: vm._read_mem(m, ((a, 3), (b, 1), (c, 2))))
    for a, b, c in rng.integers(-4, 15, (40, 3)):
        got = read(mem, jnp.int32(a), jnp.int32(b), jnp.int32(c))
        want = jnp.concatenate(
            [
                jax.lax.dynamic_slice(mem, (jnp.int32(x), 0), (n, 2))
                for x, n in ((a, 3), (b, 1), (c, 2))
            ]
        )
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_status_bits_hold_every_status_a_step_sets():
    # the step packs (priority, status) into one int: a status over the mask would change
    # the priority and come out as another code
    for code in (Code.OK, Code.RUNNING, *RUNTIME_CODES):
        assert code < 1 << vm._STATUS_BITS
