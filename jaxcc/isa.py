"""The jaxcc bytecode: one opcode table, read by every producer and consumer.

The reference compiler, the JAX code generator, the reference interpreter, the JAX VM's
decode tables, the disassembler and the neural model's decoding mask all read the
tables below; nothing else defines an opcode (tests/test_isa.py checks they agree).

Encoding (fixed width, see docs/layouts.md section 4): per program, parallel int32 arrays
``op[I]``, ``arg[I]``, ``line[I]`` (the source line of each instruction), plus a
function table ``fn_entry[F]``, ``fn_nparams[F]``, ``fn_nlocals[F]``,
``fn_maxstack[F]``, ``fn_rettype[F]``. Function 0 is the module body.

Machine model (exactly what the reference interpreter and the JAX VM implement):

* One value stack per program (``stack[S]``, int32) holding, for each active call,
  its locals (``nlocals`` slots starting at the frame base ``fp``) followed by its
  operand stack. Each slot has a "bound" flag; parameters are bound at CALL, other
  locals start unbound (LOAD_VAR of an unbound slot is UnboundLocalError).
* A call stack of at most ``max_depth`` frames (return pc, fp, function id).
* An output buffer of at most ``max_output`` items (kind, value); kinds are
  ``OUT_INT``, ``OUT_BOOL``, ``OUT_NEWLINE``. ``print(a, b)`` is ``a b\\n``.
* Execution starts in function ``entry`` (default 0) with its parameters taken from
  the given arguments; RETURN_VALUE from the bottom frame halts with status OK and
  that value as the result.

Per-step checks, in this order (the first that fails sets the status):
1. pc outside ``[0, n_code)`` or opcode not in the table -> InvalidBytecode.
2. step budget spent -> TimeoutError (checked before executing the instruction).
3. bad argument (slot outside [0, nlocals), jump target outside [0, n_code), function
   id outside [0, n_funcs), PRINT depth outside [1, operand depth], POP_N count
   outside [0, operand depth]) -> InvalidBytecode.
4. operand stack underflow (fewer than ``pops`` items above fp + nlocals) or overflow
   (more than ``fn_maxstack`` items above fp + nlocals after the push) -> InvalidBytecode.
5. the instruction's own errors (see each opcode). CALL: a callee whose table entry is
   malformed (nparams < 0, nlocals < nparams, maxstack < 0, entry outside [0, n_code))
   -> InvalidBytecode; a call that would make more than ``max_depth`` frames, or whose
   frame (nlocals + maxstack slots from the new fp) would not fit in the value stack
   -> RecursionError.

A run-time error stops the lane with its status, the pc of the failing instruction and
``line[pc]``. The step count is the number of instructions started; TimeoutError is
raised when an instruction would be the ``max_steps + 1``-th.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np


class Op(enum.IntEnum):
    """Opcodes. The numbering is part of the encoding: append, never renumber."""

    NOP = 0
    LOAD_CONST = 1  # arg: the int32 value itself                    -> push arg
    LOAD_VAR = 2  # arg: local slot; UnboundLocalError if unbound     -> push local
    STORE_VAR = 3  # arg: local slot                                  pop -> local
    POP_TOP = 4  #                                                    pop
    DUP_TOP = 5  #                                                    push top
    POP_N = 6  # arg: n >= 0                                          pop n
    # binary: pop b, pop a, push (a OP b); errors as Python's on int32 (OverflowError
    # whenever the exact result leaves int32)
    ADD = 7
    SUB = 8
    MUL = 9
    FLOORDIV = 10  # ZeroDivisionError on b == 0; floors
    MOD = 11  # ZeroDivisionError on b == 0; sign of b
    POW = 12  # ValueError on b < 0 (Python would give a float)
    LSHIFT = 13  # ValueError on b < 0 ("negative shift count")
    RSHIFT = 14  # ValueError on b < 0; b >= 32 gives 0 or -1
    AND = 15
    OR = 16
    XOR = 17
    MIN = 18  # min(a, b): a if a <= b else b
    MAX = 19  # max(a, b): a if a >= b else b
    LT = 20  # comparisons push 1 or 0 (bool)
    LE = 21
    GT = 22
    GE = 23
    EQ = 24
    NE = 25
    # unary: pop a, push f(a)
    NEG = 26  # OverflowError on -2**31
    INVERT = 27  # ~a
    NOT = 28  # 1 if a == 0 else 0
    ABS = 29  # OverflowError on -2**31
    # control flow; arg is an absolute instruction index within the program
    JUMP = 30
    JUMP_IF_FALSE = 31  # pop a; if a == 0: jump
    JUMP_IF_TRUE = 32  # pop a; if a != 0: jump
    JUMP_IF_FALSE_OR_POP = 33  # if top == 0: jump (keep it) else pop   (`and`)
    JUMP_IF_TRUE_OR_POP = 34  # if top != 0: jump (keep it) else pop    (`or`)
    FOR_RANGE = 35  # stack [.., c, stop, step]: see below
    CALL = 36  # arg: function id; pops its nparams args (first pushed = slot 0)
    RETURN_VALUE = 37  # pop v; pop the frame; push v in the caller (halt at bottom)
    PRINT_INT = 38  # arg: depth d >= 1; emit (OUT_INT, stack[sp - d]); no pop
    PRINT_BOOL = 39  # arg: depth d >= 1; emit (OUT_BOOL, stack[sp - d]); no pop
    PRINT_NEWLINE = 40  # emit (OUT_NEWLINE, 0)
    ASSERT = 41  # pop a; AssertionError if a == 0
    # compare-and-branch: pop b, pop a; jump if (a OP b). Only the optimizer emits them
    # (a comparison followed by JUMP_IF_FALSE / JUMP_IF_TRUE, fused); the compilers and
    # the neural model never do.
    JUMP_IF_LT = 42
    JUMP_IF_LE = 43
    JUMP_IF_GT = 44
    JUMP_IF_GE = 45
    JUMP_IF_EQ = 46
    JUMP_IF_NE = 47
    # superinstruction: push local a, then local b; arg = a | (b << 16) (isa.pack_slots;
    # slots are < 2**15, so both fit and the arg is >= 0). Exactly LOAD_VAR a; LOAD_VAR b
    # in one step: UnboundLocalError for a if a is unbound (checked first), else for b
    # (RunResult.detail 0 for a, 1 for b: isa.failing_slot). Only the optimizer emits it.
    LOAD_VAR2 = 48


# FOR_RANGE t, with the operand stack [.., c, stop, step] (c = next value):
#   step == 0                          -> ValueError (range() arg 3 must not be zero)
#   (step > 0 and c < stop) or (step < 0 and c > stop):
#       replace c by c + step (if that overflows int32 the loop is over anyway, so
#       store stop instead), then push the old c; pc += 1
#   otherwise: pop the three items and jump to t.
# `break` inside such a loop emits POP_N 3 before its JUMP.

OUT_INT, OUT_BOOL, OUT_NEWLINE = 0, 1, 2

# Static function result types (fn_rettype); also the type codes of the checker.
T_INT, T_BOOL, T_NONE = 0, 1, 2


class ArgKind(enum.IntEnum):
    NONE = 0  # arg ignored (must be 0 in compiler output)
    CONST = 1  # any int32
    SLOT = 2  # local slot in [0, nlocals)
    TARGET = 3  # jump target in [0, n_code)
    FUNC = 4  # function id in [0, n_funcs)
    DEPTH = 5  # operand-stack depth in [1, operand depth]
    COUNT = 6  # pop count in [0, operand depth]
    SLOT2 = 7  # two local slots a | (b << 16), each in [0, nlocals) (LOAD_VAR2)


class OpInfo(NamedTuple):
    arg: ArgKind
    pops: int  # operands it needs (CALL: nparams of the callee, see below)
    pushes: int  # net pushes after the pops, on the fall-through path
    jumps: bool


_B = (ArgKind.NONE, 2, 1, False)
_U = (ArgKind.NONE, 1, 1, False)
INFO: dict[Op, OpInfo] = {
    Op.NOP: OpInfo(ArgKind.NONE, 0, 0, False),
    Op.LOAD_CONST: OpInfo(ArgKind.CONST, 0, 1, False),
    Op.LOAD_VAR: OpInfo(ArgKind.SLOT, 0, 1, False),
    Op.STORE_VAR: OpInfo(ArgKind.SLOT, 1, 0, False),
    Op.POP_TOP: OpInfo(ArgKind.NONE, 1, 0, False),
    Op.DUP_TOP: OpInfo(ArgKind.NONE, 1, 2, False),
    Op.POP_N: OpInfo(ArgKind.COUNT, 0, 0, False),  # pops arg items
    **{
        op: OpInfo(*_B)
        for op in (
            Op.ADD,
            Op.SUB,
            Op.MUL,
            Op.FLOORDIV,
            Op.MOD,
            Op.POW,
            Op.LSHIFT,
            Op.RSHIFT,
            Op.AND,
            Op.OR,
            Op.XOR,
            Op.MIN,
            Op.MAX,
            Op.LT,
            Op.LE,
            Op.GT,
            Op.GE,
            Op.EQ,
            Op.NE,
        )
    },
    **{op: OpInfo(*_U) for op in (Op.NEG, Op.INVERT, Op.NOT, Op.ABS)},
    Op.JUMP: OpInfo(ArgKind.TARGET, 0, 0, True),
    Op.JUMP_IF_FALSE: OpInfo(ArgKind.TARGET, 1, 0, True),
    Op.JUMP_IF_TRUE: OpInfo(ArgKind.TARGET, 1, 0, True),
    # taken: keeps the item (net 0); fall through: pops it (-1)
    Op.JUMP_IF_FALSE_OR_POP: OpInfo(ArgKind.TARGET, 1, 0, True),
    Op.JUMP_IF_TRUE_OR_POP: OpInfo(ArgKind.TARGET, 1, 0, True),
    # fall through (next value): 3 -> 4 items; taken (exhausted): 3 -> 0
    Op.FOR_RANGE: OpInfo(ArgKind.TARGET, 3, 4, True),
    Op.CALL: OpInfo(ArgKind.FUNC, 0, 1, False),  # pops nparams(callee), pushes 1
    Op.RETURN_VALUE: OpInfo(ArgKind.NONE, 1, 0, False),
    Op.PRINT_INT: OpInfo(ArgKind.DEPTH, 0, 0, False),
    Op.PRINT_BOOL: OpInfo(ArgKind.DEPTH, 0, 0, False),
    Op.PRINT_NEWLINE: OpInfo(ArgKind.NONE, 0, 0, False),
    Op.ASSERT: OpInfo(ArgKind.NONE, 1, 0, False),
    **{
        op: OpInfo(ArgKind.TARGET, 2, 0, True)
        for op in (
            Op.JUMP_IF_LT,
            Op.JUMP_IF_LE,
            Op.JUMP_IF_GT,
            Op.JUMP_IF_GE,
            Op.JUMP_IF_EQ,
            Op.JUMP_IF_NE,
        )
    },
    Op.LOAD_VAR2: OpInfo(ArgKind.SLOT2, 0, 2, False),
}
assert set(INFO) == set(Op)

N_OPS = len(Op)
BINARY_OPS = tuple(op for op in Op if INFO[op][:3] == _B[:3])
UNARY_OPS = (Op.NEG, Op.INVERT, Op.NOT, Op.ABS)
JUMP_OPS = tuple(op for op in Op if INFO[op].jumps)
# comparison opcode -> the compare-and-branch that jumps when it is true
COMPARE_JUMP = {Op.LT: Op.JUMP_IF_LT, Op.LE: Op.JUMP_IF_LE, Op.GT: Op.JUMP_IF_GT,
                Op.GE: Op.JUMP_IF_GE, Op.EQ: Op.JUMP_IF_EQ, Op.NE: Op.JUMP_IF_NE}  # fmt: skip
COMPARE_JUMP_OPS = tuple(COMPARE_JUMP.values())


def pack_slots(a: int, b: int) -> int:
    """LOAD_VAR2's argument for slots a, b (each in [0, 2**15))."""
    return a | (b << 16)


