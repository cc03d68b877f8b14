"""The optimizer on the device: bytecode to shorter bytecode with the same behaviour.

``optimize(program, limits, passes)`` takes an ``isa.Program`` (batched, leading axis B,
or one program) and returns the optimized Program with the same shapes. It is a pure
function of fixed-shape arrays, usable under ``jit`` and ``vmap``; a batch is optimized
program by program in parallel (``vmap`` of the one-program version), with no host
round trip. The specification (what one round does, in which order, and the rules) is
``jaxcc.reference.optimize``'s docstring; that module is the plain-Python oracle and
this one must give the identical Program (tests/test_optimize.py,
property_tests/test_optimize_vs_reference.py). docs/middle_end.md section 7 has the
design and the measured gains.

How the sequential algorithms become array code:

* targets: a scatter of every jump's argument and every function entry into a mask;
* jump threading: the end of every chain of JUMPs by pointer doubling
  (``d = d[d]``, log2(I) + 1 times); a chain that still ends on a JUMP is a cycle;
* reachability (forward) and liveness (backward) are data-flow problems solved by
  rounds to the least fixpoint: a round scatters what the jumps carry, then propagates
  along fall-through chains with one scan (reachability: a running maximum of "last
  entry point" against "last instruction that does not fall through"; liveness: a
  reversed associative scan of the transfer functions ``x -> A | (x & B)`` on bitsets of
  32 slots a word). A round that changes nothing ends the loop; the number of rounds is
  bounded by the code length (every fact travels along a path of at most I edges);
* the rewrites: every position tests every rule at once on shifted copies of the code
  (k - 1, k - 2); loadvar2's left-to-right pairing of a run of LOAD_VARs is a parity:
  a pair fires at an odd distance from the run's start (a running maximum); constant operations are evaluated with ``ops.evaluate`` for every
  binary and unary opcode, and kept only where no check fires;
* compaction: an exclusive prefix sum of "kept" gives each instruction its new index;
  targets and entries are mapped through it; one scatter of indices and one gather move
  the code;
* loop inversion grows the code, so it is compaction in reverse: an exclusive prefix sum
  of each inverted back edge's growth gives the new indices (an inclusive one decides
  which fit the code length), and each new position gathers what it holds;
* rounds: up to UNROLL_ROUNDS unrolled (-O1's one), more in a while_loop until a round
  changes nothing (the same Program either way).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxcc import isa, ops
from jaxcc.errors import Code
from jaxcc.isa import Op
from jaxcc.limits import DEFAULT, Limits

PASSES = ("thread", "unreachable", "fold", "peephole", "deadstore", "cmpjump", "loadvar2",
          "invert")  # fmt: skip
MAX_ROUNDS = 32
UNROLL_ROUNDS = 2  # max_rounds up to this: the rounds unrolled, no while_loop
# Optimization levels (docs/middle_end.md section 7, "Levels"): 1 (-O1, the API's
# optimize=True, what the loop runs) is the cheap preset: every pass but unreachable
# (which saves no VM steps), one round: 94-99% of -O2's steps saved for a fifth to a
# ninth of its time (CPU); 2 (-O2) is every pass, rounds to a fixpoint.
O1_PASSES = ("thread", "fold", "peephole", "deadstore", "cmpjump", "loadvar2", "invert")
O1_ROUNDS = 1
LEVELS = {1: (O1_PASSES, O1_ROUNDS), 2: (PASSES, MAX_ROUNDS)}

i32 = jnp.int32
_JUMPS = (Op.JUMP, Op.FOR_RANGE, Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE,
          Op.JUMP_IF_FALSE_OR_POP, Op.JUMP_IF_TRUE_OR_POP, *isa.COMPARE_JUMP_OPS)  # fmt: skip
_COND = (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE, Op.JUMP_IF_FALSE_OR_POP, Op.JUMP_IF_TRUE_OR_POP)
_COMPARE = (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)
# right identities: x OP e == x for every int32 x, without any check firing
_IDENTITY = {Op.ADD: 0, Op.SUB: 0, Op.OR: 0, Op.XOR: 0, Op.LSHIFT: 0, Op.RSHIFT: 0,
             Op.MUL: 1, Op.FLOORDIV: 1, Op.POW: 1, Op.AND: -1}  # fmt: skip
_NEGATE = {Op.LT: Op.GE, Op.GE: Op.LT, Op.LE: Op.GT, Op.GT: Op.LE, Op.EQ: Op.NE, Op.NE: Op.EQ}
_SLOT2_MAX = 2**15  # LOAD_VAR2 packs two slots below this into one arg


def _table(mapping: dict, default: int):
    """An Int32[N_OPS + 1] lookup indexed by opcode (index N_OPS: any invalid opcode)."""
    t = [default] * (isa.N_OPS + 1)
    for k, v in mapping.items():
        t[int(k)] = int(v)
    return jnp.array(t, i32)


def _is(op, opcodes) -> jax.Array:
    """Bool: op is one of ``opcodes`` (a few: compares; more: a lookup table)."""
    if len(opcodes) <= 3:
        out = jnp.zeros(jnp.shape(op), bool)
        for o in opcodes:
            out = out | (op == int(o))
        return out
    table = np.zeros((isa.N_OPS + 1,), bool)
    table[[int(o) for o in opcodes]] = True
    return jnp.asarray(table)[jnp.where((op >= 0) & (op < isa.N_OPS), op, isa.N_OPS)]


class _Code(NamedTuple):
    """One program's code while it is optimized (unbatched)."""

    op: jax.Array  # Int32[I]
    arg: jax.Array  # Int32[I]
    line: jax.Array  # Int32[I]
    n: jax.Array  # Int32[]  n_code
    entry: jax.Array  # Int32[F]  fn_entry
    nf: jax.Array  # Int32[]  n_funcs


