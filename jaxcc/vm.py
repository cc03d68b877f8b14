"""The bytecode VM on the accelerator: a batch of lanes stepped in lockstep.

``run(program, limits, entry, args, budget) -> isa.RunResult`` runs every program of a
batch (leading axis B) as its own lane; ``run_tests`` runs every (program, test input)
pair as its own lane and compares return values on the device. The machine model and the
per-step check order are exactly those of ``jaxcc/isa.py``; docs/vm.md explains the state
layout, the step and why no lane can touch another lane or hang.

Design (why it looks like this):

* The step is branch-free and table-driven: every lane decodes its instruction through a
  small per-opcode table, computes the few candidate results (all arithmetic, all checks)
  and selects with ``jnp.where``. ``lax.switch`` under ``vmap`` would run all 49 branches.
* A fixed-count ``lax.fori_loop`` of ``inner_steps`` steps runs inside an outer
  ``lax.while_loop(any lane running)``: the data-dependent predicate costs a host sync, so
  it is paid once per ``inner_steps`` steps. Finished lanes are masked (they change nothing).
* All per-lane memory (value stack, call frames, output buffer) lives in ONE array
  ``mem: int32[M, 2]`` per lane, so a step is ONE scatter of at most two (2-int) pairs:
  a stack slot is (value, stamp), a frame record is two pairs (ret_pc, fp), (fn, serial),
  an output item is (kind, value).
* Bound flags need no clearing on CALL: every frame has a serial number (the step count
  of the CALL that made it; 0 for the entry frame) and a local slot is bound iff it is a
  parameter or its stamp equals the frame's serial (STORE_VAR writes the stamp). Serials
  are unique per lane, so a stale stamp left by an earlier frame never matches.
* Every per-lane index is either checked (the instruction fails before using it) or
  harmless (gathers clamp, and their result is only used when the checks pass); every
  write is enabled only after all checks pass, and its index is range-checked again and
  otherwise sent to an out-of-range slot that ``mode="drop"`` discards.
* A step's memory reads are one gather of six pairs, passed through an optimization
  barrier together with ``mem`` before the one scatter (the fence in ``_fetch``), so XLA provably
  updates ``mem`` in place (without the barrier the H200 step was 3.7x slower).
* A batch of ONE lane is stepped without vmap (``_stepper``): its reads are three dynamic
  slices and its writes two dynamic-update-slices of one pair, which XLA:CPU does in
  place; the gather and the scatter over a large memory (the CLI's limits) were split
  into parallel tasks, a thread-pool round trip each, every step (docs/vm.md).
* The status of a step (the first failing check) is computed once per lane and
  materialized, so XLA does not re-derive the whole check tree inside every register
  update (see ``_materialize``).
* Optional ``shrink``: the lockstep array shrinks (by ``shrink_by``, default halves) as
  lanes stop, so a few long programs do not keep paying for the whole batch. ``trace`` records one lane step by step.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxcc import isa, ops
from jaxcc.arrays import as_i32
from jaxcc.errors import RUNTIME_CODES, Code, Value
from jaxcc.isa import ArgKind, Op
from jaxcc.limits import DEFAULT, Limits

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1

# per_case value of run_tests for a lane that returned normally with the wrong value
WRONG_RESULT = -1

# Three guard pairs below stack slot 0, so the window of the top three operands
# (logical slots sp-3 .. sp-1) is always in bounds: it starts at physical index sp.
_GUARD = 3

# Decode table: one row per opcode (plus a row for invalid opcodes, decoded as NOP):
# argument kind, pops, pushes. Read with one gather per step.
_N_OPS = isa.N_OPS
_TAB = np.zeros((_N_OPS + 1, 3), np.int32)
_dt = isa.decode_tables()
_TAB[:_N_OPS, 0] = _dt["arg_kind"]
_TAB[:_N_OPS, 1] = _dt["pops"]
_TAB[:_N_OPS, 2] = _dt["pushes"]
del _dt


class Layout(NamedTuple):
    """Where each region lives in a lane's ``mem: int32[size, 2]`` (static ints)."""

    stack0: int  # physical index of value-stack slot 0; slots hold (value, stamp)
    frame0: int  # frame records: 2 pairs each, (ret_pc, fp), (fn, serial); D of them
    out0: int  # output items (kind, value); O of them
    res: int  # one pair (result or detail, 0), written by the step that stops the lane
    size: int  # M: number of pairs
    drop: int  # first index of writes to discard (>= size; drop and drop + 1 are used)


def layout(limits: Limits) -> Layout:
    stack0 = _GUARD
    frame0 = stack0 + limits.max_stack
    out0 = frame0 + 2 * limits.max_depth
    res = out0 + limits.max_output
    size = res + 1
    return Layout(stack0, frame0, out0, res, size, size)


class Tables(NamedTuple):
    """The programs, re-packed for one gather per fetch (shared by all lanes; P programs)."""

    code: object  # Int32[Array, "P I+2F 2"]  rows < I: (op, arg); then two rows per
    #               function: (entry, nparams), (nlocals, maxstack). One array, so a
    #               table read that a step does not need can hit the instruction's sector.
    line: object  # Int32[Array, "P I"]
    n_code: object  # Int32[Array, "P"]  clipped to [0, I]
    n_funcs: object  # Int32[Array, "P"]  clipped to [0, F]


class Lane(NamedTuple):
    """One lane's machine state (scalars are Int32[]; a batch adds a leading axis L)."""

    pid: object  # which program of Tables this lane runs (loop-invariant)
    budget: object  # step budget of this lane (loop-invariant)
    n_code: object  # its program's n_code and n_funcs (loop-invariant copies)
    n_funcs: object
    pc: object
    sp: object  # first free value-stack slot (logical index)
    fp: object  # frame base: slot of local 0 of the current frame
    fn: object  # current function id
    depth: object  # number of frames (the entry frame is 1)
    serial: object  # serial number of the current frame (its locals' bound stamp)
    nparams: object  # the current function's table entry, cached
    nlocals: object
    maxstack: object
    steps: object  # instructions started
    status: object  # Code.RUNNING while running
    n_out: object
    mem: object  # Int32[Array, "M 2"]  see Layout


# The registers Lane carries from step to step, packed into one Int32[12] per lane in the
# loop carry: the update is then one array (one fused kernel) instead of 12 separate
# outputs, each of which XLA would compute in its own kernel.
_REGS = ("pc", "sp", "fp", "fn", "depth", "serial", "nparams", "nlocals", "maxstack",
         "steps", "status", "n_out")  # fmt: skip
_STATUS = _REGS.index("status")


class Packed(NamedTuple):
    """Lane as carried by the loops: loop-invariant fields, the registers, memory."""

    pid: object
    budget: object
    n_code: object
    n_funcs: object
    regs: object  # Int32[Array, "12"]  in _REGS order
    mem: object  # Int32[Array, "M 2"]


def _pack(s: Lane) -> Packed:
    regs = jnp.stack([getattr(s, k) for k in _REGS])
    return Packed(s.pid, s.budget, s.n_code, s.n_funcs, regs, s.mem)


def _unpack(p: Packed) -> Lane:
    regs = {k: p.regs[i] for i, k in enumerate(_REGS)}
    return Lane(pid=p.pid, budget=p.budget, n_code=p.n_code, n_funcs=p.n_funcs, mem=p.mem, **regs)


def _tables(program: isa.Program) -> Tables:
    code = jnp.stack([as_i32(program.op), as_i32(program.arg)], axis=-1)  # [P, I, 2]
    fn = jnp.stack(
        [
            as_i32(program.fn_entry),
            as_i32(program.fn_nparams),
            as_i32(program.fn_nlocals),
            as_i32(program.fn_maxstack),
        ],
        axis=-1,
    )  # [P, F, 4]
    n_i, n_f = code.shape[-2], fn.shape[-2]
    fn_rows = jnp.reshape(fn, (fn.shape[0], 2 * n_f, 2))
    # garbage sizes only shrink what is valid (as the reference interpreter does)
    n_code = jnp.clip(as_i32(program.n_code), 0, n_i)
    n_funcs = jnp.clip(as_i32(program.n_funcs), 0, n_f)
    return Tables(jnp.concatenate([code, fn_rows], axis=1), as_i32(program.line), n_code, n_funcs)


def _fn_row(t: Tables, pid, f, use=True, pc=0):
    """(entry, nparams, nlocals, maxstack) of function f (clipped into the table) of
    program pid; when ``use`` is false, reads next to instruction pc instead (the caller
    ignores the value; the read then hits the instruction's memory)."""
    n_i = t.line.shape[-1]
    n_f = (t.code.shape[-2] - n_i) // 2
    row = jnp.where(use, n_i + 2 * jnp.clip(f, 0, n_f - 1), pc)
    r = _get(t.code, (pid, row, 0), (1, 2, 2))[0]
    return r[0, 0], r[0, 1], r[1, 0], r[1, 1]


# ----------------------------------------------------------------------------------------
# exact int32 arithmetic


def _add_ovf(a, b):
    r = a + b  # wraps
    return r, ((a ^ r) & (b ^ r)) < 0


def _sub_ovf(a, b):
    r = a - b
    return r, ((a ^ b) & (a ^ r)) < 0


def _u32(x):
    return lax.bitcast_convert_type(x, jnp.uint32)


