"""The VM's step loop as ONE Pallas kernel (GPU, Triton backend): ``vm.run(..., backend="pallas")``.

The XLA VM (``jaxcc/vm.py``) is the reference: this backend gives the same RunResult, every
field of every lane, on any bytecode (tests/test_vm_pallas.py runs the kernel in Pallas'
interpret mode on the CPU and compares). Only the loop moves into the kernel: the lanes
are started (``vm._init``) and finished (``vm._finish``) by the same XLA code as ``vm.run``,
and the kernel's step calls vm.py's own ``_check``, ``_registers``, ``_write_pairs`` and
``_update`` on vectors of lanes. What it replaces is what Triton cannot lower: every read
that vm.py makes with a gather or a dynamic slice on a VALUE (the instruction, the decode
row, the six memory pairs, the function row, POW's limit) is here a load from a Ref with
integer-array indices (a pointer gather), placed exactly where vm.py's clamped read lands;
the one scatter is four masked stores; the n-way selects by opcode are select chains.

Design (why it looks like this):

* Grid over blocks of ``block`` lanes (a power of two, default 32, and 1 for a batch of
  at most ``FEW_LANES``; the batch is padded with stopped lanes). One program instance holds its
  lanes' 12 registers as twelve ``Int32[block]`` vectors in a ``lax.while_loop`` of ``lax.fori_loop``s of
  ``inner_steps`` steps: one kernel launch runs every step of its lanes, and a block
  returns as soon as its own lanes have stopped (no batch-wide lockstep).
* Per-lane memory is ``mem: Int32[2, M, L]`` (vm's ``Int32[L, M, 2]`` transposed once
  before and after the kernel: lane-minor, so lanes that touch the same slot, as lanes
  running the same program do, read and write consecutive words). It is an output aliased
  to its input; the kernel reads and writes it only through ``mem[col, row, lane]`` with
  ``lane`` the lane's own column of the block, so no index can reach another lane's
  memory: every row index is clamped into ``[0, M)`` (reads exactly as vm.py's
  ``_read_mem`` places them, writes only when ``_write_pairs`` says the pair is in range).
* The programs (``Tables.code``) are read as vm.py lays them out, ``code: Int32[P, I +
  2F, 2]``, with ``(pid, row, col)`` indices, rows placed as vm.py's dynamic slices
  place them (negative starts count from the end, then clamped). Not transposed: in one
  jit with the compiler, XLA gave a transposed operand's layout to the compiler's own
  arrays, and the loop ran 30 ms (small) to 75 ms (medium) slower on an H100. One constant table
  ``Int32[2, 64]`` holds the decode row of each opcode (argument kind, pops, pushes packed
  in one int) and POW's limits (``vm._POW_MAX``).
* The binary operators are computed behind a branch taken only when a running lane of
  the block executes one (``_step``'s ``lazy``): a step's time is mostly its
  instruction count, and they are a quarter of it.
* Where every running lane of a block is at one of ``HOT_OPS`` (one lane alone always
  is; lanes of one program in lockstep often are), the step is a copy specialized to
  that opcode, picked by a tree of branches (``_step``'s ``dispatch``): the opcode is a
  constant there, so Triton folds away every other opcode's work. A block whose lanes
  disagree takes the general step.
* The step's operand loads (the two top stack words, the local slot ``fp + arg``) are
  issued first, beside the instruction's (``hoist``), so their latency overlaps the
  choice of copy: on an H100 one lane +4-8%, 65,536 lanes +9-13% (docs/vm.md).
* In blocks of more than one lane each step loads the next step's instruction as soon
  as its pc is known, before its own stores (``prefetch``): on an H100 65,536 lanes
  +5-7%; one lane ran 8-12% slower with it, so a block of one lane does not.
* Loads a step does not need are masked off (a stopped lane loads nothing; the frame
  record only for RETURN_VALUE/LOAD_VAR2, the function row only for CALL/RETURN_VALUE,
  the slot only for SLOT/SLOT2/DEPTH instructions, the third operand only for
  FOR_RANGE): the values they would give are never used by vm.py's step either (it reads
  them only to keep its gathers branch-free).
* Safety as in vm.py: the step's checks are vm.py's own; the outer loop also stops after
  ``ceil((max_steps + 1) / inner_steps) + 1`` iterations, which no lane can outlast (a
  running lane stops at the latest when its steps reach its budget <= max_steps), so the
  kernel cannot hang even if that reasoning were wrong; a lane would then come back with
  status RUNNING, never a wrong final status.

On a machine without a GPU the kernel runs in Pallas' interpret mode (``interpret=None``
picks it when JAX's default backend is not a GPU). ``lower_triton`` lowers it for CUDA
without a GPU (Triton IR, not yet compiled to PTX), which tests/test_vm_pallas.py uses to
check that every primitive of the kernel is one the Triton lowering accepts.
"""

from __future__ import annotations

import contextlib
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from jaxcc import isa, vm
from jaxcc.arrays import as_i32
from jaxcc.errors import Code
from jaxcc.isa import ArgKind, Op
from jaxcc.limits import DEFAULT, Limits