def failing_slot(op: int, arg: int, detail: int) -> int:
    """The unbound slot of an UnboundLocalError raised by instruction (op, arg) with the
    RunResult's detail: LOAD_VAR's arg, or LOAD_VAR2's first (detail 0) or second (1)."""
    if int(op) == Op.LOAD_VAR2:
        return unpack_slots(int(arg))[1 if int(detail) == 1 else 0]
    return int(arg)


def unpack_slots(arg: int) -> tuple[int, int]:
    """LOAD_VAR2's (a, b) from its argument: the low 16 bits and the arithmetic rest
    (a negative arg gives a negative b, out of range like any bad slot)."""
    return arg & 0xFFFF, arg >> 16


def decode_tables() -> dict[str, np.ndarray]:
    """Per-opcode arrays (indexed by opcode) for table-driven decoders (VM, neural mask)."""
    return {
        "arg_kind": np.array([INFO[op].arg for op in Op], np.int32),
        "pops": np.array([INFO[op].pops for op in Op], np.int32),
        "pushes": np.array([INFO[op].pushes for op in Op], np.int32),
        "jumps": np.array([INFO[op].jumps for op in Op], np.bool_),
    }


class Program(NamedTuple):
    """A batch of bytecode programs (leading batch axis B, or none for one program).

    Padding: op = NOP, arg = 0, line = 0 beyond n_code; fn_* = 0 beyond n_funcs.
    """

    op: object  # Int32[Array, "B I"]
    arg: object  # Int32[Array, "B I"]
    line: object  # Int32[Array, "B I"]  source line of each instruction (1-based)
    n_code: object  # Int32[Array, "B"]
    fn_entry: object  # Int32[Array, "B F"]  first instruction of each function
    fn_nparams: object  # Int32[Array, "B F"]
    fn_nlocals: object  # Int32[Array, "B F"]  params + locals + hidden temporaries
    fn_maxstack: object  # Int32[Array, "B F"]  max operand-stack depth of the body
    fn_rettype: object  # Int32[Array, "B F"]  T_INT / T_BOOL / T_NONE
    n_funcs: object  # Int32[Array, "B"]