def _mag(x):
    """|x| as uint32 (exact, also for -2**31)."""
    return _u32(jnp.where(x < 0, -x, x))


def _umul_ovf(x, y):
    """x * y for uint32 magnitudes; flags a product >= 2**32. Multiplies only (no divide)."""
    m16 = jnp.uint32(0xFFFF)
    s16 = jnp.uint32(16)
    xh, xl = x >> s16, x & m16
    yh, yl = y >> s16, y & m16
    both_high = (xh != 0) & (yh != 0)
    mid = xh * yl + xl * yh  # one term is 0 unless both_high, so no wrap then
    lo = xl * yl
    mid_lo = mid << s16
    r = mid_lo + lo
    ovf = both_high | (mid > m16) | (r < mid_lo)
    return r, ovf


def _signed_from_mag(mag, neg, ovf):
    """Apply a sign to a uint32 magnitude; overflow if it leaves int32."""
    lim = jnp.where(neg, jnp.uint32(2**31), jnp.uint32(INT_MAX))
    ovf = ovf | (mag > lim)
    v = lax.bitcast_convert_type(mag, jnp.int32)
    return jnp.where(neg, -v, v), ovf


def _mul_ovf(a, b):
    m, ovf = _umul_ovf(_mag(a), _mag(b))
    neg = (a < 0) != (b < 0)
    return _signed_from_mag(m, neg & (m != 0), ovf)


def _pow_limits() -> np.ndarray:
    """_POW_MAX[e]: the largest |a| with |a| ** e <= 2**31 - 1 (e = 0 .. 32; e >= 32 uses
    row 32: only |a| <= 1). Row 1 allows |a| = 2**31 (a ** 1 is a itself)."""
    t = np.zeros(33, np.uint64)
    t[0], t[1] = 2**32 - 1, 2**31
    for e in range(2, 33):
        m = int(round((2**31 - 1) ** (1 / e)))
        while (m + 1) ** e <= 2**31 - 1:
            m += 1
        while m**e > 2**31 - 1:
            m -= 1
        t[e] = m
    return t.astype(np.uint32)


_POW_MAX = _pow_limits()


def _pow_limit(e):
    """_POW_MAX[e] (uint32) for 0 <= e <= 32: one table read."""
    return jnp.asarray(_POW_MAX)[e]


def _pow_ovf(a, b, pow_limit=_pow_limit):
    """a ** b for b >= 0 (b < 0 is the caller's ValueError); exact, with overflow.

    Overflow iff |a| > _POW_MAX[b] (one table read), except (-2) ** 31 == -2**31, the
    only negative power at exactly -2**31 besides a ** 1. When it does not overflow, the
    wrapping int32 square-and-multiply below is exact (arithmetic mod 2**32 agrees with
    the true value, which fits). |a| <= 1 only needs b's parity (and b > 0)."""
    big = b >= 32
    e = jnp.where(big, 30 + (b & 1), b)  # 0 < e < 32, same parity as b
    ovf = _mag(a) > pow_limit(jnp.clip(b, 0, 32))
    ovf = ovf & ~((a == -2) & (b == 31))
    res = as_i32(1)
    base = a
    for i in range(5):  # e < 32: five bits
        res = jnp.where(((e >> i) & 1) == 1, res * base, res)
        base = base * base
    return res, ovf


def _floordiv_mod(a, b):
    """Python's a // b and a % b; b == 0 and (-2**31) // -1 are the caller's errors."""
    bad = (b == 0) | ((a == INT_MIN) & (b == -1))
    bs = jnp.where(bad, 1, b)
    q = lax.div(a, bs)  # truncates
    r = a - q * bs
    fix = (r != 0) & ((r ^ bs) < 0)
    q = jnp.where(fix, q - 1, q)
    r = jnp.where(fix, r + bs, r)
    r = jnp.where(bad, 0, r)  # (-2**31) % -1 == 0
    return q, r


# The arithmetic kernels below compute these opcodes' results side by side and select one
# by opcode; the selection is derived from these tuples (a subtraction where the opcodes
# are contiguous in isa.py, as today, else a lookup table), so appending or reordering
# opcodes in isa.py cannot misdecode.
_KERNEL_BINARY = (Op.ADD, Op.SUB, Op.MUL, Op.FLOORDIV, Op.MOD, Op.POW, Op.LSHIFT, Op.RSHIFT,
                  Op.AND, Op.OR, Op.XOR, Op.MIN, Op.MAX, Op.LT, Op.LE, Op.GT,
                  Op.GE, Op.EQ, Op.NE)  # fmt: skip
_KERNEL_UNARY = (Op.NEG, Op.INVERT, Op.NOT, Op.ABS)
# Arithmetic opcodes with an ops.py row but no tuned kernel: they run that row's semantic
# function and checks (ops.evaluate). None today; tests/test_ops.py checks the kernels
# against the table.
_TABLE_BINARY = tuple(
    op for op in sorted(ops.SEMANTICS) if ops.SEMANTICS[op].arity == 2 and op not in _KERNEL_BINARY
)
_TABLE_UNARY = tuple(
    op for op in sorted(ops.SEMANTICS) if ops.SEMANTICS[op].arity == 1 and op not in _KERNEL_UNARY
)
# _unary reports errors as an overflow flag only
assert all(c.code == Code.OVERFLOW for op in _TABLE_UNARY for c in ops.SEMANTICS[op].checks)


class _Decode(NamedTuple):
    """Opcode -> position in a kernel's tuple, and membership, derived from the tuple."""

    index: Callable  # o -> Int32 position (clamped; meaningless where not a member)
    member: Callable  # o -> Bool


def _decode(kernel: tuple[Op, ...], extra: tuple[Op, ...] = ()) -> _Decode:
    codes = [int(op) for op in kernel]
    lo, n = min(codes), len(codes)
    if codes == list(range(lo, lo + n)):  # contiguous: o - lo (the fast path)
        index = lambda o: jnp.clip(o - lo, 0, n - 1)  # noqa: E731
        inside = lambda o: (o >= lo) & (o <= lo + n - 1)  # noqa: E731
    else:
        table = np.full(max(codes) + 1, -1, np.int32)
        table[codes] = np.arange(n, dtype=np.int32)
        at = lambda o: jnp.asarray(table)[jnp.clip(o, 0, len(table) - 1)]  # noqa: E731
        index = lambda o: jnp.clip(at(o), 0, n - 1)  # noqa: E731
        inside = lambda o: (o >= 0) & (o < len(table)) & (at(o) >= 0)  # noqa: E731

    def member(o):
        out = inside(o)
        for op in extra:
            out = out | (o == op)
        return out

    return _Decode(index, member)


_BIN = _decode(_KERNEL_BINARY, _TABLE_BINARY)
_UN = _decode(_KERNEL_UNARY, _TABLE_UNARY)


def _pick(dec: _Decode, o):
    """A selector by opcode o for a kernel tuple (decoded by ``dec``): applied to the
    results (opcode -> value, in the tuple's order) it gives results[o], one select by
    position. (The Pallas kernel passes a select chain instead.)"""
    k = dec.index(o)
    return lambda results: lax.select_n(k, *results.values())


def _binary(o, a, b, *, pick=_pick, pow_limit=_pow_limit):
    """Every binary opcode's result and error (code, detail), selected by opcode.

    ``pick`` and ``pow_limit`` are the two table reads on values (the Pallas kernel,
    jaxcc/vm_pallas.py, replaces them with what its Triton lowering accepts)."""
    add, add_o = _add_ovf(a, b)
    sub, sub_o = _sub_ovf(a, b)
    mul, mul_o = _mul_ovf(a, b)
    q, r = _floordiv_mod(a, b)
    pw, pw_o = _pow_ovf(a, b, pow_limit)
    sh = jnp.clip(b, 0, 31)
    lsh = a << sh
    lsh_o = jnp.where(b >= 32, a != 0, (lsh >> sh) != a)
    rsh = a >> sh  # arithmetic: b >= 32 gives 0 or -1 like b == 31
    one, zero = as_i32(1), as_i32(0)
    results = {
        Op.ADD: add,
        Op.SUB: sub,
        Op.MUL: mul,
        Op.FLOORDIV: q,
        Op.MOD: r,
        Op.POW: pw,
        Op.LSHIFT: lsh,
        Op.RSHIFT: rsh,
        Op.AND: a & b,
        Op.OR: a | b,
        Op.XOR: a ^ b,
        Op.MIN: jnp.where(a <= b, a, b),
        Op.MAX: jnp.where(a >= b, a, b),
        Op.LT: jnp.where(a < b, one, zero),
        Op.LE: jnp.where(a <= b, one, zero),
        Op.GT: jnp.where(a > b, one, zero),
        Op.GE: jnp.where(a >= b, one, zero),
        Op.EQ: jnp.where(a == b, one, zero),
        Op.NE: jnp.where(a != b, one, zero),
    }
    assert tuple(results) == _KERNEL_BINARY
    val = pick(_BIN, o)(results)
    zdiv = (b == 0) & ((o == Op.FLOORDIV) | (o == Op.MOD))
    neg_shift = (b < 0) & ((o == Op.LSHIFT) | (o == Op.RSHIFT))
    neg_pow = (b < 0) & (o == Op.POW)
    ovf = (
        ((o == Op.ADD) & add_o)
        | ((o == Op.SUB) & sub_o)
        | ((o == Op.MUL) & mul_o)
        | ((o == Op.FLOORDIV) & (a == INT_MIN) & (b == -1))
        | ((o == Op.POW) & pw_o)
        | ((o == Op.LSHIFT) & lsh_o)
    )
    code = jnp.where(
        zdiv,
        Code.ZERO_DIVISION,
        jnp.where(neg_shift | neg_pow, Code.VALUE, jnp.where(ovf, Code.OVERFLOW, Code.RUNNING)),
    )
    detail = jnp.where(neg_pow, Value.NEGATIVE_POWER, Value.NEGATIVE_SHIFT)
    for op in _TABLE_BINARY:
        v, c, d = ops.evaluate(op, a, b)
        hit = o == op
        val = jnp.where(hit, v, val)
        code = jnp.where(hit, jnp.where(c == Code.OK, Code.RUNNING, c), code)
        detail = jnp.where(hit, d, detail)
    return val, as_i32(code), as_i32(detail)