# lanes per program instance (one thread per lane, one warp): on an H100 65,536 lanes ran
# 1.6x more lane-steps/s than in blocks of 128 (4 warps, whose per-step agreement test
# crosses warps) and the loop's VM stage 14% (small) and 34% (medium) faster (docs/vm.md)
BLOCK = 32
# The twelve opcodes that the corpora's programs execute most (bench/opcode_mix.py: 86% of
# the instructions run by the small and medium corpora's tests): each gets a copy of the
# step specialized to it (``_step``'s dispatch). On an H100 this made one lane 2.4x
# faster and 65,536 lanes 1.7x, for 4.5 s more of the kernel's compile; a copy for every
# opcode (``dispatch=True``) was no faster and took 35 s more (docs/vm.md).
HOT_OPS = tuple(int(op) for op in (
    Op.LOAD_VAR, Op.LOAD_CONST, Op.STORE_VAR, Op.JUMP, Op.MOD, Op.FOR_RANGE, Op.ADD,
    Op.JUMP_IF_FALSE, Op.NEG, Op.MUL, Op.RETURN_VALUE, Op.LT,
))  # fmt: skip
DISPATCH = HOT_OPS  # the default of ``dispatch`` (read when the kernel is traced)
# the defaults of ``hoist`` and ``forward`` (read when the kernel is traced): the operand
# loads first (one lane +4-8%, 65,536 lanes +9-13% on an H100); the last steps' stores
# from registers off (slower everywhere: a stored word comes back from L1 in ~26 ns,
# and the selects cost more than that; docs/vm.md)
HOIST = 2
FORWARD = 0
# the default of ``prefetch`` for blocks of more than one lane (read when the kernel is
# traced): the next instruction loaded by the step before, as soon as its pc is known
# (``_op_step``'s fetch_next). On an H100 65,536 lanes ran 5-7% more lane-steps/s with
# it, and one lane 8-12% fewer steps/s, so a block of one lane never uses it (docs/vm.md)
PREFETCH = 1
CHUNK = 256  # outer iterations per guarded chunk (outer="for")
# a batch of at most this many lanes runs one lane per block (``_lanes_block``): on an
# H100 (132 SMs) faster than blocks of 32 up to 1,056 lanes (1.17x at 528, 1.03-1.06x at
# 1,056), slower from 2,112 (0.68x; docs/vm.md)
FEW_LANES = 1056

# the constant table: row 0 the decode row of opcode o (o = N_OPS: invalid, decodes as
# nothing), (kind << 8) | (pops << 4) | pushes; row 1 POW's limits, uint32 bits as int32
_N_OPS = isa.N_OPS
_WIDTH = 1 << max(_N_OPS + 1, 33).bit_length()
assert vm._TAB.shape == (_N_OPS + 1, 3) and vm._TAB.min() >= 0
assert vm._TAB[:, 1].max() < 16 and vm._TAB[:, 2].max() < 16 and vm._TAB[:, 0].max() < 1 << 20


def _consts() -> np.ndarray:
    t = np.zeros((2, _WIDTH), np.int32)
    tab = vm._TAB.astype(np.int32)
    t[0, : _N_OPS + 1] = (tab[:, 0] << 8) | (tab[:, 1] << 4) | tab[:, 2]
    t[1, : len(vm._POW_MAX)] = vm._POW_MAX.view(np.int32)
    return t


_CONSTS = _consts()


def _place(start, dim: int, size: int):
    """Where ``lax.dynamic_slice`` puts a window of ``size`` starting at ``start`` in an
    axis of ``dim``: a negative start counts from the end, then it is clamped."""
    return jnp.clip(jnp.where(start < 0, start + dim, start), 0, dim - size)


def _chain(dec, o):
    """vm._pick without an n-way select (Triton lowers select_n of two cases only): a
    chain of two-way selects. For an opcode outside the tuple it gives the first
    opcode's value (vm._pick the clamped neighbour's); vm.py uses the value only for
    members (``is_bin``/``is_un``)."""
    del dec

    def select(results):
        items = list(results.items())
        val = items[0][1]
        for op, v in items[1:]:
            val = jnp.where(o == op, v, val)
        return val

    return select


def _first(enc):
    """vm._first_failing without a stack: a chain of maxima (Triton concatenates two
    arrays only); each value is computed once per lane inside the kernel anyway."""
    return functools.reduce(jnp.maximum, enc)


def _contiguous(ops) -> bool:
    codes = [int(op) for op in ops]
    return codes == list(range(min(codes), min(codes) + len(codes)))