def _valid(c: _Code):
    return jnp.arange(c.op.shape[0], dtype=i32) < c.n


def _jump_edge(c: _Code):
    """Jumps whose target is an instruction of the program."""
    return _valid(c) & _is(c.op, _JUMPS) & (c.arg >= 0) & (c.arg < c.n)


def _falls(c: _Code):
    """Instructions that can go on to the next one (which exists)."""
    idx = jnp.arange(c.op.shape[0], dtype=i32)
    ok_op = (c.op >= 0) & (c.op < isa.N_OPS) & ~_is(c.op, (Op.JUMP, Op.RETURN_VALUE))
    return _valid(c) & ok_op & (idx + 1 < c.n)


def _entries(c: _Code):
    f = jnp.arange(c.entry.shape[0], dtype=i32)
    return (f < c.nf) & (c.entry >= 0) & (c.entry < c.n)


def _mark(size: int, where, at):
    """Bool[size]: True at each ``at[j]`` with ``where[j]``."""
    return jnp.zeros((size + 1,), bool).at[jnp.where(where, at, size)].set(True)[:size]


def _targets(c: _Code):
    size = c.op.shape[0]
    return _mark(size, _jump_edge(c), c.arg) | _mark(size, _entries(c), c.entry)


def _fixpoint(step, init, bound):
    """Iterate ``x = step(x)`` from init until it stops changing (at most bound rounds)."""

    def cond(s):
        return s[2] & (s[1] < bound)

    def body(s):
        x, k, _ = s
        y = step(x)
        pairs = zip(jax.tree.leaves(x), jax.tree.leaves(y), strict=True)
        changed = jnp.stack([jnp.any(a != b) for a, b in pairs]).any()
        return y, k + 1, changed

    return lax.while_loop(cond, body, (init, i32(0), jnp.array(True)))[0]


# -- compaction -------------------------------------------------------------------------