def _unary(o, x, *, pick=_pick):
    select = pick(_UN, o)
    results = {
        Op.NEG: -x,
        Op.INVERT: ~x,
        Op.NOT: jnp.where(x == 0, as_i32(1), as_i32(0)),
        Op.ABS: jnp.where(x < 0, -x, x),
    }
    assert tuple(results) == _KERNEL_UNARY
    val = select(results)
    ovf = (x == INT_MIN) & ((o == Op.NEG) | (o == Op.ABS))
    for op in _TABLE_UNARY:
        v, c, _ = ops.evaluate(op, x)
        hit = o == op
        val = jnp.where(hit, v, val)
        ovf = ovf | (hit & (c == Code.OVERFLOW))
    return val, ovf


# ----------------------------------------------------------------------------------------
# one step of one lane


def _materialize(x):
    """x (a small non-negative int32), computed once per lane and stored.

    XLA treats integer ops as cheap and fuses a producer into every consumer, so without
    this the whole check tree (all the arithmetic included) is re-derived inside each
    of the ~15 register updates. A float divide counts as expensive, so XLA computes it
    (and the tree feeding it) once. The divisor is 1.0 written so that the algebraic
    simplifier cannot fold it (0 * f is not 0 for every float); exact for x < 2**24.
    """
    f = x.astype(jnp.float32)
    return (f / (1.0 + 0.0 * f)).astype(jnp.int32)


def _get(arr, start, size):
    """arr[start : start + size] along the leading axes (clamped, never out of bounds)."""
    return lax.dynamic_slice(arr, start, size)


def _place(start, dim: int, size: int):
    """Where ``lax.dynamic_slice`` puts a window of ``size`` starting at ``start`` in an
    axis of ``dim``: a negative start counts from the end (its allow_negative_indices
    default), then it is clamped."""
    return jnp.clip(jnp.where(start < 0, start + dim, start), 0, dim - size)


def _read_mem(mem, windows, flat: bool = False):
    """The pairs of ``mem`` in each (start, size) window, as ONE gather: Int32[sum(size), 2].

    A window is placed exactly as ``lax.dynamic_slice`` places it (``_place``), so an
    unused read lands where it always did. ``flat`` (one lane, not under vmap; mem is
    Int32[1, M, 2]): the same pairs as one ``lax.dynamic_slice`` per window instead of the
    gather (see ``_write``)."""
    if flat:
        zero = as_i32(0)
        return jnp.concatenate(
            [_get(mem, (zero, start, zero), (1, size, 2))[0] for start, size in windows]
        )
    m = mem.shape[0]
    rows = jnp.concatenate(
        [_place(start, m, size) + jnp.arange(size, dtype=jnp.int32) for start, size in windows]
    )
    return jnp.take(mem, rows, axis=0, mode="clip")


# Bits of a lane status in the step's (priority, status) encoding: enough for every code
# a step can set (OK, RUNNING and the run-time codes), derived so that appending a code
# cannot overflow into the priority.
_STATUS_BITS = max(Code.OK, Code.RUNNING, *RUNTIME_CODES).bit_length()


class _Fetched(NamedTuple):
    """What one step reads: the decoded instruction, the operands, the addressed slot,
    the caller's frame record and one function-table row (``_fetch``)."""

    run: object
    o: object
    a: object
    valid: object
    kind: object
    pops_t: object
    pushes_t: object
    timeout: object
    depth: object
    is_call: object
    is_ret: object
    f_entry: object
    f_np: object
    f_nl: object
    f_ms: object
    third: object
    second: object
    top: object
    slot: object
    slot2: object  # LOAD_VAR2's second slot (read in place of the frame record)
    ret_pc: object
    ret_fp: object
    ret_fn: object
    ret_serial: object
    mem: object
    slot_row: object = None  # where ``slot`` was read (``_write``'s flat no-op target)


class _Outcome(NamedTuple):
    """What one step decides (``_check``): its status and each opcode's results."""

    pops: object
    bval: object
    bcode: object
    uval: object
    is_bin: object
    is_un: object
    is_for: object
    rc: object
    r_more: object
    r_next: object
    new_fp: object
    is_print: object
    d5: object
    new_status: object
    go: object
    steps: object


class _Registers(NamedTuple):
    """The lane's registers after a completed step (``_registers``)."""

    nxt: object
    pc: object
    sp: object
    fp: object
    fn: object
    fdepth: object
    serial: object
    nparams: object
    nlocals: object
    maxstack: object
    n_out: object


def _step(t: Tables, lay: Layout, limits: Limits, s: Lane, flat: bool = False) -> Lane:
    """One instruction of one lane (vmapped over lanes; ``t`` is shared). ``flat``: the
    lane is stepped on its own, not under vmap (``_stepper``): memory is read by dynamic
    slices and written by dynamic-update-slices instead of one gather and one scatter.

    Equivalent plain Python (``isa.py``'s check order; the first failing check stops the
    lane, leaving pc at the failing instruction):

        if status != RUNNING: return
        if not (0 <= pc < n_code and 0 <= op[pc] < N_OPS): status = INVALID_BYTECODE; return
        if steps >= budget: status = TIMEOUT; return
        steps += 1
        o, a = op[pc], arg[pc]; depth = sp - (fp + nlocals)
        if bad_arg(kind[o], a, depth): status = INVALID_BYTECODE; return
        pops = nparams[a] if o == CALL else POPS[o]
        if depth < pops or depth - pops + PUSHES[o] > maxstack: status = INVALID_BYTECODE; return
        if o's own check fails: status = its error; return
        execute o (at most two value-stack / frame / output pairs written)

    In four named steps: ``_fetch`` (decode and read), ``_check`` (checks 1-5, each
    opcode's results), ``_registers`` (pc, sp, frame, output count), ``_write`` (the
    pairs written to memory).
    """
    f = _fetch(t, lay, s, flat)
    x = _check(limits, s, f, binary=_lazy_binary(f) if flat and FLAT_LAZY else _binary)
    r = _registers(s, f, x)
    return _update(s, f, x, r, _write(lay, s, f, x, r, flat))


# the one-lane step's lazy binary operators (docs/vm.md "Backends"); read when a jit
# traces the step, so for A/B runs set it before the first call (or jax.clear_caches())
FLAT_LAZY = True


def _lazy_binary(f: _Fetched) -> Callable:
    """``_binary`` behind a branch on the one lane's opcode (``flat``): computed only when
    the lane runs a binary operator; otherwise values that ``_check`` and ``_write_pairs``
    never read for that opcode."""

    def binary(o, a, b):
        def skip(o, a, b):
            zero = jnp.zeros_like(a)
            return zero, jnp.full_like(a, Code.RUNNING), zero

        return lax.cond(f.run & _BIN.member(o), _binary, skip, o, a, b)

    return binary


def _update(s: Lane, f: _Fetched, x: _Outcome, r: _Registers, mem) -> Lane:
    """The lane after the step: registers change only when the instruction completes."""

    def upd(new, old):
        return jnp.where(x.go, new, old)

    return Lane(
        pid=s.pid,
        budget=s.budget,
        n_code=s.n_code,
        n_funcs=s.n_funcs,
        pc=upd(r.pc, s.pc),
        sp=upd(r.sp, s.sp),
        fp=upd(r.fp, s.fp),
        fn=upd(r.fn, s.fn),
        depth=upd(r.fdepth, s.depth),
        serial=upd(r.serial, s.serial),
        nparams=upd(r.nparams, s.nparams),
        nlocals=upd(r.nlocals, s.nlocals),
        maxstack=upd(r.maxstack, s.maxstack),
        steps=x.steps,
        status=jnp.where(f.run, x.new_status, s.status),
        n_out=upd(r.n_out, s.n_out),
        mem=mem,
    )