def _step(consts_ref, code_ref, mem_ref, lane, lay: vm.Layout, limits: Limits, n_i: int, s,
          barrier: bool = False, lazy: bool = False, dispatch=False, hoist: int = 0,
          fwd=None, pf=None, prefetch: int = 0):  # fmt: skip
    """One step of a block of lanes (every field of ``s`` an Int32[block]); returns
    ``_op_step``'s (lane after it, pairs stored or None, next instruction or None) and
    stores its (at most two) pairs: ``_op_step`` on the block's lanes. With ``fwd``
    (``_reader``'s pairs stored by the last steps), it reads those words from ``fwd``
    instead of memory and returns the pairs this step stored.

    ``dispatch`` (False, True: every opcode, or a tuple of opcodes): when every running
    lane of the block is at the same opcode (one lane alone always; lanes of one program
    in lockstep often) and it is one of these, run a copy of the step specialized to it,
    chosen by a tree of branches on it (``_by_opcode``); otherwise the general step. The
    opcode is then a constant in its copy, so Triton and LLVM fold away every other
    opcode's selects, checks and loads: a step runs the instructions of its own opcode,
    not of all of them. Every lane's result is the general step's (a specialized copy
    reads the opcode where the general one does, and a lane that is not running changes
    nothing in either).

    ``hoist`` (0, 1, 2): the step's operand loads issued first, beside the instruction's,
    so that their latency (a word the previous step stored) overlaps the fetch and the
    choice of copy instead of following them: 1 the two top stack words (every running
    lane reads them anyway), 2 also the local slot ``fp + arg`` (read by every lane, used
    by SLOT-kind opcodes: LOAD_VAR, STORE_VAR). Every value is the one the step would
    load later: nothing is stored between.

    ``pf`` (with ``prefetch`` 1 or 2): the instruction the step before prefetched, the
    triple (pc, opcode word, argument word); the step's instruction is taken from it
    (``_head_carried``), and the step returns the triple for the next step."""
    head = _head(code_ref, n_i, s) if pf is None else _head_carried(code_ref, s, pf, prefetch)
    read = _reader(mem_ref, lane, fwd)
    pre = _preload(read, lay, s, head, hoist)
    step = functools.partial(_op_step, consts_ref, code_ref, mem_ref, lane, lay, limits, n_i,
                             s, head, pre=pre, read=read, writes=fwd is not None,
                             fetch_next=pf is not None)  # fmt: skip
    ops = _dispatch_ops(dispatch)
    if not ops:
        return step(barrier, lazy)
    run, o = head[0], head[1]
    lo = jnp.min(jnp.where(run, o, _N_OPS + 1))
    hi = jnp.max(jnp.where(run, o, -1))
    go = lo == hi  # false when no lane runs (lo > hi)
    if len(ops) < _N_OPS + 1:  # and the opcode is one with a copy: a bit of a constant
        words = [sum(1 << (op - 32 * w) for op in ops if op // 32 == w) for w in range(2)]
        words = [np.int32(np.uint32(m).view(np.int32)) for m in words]
        sh = jnp.clip(lo, 0, 63)
        word = jnp.where(sh < 32, words[0], words[1])
        go = go & (((word >> (sh & 31)) & 1) == 1)

    def general():
        return step(False, lazy)

    def one_op(op):
        return lambda: step(False, lazy, op)

    out = lax.cond(go, lambda: _by_opcode(lo, ops, one_op), general)
    if barrier:
        plt.debug_barrier()  # as in _op_step: the next step's loads see these stores
    return out


def _dispatch_ops(dispatch) -> tuple[int, ...]:
    """The opcodes that get a copy of the step: none (False), every one and the invalid
    one (True), or the given ones (sorted)."""
    if dispatch is True:
        return tuple(range(_N_OPS + 1))
    if not dispatch:
        return ()
    ops = tuple(sorted({int(op) for op in dispatch}))
    if ops[0] < 0 or ops[-1] > _N_OPS:
        raise ValueError(f"dispatch: opcodes outside [0, {_N_OPS}]: {ops}")
    return ops


def _by_opcode(key, ops: tuple[int, ...], branch):
    """``branch(key)()`` for a scalar ``key`` in the sorted ``ops``: a balanced tree of
    two-way branches (Pallas' Triton lowering makes an n-way switch a chain of n ifs)."""
    if len(ops) == 1:
        return branch(ops[0])()
    mid = len(ops) // 2
    return lax.cond(key < ops[mid], lambda: _by_opcode(key, ops[:mid], branch),
                    lambda: _by_opcode(key, ops[mid:], branch))  # fmt: skip


def _words(code_ref, s, pc, mask):
    """The lane's instruction words (opcode, argument) at ``pc`` (``_place``d as vm.py's
    dynamic slice places it), 0 where ``mask`` is off."""
    at = _place(pc, code_ref.shape[1], 1)
    return (plt.load(code_ref.at[s.pid, at, 0], mask=mask, other=0),
            plt.load(code_ref.at[s.pid, at, 1], mask=mask, other=0))  # fmt: skip


def _decoded(s, run, o, a):
    """(run, o, a, valid) as vm._fetch decodes the words at pc: o = N_OPS for an invalid
    instruction (it decodes as nothing)."""
    valid = (s.pc >= 0) & (s.pc < s.n_code) & (o >= 0) & (o < _N_OPS)
    return run, jnp.where(valid, o, _N_OPS), a, valid


def _head(code_ref, n_i: int, s):
    """The instruction at pc, decoded as vm._fetch decodes it: (run, o, a, valid), o =
    N_OPS for an invalid one (it decodes as nothing)."""
    run = s.status == Code.RUNNING
    return _decoded(s, run, *_words(code_ref, s, s.pc, run))


def _next_head(code_ref, s, npc, run):
    """``_op_step``'s prefetch: the instruction words at ``npc`` (the pc after the step
    if the instruction completes, the only way a lane goes on running), as ``_head``
    would load them there; masked by ``run`` (the lanes running now). Returns the
    triple (npc, opcode word, argument word)."""
    return (as_i32(jnp.broadcast_to(npc, s.pc.shape)), *_words(code_ref, s, npc, run))


def _head_carried(code_ref, s, pf, prefetch: int):
    """``_head`` from the triple the step before prefetched (``_next_head``): the same
    values. A lane running now was running then, so its words were loaded at
    ``_place(cpc)``, which is ``_place(pc)`` when ``pc == cpc``; the code is never
    written. Where pc differs (the instruction did not complete, so the lane has
    stopped; or a carried triple that was never loaded for this pc) the words are loaded
    here: by a masked load beside the select (``prefetch`` 1), or behind a branch taken
    only when a running lane of the block misses (2)."""
    cpc, co, ca = pf
    run = s.status == Code.RUNNING
    miss = run & (cpc != s.pc)

    def fill():
        lo, la = _words(code_ref, s, s.pc, miss)
        return jnp.where(miss, lo, co), jnp.where(miss, la, ca)

    if prefetch == 1:
        o, a = fill()
    else:
        need = jnp.max(jnp.where(miss, 1, 0)) > 0
        o, a = lax.cond(need, fill, lambda: (co, ca))
    # 0 where the lane is not running, as _head's masked loads give
    return _decoded(s, run, jnp.where(run, o, 0), jnp.where(run, a, 0))


def _window(lay: vm.Layout, s):
    """Where the top three stack words of the lane are (``_place``d: always in range)."""
    return _place(s.sp + (lay.stack0 - vm._GUARD), lay.size, 3)


def _local(lay: vm.Layout, s, a):
    """Where local slot ``a`` of the frame is (``_place``d)."""
    return _place(lay.stack0 + s.fp + a, lay.size, 1)


def _reader(mem_ref, lane, fwd=None):
    """``read(col, row, mask)``: this block's lanes' word ``mem[col, row, lane]`` (0 where
    ``mask`` is off). ``fwd``: the pairs that the last steps stored, oldest first, four
    Int32[block] each (written?, row, column 0, column 1): a word among them is taken
    from there (the latest pair wins, as in memory) and not loaded, so a step does not
    wait for the round trip of a word the step before it stored."""

    def read(col, row, mask):
        if not fwd:
            return plt.load(mem_ref.at[col, row, lane], mask=mask, other=0)
        hit, val = None, None
        for k in range(0, len(fwd), 4):
            w, i, va, vb = fwd[k : k + 4]
            h = (w != 0) & (i == row)
            v = va if col == 0 else vb
            hit, val = (h, v) if hit is None else (hit | h, jnp.where(h, v, val))
        got = plt.load(mem_ref.at[col, row, lane], mask=mask & ~hit, other=0)
        return jnp.where(mask & hit, val, got)

    return read


def _preload(read, lay: vm.Layout, s, head, hoist: int):
    """``_step``'s hoisted loads: None, or (second, top, slot pair or None)."""
    if not hoist:
        return None
    run, _, a, _ = head
    w = _window(lay, s)
    second, top = read(0, w + 1, run), read(0, w + 2, run)
    slot = None
    if hoist > 1:
        sl = _local(lay, s, a)
        slot = (read(0, sl, run), read(1, sl, run))
    return second, top, slot


def _op_step(consts_ref, code_ref, mem_ref, lane, lay: vm.Layout, limits: Limits, n_i: int, s,
             head, barrier: bool = False, lazy: bool = False, op: int | None = None,
             *, pre=None, read, writes: bool = False, fetch_next: bool = False):  # fmt: skip
    """One step of a block of lanes (every field of ``s`` an Int32[block]); returns (the
    lane after it, the pairs it stored or None, the next instruction or None) and stores
    its (at most two) pairs. The same as ``vm._step`` lane by lane: ``_fetch`` here, then vm.py's ``_check``, ``_registers``, ``_write_pairs``,
    ``_update``.

    ``lazy``: the binary operators' results (about a quarter of the step's operations:
    every operator with its overflow checks, square-and-multiply, floor division) only
    when a running lane of the block executes one, behind a branch on the block (a
    reduction per step). vm.py's step reads them only for those lanes (``_check``'s
    code and detail, ``_write_pairs``' value), so every lane's result is the same. On an
    H200 one lane ran 1.46e6 steps/s against 1.03e6 without it, 65,536 lanes of one
    program 3.26e10 lane-steps/s against 2.57e10, and the loop's mixed blocks as fast
    (docs/vm.md).

    ``op``: every running lane is at opcode ``op`` (``_step``'s dispatch): the step with
    that constant in place of the opcode read; the binary and unary operators are then
    computed only in their own opcodes' copies. ``pre``: ``_preload``'s values; ``read``:
    ``_reader``'s; ``writes``: return the pairs it stored; ``fetch_next``: return the
    next step's instruction (``_next_head``), loaded as soon as the pc after
    the instruction is known (in a copy of one opcode that is early: pc + 1, or the
    argument of a jump) and before this step's stores, so that its latency overlaps the
    rest of the step instead of starting the next one."""
    f = _fetch(consts_ref, code_ref, read, lay, n_i, s, head, op, pre)

    def skip(o, a, b):
        zero = jnp.zeros_like(a)
        return zero, jnp.full_like(a, Code.RUNNING), zero

    def binary(o, a, b):
        def pow_limit(e):  # one read of the constant table, only by POW lanes
            v = plt.load(consts_ref.at[1, e], mask=f.run & (o == Op.POW), other=0)
            return lax.bitcast_convert_type(v, jnp.uint32)

        def compute(o, a, b):
            return vm._binary(o, a, b, pick=_chain, pow_limit=pow_limit)

        if op is not None:
            return compute(o, a, b) if vm._BIN.member(op) else skip(o, a, b)
        if not lazy:
            return compute(o, a, b)
        need = jnp.max(jnp.where(f.run & vm._BIN.member(o), 1, 0)) > 0
        return lax.cond(need, compute, skip, o, a, b)

    def unary(o, x):
        if op is not None and not vm._UN.member(op):
            return jnp.zeros_like(x), jnp.zeros_like(x, dtype=bool)
        return vm._unary(o, x, pick=_chain)

    x = vm._check(limits, s, f, binary=binary, unary=unary, first=_first)
    r = vm._registers(s, f, x)
    nxt = _next_head(code_ref, s, r.pc, f.run) if fetch_next else None
    w1, i1, v1a, v1b, w2, i2, v2a, v2b = vm._write_pairs(lay, s, f, x, r)
    m = lay.size
    for col, i, v, w in ((0, i1, v1a, w1), (1, i1, v1b, w1), (0, i2, v2a, w2), (1, i2, v2b, w2)):
        # w implies 0 <= i < M; the clip only keeps masked-off addresses in the block too
        plt.store(mem_ref.at[col, jnp.clip(i, 0, m - 1), lane], as_i32(v), mask=w)
    if barrier:
        # The next step's loads must see these stores. Lane j's element is normally held
        # by one thread throughout, but nothing in Triton promises that every load and
        # store of the step uses the same thread for it (or that a replicated element is
        # stored by the thread that loads it); __syncthreads makes the block's global
        # writes visible to all of its threads. (Interpret mode has no such rule.)
        plt.debug_barrier()
    pairs = None
    if writes:
        pairs = tuple(as_i32(jnp.broadcast_to(v, s.pc.shape))
                      for v in (w1, i1, v1a, v1b, w2, i2, v2a, v2b))  # fmt: skip
    return vm._update(s, f, x, r, None), pairs, nxt


def _fetch(consts_ref, code_ref, mem, lay: vm.Layout, n_i: int, s, head,
           op: int | None = None, pre=None) -> vm._Fetched:  # fmt: skip
    """vm._fetch with Ref loads (code_ref: Int32[P, I + 2F, 2] with I = n_i; ``mem``:
    ``_reader`` of this block's Int32[2, M, block]): the same values wherever vm.py's
    step uses them.
    ``head``: ``_head``'s decoded instruction; ``op``: the opcode of every running lane
    (a constant; its decode row is read from ``_CONSTS`` at trace time); ``pre``:
    ``_preload``'s values, loaded where this would load them."""
    n_rows = code_ref.shape[1]
    n_f = (n_rows - n_i) // 2
    pid = s.pid

    def code(col, row, mask):
        return plt.load(code_ref.at[pid, row, col], mask=mask, other=0)

    run, o, a, valid = head
    if op is None:
        dec = plt.load(consts_ref.at[0, o], mask=run, other=0)
    else:
        o = jnp.full_like(o, op)
        dec = jnp.full_like(o, int(_CONSTS[0, op]))
    kind, pops_t, pushes_t = dec >> 8, (dec >> 4) & 15, dec & 15
    timeout = s.steps >= s.budget

    base = s.fp + s.nlocals
    depth = s.sp - base
    is_slot = kind == ArgKind.SLOT
    is_slot2 = kind == ArgKind.SLOT2
    is_depth = kind == ArgKind.DEPTH
    slot_i = jnp.where(is_slot, s.fp + a, jnp.where(is_depth, s.sp - a, s.sp - 1))
    slot_i = jnp.where(is_slot2, s.fp + (a & 0xFFFF), slot_i)
    slot_at = lay.stack0 + slot_i
    is_call = o == Op.CALL
    is_ret = o == Op.RETURN_VALUE
    is_for = o == Op.FOR_RANGE
    rec_at = jnp.where(
        is_ret,
        lay.frame0 + 2 * (s.depth - 2),
        jnp.where(is_slot2, lay.stack0 + s.fp + (a >> 16), lay.stack0 + s.sp - 2),
    )
    m = lay.size
    w, sl, rc = _window(lay, s), _place(slot_at, m, 1), _place(rec_at, m, 2)
    third = mem(0, w, run & is_for)
    if pre is None:
        second, top = mem(0, w + 1, run), mem(0, w + 2, run)
    else:
        second, top = pre[0], pre[1]
    need_slot = run & (is_slot | is_slot2 | is_depth)
    if pre is not None and pre[2] is not None and op is not None and vm._TAB[op, 0] == ArgKind.SLOT:
        slot = pre[2]  # every running lane's slot is fp + a: the hoisted pair
    else:
        slot = (mem(0, sl, need_slot), mem(1, sl, need_slot))
    need_rec = run & (is_ret | is_slot2)
    p4 = (mem(0, rc, need_rec), mem(1, rc, need_rec))
    p5 = (mem(0, rc + 1, need_rec), mem(1, rc + 1, need_rec))

    # one function-table row: the callee (CALL) or the caller (RETURN_VALUE)
    use = is_call | is_ret
    fsel = jnp.where(is_ret, p5[0], a)
    row = jnp.where(use, n_i + 2 * jnp.clip(fsel, 0, n_f - 1), s.pc)
    fr = _place(row, n_rows, 2)
    need_fn = run & use
    f_entry, f_np = code(0, fr, need_fn), code(1, fr, need_fn)
    f_nl, f_ms = code(0, fr + 1, need_fn), code(1, fr + 1, need_fn)

    return vm._Fetched(
        run=run,
        o=o,
        a=a,
        valid=valid,
        kind=kind,
        pops_t=pops_t,
        pushes_t=pushes_t,
        timeout=timeout,
        depth=depth,
        is_call=is_call,
        is_ret=is_ret,
        f_entry=f_entry,
        f_np=f_np,
        f_nl=f_nl,
        f_ms=f_ms,
        third=third,
        second=second,
        top=top,
        slot=slot,
        slot2=p4,
        ret_pc=p4[0],
        ret_fp=p4[1],
        ret_fn=p5[0],
        ret_serial=p5[1],
        mem=None,
    )


def _kernel(lay: vm.Layout, limits: Limits, n_i: int, block: int, inner_steps: int, unroll: int,
            barrier: bool, outer: str = "for", lazy: bool = False,
            dispatch=False, hoist: int = 0, forward: int = 0,
            prefetch: int = 0):  # fmt: skip
    """The kernel of one block of lanes (``forward``: the pairs stored by that many last
    steps carried in registers, ``_reader``; ``prefetch``: the next instruction carried,
    ``_head_carried``).

    Equivalent plain Python (``lanes``: this block's lanes):

        k = 0
        while any(lane.status == RUNNING for lane in lanes) and k < max_iters:
            for _ in range(inner_steps):            # lax.fori_loop, fixed count
                lanes = [step(lane) for lane in lanes]   # one vector op per field
            k += 1
    """
    for ops in (vm._KERNEL_BINARY, vm._KERNEL_UNARY):
        # vm._check decodes membership in these tuples by a range test when the opcodes
        # are contiguous, else by a table read on the opcode, which Triton cannot lower
        if not _contiguous(ops):
            raise NotImplementedError(f"opcodes {ops} are not contiguous in isa.py")
    u = math.gcd(inner_steps, unroll)  # steps per fori_loop iteration (Triton: no unroll)
    max_iters = -(-(limits.max_steps + 1) // inner_steps) + 1
    status_k = vm._REGS.index("status")

    def kernel(consts_ref, code_ref, inv_ref, regs_in_ref, mem_in_ref, regs_ref, mem_ref):
        del mem_in_ref  # the same buffer as mem_ref (aliased)
        lane = lax.broadcasted_iota(jnp.int32, (block,), 0)
        pid, budget, n_code, n_funcs = (inv_ref[k, :] for k in range(4))
        # the slice's cap on outer iterations (vm.advance's chunks; the same in every lane)
        cap = jnp.max(inv_ref[4, :])

        n_regs = len(vm._REGS)

        def lane_of(regs):
            return vm.Lane(pid=pid, budget=budget, n_code=n_code, n_funcs=n_funcs, mem=None,
                           **dict(zip(vm._REGS, regs[:n_regs], strict=True)))  # fmt: skip

        def one(regs):  # the lane's registers, the forwarded pairs, the next instruction
            fwd = regs[n_regs : n_regs + 8 * forward] if forward else None
            pf = regs[n_regs + 8 * forward :] if prefetch else None
            s, pairs, pf = _step(consts_ref, code_ref, mem_ref, lane, lay, limits, n_i,
                                 lane_of(regs), barrier, lazy, dispatch, hoist, fwd, pf,
                                 prefetch)  # fmt: skip
            if forward:
                fwd = fwd[8:] + pairs  # the oldest step's two pairs out, this step's in
            return tuple(getattr(s, k) for k in vm._REGS) + (fwd or ()) + (pf or ())

        def steps(_, regs):
            for _ in range(u):
                regs = one(regs)
            return regs

        def live(regs):  # int32: reduce_or does not lower to Triton, reduce_max does
            return jnp.max(jnp.where(regs[status_k] == Code.RUNNING, 1, 0))

        def cond(c):
            k, n_live, _ = c
            return (n_live > 0) & (k < max_iters) & (k < cap)

        def body(c):
            k, _, regs = c
            regs = lax.fori_loop(0, inner_steps // u, steps, regs)
            return k + 1, live(regs), regs

        regs = tuple(regs_in_ref[k, :] for k in range(len(vm._REGS)))
        # nothing forwarded at the start: every pair's "written?" is 0
        regs += tuple(jnp.zeros_like(lane) for _ in range(8 * forward))
        if prefetch:  # the first instruction, as _head loads it
            s = lane_of(regs)
            regs += _next_head(code_ref, s, s.pc, s.status == Code.RUNNING)
        if outer == "while":
            _, _, regs = lax.while_loop(cond, body, (as_i32(0), live(regs), regs))
        elif outer == "for":
            # the same loop as counted scf.for loops with scf.if guards: Triton (jax 0.11.2,
            # H100) crashes compiling the scf.while form of this kernel. Two levels, so
            # that a block whose lanes have stopped skips the rest in max_iters / CHUNK
            # cheap iterations; stepping a stopped lane changes nothing, so the guards
            # only save time.
            def chunk(g, regs):
                def guarded(i, regs):
                    go = (live(regs) > 0) & (g * CHUNK + i < cap)
                    return lax.cond(go, lambda r: body((0, 0, r))[2], lambda r: r, regs)

                run = lambda r: lax.fori_loop(0, CHUNK, guarded, r)  # noqa: E731
                go = (live(regs) > 0) & (g * CHUNK < cap)
                return lax.cond(go, run, lambda r: r, regs)

            regs = lax.fori_loop(0, -(-max_iters // CHUNK), chunk, regs)
        elif outer == "once":  # one fori_loop of inner_steps: for compiler bisection only
            regs = body((0, 0, regs))[2]
        else:
            raise ValueError(f"outer must be while, for or once: {outer!r}")
        for k, v in enumerate(regs[:n_regs]):
            regs_ref[k, :] = v

    return kernel


def resolve(backend: str) -> str:
    """A VM backend name for vm.run / run_tests / the loop: "auto" is "pallas" where JAX's
    default backend is a GPU; "serial" (one lane after another) where it is the CPU and
    XLA:CPU compiles small while loops whole (``vm.cpu_loops_hoisted``: `jaxcc run` sets
    that up), else "xla" (lockstep); any other name stays as it is."""
    if backend == "auto":
        if not _interpret_here():
            return "pallas"
        cpu = jax.default_backend() == "cpu"
        return "serial" if cpu and vm.cpu_loops_hoisted() else "xla"
    return backend


def _interpret_here() -> bool:
    """No GPU behind JAX's default backend: the kernel can only run in interpret mode."""
    return jax.default_backend() not in ("gpu", "cuda")


def _lanes_block(n: int, block: int | None) -> int:
    """The kernel's block for ``n`` lanes: ``_block_size(n, block)``; by default (None)
    ``BLOCK``, or ONE lane for a batch of at most ``FEW_LANES`` (no padding lanes, and
    each lane always runs its own opcode's copy of the step: on an H100 one lane ran
    4.4e6-4.5e6 steps/s against 3.6e6-3.9e6 in a block of 32; 32 lanes 20-26%, 132
    lanes 2.3x, 528 lanes 1.17x more lane-steps/s than in blocks of 32; docs/vm.md)."""
    if block is None:
        return 1 if n <= FEW_LANES else _block_size(n, BLOCK)
    return _block_size(n, block)


def _block_size(n: int, block: int) -> int:
    """``block``, or for a small batch the power of two that holds it (at least one warp:
    in a block narrower than a warp Triton replicates each lane over several threads)."""
    if block < 1 or block & (block - 1):
        raise ValueError(f"block must be a power of two: {block}")
    return min(block, max(32, 1 << max(0, n - 1).bit_length()))


def advance_lanes(
    t: vm.Tables,
    lanes: vm.Packed,
    limits: Limits,
    inner_steps: int = 16,
    unroll: int = 1,
    *,
    block: int | None = None,
    num_warps: int | None = None,
    interpret: bool | None = None,
    barrier: bool = True,
    outer: str = "for",
    chunks=None,
    lazy: bool = True,
    dispatch: bool | tuple[int, ...] | None = None,
    hoist: int | None = None,
    forward: int | None = None,
    prefetch: int | None = None,
) -> vm.Packed:
    """Run every lane of ``lanes`` (vm.Packed with a leading lane axis L) until it stops,
    or for at most ``chunks`` (Int32 scalar, may be traced) loops of ``inner_steps`` steps,
    in one pallas_call; returns the lanes as vm's loop would leave them. ``lazy``: the
    binary operators behind a branch (``_step``); ``dispatch``: a copy of the step per
    opcode for blocks whose running lanes share one (``_step``; None: ``DISPATCH``, read
    when traced); ``hoist``: the operand loads first (``_step``; None: ``HOIST``);
    ``forward``: the pairs stored by the last this many steps read from registers
    (``_reader``; None: ``FORWARD``); ``prefetch``: each step loads the next one's
    instruction (``_head_carried``; 0 off, 1 or 2; None: ``PREFETCH``, or 0 in blocks of
    one lane)."""
    if interpret is None:
        interpret = _interpret_here()
    if dispatch is None:
        dispatch = DISPATCH
    if hoist is None:
        hoist = HOIST
    if forward is None:
        forward = FORWARD
    lay = vm.layout(limits)
    n = lanes.pid.shape[0]
    bl = _lanes_block(n, block)
    if prefetch is None:
        prefetch = PREFETCH if bl > 1 else 0
    if n == 0:
        return lanes
    n_pad = -(-n // bl) * bl
    pad = n_pad - n
    n_i = t.line.shape[-1]
    code = t.code  # [P, I + 2F, 2]
    # chunks: at most this many loops of inner_steps (None: until every lane stops)
    cap = jnp.full_like(lanes.pid, vm.INT_MAX if chunks is None else chunks)
    inv = jnp.stack([lanes.pid, lanes.budget, lanes.n_code, lanes.n_funcs, cap])  # [5, L]
    regs = jnp.transpose(lanes.regs)  # [12, L]
    mem = jnp.transpose(lanes.mem, (2, 1, 0))  # [2, M, L]
    if pad:  # stopped lanes of program 0: they load and store nothing
        inv = jnp.pad(inv, ((0, 0), (0, pad)))
        stopped = jnp.zeros((len(vm._REGS), pad), jnp.int32)
        stopped = stopped.at[vm._STATUS].set(Code.INVALID_BYTECODE)
        regs = jnp.concatenate([regs, stopped], axis=1)
        mem = jnp.pad(mem, ((0, 0), (0, 0), (0, pad)))
    consts = jnp.asarray(_CONSTS)
    n_regs = len(vm._REGS)
    if num_warps is None:
        num_warps = max(1, min(4, bl // 32))
    regs, mem = pl.pallas_call(
        _kernel(
            lay,
            limits,
            n_i,
            bl,
            inner_steps,
            unroll,
            barrier and not interpret,
            outer,
            lazy,
            dispatch,
            hoist,
            forward,
            prefetch,
        ),
        grid=(n_pad // bl,),
        in_specs=[
            pl.BlockSpec(consts.shape, lambda i: (0, 0)),
            pl.BlockSpec(code.shape, lambda i: (0, 0, 0)),
            pl.BlockSpec((5, bl), lambda i: (0, i)),
            pl.BlockSpec((n_regs, bl), lambda i: (0, i)),
            pl.BlockSpec((2, lay.size, bl), lambda i: (0, 0, i)),
        ],
        out_specs=[
            pl.BlockSpec((n_regs, bl), lambda i: (0, i)),
            pl.BlockSpec((2, lay.size, bl), lambda i: (0, 0, i)),
        ],
        out_shape=[
            jax.ShapeDtypeStruct(regs.shape, jnp.int32),
            jax.ShapeDtypeStruct(mem.shape, jnp.int32),
        ],
        input_output_aliases={4: 1},
        interpret=interpret,
        compiler_params=plt.CompilerParams(num_warps=num_warps, num_stages=1),
        name="jaxcc_vm",
    )(consts, code, inv, regs, mem)
    return lanes._replace(
        regs=jnp.transpose(regs[:, :n]), mem=jnp.transpose(mem[:, :, :n], (2, 1, 0))
    )


def run_lanes(
    t: vm.Tables,
    pid,
    entry,
    args,
    budget,
    limits: Limits,
    inner_steps: int = 16,
    unroll: int = 1,
    **kernel_options,
) -> isa.RunResult:
    """vm._run_lanes with the loop in the kernel: the same start and finish (XLA)."""
    lay = vm.layout(limits)
    lanes = vm._start_lanes(t, limits, pid, entry, args, budget)
    lanes = advance_lanes(t, lanes, limits, inner_steps, unroll, **kernel_options)
    return jax.vmap(lambda p: vm._finish(t, lay, limits, vm._unpack(p)))(lanes)


@functools.partial(
    jax.jit,
    static_argnames=(
        "limits",
        "inner_steps",
        "unroll",
        "block",
        "num_warps",
        "interpret",
        "barrier",
        "outer",
        "lazy",
        "dispatch",
        "hoist",
        "forward",
        "prefetch",
    ),
)
def run_batch(
    program: isa.Program,
    entry,
    args,
    budget,
    limits: Limits = DEFAULT,
    inner_steps: int = 16,
    unroll: int = 1,
    block: int | None = None,
    num_warps: int | None = None,
    interpret: bool | None = None,
    barrier: bool = True,
    outer: str = "for",
    lazy: bool = True,
    dispatch: bool | tuple[int, ...] | None = None,
    hoist: int | None = None,
    forward: int | None = None,
    prefetch: int | None = None,
) -> isa.RunResult:
    """``vm.run_batch`` on this backend, with the kernel's knobs: ``block`` lanes per
    program instance (a power of two; None: ``_lanes_block``'s rule), Triton's ``num_warps`` (default block // 32, at
    most 4), ``interpret`` (None: on a machine without a GPU), ``barrier`` (a block
    barrier after each step's stores; see ``_step``), ``outer`` (the loop around the
    fixed-count inner loop: "for" (default) counted loops of guarded iterations, "while"
    a while loop until the block's lanes stop (the same results; Triton on jax 0.11.2
    crashes compiling it for an H100: bench/pallas_bisect.py), "once" a single inner
    loop, for bisection only), ``lazy`` (the binary operators behind a branch: ``_step``),
    ``dispatch`` (a copy of the step per opcode, taken when a block's running lanes share
    one: ``_step``), ``hoist`` (the operand loads first: ``_step``), ``forward`` (the
    last steps' stores read from registers: ``_reader``), ``prefetch`` (each step loads
    the next one's instruction: ``_head_carried``)."""
    t = vm._tables(program)
    pid = jnp.arange(t.code.shape[0], dtype=jnp.int32)
    return run_lanes(t, pid, as_i32(entry), as_i32(args), as_i32(budget), limits, inner_steps,
                     unroll, block=block, num_warps=num_warps, interpret=interpret,
                     barrier=barrier, outer=outer, lazy=lazy, dispatch=dispatch,
                     hoist=hoist, forward=forward, prefetch=prefetch)  # fmt: skip


@functools.partial(
    jax.jit,
    static_argnames=("limits", "inner_steps", "unroll", "block", "num_warps", "interpret",
                     "dispatch"),
    donate_argnames=("lanes",),
)  # fmt: skip
def _advance(t, lanes, chunks, limits, inner_steps, unroll, block, num_warps, interpret,
             dispatch):  # fmt: skip
    return advance_lanes(t, lanes, limits, inner_steps, unroll, block=block,
                         num_warps=num_warps, interpret=interpret, chunks=chunks,
                         dispatch=dispatch)  # fmt: skip


def advance(state: vm.State, limits: Limits = DEFAULT, steps: int | None = None, *,
            inner_steps: int = 16, unroll: int = 1, block: int | None = None,
            num_warps: int | None = None, interpret: bool | None = None,
            dispatch: bool | tuple[int, ...] | None = None) -> vm.State:  # fmt: skip
    """``vm.advance`` on this backend: every running lane makes at most ``steps`` more
    steps (None: until it stops), in one kernel launch; the same chunking of ``steps``
    into loops of ``inner_steps`` as ``vm.advance``, so the same final states (stopped
    lanes never change). ``steps`` is traced: changing it does not recompile."""
    inner_steps, chunks = vm.slice_chunks(steps, inner_steps)
    dispatch = DISPATCH if dispatch is None else dispatch
    lanes = _advance(state.tables, state.lanes, chunks, limits, inner_steps, unroll,
                     block, num_warps, interpret, dispatch)  # fmt: skip
    return vm.State(state.tables, lanes)


def run(program: isa.Program, limits: Limits = DEFAULT, entry=None, args=None, budget=None,
        **options) -> isa.RunResult:  # fmt: skip
    """``vm.run`` on this backend (same arguments; ``options``: run_batch's knobs)."""
    program, entry, args, budget, unbatched = vm._batch_inputs(program, limits, entry, args, budget)
    res = run_batch(program, entry, args, budget, limits, **options)
    if unbatched:
        res = jax.tree.map(lambda x: x[0], res)
    return res


def lower_triton(program: isa.Program, limits: Limits = DEFAULT, **options) -> str:
    """The StableHLO text of ``run_batch`` lowered for CUDA with the Triton kernel (no GPU
    needed: it shows that every primitive of the kernel lowers to Triton IR; compiling
    that IR to PTX happens on the GPU). ``program``: a batched Program."""
    b = np.shape(program.op)[0]
    args = (program, np.zeros(b, np.int32), np.zeros((b, 1), np.int32), np.zeros(b, np.int32))
    fn = functools.partial(run_batch, limits=limits, interpret=False, **options)
    return cuda_text(fn, *args)


def cuda_text(fn, *args) -> str:
    """The StableHLO text of ``jax.jit(fn)(*args)`` exported for CUDA, with Pallas'
    Triton kernels as custom calls (no GPU needed: ``_abstract_gpu``)."""
    export = jax.export.export(
        jax.jit(fn),
        platforms=["cuda"],
        disabled_checks=[jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")],
    )
    with _abstract_gpu():
        return export(*args).mlir_module()


def _abstract_gpu():
    """Where JAX's default device is not a GPU: an abstract H100 to lower for (jax 0.11's
    Triton lowering reads the GPU's compute capability, and without a GPU asks for one
    named this way; jax 0.10 lowers without it)."""
    if jax.default_backend() == "gpu":
        return contextlib.nullcontext()
    device = jax.sharding.AbstractDevice(
        device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="gpu"
    )
    mesh = jax.sharding.AbstractMesh((1,), ("lanes",), abstract_device=device)
    return jax.sharding.use_abstract_mesh(mesh)