def empty_program(n_code: int, n_funcs: int, batch: tuple[int, ...] = ()) -> Program:
    """A Program of no code and no functions (numpy zeros: n_code = n_funcs = 0), padded
    to ``n_code`` instructions and ``n_funcs`` functions, with leading axes ``batch``."""
    z = lambda *tail: np.zeros((*batch, *tail), np.int32)  # noqa: E731
    return Program(op=z(n_code), arg=z(n_code), line=z(n_code), n_code=z(),
                   fn_entry=z(n_funcs), fn_nparams=z(n_funcs), fn_nlocals=z(n_funcs),
                   fn_maxstack=z(n_funcs), fn_rettype=z(n_funcs), n_funcs=z())  # fmt: skip


class RunResult(NamedTuple):
    """What running a batch of programs gives, lane by lane (reference interpreter and VM).

    O = max_output. Padding beyond n_out: kind 0, value 0.
    """

    status: object  # Int32[Array, "B"]  errors.Code: OK, or the run-time error that stopped it
    detail: object  # Int32[Array, "B"]  errors.Value for Code.VALUE; UNBOUND_LOCAL: 1 when
    # LOAD_VAR2's second slot is the unbound one (isa.failing_slot); else 0
    pc: object  # Int32[Array, "B"]  pc of the failing (or last) instruction
    line: object  # Int32[Array, "B"]  line[pc] of it (0 if pc is invalid)
    fn: object  # Int32[Array, "B"]  function id of the frame it stopped in
    result: object  # Int32[Array, "B"]  the entry function's return value when status is OK
    out_kind: object  # Int32[Array, "B O"]  OUT_INT / OUT_BOOL / OUT_NEWLINE
    out_val: object  # Int32[Array, "B O"]
    n_out: object  # Int32[Array, "B"]
    steps: object  # Int32[Array, "B"]  instructions started


def format_output(kinds, vals, n_out) -> str:
    """The text a lane printed (host side): items of a line are joined by spaces."""
    parts: list[str] = []
    line: list[str] = []
    for k, v in zip(list(kinds)[: int(n_out)], list(vals)[: int(n_out)], strict=True):
        if int(k) == OUT_NEWLINE:
            parts.append(" ".join(line) + "\n")
            line = []
        elif int(k) == OUT_BOOL:
            line.append("True" if int(v) else "False")
        else:
            line.append(str(int(v)))
    if line:  # only reachable when the output buffer filled mid-line
        parts.append(" ".join(line))
    return "".join(parts)