def _fetch(t: Tables, lay: Layout, s: Lane, flat: bool = False) -> _Fetched:
    """Decode the instruction at pc and read what the step needs: the top three operands,
    the addressed slot and the caller's frame record (one gather), then the callee's or
    caller's function-table row."""
    run = s.status == Code.RUNNING
    n_code = s.n_code
    ins = _get(t.code, (s.pid, s.pc, 0), (1, 1, 2))[0, 0]
    o, a = ins[0], ins[1]
    pc_ok = (s.pc >= 0) & (s.pc < n_code)
    valid = pc_ok & (o >= 0) & (o < _N_OPS)
    o = jnp.where(valid, o, _N_OPS)  # decodes as nothing
    row = jnp.asarray(_TAB)[o]
    kind, pops_t, pushes_t = row[0], row[1], row[2]
    timeout = s.steps >= s.budget

    base = s.fp + s.nlocals
    depth = s.sp - base  # operand-stack depth (>= 0 and <= maxstack, an invariant)
    # top three operands: logical slots sp-3, sp-2, sp-1 live at physical sp .. sp+2
    win_at = s.sp + (lay.stack0 - _GUARD)
    # the one slot an instruction addresses: a local (SLOT) or sp - d (PRINT's DEPTH)
    # (reads an instruction does not need point at the operand window or at the
    # instruction itself, memory this step reads anyway)
    is_slot = kind == ArgKind.SLOT
    is_slot2 = kind == ArgKind.SLOT2  # LOAD_VAR2: slots a & 0xFFFF and a >> 16
    slot_i = jnp.where(is_slot, s.fp + a, jnp.where(kind == ArgKind.DEPTH, s.sp - a, s.sp - 1))
    slot_i = jnp.where(is_slot2, s.fp + (a & 0xFFFF), slot_i)
    slot_at = lay.stack0 + slot_i
    # the caller's frame record (for RETURN_VALUE); LOAD_VAR2's second slot instead
    is_call = o == Op.CALL
    is_ret = o == Op.RETURN_VALUE
    rec_at = jnp.where(
        is_ret,
        lay.frame0 + 2 * (s.depth - 2),
        jnp.where(is_slot2, lay.stack0 + s.fp + (a >> 16), lay.stack0 + s.sp - 2),
    )
    # All three reads in ONE gather of six pairs: the operand window (3 pairs), the
    # addressed slot, the frame record.
    pairs = _read_mem(s.mem, ((win_at, 3), (slot_at, 1), (rec_at, 2)), flat)

    # one function-table row: the callee (CALL) or the caller (RETURN_VALUE)
    def fn_row(pairs, a, is_call, is_ret):
        return _fn_row(t, s.pid, jnp.where(is_ret, pairs[5, 0], a), is_call | is_ret, s.pc)

    # The fence: the step's memory reads happen before this optimization barrier and its
    # one write of mem after it (the scatter updates the barrier's output), so XLA can
    # prove every read of the old mem precedes the in-place write. Without it XLA copies
    # the whole per-lane mem every step: 3.7x slower on an H200 (docs/vm.md). Passing
    # every gathered value through the barrier too (a variant measured there) was within
    # 10% either way and is not kept.
    pairs, mem = lax.optimization_barrier((pairs, s.mem))
    f_row = fn_row(pairs, a, is_call, is_ret)
    f_entry, f_np, f_nl, f_ms = f_row
    is_slot = kind == ArgKind.SLOT
    is_call = o == Op.CALL
    is_ret = o == Op.RETURN_VALUE
    third, second, top = pairs[0, 0], pairs[1, 0], pairs[2, 0]
    slot = pairs[3]
    slot2 = pairs[4]
    ret_pc, ret_fp, ret_fn, ret_serial = pairs[4, 0], pairs[4, 1], pairs[5, 0], pairs[5, 1]

    return _Fetched(
        run,
        o,
        a,
        valid,
        kind,
        pops_t,
        pushes_t,
        timeout,
        depth,
        is_call,
        is_ret,
        f_entry,
        f_np,
        f_nl,
        f_ms,
        third,
        second,
        top,
        slot,
        slot2,
        ret_pc,
        ret_fp,
        ret_fn,
        ret_serial,
        mem,
        _place(slot_at, lay.size, 1),
    )


def _first_failing(enc: list):
    """The largest of the (priority, status) codes ``enc`` (a list of Int32 per lane),
    materialized (see ``_materialize``)."""
    return _materialize(jnp.max(jnp.stack(enc)))


def _check(
    limits: Limits,
    s: Lane,
    f: _Fetched,
    *,
    binary=_binary,
    unary=_unary,
    first=_first_failing,
) -> _Outcome:
    """Checks 3-5 (isa.py's order; 1 and 2 are ``_fetch``'s valid and timeout) and each
    opcode's results; the first failing check gives the new status.

    Elementwise in every field of ``s`` and ``f`` (``f.slot``/``f.slot2`` are read as
    ``[0]``/``[1]`` pairs), so the Pallas kernel calls it on vectors of lanes, passing
    its own ``binary``, ``unary`` and ``first`` (no value gathers, no n-way select)."""
    run, o, a, valid, kind, pops_t = f.run, f.o, f.a, f.valid, f.kind, f.pops_t
    pushes_t, timeout, depth, is_call = f.pushes_t, f.timeout, f.depth, f.is_call
    is_ret, f_entry, f_np, f_nl, f_ms = f.is_ret, f.f_entry, f.f_np, f.f_nl, f.f_ms
    third, second, top, slot = f.third, f.second, f.top, f.slot
    n_code, n_funcs = s.n_code, s.n_funcs
    # check 3: the argument
    arg_bad = (
        ((kind == ArgKind.SLOT) & ((a < 0) | (a >= s.nlocals)))
        | ((kind == ArgKind.TARGET) & ((a < 0) | (a >= n_code)))
        | ((kind == ArgKind.FUNC) & ((a < 0) | (a >= n_funcs)))
        | ((kind == ArgKind.DEPTH) & ((a < 1) | (a > depth)))
        | ((kind == ArgKind.COUNT) & ((a < 0) | (a > depth)))
        | (
            (kind == ArgKind.SLOT2)
            & (((a & 0xFFFF) >= s.nlocals) | (a < 0) | ((a >> 16) >= s.nlocals))
        )
    )
    # check 4: operand stack under/overflow (CALL pops its callee's nparams; a negative
    # nparams is check 5's malformed table, so its wrapped arithmetic here is irrelevant)
    pops = jnp.where(is_call, f_np, pops_t)
    stack_bad = (depth < pops) | (depth - pops + pushes_t > s.maxstack)

    # check 5 and the results: each opcode's own errors
    bval, bcode, bdetail = binary(o, second, top)
    uval, uovf = unary(o, top)
    is_bin = _BIN.member(o)
    is_un = _UN.member(o)
    unbound = (o == Op.LOAD_VAR) & (a >= s.nparams) & (slot[1] != s.serial)
    # LOAD_VAR2: its first slot is checked first; detail 1 when the second is unbound
    is_lv2 = o == Op.LOAD_VAR2
    unbound_lo = is_lv2 & ((a & 0xFFFF) >= s.nparams) & (slot[1] != s.serial)
    unbound_hi = is_lv2 & ((a >> 16) >= s.nparams) & (f.slot2[1] != s.serial)
    unbound = unbound | unbound_lo | unbound_hi
    # FOR_RANGE: [.., c, stop, step]
    rc, rstop, rstep = third, second, top
    r_more = ((rstep > 0) & (rc < rstop)) | ((rstep < 0) & (rc > rstop))
    r_next, r_ovf = _add_ovf(rc, rstep)
    r_next = jnp.where(r_ovf, rstop, r_next)
    is_for = o == Op.FOR_RANGE
    # CALL
    malformed = (f_np < 0) | (f_nl < f_np) | (f_ms < 0) | (f_entry < 0) | (f_entry >= n_code)
    new_fp = s.sp - f_np
    room = limits.max_stack - new_fp  # >= 0 whenever the checks above passed
    too_deep = (s.depth >= limits.max_depth) | (f_nl > room) | (f_ms > room - f_nl)
    is_print = (o == Op.PRINT_INT) | (o == Op.PRINT_BOOL) | (o == Op.PRINT_NEWLINE)
    out_full = s.n_out >= limits.max_output
    bottom = s.depth <= 1

    e5 = jnp.where(is_bin, bcode, as_i32(Code.RUNNING))
    e5 = jnp.where(is_un & uovf, Code.OVERFLOW, e5)
    e5 = jnp.where(unbound, Code.UNBOUND_LOCAL, e5)
    e5 = jnp.where(is_for & (rstep == 0), Code.VALUE, e5)
    e5 = jnp.where(is_call & too_deep, Code.RECURSION, e5)
    e5 = jnp.where(is_call & malformed, Code.INVALID_BYTECODE, e5)
    e5 = jnp.where(is_print & out_full, Code.OUTPUT_LIMIT, e5)
    e5 = jnp.where((o == Op.ASSERT) & (top == 0), Code.ASSERTION, e5)
    e5 = jnp.where(is_ret & bottom, Code.OK, e5)
    d5 = jnp.where(is_for, as_i32(Value.RANGE_STEP_ZERO), bdetail)
    d5 = jnp.where(unbound, (unbound_hi & ~unbound_lo).astype(jnp.int32), d5)

    # The first failing check wins. Encoded as a max over (priority, code) pairs: the
    # reduction makes XLA materialize the status once per lane instead of re-deriving it
    # (with all the arithmetic behind it) inside every register update that reads it.
    checks = [
        (~valid, Code.INVALID_BYTECODE),
        (timeout, Code.TIMEOUT),
        (arg_bad | stack_bad, Code.INVALID_BYTECODE),
    ]
    n_chk = len(checks) + 1
    enc = [
        jnp.where(c, as_i32(((n_chk - k) << _STATUS_BITS) + code), 0)
        for k, (c, code) in enumerate(checks)
    ]
    enc.append(jnp.where(e5 != Code.RUNNING, (1 << _STATUS_BITS) + e5, 0))
    enc = first(enc)
    new_status = jnp.where(enc == 0, as_i32(Code.RUNNING), enc & ((1 << _STATUS_BITS) - 1))
    go = run & (new_status == Code.RUNNING)  # the instruction completes, the lane goes on
    started = run & valid & ~timeout
    steps = jnp.where(started, s.steps + 1, s.steps)

    return _Outcome(
        pops,
        bval,
        bcode,
        uval,
        is_bin,
        is_un,
        is_for,
        rc,
        r_more,
        r_next,
        new_fp,
        is_print,
        d5,
        new_status,
        go,
        steps,
    )


