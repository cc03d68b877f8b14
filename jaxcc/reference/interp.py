"""Reference bytecode interpreter: plain Python, exactly the machine model of jaxcc.isa.

It is the oracle for the JAX VM (jaxcc.vm) and the CLI's ``--vm python``. It must be safe
on arbitrary bytecode: any int32 in any field gives a status (InvalidBytecode or the
language error named by isa.py), never a Python exception, a hang or a memory blow-up.

Decisions where isa.py leaves room (the JAX VM must make the same ones):

* Sizes: ``I`` = min(len(op), len(arg), len(line)), ``F`` = min of the fn_* lengths.
  ``n_code`` is clipped to [0, I] and ``n_funcs`` to [0, F] before anything else, so
  garbage sizes never read outside the arrays (they only shrink what is valid).
* Start: the entry function gets the same checks as a CALL target. ``entry`` outside
  [0, n_funcs) or a malformed table entry (nparams < 0, nlocals < nparams, maxstack < 0,
  fn_entry outside [0, n_code)) -> InvalidBytecode; ``max_depth < 1`` or a frame
  (nlocals + maxstack slots from fp = 0) that does not fit in ``max_stack`` ->
  RecursionError. Both with steps = 0, fn = entry, pc = fn_entry[entry] when entry is
  in range (else 0) and line = line[pc] when pc is in [0, n_code) (else 0).
* Arguments: parameter slot i gets ``args[i]`` (wrapped to int32) for i < len(args) and
  0 beyond; all nparams parameter slots are bound; extra args are ignored.
* Steps: an instruction is "started" once checks 1 and 2 pass; so an instruction that
  fails check 3, 4 or 5 is counted in ``steps``, one that fails check 1 or 2 is not.
* Check 3 and check 4 are static per opcode: a TARGET argument is checked whether or not
  the jump is taken, and the overflow check uses INFO's pops/pushes (the fall-through
  effect) whatever path is taken (FOR_RANGE needs room for 4 items even when it exits).
  ArgKind.NONE and CONST arguments are never checked.
* CALL: check 4 uses pops = fn_nparams[callee] (read after check 3 proved the id valid)
  and pushes = 1, i.e. the caller's operand stack must have room for the result. A
  negative nparams is then caught by check 5's malformed-entry test; both are
  InvalidBytecode, so the order between them is not observable.
* Frames: on CALL the arguments become slots [0, nparams) of the new frame in place
  (new fp = sp - nparams), slots [nparams, nlocals) are marked unbound, sp = fp +
  nlocals. "More than max_depth frames" counts the entry frame.
* Output: PRINT_BOOL stores the raw stack value (format_output prints any non-zero as
  True). Emitting the (max_output + 1)-th item is OutputLimitError; the buffer keeps the
  first max_output items.
* Result fields: on OK, pc is the final RETURN_VALUE's pc and fn the entry function; on
  an error, pc/fn are those of the instruction that failed (for check 1, the bad pc);
  result is 0 unless the status is OK; detail is an errors.Value for Code.VALUE, 1 for
  Code.UNBOUND_LOCAL raised by LOAD_VAR2's second slot (isa.failing_slot), else 0.
* Arithmetic is exact (Python ints) and checked against int32, so every op's
  OverflowError is exact: ADD/SUB/MUL, FLOORDIV (-2**31 // -1), POW, LSHIFT, NEG, ABS.
  POW: b < 0 -> ValueError NEGATIVE_POWER (even for a == 0); 0**0 == 1. LSHIFT: b < 0
  -> ValueError; a != 0 and b >= 32 -> OverflowError (never builds a huge int).
  RSHIFT: b < 0 -> ValueError; b >= 32 gives 0 or -1. MOD never overflows.
  FOR_RANGE: step == 0 -> ValueError RANGE_STEP_ZERO (checked before the comparison).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from jaxcc import isa
from jaxcc.errors import Code, Value
from jaxcc.isa import ArgKind, Op
from jaxcc.limits import DEFAULT, Limits
from jaxcc.ops import SEMANTICS, evaluate

_INT_MIN = -(2**31)
_INT_MAX = 2**31 - 1
_N_OPS = len(Op)

# Per-opcode tables as plain lists (fast indexing in the step loop).
_ARG_KIND = [int(isa.INFO[op].arg) for op in Op]
_POPS = [isa.INFO[op].pops for op in Op]
_PUSHES = [isa.INFO[op].pushes for op in Op]

_K_NONE, _K_CONST, _K_SLOT, _K_TARGET, _K_FUNC, _K_DEPTH, _K_COUNT, _K_SLOT2 = (
    int(ArgKind.NONE),
    int(ArgKind.CONST),
    int(ArgKind.SLOT),
    int(ArgKind.TARGET),
    int(ArgKind.FUNC),
    int(ArgKind.DEPTH),
    int(ArgKind.COUNT),
    int(ArgKind.SLOT2),
)

# Opcode numbers as module constants (the step loop compares plain ints).
(
    NOP,
    LOAD_CONST,
    LOAD_VAR,
    STORE_VAR,
    POP_TOP,
    DUP_TOP,
    POP_N,
    ADD,
    SUB,
    MUL,
    FLOORDIV,
    MOD,
    POW,
    LSHIFT,
    RSHIFT,
    AND,
    OR,
    XOR,
    MIN,
    MAX,
    LT,
    LE,
    GT,
    GE,
    EQ,
    NE,
    NEG,
    INVERT,
    NOT,
    ABS,
    JUMP,
    JUMP_IF_FALSE,
    JUMP_IF_TRUE,
    JUMP_IF_FALSE_OR_POP,
    JUMP_IF_TRUE_OR_POP,
    FOR_RANGE,
    CALL,
    RETURN_VALUE,
    PRINT_INT,
    PRINT_BOOL,
    PRINT_NEWLINE,
    ASSERT,
    JUMP_IF_LT,
    JUMP_IF_LE,
    JUMP_IF_GT,
    JUMP_IF_GE,
    JUMP_IF_EQ,
    JUMP_IF_NE,
    LOAD_VAR2,
) = range(Op.LOAD_VAR2 + 1)  # the opcodes with an arm below (appended ones: _TABLE_ONLY)
assert (ASSERT, FOR_RANGE, CALL) == (Op.ASSERT, Op.FOR_RANGE, Op.CALL)
assert (JUMP_IF_LT, JUMP_IF_NE, LOAD_VAR2) == (Op.JUMP_IF_LT, Op.JUMP_IF_NE, Op.LOAD_VAR2)

# Arithmetic opcodes without an arm of their own in _run (none today): an opcode appended
# to isa.py with a row in ops.py runs that row's semantics (tests/test_ops.py checks the
# arms against the table).
_TABLE_ONLY = frozenset(op for op in SEMANTICS if not (ADD <= op <= NE or NEG <= op <= ABS))

_OK = int(Code.OK)
_ZERO_DIVISION = int(Code.ZERO_DIVISION)
_OVERFLOW = int(Code.OVERFLOW)
_VALUE = int(Code.VALUE)
_RECURSION = int(Code.RECURSION)
_UNBOUND = int(Code.UNBOUND_LOCAL)
_ASSERTION = int(Code.ASSERTION)
_TIMEOUT = int(Code.TIMEOUT)
_OUTPUT_LIMIT = int(Code.OUTPUT_LIMIT)
_INVALID = int(Code.INVALID_BYTECODE)


def _wrap32(x: int) -> int:
    """Wrap a Python int to int32 (for inputs only; ops check overflow instead)."""
    return ((int(x) - _INT_MIN) & 0xFFFFFFFF) + _INT_MIN


def _as_list(a) -> list[int]:
    """A 1-D array-like of ints as a list of int32-wrapped Python ints."""
    arr = np.asarray(a).reshape(-1).astype(np.int64)
    return (((arr - _INT_MIN) & 0xFFFFFFFF) + _INT_MIN).tolist()


def _pow(a: int, b: int) -> int | None:
    """a ** b for b >= 0, or None when the result leaves int32 (never builds a huge int)."""
    if a in (0, 1):
        return 1 if b == 0 else a
    if a == -1:
        return 1 if b % 2 == 0 else -1
    if b >= 32:  # |a| >= 2: |a| ** 32 >= 2 ** 32
        return None
    r = a**b
    return r if _INT_MIN <= r <= _INT_MAX else None


def _lshift(a: int, b: int) -> int | None:
    """a << b for b >= 0, or None when the result leaves int32."""
    if a == 0:
        return 0
    if b >= 32:
        return None
    r = a << b
    return r if _INT_MIN <= r <= _INT_MAX else None


def run_program(
    program: isa.Program,
    limits: Limits = DEFAULT,
    entry: int = 0,
    args: Sequence[int] = (),
    trace: Callable | None = None,
) -> isa.RunResult:
    """Run one (unbatched) program; returns a RunResult of numpy scalars and arrays.

    Equivalent to the JAX VM on one lane (see the module docstring for the decisions).
    ``trace`` (off by default, like clox's DEBUG_TRACE_EXECUTION) is called as
    ``trace(fn, pc, op, arg, operands)`` for every instruction started, before it runs;
    ``operands`` is the current frame's operand stack as a list, bottom first.
    """
    max_output = int(limits.max_output)
    args = [int(a) for a in np.asarray(args).reshape(-1).tolist()]
    status, detail, pc, line, fn, result, out_kind, out_val, steps = _run(
        program, limits, _wrap32(entry), args, trace
    )
    n_out = len(out_kind)
    ok = np.zeros(max_output, np.int32)
    ov = np.zeros(max_output, np.int32)
    ok[:n_out] = out_kind
    ov[:n_out] = out_val
    i32 = np.int32
    return isa.RunResult(
        status=i32(status),
        detail=i32(detail),
        pc=i32(_wrap32(pc)),
        line=i32(line),
        fn=i32(_wrap32(fn)),
        result=i32(result),
        out_kind=ok,
        out_val=ov,
        n_out=i32(n_out),
        steps=i32(steps),
    )


def run_batch(
    program: isa.Program,
    limits: Limits = DEFAULT,
    entry=None,
    args=None,
    trace: Callable | None = None,
) -> isa.RunResult:
    """Run a batch (leading axis B) lane by lane; fields stacked along B.

    ``entry``: None (0 for every lane), an int, or an Int32[B]; ``args``: None, or an
    Int32[B, A] (or one Sequence[int] for every lane). ``trace`` as in run_program,
    called with the lane index first.
    """
    op = np.asarray(program.op)
    b = op.shape[0]
    entries = np.zeros(b, np.int64) if entry is None else np.broadcast_to(np.asarray(entry), (b,))
    if args is None:
        lane_args = [()] * b
    else:
        a = np.asarray(args)
        lane_args = [a.reshape(-1)] * b if a.ndim <= 1 else [a[i] for i in range(b)]
    results = []
    for i in range(b):
        lane = isa.Program(*(np.asarray(f)[i] for f in program))
        lane_trace = None if trace is None else functools.partial(trace, i)
        results.append(run_program(lane, limits, int(entries[i]), lane_args[i], lane_trace))
    if not results:
        o = int(limits.max_output)
        z = np.zeros(0, np.int32)
        return isa.RunResult(z, z, z, z, z, z, np.zeros((0, o), np.int32),
                             np.zeros((0, o), np.int32), z, z)  # fmt: skip
    return isa.RunResult(*(np.stack(f) for f in zip(*results, strict=True)))


def _run(program: isa.Program, limits: Limits, entry: int, args: list[int], trace=None):
    """The step loop. Returns (status, detail, pc, line, fn, result, kinds, vals, steps)."""
    ops = _as_list(program.op)
    argv = _as_list(program.arg)
    lines = _as_list(program.line)
    n_i = min(len(ops), len(argv), len(lines))
    f_entry = _as_list(program.fn_entry)
    f_np = _as_list(program.fn_nparams)
    f_nl = _as_list(program.fn_nlocals)
    f_ms = _as_list(program.fn_maxstack)
    n_f = min(
        len(f_entry),
        len(f_np),
        len(f_nl),
        len(f_ms),
        len(np.asarray(program.fn_rettype).reshape(-1)),
    )
    n_code = min(max(_wrap32(np.asarray(program.n_code).reshape(-1)[0]), 0), n_i)
    n_funcs = min(max(_wrap32(np.asarray(program.n_funcs).reshape(-1)[0]), 0), n_f)

    max_stack = int(limits.max_stack)
    max_depth = int(limits.max_depth)
    max_output = int(limits.max_output)
    max_steps = int(limits.max_steps)

    def line_of(p: int) -> int:
        return lines[p] if 0 <= p < n_code else 0

    def malformed(f: int) -> bool:
        return f_np[f] < 0 or f_nl[f] < f_np[f] or f_ms[f] < 0 or not 0 <= f_entry[f] < n_code

    kinds: list[int] = []
    vals: list[int] = []

    # --- the entry frame (checked like a CALL target) ---
    if not 0 <= entry < n_funcs:
        return _INVALID, 0, 0, line_of(0), entry, 0, kinds, vals, 0
    fn = entry
    pc = f_entry[fn]
    if malformed(fn):
        return _INVALID, 0, pc, line_of(pc), fn, 0, kinds, vals, 0
    if max_depth < 1 or f_nl[fn] + f_ms[fn] > max_stack:
        return _RECURSION, 0, pc, line_of(pc), fn, 0, kinds, vals, 0

    stack = [0] * max(max_stack, 0)
    bound = bytearray(max(max_stack, 0))
    nparams = f_np[fn]
    for i in range(nparams):
        stack[i] = _wrap32(args[i]) if i < len(args) else 0
        bound[i] = 1
    fp = 0
    nlocals = f_nl[fn]
    maxstack = f_ms[fn]
    base = fp + nlocals  # first operand slot of the current frame
    sp = base  # next free slot
    frames: list[tuple[int, int, int]] = []  # (return pc, fp, fn) of callers
    steps = 0
    status = _OK
    detail = 0
    result = 0

    arg_kind = _ARG_KIND
    pops_t = _POPS
    pushes_t = _PUSHES

    while True:
        # 1. pc and opcode
        if not 0 <= pc < n_code:
            status = _INVALID
            break
        o = ops[pc]
        if not 0 <= o < _N_OPS:
            status = _INVALID
            break
        # 2. step budget
        if steps >= max_steps:
            status = _TIMEOUT
            break
        steps += 1
        if trace is not None:
            trace(fn, pc, o, argv[pc], stack[base:sp])
        a = argv[pc]
        depth = sp - base
        # 3. argument
        k = arg_kind[o]
        if k >= _K_SLOT:
            if k == _K_SLOT:
                bad = not 0 <= a < nlocals
            elif k == _K_TARGET:
                bad = not 0 <= a < n_code
            elif k == _K_FUNC:
                bad = not 0 <= a < n_funcs
            elif k == _K_DEPTH:
                bad = not 1 <= a <= depth
            elif k == _K_COUNT:
                bad = not 0 <= a <= depth
            else:  # SLOT2: both slots
                s1, s2 = isa.unpack_slots(a)
                bad = not (0 <= s1 < nlocals and 0 <= s2 < nlocals)
            if bad:
                status = _INVALID
                break
        # 4. operand stack underflow / overflow
        pops = f_np[a] if o == CALL else pops_t[o]
        if depth < pops or depth - pops + pushes_t[o] > maxstack:
            status = _INVALID
            break
        # 5. the instruction
        if o == LOAD_VAR:
            i = fp + a
            if not bound[i]:
                status = _UNBOUND
                break
            stack[sp] = stack[i]
            sp += 1
            pc += 1
        elif o == LOAD_VAR2:  # LOAD_VAR s1; LOAD_VAR s2 in one step
            s1, s2 = isa.unpack_slots(a)
            i, j = fp + s1, fp + s2
            if not bound[i]:
                status = _UNBOUND
                break
            if not bound[j]:
                status, detail = _UNBOUND, 1  # the second slot (isa.failing_slot)
                break
            stack[sp] = stack[i]
            stack[sp + 1] = stack[j]
            sp += 2
            pc += 1
        elif o == LOAD_CONST:
            stack[sp] = a
            sp += 1
            pc += 1
        elif o == STORE_VAR:
            sp -= 1
            i = fp + a
            stack[i] = stack[sp]
            bound[i] = 1
            pc += 1
        elif ADD <= o <= NE:
            y = stack[sp - 1]
            x = stack[sp - 2]
            if o == ADD:
                r = x + y
            elif o == SUB:
                r = x - y
            elif o == MUL:
                r = x * y
            elif o == FLOORDIV or o == MOD:
                if y == 0:
                    status = _ZERO_DIVISION
                    break
                r = x // y if o == FLOORDIV else x % y
            elif o == POW:
                if y < 0:
                    status, detail = _VALUE, int(Value.NEGATIVE_POWER)
                    break
                r = _pow(x, y)
                if r is None:
                    status = _OVERFLOW
                    break
            elif o == LSHIFT:
                if y < 0:
                    status, detail = _VALUE, int(Value.NEGATIVE_SHIFT)
                    break
                r = _lshift(x, y)
                if r is None:
                    status = _OVERFLOW
                    break
            elif o == RSHIFT:
                if y < 0:
                    status, detail = _VALUE, int(Value.NEGATIVE_SHIFT)
                    break
                r = x >> min(y, 31)
            elif o == AND:
                r = x & y
            elif o == OR:
                r = x | y
            elif o == XOR:
                r = x ^ y
            elif o == MIN:
                r = x if x <= y else y
            elif o == MAX:
                r = x if x >= y else y
            elif o == LT:
                r = int(x < y)
            elif o == LE:
                r = int(x <= y)
            elif o == GT:
                r = int(x > y)
            elif o == GE:
                r = int(x >= y)
            elif o == EQ:
                r = int(x == y)
            else:  # NE
                r = int(x != y)
            if not _INT_MIN <= r <= _INT_MAX:
                status = _OVERFLOW
                break
            sp -= 1
            stack[sp - 1] = r
            pc += 1
        elif o == FOR_RANGE:
            c, stop, step = stack[sp - 3], stack[sp - 2], stack[sp - 1]
            if step == 0:
                status, detail = _VALUE, int(Value.RANGE_STEP_ZERO)
                break
            if (step > 0 and c < stop) or (step < 0 and c > stop):
                nxt = c + step
                stack[sp - 3] = nxt if _INT_MIN <= nxt <= _INT_MAX else stop
                stack[sp] = c
                sp += 1
                pc += 1
            else:
                sp -= 3
                pc = a
        elif o == JUMP:
            pc = a
        elif o == JUMP_IF_FALSE:
            sp -= 1
            pc = a if stack[sp] == 0 else pc + 1
        elif o == JUMP_IF_TRUE:
            sp -= 1
            pc = a if stack[sp] != 0 else pc + 1
        elif JUMP_IF_LT <= o <= JUMP_IF_NE:  # compare-and-branch: jump if a OP b
            y = stack[sp - 1]
            x = stack[sp - 2]
            sp -= 2
            if o == JUMP_IF_LT:
                c = x < y
            elif o == JUMP_IF_LE:
                c = x <= y
            elif o == JUMP_IF_GT:
                c = x > y
            elif o == JUMP_IF_GE:
                c = x >= y
            elif o == JUMP_IF_EQ:
                c = x == y
            else:  # JUMP_IF_NE
                c = x != y
            pc = a if c else pc + 1
        elif o == JUMP_IF_FALSE_OR_POP:
            if stack[sp - 1] == 0:
                pc = a
            else:
                sp -= 1
                pc += 1
        elif o == JUMP_IF_TRUE_OR_POP:
            if stack[sp - 1] != 0:
                pc = a
            else:
                sp -= 1
                pc += 1
        elif o == POP_TOP:
            sp -= 1
            pc += 1
        elif o == DUP_TOP:
            stack[sp] = stack[sp - 1]
            sp += 1
            pc += 1
        elif o == POP_N:
            sp -= a
            pc += 1
        elif o == NEG or o == ABS:
            x = stack[sp - 1]
            if x == _INT_MIN:
                status = _OVERFLOW
                break
            stack[sp - 1] = -x if (o == NEG or x < 0) else x
            pc += 1
        elif o == INVERT:
            stack[sp - 1] = ~stack[sp - 1]
            pc += 1
        elif o == NOT:
            stack[sp - 1] = int(stack[sp - 1] == 0)
            pc += 1
        elif o == CALL:
            if malformed(a):
                status = _INVALID
                break
            new_fp = sp - f_np[a]
            if len(frames) + 2 > max_depth or new_fp + f_nl[a] + f_ms[a] > max_stack:
                status = _RECURSION
                break
            frames.append((pc + 1, fp, fn))
            fn = a
            fp = new_fp
            nlocals = f_nl[fn]
            maxstack = f_ms[fn]
            for i in range(fp, fp + f_np[fn]):
                bound[i] = 1
            for i in range(fp + f_np[fn], fp + nlocals):
                bound[i] = 0
            base = sp = fp + nlocals
            pc = f_entry[fn]
        elif o == RETURN_VALUE:
            v = stack[sp - 1]
            if not frames:
                result = v
                break  # status OK
            sp = fp
            pc, fp, fn = frames.pop()
            nlocals = f_nl[fn]
            maxstack = f_ms[fn]
            base = fp + nlocals
            stack[sp] = v
            sp += 1
        elif o == PRINT_INT or o == PRINT_BOOL or o == PRINT_NEWLINE:
            if len(kinds) >= max_output:
                status = _OUTPUT_LIMIT
                break
            if o == PRINT_NEWLINE:
                kinds.append(isa.OUT_NEWLINE)
                vals.append(0)
            else:
                kinds.append(isa.OUT_INT if o == PRINT_INT else isa.OUT_BOOL)
                vals.append(stack[sp - a])
            pc += 1
        elif o == ASSERT:
            sp -= 1
            if stack[sp] == 0:
                status = _ASSERTION
                break
            pc += 1
        elif o in _TABLE_ONLY:
            n = SEMANTICS[o].arity
            r, code, det = evaluate(o, *stack[sp - n : sp])
            if code != _OK:
                status, detail = int(code), int(det)
                break
            sp -= n - 1
            stack[sp - 1] = r
            pc += 1
        else:  # NOP
            pc += 1

    return status, detail, pc, line_of(pc), fn, result, kinds, vals, steps