def compact(c: _Code, deleted) -> _Code:
    """Remove the deleted instructions; jump targets and function entries follow their
    instruction (a deleted one's to the next kept one)."""
    size = c.op.shape[0]
    keep = _valid(c) & ~deleted
    k = keep.astype(i32)
    new_index = jnp.cumsum(k) - k
    pos = jnp.concatenate([new_index, jnp.sum(k, keepdims=True)])  # [I + 1]: t in [0, I]

    def move(t, ok):
        return jnp.where(ok & (t >= 0) & (t <= c.n), pos[jnp.clip(t, 0, size)], t)

    arg = move(c.arg, _valid(c) & _is(c.op, _JUMPS))
    f = jnp.arange(c.entry.shape[0], dtype=i32)
    entry = move(c.entry, f < c.nf)
    # one scatter of the old indices to their new places, then one gather of the code
    src = (
        jnp.zeros((size + 1,), i32)
        .at[jnp.where(keep, new_index, size)]
        .set(jnp.arange(size, dtype=i32))[:size]
    )
    n = jnp.sum(k)
    code = jnp.where((jnp.arange(size) < n)[:, None], jnp.stack([c.op, arg, c.line], 1)[src], 0)
    return _Code(code[:, 0], code[:, 1], code[:, 2], n, entry, c.nf)


# -- passes -----------------------------------------------------------------------------


def thread(c: _Code) -> _Code:
    """Jump threading (all jumps at once, reading the code as it is)."""
    size = c.op.shape[0]
    idx = jnp.arange(size, dtype=i32)
    edge = _jump_edge(c)
    t = jnp.clip(c.arg, 0, size - 1)
    is_jump = _valid(c) & (c.op == Op.JUMP)
    d = jnp.where(is_jump & edge, c.arg, idx)
    for _ in range(max(1, math.ceil(math.log2(size))) + 1):
        d = d[d]
    end = d[t]
    to_jump = edge & is_jump[t]
    chain_ok = to_jump & ~is_jump[end]
    op, arg = c.op, jnp.where(chain_ok, end, c.arg)
    # the *_OR_POP jumps, where the target tests the same value again
    ot, at = c.op[t], c.arg[t]
    for mine, same, popped in (
        (Op.JUMP_IF_FALSE_OR_POP, (Op.JUMP_IF_FALSE, Op.JUMP_IF_FALSE_OR_POP), Op.JUMP_IF_FALSE),
        (Op.JUMP_IF_TRUE_OR_POP, (Op.JUMP_IF_TRUE, Op.JUMP_IF_TRUE_OR_POP), Op.JUMP_IF_TRUE),
    ):
        here = edge & ~to_jump & (c.op == mine)
        other = tuple(o for o in _COND if o not in same)
        s, o = here & _is(ot, same), here & _is(ot, other)
        op = jnp.where(s, ot, jnp.where(o, i32(popped), op))
        arg = jnp.where(s, at, jnp.where(o, t + 1, arg))
    return c._replace(op=op, arg=arg)


def reachable(c: _Code):
    """Bool[I]: instructions some path from a function entry reaches."""
    size = c.op.shape[0]
    idx = jnp.arange(size, dtype=i32)
    edge, falls, valid = _jump_edge(c), _falls(c), _valid(c)
    roots = _mark(size, _entries(c), c.entry)
    stops = jnp.where(valid & ~falls, idx, -1)
    last_stop = jnp.concatenate([jnp.full((1,), -1, i32), lax.cummax(stops)[:-1]])

    def step(reach):
        seed = roots | _mark(size, reach & edge, c.arg)
        last_seed = lax.cummax(jnp.where(seed, idx, -1))
        return valid & (last_seed >= 0) & (last_seed > last_stop)

    return _fixpoint(step, roots, size + 2)