def _registers(s: Lane, f: _Fetched, x: _Outcome) -> _Registers:
    """pc, sp, the frame registers and the output count after the step."""
    o, a, pops_t, pushes_t, is_call = f.o, f.a, f.pops_t, f.pushes_t, f.is_call
    is_ret, f_entry, f_np, f_nl, f_ms, top = f.is_ret, f.f_entry, f.f_np, f.f_nl, f.f_ms, f.top
    second = f.second
    ret_pc, ret_fp, ret_fn, ret_serial = f.ret_pc, f.ret_fp, f.ret_fn, f.ret_serial
    is_for, r_more, new_fp, is_print, steps = x.is_for, x.r_more, x.new_fp, x.is_print, x.steps
    # --- control flow
    nxt = s.pc + 1
    taken = (
        (o == Op.JUMP)
        | ((o == Op.JUMP_IF_FALSE) & (top == 0))
        | ((o == Op.JUMP_IF_TRUE) & (top != 0))
        | ((o == Op.JUMP_IF_FALSE_OR_POP) & (top == 0))
        | ((o == Op.JUMP_IF_TRUE_OR_POP) & (top != 0))
        | (is_for & ~r_more)
        # compare-and-branch: pop b (top), pop a (second); jump if a OP b
        | ((o == Op.JUMP_IF_LT) & (second < top))
        | ((o == Op.JUMP_IF_LE) & (second <= top))
        | ((o == Op.JUMP_IF_GT) & (second > top))
        | ((o == Op.JUMP_IF_GE) & (second >= top))
        | ((o == Op.JUMP_IF_EQ) & (second == top))
        | ((o == Op.JUMP_IF_NE) & (second != top))
    )
    pc = jnp.where(taken, a, nxt)
    pc = jnp.where(is_call, f_entry, pc)
    pc = jnp.where(is_ret, ret_pc, pc)
    # --- stack pointer
    sp = s.sp - pops_t + pushes_t
    sp = jnp.where(o == Op.POP_N, s.sp - a, sp)
    keep = ((o == Op.JUMP_IF_FALSE_OR_POP) | (o == Op.JUMP_IF_TRUE_OR_POP)) & taken
    sp = jnp.where(keep, s.sp, sp)
    sp = jnp.where(is_for & ~r_more, s.sp - 3, sp)
    sp = jnp.where(is_call, new_fp + f_nl, sp)
    sp = jnp.where(is_ret, s.fp + 1, sp)
    # --- frame registers
    fp = jnp.where(is_call, new_fp, jnp.where(is_ret, ret_fp, s.fp))
    fn = jnp.where(is_call, a, jnp.where(is_ret, ret_fn, s.fn))
    fdepth = jnp.where(is_call, s.depth + 1, jnp.where(is_ret, s.depth - 1, s.depth))
    serial = jnp.where(is_call, steps, jnp.where(is_ret, ret_serial, s.serial))
    new_frame = is_call | is_ret
    nparams = jnp.where(new_frame, f_np, s.nparams)
    nlocals = jnp.where(new_frame, f_nl, s.nlocals)
    maxstack = jnp.where(new_frame, f_ms, s.maxstack)
    n_out = jnp.where(is_print, s.n_out + 1, s.n_out)

    return _Registers(nxt, pc, sp, fp, fn, fdepth, serial, nparams, nlocals, maxstack, n_out)


def _write(lay: Layout, s: Lane, f: _Fetched, x: _Outcome, r: _Registers, flat: bool = False):
    """The (at most two) pairs the step writes to memory: a value-stack slot, a frame
    record, an output item; the stopping step writes the lane's result instead.

    ``flat`` (one lane, not under vmap; ``f.mem`` is Int32[1, M, 2], the lane axis kept so
    that XLA:CPU sees the update's operand as the loop's buffer itself, not a reshape of
    it, else it copies the whole memory every step): two dynamic-update-slices of one
    pair each, which XLA does in place and, unlike the scatter, never splits into
    parallel tasks over the whole memory (on the CPU a large memory made the scatter and
    the gather two thread-pool round trips per step; docs/vm.md). A pair not written is
    replaced by one that changes nothing: pair 1 by the addressed slot as read
    (``f.slot`` at ``f.slot_row``), pair 2 by pair 1 as written (i1 != i2 when both are
    written, so pair 2 never overwrites a written pair 1)."""
    w1, i1, v1a, v1b, w2, i2, v2a, v2b = _write_pairs(lay, s, f, x, r)
    if flat:
        j1 = jnp.where(w1, i1, f.slot_row)
        p1 = jnp.stack([jnp.where(w1, v1a, f.slot[0]), jnp.where(w1, v1b, f.slot[1])])
        j2 = jnp.where(w2, i2, j1)
        p2 = jnp.where(w2, jnp.stack([v2a, v2b]), p1)
        zero = as_i32(0)
        mem = lax.dynamic_update_slice(f.mem, p1[None, None], (zero, j1, zero))
        return lax.dynamic_update_slice(mem, p2[None, None], (zero, j2, zero))
    idx = jnp.stack([jnp.where(w1, i1, lay.drop), jnp.where(w2, i2, lay.drop + 1)])
    vals = jnp.stack([jnp.stack([v1a, v1b]), jnp.stack([v2a, v2b])])
    return f.mem.at[idx].set(vals, mode="drop", unique_indices=True)


def _write_pairs(lay: Layout, s: Lane, f: _Fetched, x: _Outcome, r: _Registers):
    """``_write``'s two pairs, elementwise: (w1, i1, v1a, v1b, w2, i2, v2a, v2b). Pair k,
    (vka, vkb), goes to mem[ik] iff wk; wk implies 0 <= ik < M, and i1 != i2 when both."""
    run, o, a, is_call, is_ret = f.run, f.o, f.a, f.is_call, f.is_ret
    top, slot = f.top, f.slot
    bval, uval, is_bin, is_un, is_for, rc = x.bval, x.uval, x.is_bin, x.is_un, x.is_for, x.rc
    r_more, r_next, is_print, d5 = x.r_more, x.r_next, x.is_print, x.d5
    new_status, go = x.new_status, x.go
    nxt, pc, sp, fp, fn, fdepth, serial, nparams, nlocals, maxstack, n_out = r
    # --- the (at most two) pairs written: index into mem and the pair
    ser = s.serial
    is_lv2 = o == Op.LOAD_VAR2
    is_push_val = (o == Op.LOAD_CONST) | (o == Op.LOAD_VAR) | (o == Op.DUP_TOP) | is_lv2
    is_slot_v = (o == Op.LOAD_VAR) | is_lv2
    push_v = jnp.where(o == Op.LOAD_CONST, a, jnp.where(is_slot_v, slot[0], top))
    i1 = as_i32(-1)
    v1a, v1b = as_i32(0), ser
    i1 = jnp.where(is_push_val, lay.stack0 + s.sp, i1)
    v1a = jnp.where(is_push_val, push_v, v1a)
    i1 = jnp.where(o == Op.STORE_VAR, lay.stack0 + s.fp + a, i1)
    v1a = jnp.where(o == Op.STORE_VAR, top, v1a)
    i1 = jnp.where(is_bin, lay.stack0 + s.sp - 2, i1)
    v1a = jnp.where(is_bin, bval, v1a)
    i1 = jnp.where(is_un, lay.stack0 + s.sp - 1, i1)
    v1a = jnp.where(is_un, uval, v1a)
    i1 = jnp.where(is_for & r_more, lay.stack0 + s.sp - 3, i1)
    v1a = jnp.where(is_for, r_next, v1a)
    i1 = jnp.where(is_ret, lay.stack0 + s.fp, i1)  # the value, pushed in the caller
    v1a = jnp.where(is_ret, top, v1a)
    out_kind = jnp.where(
        o == Op.PRINT_INT,
        isa.OUT_INT,
        jnp.where(o == Op.PRINT_BOOL, isa.OUT_BOOL, isa.OUT_NEWLINE),
    )
    i1 = jnp.where(is_print, lay.out0 + s.n_out, i1)
    v1a = jnp.where(is_print, as_i32(out_kind), v1a)
    v1b = jnp.where(is_print, jnp.where(o == Op.PRINT_NEWLINE, 0, slot[0]), v1b)
    rec_i = lay.frame0 + 2 * (s.depth - 1)  # the caller's record, for CALL
    i1 = jnp.where(is_call, rec_i, i1)
    v1a = jnp.where(is_call, nxt, v1a)
    v1b = jnp.where(is_call, s.fp, v1b)
    # second pair: FOR_RANGE's pushed value, CALL's (fn, serial)
    i2 = jnp.where(is_for & r_more, lay.stack0 + s.sp, jnp.where(is_call, rec_i + 1, -1))
    v2a = jnp.where(is_call, s.fn, rc)
    v2b = jnp.where(is_call, s.serial, ser)
    # LOAD_VAR2's second push (its first is the first pair's)
    i2 = jnp.where(is_lv2, lay.stack0 + s.sp + 1, i2)
    v2a = jnp.where(is_lv2, f.slot2[0], v2a)

    # the step that stops a lane writes its result (OK) or detail (VALUE; UNBOUND_LOCAL:
    # which slot of LOAD_VAR2) instead
    stops = run & ~go
    i1 = jnp.where(stops, lay.res, i1)
    has_detail = (new_status == Code.VALUE) | (new_status == Code.UNBOUND_LOCAL)
    v1a = jnp.where(
        stops,
        jnp.where(new_status == Code.OK, top, jnp.where(has_detail, d5, 0)),
        v1a,
    )
    v1b = jnp.where(stops, 0, v1b)
    # writes happen only for a completed (or stopping) step, only in bounds (else dropped)
    w1 = (go | stops) & (i1 >= 0) & (i1 < lay.size)
    w2 = go & (i2 >= 0) & (i2 < lay.size)
    return w1, i1, v1a, v1b, w2, i2, v2a, v2b


# ----------------------------------------------------------------------------------------
# start and finish


def _init(t: Tables, lay: Layout, limits: Limits, pid, entry, args, budget) -> Lane:
    """The entry frame of one lane, or a lane already stopped by a bad start.

    The entry function gets a CALL target's checks (steps stays 0; pc is the entry's
    first instruction when the entry id is valid, else 0): entry outside [0, n_funcs) or
    a malformed table entry -> InvalidBytecode; a frame that does not fit in the value
    stack -> RecursionError. Parameter slot i gets args[i], 0 beyond the given args.
    """
    n_funcs = t.n_funcs[pid]
    entry_bad = (entry < 0) | (entry >= n_funcs)
    f_entry, f_np, f_nl, f_ms = _fn_row(t, pid, entry)
    malformed = (f_np < 0) | (f_nl < f_np) | (f_ms < 0) | (f_entry < 0) | (f_entry >= t.n_code[pid])
    too_big = (f_nl > limits.max_stack) | (f_ms > limits.max_stack - f_nl)
    status = jnp.where(
        entry_bad | malformed,
        Code.INVALID_BYTECODE,
        jnp.where(too_big | (limits.max_depth < 1), Code.RECURSION, Code.RUNNING),
    )
    pc = jnp.where(entry_bad, 0, f_entry)
    mem = jnp.zeros((lay.size, 2), jnp.int32)
    mem = mem.at[lay.stack0 : lay.stack0 + limits.max_stack, 1].set(-1)  # nothing bound
    n = min(args.shape[0], limits.max_stack)
    if n:  # slots beyond nparams are unbound locals or operands: their values are unread
        mem = mem.at[lay.stack0 : lay.stack0 + n, 0].set(args[:n])
    zero = as_i32(0)
    return Lane(
        pid=pid,
        budget=jnp.clip(budget, 0, limits.max_steps),
        n_code=t.n_code[pid],
        n_funcs=n_funcs,
        pc=as_i32(pc),
        sp=f_nl,
        fp=zero,
        fn=entry,
        depth=as_i32(1),
        serial=zero,
        nparams=f_np,
        nlocals=f_nl,
        maxstack=f_ms,
        steps=zero,
        status=as_i32(status),
        n_out=zero,
        mem=mem,
    )


def _finish(t: Tables, lay: Layout, limits: Limits, s: Lane) -> isa.RunResult:
    pc_ok = (s.pc >= 0) & (s.pc < s.n_code)
    line = jnp.where(pc_ok, _get(t.line, (s.pid, s.pc), (1, 1))[0, 0], 0)
    out = s.mem[lay.out0 : lay.out0 + limits.max_output]
    return isa.RunResult(
        status=s.status,
        detail=jnp.where(
            (s.status == Code.VALUE) | (s.status == Code.UNBOUND_LOCAL), s.mem[lay.res, 0], 0
        ),
        pc=s.pc,
        line=line,
        fn=s.fn,
        result=jnp.where(s.status == Code.OK, s.mem[lay.res, 0], 0),
        out_kind=out[:, 0],
        out_val=out[:, 1],
        n_out=s.n_out,
        steps=s.steps,
    )


def _stepper(t: Tables, lay: Layout, limits: Limits, n: int) -> Callable[[Packed], Packed]:
    """One step of every lane of a Packed of ``n`` lanes: ``_step`` under vmap, or, for
    one lane, ``_step`` of that lane on its own (``flat``: no gather or scatter over the
    lane's memory, which keeps its lane axis of 1; the same results)."""
    if n == 1:

        def step(p: Packed) -> Packed:
            one = jax.tree.map(lambda x: x[0], p._replace(mem=None))._replace(mem=p.mem)
            q = _pack(_step(t, lay, limits, _unpack(one), flat=True))
            return jax.tree.map(lambda x: x[None], q._replace(mem=None))._replace(mem=q.mem)

        return step
    return jax.vmap(lambda p: _pack(_step(t, lay, limits, _unpack(p))))


def _serial(t: Tables, lay: Layout, limits: Limits, lanes: Packed, chunks, inner_steps: int,
            unroll: int) -> Packed:  # fmt: skip
    """Backend "serial": the lanes one after another (a loop over the lane axis), each
    stepped on its own (``_stepper``'s one-lane step) in loops of ``inner_steps`` steps
    until it stops or ``chunks`` such loops have run. A lane's steps never depend on
    another lane's, so this ends in the state lockstep stepping ends in; but every step
    is one lane's, not the slowest lane's, with no gather or scatter over the lanes: on
    the CPU the loops then compile to plain code (XLA:CPU's while-loop hoisting, which
    a scatter in the loop prevents; docs/vm.md "Backends"), several times faster there."""
    step = _stepper(t, lay, limits, 1)

    def lane(b, every: Packed) -> Packed:
        one = jax.tree.map(lambda x: lax.dynamic_slice_in_dim(x, b, 1, 0), every)

        def cond(c):
            i, s = c
            return (i < chunks) & (s.regs[0, _STATUS] == Code.RUNNING)

        def body(c):
            i, s = c
            return i + 1, lax.fori_loop(0, inner_steps, lambda _, x: step(x), s, unroll=unroll)

        one = lax.while_loop(cond, body, (as_i32(0), one))[1]
        return jax.tree.map(lambda a, x: lax.dynamic_update_slice_in_dim(a, x, b, 0), every, one)

    return lax.fori_loop(0, lanes.regs.shape[0], lane, lanes)


def _put(full: Packed, idx, part: Packed) -> Packed:
    """full[idx] = part, lane-wise (idx: distinct lane indices)."""
    return jax.tree.map(lambda f, p: f.at[idx].set(p, unique_indices=True), full, part)


def _take(lanes: Packed, idx) -> Packed:
    return jax.tree.map(lambda x: x[idx], lanes)


BACKENDS = ("xla", "pallas", "serial")


def cpu_loops_hoisted() -> bool:
    """Whether XLA_FLAGS asks XLA:CPU to compile small while loops as one function
    (``xla_cpu_small_while_loop_byte_threshold``, as `jaxcc run` sets it before the
    backend starts: ``cli.hoist_cpu_while_loops``). The "serial" backend is fast only
    then: each lane's loop becomes plain code (~5e6 steps/s on a 2-core Xeon); without
    it every 16 steps are a round of XLA:CPU's thread pool, and serial is 2-3x slower
    than lockstep (docs/vm.md "Backends"). The backend reads XLA_FLAGS once, when it
    starts; this reads the variable as it is now."""
    flags = os.environ.get("XLA_FLAGS", "")
    m = re.search(r"xla_cpu_small_while_loop_byte_threshold=(\d+)", flags)
    return m is not None and int(m.group(1)) > 0


def _run_lanes(
    t: Tables,
    pid,
    entry,
    args,
    budget,
    limits: Limits,
    inner_steps: int,
    unroll,
    shrink: int = 0,
    backend: str = "xla",
    shrink_by: int = 2,
):
    """Run lanes (lane l runs program pid[l]) to completion.

    backend "pallas": the loop is one Pallas kernel (jaxcc/vm_pallas.py; same results,
    ``shrink`` unused: its blocks of lanes stop on their own).

    Equivalent plain Python (shrink = 0):

        lanes = [init(l) for l in range(L)]
        while any(lane.status == RUNNING for lane in lanes):
            for _ in range(inner_steps):          # fixed count: no host sync inside
                lanes = [step(lane) for lane in lanes]   # stopped lanes do nothing
        return [finish(lane) for lane in lanes]

    With shrink = k > 0, the lockstep array shrinks up to k times by ``shrink_by`` (2:
    halves): once at most size // shrink_by of the current lanes are running, the
    running ones are gathered into an array of that size (stopped lanes are final and
    are written back), so a few long-running lanes do not keep paying for the whole
    batch. Results are identical; each level is one more compiled loop body.
    """
    if backend == "pallas":
        from jaxcc import vm_pallas  # it imports this module

        return vm_pallas.run_lanes(t, pid, entry, args, budget, limits, inner_steps, unroll)
    if backend not in ("xla", "serial"):
        raise ValueError(f"backend must be one of {BACKENDS}: {backend!r}")
    lay = layout(limits)
    full = jax.vmap(lambda *a: _pack(_init(t, lay, limits, *a)))(pid, entry, args, budget)
    if backend == "serial":
        full = _serial(t, lay, limits, full, INT_MAX, inner_steps, unroll)
    else:
        full = _lockstep(t, lay, limits, full, inner_steps, unroll, shrink, shrink_by)
    return jax.vmap(lambda p: _finish(t, lay, limits, _unpack(p)))(full)