def _slot_bits(slot, where, words: int):
    """UInt32[I, words]: bit ``slot`` set in the rows ``where`` holds (slots outside
    [0, 32 * words) set nothing)."""
    ok = where & (slot >= 0) & (slot < 32 * words)
    s = jnp.clip(slot, 0, 32 * words - 1)
    bit = jnp.left_shift(jnp.uint32(1), (s % 32).astype(jnp.uint32))
    hot = jnp.where(jnp.arange(words)[None, :] == (s // 32)[:, None], bit[:, None], jnp.uint32(0))
    return jnp.where(ok[:, None], hot, jnp.uint32(0))


def live_after(c: _Code, words: int):
    """UInt32[I, words]: bit s of row i is set when some path from i's successors reads
    slot s before writing it (slots >= 32 * words are not tracked: the dead-store rule
    leaves them alone)."""
    size = c.op.shape[0]
    valid, edge, falls = _valid(c), _jump_edge(c), _falls(c)
    zero = jnp.uint32(0)
    is_lv2 = valid & (c.op == Op.LOAD_VAR2)  # reads both its slots, a & 0xFFFF and a >> 16
    use = _slot_bits(c.arg, valid & (c.op == Op.LOAD_VAR), words)
    use = use | _slot_bits(c.arg & 0xFFFF, is_lv2, words) | _slot_bits(c.arg >> 16, is_lv2, words)
    kill = _slot_bits(c.arg, valid & (c.op == Op.STORE_VAR), words)
    t = jnp.clip(c.arg, 0, size - 1)
    through = jnp.where(falls[:, None], ~kill, zero)  # B: what passes from i + 1 to i

    def combine(later, earlier):  # compose x -> A | (x & B), the earlier one applied last
        return earlier[0] | (earlier[1] & later[0]), earlier[1] & later[1]

    def step(live_in):
        carried = jnp.where(edge[:, None], live_in[t], zero)
        a = use | (carried & ~kill)
        rev = lax.associative_scan(combine, (a[::-1], through[::-1]))
        return rev[0][::-1]

    live_in = _fixpoint(step, jnp.zeros((size, words), jnp.uint32), size + 2)
    nxt = jnp.concatenate([live_in[1:], jnp.zeros((1, words), jnp.uint32)])
    jump_in = jnp.where(edge[:, None], live_in[t], zero)
    return jnp.where(falls[:, None], nxt, zero) | jump_in


def _shift(x, k: int, fill):
    """y[i] = x[i - k] (k > 0: from earlier positions; k < 0: from later ones)."""
    pad = jnp.full((abs(k),), fill, x.dtype)
    return jnp.concatenate([pad, x[:-k]]) if k > 0 else jnp.concatenate([x[-k:], pad])


def _evaluate_all(opcodes, op, *args):
    """(value, ok) of ``op`` at each position, over the given arithmetic opcodes."""
    value, ok = jnp.zeros_like(op), jnp.zeros(op.shape, bool)
    for o in opcodes:
        v, code, _ = ops.evaluate(o, *args)
        here = op == o
        value = jnp.where(here, v, value)
        ok = jnp.where(here, code == Code.OK, ok)
    return value, ok


def rewrite(c: _Code, passes: tuple, words: int) -> _Code:
    """The fold / peephole / deadstore rewrites at every anchor at once, then compaction."""
    size = c.op.shape[0]
    idx = jnp.arange(size, dtype=i32)
    valid = _valid(c)
    op = jnp.where(valid, c.op, -1)
    arg = c.arg
    free = ~_targets(c)
    p1, p2 = _shift(op, 1, -1), _shift(op, 2, -1)
    a1, a2 = _shift(arg, 1, 0), _shift(arg, 2, 0)
    free1 = _shift(free, 1, True)
    lc1, lc2 = p1 == Op.LOAD_CONST, p2 == Op.LOAD_CONST

    def cmp_folded(j: int):
        """At each anchor k: whether fold turns the instruction at k - j, a comparison
        after two LOAD_CONSTs, into a LOAD_CONST this round (comparing two ints raises
        nothing); then no other rule may consume that comparison."""
        if "fold" not in passes:
            return jnp.zeros((size,), bool)
        lc = op == Op.LOAD_CONST
        return (
            _shift(lc, j + 1, False)
            & _shift(lc, j + 2, False)
            & _shift(free, j + 1, True)
            & _shift(free, j, True)
        )

    folded1 = cmp_folded(1)  # the comparison right before k (peephole's NOT, cmpjump)
    binary, unary = _is(op, isa.BINARY_OPS), _is(op, isa.UNARY_OPS)
    false = jnp.zeros((size,), bool)

    # each rule: (fires at anchor k, new op at k or -1 to delete it, new arg, deletes k-1, k-2)
    rules = []
    if "fold" in passes:
        v2, ok2 = _evaluate_all(isa.BINARY_OPS, op, a2, a1)
        rules.append((binary & lc1 & lc2 & free1 & free & ok2, Op.LOAD_CONST, v2, True, True))
        v1, ok1 = _evaluate_all(isa.UNARY_OPS, op, a1)
        rules.append((unary & lc1 & free & ok1, Op.LOAD_CONST, v1, True, False))
        # a compare-and-branch on two constants: a JUMP (taken) or nothing
        cmpj = _is(op, isa.COMPARE_JUMP_OPS) & lc1 & lc2 & free1 & free
        as_cmp = _table({j: c for c, j in isa.COMPARE_JUMP.items()}, 0)[jnp.clip(op, 0, isa.N_OPS)]
        taken, _ = _evaluate_all(_COMPARE, as_cmp, a2, a1)
        rules.append((cmpj & (taken != 0), Op.JUMP, arg, True, True))
        rules.append((cmpj & (taken == 0), -1, arg, True, True))
        cond = _is(op, _COND) & lc1 & free
        on_true = _is(op, (Op.JUMP_IF_TRUE, Op.JUMP_IF_TRUE_OR_POP))
        jumps = (a1 != 0) == on_true
        plain = _is(op, (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE))
        rules.append((cond & ~jumps, -1, arg, True, False))
        rules.append((cond & jumps & plain, Op.JUMP, arg, True, False))
        rules.append((cond & jumps & ~plain, Op.JUMP, arg, False, False))
    if "peephole" in passes:
        ident = _table(_IDENTITY, 7)  # 7: not an identity value of any opcode
        neg = _table(_NEGATE, -1)
        nop = jnp.clip(op, 0, isa.N_OPS)
        rules.append((binary & lc1 & free & (ident[nop] == a1) & (ident[nop] != 7),
                      -1, arg, True, False))  # fmt: skip
        rules.append(((op == Op.POP_TOP) & lc1 & free, -1, arg, True, False))
        gone = ((op == Op.POP_N) & (arg == 0)) | ((op == Op.JUMP) & (arg == idx + 1))
        rules.append((gone, -1, arg, False, False))
        np1 = jnp.clip(p1, 0, isa.N_OPS)
        # COMPARE; NOT -> the negated comparison, unless fold folds that comparison
        cmp_not = (op == Op.NOT) & (neg[np1] >= 0) & free & ~folded1
        rules.append((cmp_not, neg[np1], jnp.zeros_like(arg), True, False))
        # NOT; JUMP_IF_x -> JUMP_IF_not-x, unless that NOT is rewritten itself
        _, ok_not = _evaluate_all((Op.NOT,), jnp.full_like(op, int(Op.NOT)), a2)
        not_folded = ("fold" in passes) & lc2 & free1 & ok_not
        not_merged = (neg[jnp.clip(p2, 0, isa.N_OPS)] >= 0) & free1 & ~cmp_folded(2)
        not_kept = ~(not_folded | not_merged)
        flip = _is(op, (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE)) & (p1 == Op.NOT) & free & not_kept
        flipped = jnp.where(op == Op.JUMP_IF_FALSE, i32(Op.JUMP_IF_TRUE), i32(Op.JUMP_IF_FALSE))
        rules.append((flip, flipped, arg, True, False))
    if "cmpjump" in passes:
        # COMPARE; JUMP_IF_FALSE t -> JUMP_IF_<negated> t, COMPARE; JUMP_IF_TRUE t ->
        # JUMP_IF_<same> t, unless the comparison is folded itself (fold's binary rule)
        neg = _table(_NEGATE, -1)
        np1 = jnp.clip(p1, 0, isa.N_OPS)
        cmp = jnp.where(op == Op.JUMP_IF_TRUE, np1, neg[np1])
        fused = _table(isa.COMPARE_JUMP, -1)[jnp.clip(cmp, 0, isa.N_OPS)]
        at = _is(op, (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE)) & _is(p1, _COMPARE) & free
        at = at & ~folded1
        rules.append((at, fused, arg, True, False))
    if "deadstore" in passes:
        live = live_after(c, words)
        s = jnp.clip(arg, 0, 32 * words - 1)
        bit = jnp.right_shift(live[idx, s // 32], (s % 32).astype(jnp.uint32)) & 1
        in_range = (arg >= 0) & (arg < 32 * words)
        dead = in_range & (bit == 0)
        pair = (op == Op.LOAD_VAR) & (p1 == Op.STORE_VAR) & (a1 == arg) & free & dead
        rules.append((pair, -1, arg, True, False))
    if "loadvar2" in passes:
        # LOAD_VAR a; LOAD_VAR b (b's not a target, same line, a not deleted by deadstore)
        # -> LOAD_VAR2 a | (b << 16). In a run of such pairs, every other one from the
        # run's start (a left-to-right greedy pairing: the reference's order)
        ds = pair if "deadstore" in passes else false
        small = (arg >= 0) & (arg < _SLOT2_MAX) & (a1 >= 0) & (a1 < _SLOT2_MAX)
        same_line = _shift(c.line, 1, -1) == c.line
        can = (op == Op.LOAD_VAR) & (p1 == Op.LOAD_VAR) & free & same_line & small
        can = can & ~_shift(ds, 1, False)
        run_start = lax.cummax(jnp.where(can, -1, idx))
        odd = ((idx - run_start) % 2) == 1
        rules.append((can & odd, Op.LOAD_VAR2, a1 | (arg << 16), True, False))

    fired = false
    new_op, new_arg, deleted, del1, del2 = op, arg, false, false, false
    for fires, o, a, d1, d2 in rules:
        f = fires & ~fired
        o = jnp.broadcast_to(jnp.asarray(o, i32), (size,))
        new_op = jnp.where(f & (o >= 0), o, new_op)
        new_arg = jnp.where(f & (o >= 0), a, new_arg)
        deleted = deleted | (f & (o < 0))
        del1 = del1 | (f & d1)
        del2 = del2 | (f & d2)
        fired = fired | f
    deleted = deleted | _shift(del1, -1, False) | _shift(del2, -2, False)
    new_op = jnp.where(valid, new_op, c.op)
    return compact(c._replace(op=new_op, arg=new_arg), deleted)


# -- loop inversion ---------------------------------------------------------------------

_TEST_OPS = (Op.LOAD_VAR, Op.LOAD_VAR2, Op.LOAD_CONST, *isa.BINARY_OPS, *isa.UNARY_OPS)
TEST_MAX = 4
_INVERTED = {Op.JUMP_IF_FALSE: Op.JUMP_IF_TRUE, Op.JUMP_IF_TRUE: Op.JUMP_IF_FALSE,
             **{isa.COMPARE_JUMP[a]: isa.COMPARE_JUMP[b] for a, b in _NEGATE.items()}}  # fmt: skip


def invert_loops(c: _Code) -> _Code:
    """Loop inversion (the reference's ``invert_loops``): every back-edge ``JUMP h`` to a
    short test becomes a copy of the test with the inverted jump to the loop body. The code
    grows, so this is compaction in reverse: an inclusive prefix sum of each accepted
    JUMP's growth decides which fit (a prefix of the candidates, as the sum only grows),
    an exclusive one gives every instruction its new index, targets and entries are
    mapped through it, and the new code is gathered: each new position finds the old
    instruction it comes from (a scatter of the old indices at their new ones and a
    running maximum) and its offset k in that instruction's output (0 for an instruction
    kept as it is; for an inverted JUMP the copy's k-th instruction, then the inverted
    jump, then the JUMP e)."""
    size = c.op.shape[0]
    idx = jnp.arange(size, dtype=i32)
    valid = _valid(c)

    def at(x, p):
        return x[jnp.clip(p, 0, size - 1)]

    h = c.arg
    cand = valid & (c.op == Op.JUMP) & (h >= 0) & (h < idx)
    # leading test instructions at h (TEST_MAX + 1: too many), before the JUMP itself:
    # the run of test opcodes from each position (the next other one, a reversed
    # running minimum, minus the position), read at h
    stop = jnp.where(_is(c.op, _TEST_OPS), size, idx)
    run = lax.cummin(stop, reverse=True) - idx
    m = jnp.where(cand, jnp.minimum(jnp.minimum(at(run, h), idx - h), TEST_MAX + 1), 0)
    cpos = h + m
    at_c = jnp.stack([c.op, c.arg], axis=1)[jnp.clip(cpos, 0, size - 1)]
    inv = _table(_INVERTED, -1)[jnp.clip(at_c[:, 0], 0, isa.N_OPS)]
    e = at_c[:, 1]
    nxt_op, nxt_arg = _shift(c.op, -1, -1), _shift(c.arg, -1, 0)
    falls_to_e = (e == idx + 1) | ((idx + 1 < c.n) & (nxt_op == Op.JUMP) & (nxt_arg == e))
    jump = ~falls_to_e  # a JUMP e after the copy
    ok = cand & (m <= TEST_MAX) & (cpos < idx) & (inv >= 0)
    want = m + jump.astype(i32)
    accepted = ok & (c.n + jnp.cumsum(jnp.where(ok, want, 0)) <= size)
    grow = jnp.where(accepted, want, 0)
    new_index = idx + jnp.cumsum(grow) - grow
    total = jnp.sum(grow)
    pos = jnp.concatenate([new_index, (size + total)[None]])  # [I + 1]: t in [0, I]

    def move(t, okay):
        return jnp.where(okay & (t >= 0) & (t <= c.n), pos[jnp.clip(t, 0, size)], t)

    arg = move(c.arg, valid & _is(c.op, _JUMPS))
    # the old instruction each new position comes from, and the offset in its output
    mark = jnp.zeros((size + 1,), i32).at[jnp.where(valid, new_index, size)].set(idx)
    owner = lax.cummax(mark[:size])
    per = jnp.stack([accepted.astype(i32), m, jnp.clip(jnp.minimum(h, cpos), 0, size - 1),
                     cpos, inv, move(cpos + 1, True), move(e, True), arg, c.op, c.line,
                     new_index], axis=1)[owner]  # fmt: skip
    acc, mo, ho, co, invo, cond_arg, jmp_arg, argo, opo, lineo, starto = (
        per[:, f] for f in range(per.shape[1])
    )
    k = idx - starto
    acc = acc == 1
    copy, cond, jmp = acc & (k < mo), acc & (k == mo), acc & (k > mo)
    src = jnp.clip(jnp.minimum(ho + k, co), 0, size - 1)
    code = jnp.stack([c.op, c.arg, c.line], axis=1)[src]
    out = idx < c.n + total
    op = jnp.where(copy, code[:, 0], jnp.where(cond, invo, jnp.where(jmp, i32(Op.JUMP), opo)))
    arg = jnp.where(copy, code[:, 1], jnp.where(cond, cond_arg, jnp.where(jmp, jmp_arg, argo)))
    line = jnp.where(acc, code[:, 2], lineo)
    f = jnp.arange(c.entry.shape[0], dtype=i32)
    return _Code(jnp.where(out, op, 0), jnp.where(out, arg, 0), jnp.where(out, line, 0),
                 c.n + total, move(c.entry, f < c.nf), c.nf)  # fmt: skip


# -- the driver -------------------------------------------------------------------------


def _round(c: _Code, passes: tuple, words: int) -> _Code:
    if "thread" in passes:
        c = thread(c)
    if "unreachable" in passes:
        c = compact(c, ~reachable(c))
    if {"fold", "peephole", "deadstore", "cmpjump", "loadvar2"} & set(passes):
        c = rewrite(c, passes, words)
    if "invert" in passes:
        c = invert_loops(c)
    return c


def optimize_one(program: isa.Program, passes: tuple, words: int, max_rounds: int):
    """One (unbatched) program."""
    c = _Code(*(jnp.asarray(x, i32) for x in (program.op, program.arg, program.line,
                                               program.n_code, program.fn_entry,
                                               program.n_funcs)))  # fmt: skip
    if max_rounds <= UNROLL_ROUNDS:
        # a few rounds: unrolled, with no test for a change (a round on code that the
        # round before left unchanged changes nothing, so this is the same Program as the
        # fixpoint's; under vmap the while_loop would run them for every lane anyway)
        for _ in range(max_rounds):
            c = _round(c, passes, words)
    else:
        c = _fixpoint(lambda x: _round(x, passes, words), c, max_rounds)
    return program._replace(op=c.op, arg=c.arg, line=c.line, n_code=c.n, fn_entry=c.entry)


def level(optimize, passes=None, max_rounds=None) -> tuple[tuple, int]:
    """(passes, max_rounds) of optimization level ``optimize`` (True or 1: -O1, 2: -O2;
    see LEVELS), each replaced by the argument when that is not None; passes checked."""
    if int(optimize) not in LEVELS:
        raise ValueError(f"unknown optimization level {optimize!r} (known: {sorted(LEVELS)})")
    p, r = LEVELS[int(optimize)]
    return check_passes(p if passes is None else passes), r if max_rounds is None else max_rounds


def check_passes(passes) -> tuple:
    """``passes`` as a tuple in PASSES order; ValueError naming an unknown one."""
    unknown = set(passes) - set(PASSES)
    if unknown:
        raise ValueError(f"unknown optimizer passes: {sorted(unknown)} (known: {PASSES})")
    return tuple(p for p in PASSES if p in passes)


def optimize_batch(program, limits: Limits = DEFAULT, passes=PASSES, max_rounds: int = MAX_ROUNDS):
    """``optimize`` unjitted (``passes`` checked by the caller): what ``_optimize`` and
    jaxcc.compiler's CPU fast-compile jit of it compile."""
    words = max(1, -(-limits.max_locals // 32))
    one = functools.partial(optimize_one, passes=passes, words=words, max_rounds=max_rounds)
    if jnp.ndim(program.op) == 1:
        return one(program)
    return jax.vmap(one)(program)


STATIC_ARGNAMES = ("limits", "passes", "max_rounds")
_optimize = jax.jit(optimize_batch, static_argnames=STATIC_ARGNAMES)


def optimize(program: isa.Program, limits: Limits = DEFAULT, passes=PASSES,
             max_rounds: int = MAX_ROUNDS) -> isa.Program:  # fmt: skip
    """The optimized Program (same shapes; batched or one program). ``limits`` (static)
    gives the slot bitsets' width (max_locals); ``passes``: the names of PASSES to run."""
    return _optimize(program, limits, check_passes(passes), max_rounds)