def _lockstep(t: Tables, lay: Layout, limits: Limits, full: Packed, inner_steps: int, unroll,
              shrink: int, shrink_by: int) -> Packed:  # fmt: skip
    """``_run_lanes``' lockstep loop (backend "xla"): every lane of ``full`` stepped until
    it stops, the array shrinking as ``_run_lanes`` describes."""

    def body(s):
        step = _stepper(t, lay, limits, s.regs.shape[0])
        return lax.fori_loop(0, inner_steps, lambda _, x: step(x), s, unroll=unroll)

    if shrink_by < 2:
        raise ValueError(f"shrink_by must be at least 2: {shrink_by}")
    n = full.regs.shape[0]
    sizes = [n]  # the lockstep array's size at each level
    while len(sizes) <= shrink and sizes[-1] // shrink_by >= 1:
        sizes.append(sizes[-1] // shrink_by)
    levels = len(sizes) - 1
    cur, orig = full, jnp.arange(n, dtype=jnp.int32)
    for k, size in enumerate(sizes):
        if k > 0:  # compact: running lanes first (stable), keep `size` of them
            # level 0's array is every lane in order: it IS the full state (a put would
            # hold a second copy of it while the scatter runs)
            full = cur if k == 1 else _put(full, orig, cur)
            order = jnp.argsort(cur.regs[:, _STATUS] != Code.RUNNING, stable=True)[:size]
            cur = _take(cur, order)
            orig = orig[order]
        # at every level but the last, stop once the next level's size holds the running
        keep = sizes[k + 1] if k < levels else 0
        cur = lax.while_loop(
            lambda s, keep=keep: jnp.sum(s.regs[:, _STATUS] == Code.RUNNING) > keep, body, cur
        )
    return _put(full, orig, cur) if levels else cur


@functools.partial(
    jax.jit,
    static_argnames=("limits", "inner_steps", "unroll", "shrink", "backend", "shrink_by"),
)
def run_batch(
    program: isa.Program,
    entry,
    args,
    budget,
    limits: Limits = DEFAULT,
    inner_steps: int = 16,
    unroll: int = 1,
    shrink: int = 0,
    backend: str = "xla",
    shrink_by: int = 2,
) -> isa.RunResult:
    """The jitted core of ``run`` on a batched program with every input given as arrays:
    entry Int32[B], args Int32[B, A], budget Int32[B]."""
    t = _tables(program)
    b = t.code.shape[0]
    pid = jnp.arange(b, dtype=jnp.int32)
    return _run_lanes(
        t,
        pid,
        as_i32(entry),
        as_i32(args),
        as_i32(budget),
        limits,
        inner_steps,
        unroll,
        shrink,
        backend,
        shrink_by,
    )


def _batch_inputs(program: isa.Program, limits: Limits, entry, args, budget):
    """run's arguments as run_batch takes them: (program, entry Int32[B], args Int32[B, A],
    budget Int32[B], unbatched)."""
    unbatched = np.ndim(program.op) == 1
    if unbatched:
        program = jax.tree.map(lambda x: jnp.asarray(x)[None], program)
        entry = None if entry is None else jnp.reshape(as_i32(entry), (1,))
        args = None if args is None else as_i32(args)[None]
        budget = None if budget is None else jnp.reshape(as_i32(budget), (1,))
    b = np.shape(program.op)[0]
    entry = jnp.broadcast_to(as_i32(0 if entry is None else entry), (b,))
    args = jnp.zeros((b, 0), jnp.int32) if args is None else as_i32(args)
    if args.ndim == 1:  # the same arguments for every lane
        args = jnp.broadcast_to(args, (b, args.shape[0]))
    budget = jnp.broadcast_to(as_i32(limits.max_steps if budget is None else budget), (b,))
    return program, entry, args, budget, unbatched


def run(
    program: isa.Program,
    limits: Limits = DEFAULT,
    entry=None,
    args=None,
    budget=None,
    *,
    inner_steps: int = 16,
    unroll: int = 1,
    shrink: int = 0,
    backend: str = "xla",
    shrink_by: int = 2,
) -> isa.RunResult:
    """Run a batch of programs (leading axis B), or one unbatched program.

    entry: Int32[B] (or a scalar for all lanes) function id each lane starts in (default
        0, the module body).
    args: Int32[B, A] (or Int32[A] for all lanes) arguments of the entry function
        (default none: A = 0); parameter i gets args[:, i], 0 for i >= A (as the
        reference interpreter does).
    budget: Int32[B] (or a scalar) per-lane step budget, clipped to [0, limits.max_steps] (default
        limits.max_steps); a lane that would start instruction budget + 1 stops with
        TimeoutError.
    limits: static; max_stack, max_depth, max_output and max_steps are used.
    inner_steps: steps per outer-loop iteration (the host sees "any lane running" once
        per inner_steps steps); unroll: unroll factor of that inner loop.
    shrink: how many times the lockstep array may shrink as lanes stop (0: never), each
        time by ``shrink_by`` (2: it halves); see _run_lanes. None of these knobs changes
        any result.
    backend: "xla" (default; the reference: every lane in lockstep), "serial" (the same
        XLA step, one lane after another, each until it stops: the CPU's fastest when
        ``cpu_loops_hoisted()``, several times slower than lockstep when not; never on a
        GPU) or "pallas" (the step loop as one Pallas kernel, jaxcc/vm_pallas.py; on a
        machine without a GPU it runs in Pallas' interpret mode, which is slow). The same
        results on every backend; ``shrink`` applies to "xla" only.
    """
    program, entry, args, budget, unbatched = _batch_inputs(program, limits, entry, args, budget)
    res = run_batch(
        program, entry, args, budget, limits, inner_steps, unroll, shrink, backend, shrink_by
    )
    if unbatched:
        res = jax.tree.map(lambda x: x[0], res)
    return res


@functools.partial(
    jax.jit,
    static_argnames=("limits", "inner_steps", "unroll", "shrink", "backend", "shrink_by",
                     "with_result"),
)  # fmt: skip
def run_tests(
    program: isa.Program,
    entry,
    args,
    expected,
    limits: Limits = DEFAULT,
    budget=None,
    inner_steps: int = 16,
    unroll: int = 1,
    shrink: int = 0,
    backend: str = "xla",
    shrink_by: int = 2,
    *,
    with_result: bool = False,
):
    """Run every (program, test case) pair as its own lane and check the return values.

    program: batched (B programs); entry: Int32[B] (the function under test);
    args: Int32[B, K, A] (K cases of A arguments each); expected: Int32[B, K];
    budget: Int32[B, K] per-case step budgets (default limits.max_steps).
    Returns (passed: Bool[B], per_case: Int32[B, K]): per_case is the lane's status
    (errors.Code; Code.OK when it returned the expected value) or WRONG_RESULT (-1) when
    it returned normally with another value; passed[b] = all cases of b are Code.OK.
    with_result (static): return (passed, per_case, res) instead, res the isa.RunResult
    of the B * K lanes (lane b * K + k is case k of program b; e.g. ``res.steps``, the
    VM steps of each case, for a cost term).
    backend, shrink, shrink_by: as in ``run``.
    """
    t = _tables(program)
    b, k = args.shape[0], args.shape[1]
    pid, entry_l, args_l, budget_l = _test_lanes(entry, args, budget, limits)
    res = _run_lanes(
        t, pid, entry_l, args_l, budget_l, limits, inner_steps, unroll, shrink, backend,
        shrink_by,
    )  # fmt: skip
    passed, per_case = case_verdicts(res, expected, b, k)
    return (passed, per_case, res) if with_result else (passed, per_case)


def _test_lanes(entry, args, budget, limits: Limits):
    """run_tests' B * K lanes: lane b * K + k runs case k of program b. Returns the
    per-lane (program id, entry, arguments, step budget)."""
    b, k = args.shape[0], args.shape[1]
    n = b * k
    pid = jnp.arange(n, dtype=jnp.int32) // k
    entry_l = jnp.repeat(jnp.broadcast_to(as_i32(entry), (b,)), k)
    args_l = jnp.reshape(as_i32(args), (n, args.shape[2]))
    if budget is None:
        budget_l = jnp.full((n,), limits.max_steps, jnp.int32)
    else:
        budget_l = jnp.reshape(jnp.broadcast_to(as_i32(budget), (b, k)), (n,))
    return pid, entry_l, args_l, budget_l


def case_verdicts(res: isa.RunResult, expected, b: int, k: int):
    """run_tests' (passed Bool[B], per_case Int32[B, K]) from the RunResult of its B * K
    lanes (lane b * K + k is case k of program b) and expected Int32[B, K]."""
    status = jnp.reshape(res.status, (b, k))
    got = jnp.reshape(res.result, (b, k))
    ok = status == Code.OK
    per_case = jnp.where(ok & (got != as_i32(expected)), WRONG_RESULT, status)
    per_case = as_i32(per_case)
    return jnp.all(per_case == Code.OK, axis=1), per_case


# ----------------------------------------------------------------------------------------
# resumable runs: the state between slices (the host driver, jaxcc.driver, repeats these)


class State(NamedTuple):
    """A batch of lanes that can be resumed: the programs' tables (shared, never changed)
    and every lane's packed state. Lane l runs program ``lanes.pid[l]``, so the lanes can
    be any subset or reordering of a batch (the driver's compaction gathers them)."""

    tables: Tables
    lanes: Packed  # Packed with a leading lane axis L


def _start_lanes(t: Tables, limits: Limits, pid, entry, args, budget) -> Packed:
    lay = layout(limits)
    return jax.vmap(lambda *a: _pack(_init(t, lay, limits, *a)))(pid, entry, args, budget)


@functools.partial(jax.jit, static_argnames=("limits",))
def _start(program: isa.Program, entry, args, budget, limits: Limits) -> State:
    t = _tables(program)
    pid = jnp.arange(t.code.shape[0], dtype=jnp.int32)
    return State(t, _start_lanes(t, limits, pid, as_i32(entry), as_i32(args), as_i32(budget)))


def start(
    program: isa.Program, limits: Limits = DEFAULT, entry=None, args=None, budget=None
) -> State:
    """The state of ``run(program, limits, entry, args, budget)`` before its first step
    (same arguments and defaults; an unbatched program gives a state of one lane)."""
    program, entry, args, budget, _ = _batch_inputs(program, limits, entry, args, budget)
    return _start(program, entry, args, budget, limits)


@functools.partial(jax.jit, static_argnames=("limits",))
def start_tests(program: isa.Program, entry, args, limits: Limits = DEFAULT, budget=None) -> State:
    """The state of ``run_tests(program, entry, args, expected, limits, budget)`` before
    its first step: B * K lanes, lane b * K + k runs case k of program b."""
    t = _tables(program)
    pid, entry_l, args_l, budget_l = _test_lanes(entry, args, budget, limits)
    return State(t, _start_lanes(t, limits, pid, entry_l, args_l, budget_l))


@functools.partial(
    jax.jit,
    static_argnames=("limits", "inner_steps", "unroll", "serial"),
    donate_argnames=("lanes",),
)
def _advance(t: Tables, lanes: Packed, chunks, limits: Limits, inner_steps: int, unroll: int,
             serial: bool = False):  # fmt: skip
    lay = layout(limits)
    if serial:
        return _serial(t, lay, limits, lanes, chunks, inner_steps, unroll)
    vstep = _stepper(t, lay, limits, lanes.regs.shape[0])

    def cond(c):
        i, s = c
        return (i < chunks) & jnp.any(s.regs[:, _STATUS] == Code.RUNNING)

    def body(c):
        i, s = c
        return i + 1, lax.fori_loop(0, inner_steps, lambda _, x: vstep(x), s, unroll=unroll)

    return lax.while_loop(cond, body, (as_i32(0), lanes))[1]


def advance(
    state: State,
    limits: Limits = DEFAULT,
    steps: int | None = None,
    *,
    inner_steps: int = 16,
    unroll: int = 1,
    backend: str = "xla",
) -> State:
    """Every running lane of ``state`` makes at most ``steps`` more steps (None: until
    every lane has stopped, i.e. the rest of ``run`` in one call).

    Inside, a fixed-count loop of ``inner_steps`` steps (gcd(steps, inner_steps) when
    steps is not a multiple) repeats ``steps / inner_steps`` times or until no lane is
    running (checked between those loops, as in ``run``). ``steps`` is a traced value, so
    changing it does not recompile. Stopped lanes never change, so any sequence of
    advances ends in exactly the state one ``run`` ends in. The lanes of ``state`` are
    donated: use the returned state, not the one passed in. ``backend``: as in ``run``
    ("pallas": one kernel launch per call, ``vm_pallas.advance``).
    """
    if backend == "pallas":
        from jaxcc import vm_pallas  # it imports this module

        return vm_pallas.advance(state, limits, steps, inner_steps=inner_steps, unroll=unroll)
    if backend not in ("xla", "serial"):
        raise ValueError(f"backend must be one of {BACKENDS}: {backend!r}")
    inner_steps, chunks = slice_chunks(steps, inner_steps)
    lanes = _advance(state.tables, state.lanes, chunks, limits, inner_steps, unroll,
                     backend == "serial")  # fmt: skip
    return State(state.tables, lanes)


def slice_chunks(steps: int | None, inner_steps: int) -> tuple[int, np.int32]:
    """How ``advance`` splits ``steps`` (None: no limit) into loops of a fixed count:
    (the inner loop's steps, gcd(steps, inner_steps); the number of loops, Int32)."""
    if steps is None:
        return inner_steps, np.int32(INT_MAX)
    if steps < 0:
        raise ValueError(f"steps must be >= 0: {steps}")
    inner_steps = math.gcd(steps, inner_steps)
    return inner_steps, np.int32(steps // inner_steps)


@functools.partial(jax.jit, static_argnames=("limits",))
def finish(state: State, limits: Limits = DEFAULT) -> isa.RunResult:
    """The RunResult of every lane of ``state`` (status RUNNING for lanes still running)."""
    lay = layout(limits)
    return jax.vmap(lambda p: _finish(state.tables, lay, limits, _unpack(p)))(state.lanes)


def status(state: State):
    """Int32[L]: every lane's status (Code.RUNNING while it runs)."""
    return state.lanes.regs[:, _STATUS]


@functools.partial(jax.jit, donate_argnames=("lanes",))
def _expire(lanes: Packed) -> Packed:
    regs = lanes.regs
    st = regs[:, _STATUS]
    regs = regs.at[:, _STATUS].set(jnp.where(st == Code.RUNNING, as_i32(Code.TIMEOUT), st))
    return lanes._replace(regs=regs)


def expire(state: State) -> State:
    """Every lane still running stops with TimeoutError where it is (a wall-clock limit:
    its ``steps`` stays below its budget). Donates ``state``'s lanes."""
    return State(state.tables, _expire(state.lanes))


class Trace(NamedTuple):
    """Per-step registers of one lane, BEFORE each step (off-by-default debugging aid)."""

    pc: object  # Int32[Array, "N"]
    op: object  # Int32[Array, "N"]  op[pc] (-1 when pc is outside the code)
    arg: object  # Int32[Array, "N"]
    sp: object  # Int32[Array, "N"]
    fp: object  # Int32[Array, "N"]
    fn: object  # Int32[Array, "N"]
    depth: object  # Int32[Array, "N"]
    top: object  # Int32[Array, "N"]  the value in slot sp - 1 (garbage when sp == fp + nlocals)
    status: object  # Int32[Array, "N"]  status before the step (RUNNING while running)


@functools.partial(jax.jit, static_argnames=("limits", "n_steps"))
def trace(program: isa.Program, limits: Limits = DEFAULT, entry=0, args=None, n_steps: int = 64):
    """Run ONE unbatched program for n_steps steps, recording the registers before each
    step (clox's DEBUG_TRACE_EXECUTION). Returns (Trace, RunResult after n_steps steps:
    status RUNNING if it has not stopped yet).

    Equivalent plain Python:

        lane = init(program, entry, args)
        rows = []
        for _ in range(n_steps):
            rows.append(registers(lane))
            lane = step(lane)
        return rows, finish(lane)
    """
    t = _tables(jax.tree.map(lambda x: jnp.asarray(x)[None], program))
    lay = layout(limits)
    args = jnp.zeros((0,), jnp.int32) if args is None else as_i32(args)
    lane = _init(t, lay, limits, as_i32(0), as_i32(entry), args, as_i32(limits.max_steps))

    def registers(s):
        ins = _get(t.code, (0, s.pc, 0), (1, 1, 2))[0, 0]
        inside = (s.pc >= 0) & (s.pc < t.n_code[0])
        top = _get(s.mem, (lay.stack0 + s.sp - 1, 0), (1, 2))[0, 0]
        return Trace(s.pc, jnp.where(inside, ins[0], -1), jnp.where(inside, ins[1], 0),
                     s.sp, s.fp, s.fn, s.depth, top, s.status)  # fmt: skip

    # Steps stop with the lane: a stopped lane's step changes nothing, so every row after
    # the stop is the stopped registers (filled in below). A scan of all n_steps copied
    # the lane's memory (megabytes at the CLI's limits) on each of them: 25 s for a
    # 30-step program on a 2-core CPU at n_steps = 10,000. ``flat``: one lane stepped on
    # its own (``_stepper``'s one-lane step: dynamic slices, not a gather and a scatter).
    def cond(c):
        i, s, _ = c
        return (i < n_steps) & (s.status == Code.RUNNING)

    def body(c):
        i, s, rows = c
        rows = jax.tree.map(lambda a, v: a.at[i].set(v), rows, registers(s))
        s = _step(t, lay, limits, s._replace(mem=s.mem[None]), flat=True)
        return i + 1, s._replace(mem=s.mem[0]), rows

    empty = Trace(*(jnp.zeros((n_steps,), jnp.int32) for _ in Trace._fields))
    i, lane, rows = lax.while_loop(cond, body, (as_i32(0), lane, empty))
    last = registers(lane)
    rows = jax.tree.map(lambda a, v: jnp.where(jnp.arange(n_steps) >= i, v, a), rows, last)
    return rows, _finish(t, lay, limits, lane)
