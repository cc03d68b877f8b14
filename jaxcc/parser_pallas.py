"""The parser's automaton loop as ONE Pallas kernel (GPU, Triton backend):
``parser.parse(..., backend="pallas")``.

The XLA loop (``parser._parse_batch``) is the reference: this backend gives the same Ast,
Error and ParseInfo, every field of every program (tests/test_parser_pallas.py runs the
kernel in Pallas' interpret mode on the CPU and compares). Only the loop moves into the
kernel: the programs are prepared (``parser._prepare``, ``parser._init``) and finished
(``parser._finish``) by the same XLA code, and the kernel's step is parser.py's own
``_advance`` on vectors of lanes. What it replaces are the reads and writes: each gather
of ``parser._step`` (the lookahead, the stack rows, the tables, the token kinds and
values) is a load from a Ref with integer-array indices, placed where ``arrays.index``
and jnp's indexing place it (a negative index counts from the end, then it is clamped);
each of the two row scatters is a masked store per field, dropped where the scatter
drops it.

Why: in XLA the loop is ~8 kernels and ~5 copies per automaton step, each launched once
per step for the whole batch (128 steps for the small corpus, 416 medium: about 60 us a
step on an H200, launch-bound). Here one launch runs every step of a block's lanes, each
lane's 14 scalars held in registers, and a block returns as soon as its own lanes are done.

Layout: every per-program array keeps parser.py's layout, lane-major (``stack: Int32[B,
D, 5]``, ``nodes: Int32[B, N, 6]``, ``sig: Int32[B, T + 1, 2]``, the tokens' ``kind`` and
``value: Int32[B, T]``),
so nothing is transposed before or after; the scalars are ``Int32[14, B]``. Grid over
blocks of ``block`` lanes (a power of two); a lane reads and writes only its own rows
(``ref.at[lane, ...]`` with ``lane`` its own row of the block, every other index clamped
into its axis), so no index can reach another program's arrays. Loads are masked off for
lanes that are done (their values would not be used: every update of ``_advance`` is
gated on an active lane), and the batch is padded with done lanes.

Termination as in parser.py: at most ``(8 T + 64) // steps_per_iter + 1`` iterations of
``steps_per_iter`` steps (a counted loop of guarded iterations: Triton on jax 0.11.2
crashed compiling the VM kernel's scf.while form, ``vm_pallas``), so a lane that never
finishes runs exactly as many steps as in the XLA loop and comes back not done.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from jaxcc import parser as P
from jaxcc.arrays import I32, as_i32
from jaxcc.errors import Error
from jaxcc.limits import DEFAULT, Limits
from jaxcc.tokens import Tokens
from jaxcc.vm_pallas import _block_size, _interpret_here, cuda_text

# lanes per program instance, one warp (one thread per lane): on an H200 blocks of 32
# parsed 65,536 programs in 2.9 / 5.4 ms (small / medium corpus) against 3.3 / 6.6 for
# 128 lanes in 4 warps (docs/results/2026-12-01-h200-parser-lean/)
BLOCK = 32

# the scalar fields of parser._Carry, in order (done held as 0/1)
_REGS = tuple(f for f in P._Carry._fields if f not in ("stack", "nodes"))
_DONE = _REGS.index("done")


def _norm(i, size: int):
    """Where jnp's indexing (and ``arrays.index``) reads ``a[i]`` in an axis of ``size``:
    a negative index counts from the end, then it is clamped."""
    return jnp.clip(jnp.where(i < 0, i + size, i), 0, size - 1)


def _reads(refs, lane, m, T: int, D: int, lean: bool = True) -> P._Reads:
    """parser._Reads as loads of a block of lanes; ``m``: the lanes that load (the rest
    read 0). Each field or row is loaded once per step, however often it is read. With
    ``lean`` a read also skips the lanes whose ``need`` is False (parser._Reads: their
    values are never used), so a shift loads no rule, row or GOTO entry."""
    action_ref, goto_ref, rules_ref, sig_ref, kind_ref, value_ref, stack_ref = refs

    def ld(ref, *idx, need=None):
        mask = m & need if lean and need is not None else m
        return plt.load(ref.at[idx], mask=mask, other=0)

    def pair(ref, i, size):
        i = _norm(i, size)
        return ld(ref, lane, i, 0), ld(ref, lane, i, 1)

    def rule(i, need):
        i, got = _norm(i, rules_ref.shape[0]), {}

        def field(f):
            if f not in got:
                got[f] = ld(rules_ref, i, f, need=need)
            return got[f]

        return field

    def rows(at, needs):
        at, got = [jnp.clip(r, 0, D - 1) for r in at], {}

        def field(k, f):
            if (k, f) not in got:
                got[k, f] = ld(stack_ref, lane, at[k], f, need=needs[k])
            return got[k, f]

        return field

    return P._Reads(
        sig=lambda pos: pair(sig_ref, pos, T + 1),
        state=lambda i: ld(stack_ref, lane, _norm(i, D), P._S_STATE),
        action=lambda i: ld(action_ref, _norm(i, action_ref.shape[0])),
        rule=rule,
        rows=rows,
        goto=lambda i, need: ld(goto_ref, _norm(i, goto_ref.shape[0]), need=need),
        kv=lambda i, need: tuple(
            ld(r, lane, _norm(i, T), need=need) for r in (kind_ref, value_ref)
        ),
    )


def _store_row(ref, lane, w, vals, size: int):
    """Row ``w`` of each lane's ``ref`` set to ``vals`` (one store per field), as
    ``arrays.set_rows`` does: a negative row counts from the end; one still outside
    [0, size) is dropped."""
    w = jnp.where(w < 0, w + size, w)
    keep = (w >= 0) & (w < size)
    w = jnp.clip(w, 0, size - 1)  # masked-off addresses stay in the lane's rows too
    for f, v in enumerate(vals):
        plt.store(ref.at[lane, w, f], as_i32(v), mask=keep)


def _kernel(T: int, D: int, N: int, nnt: int, block: int, steps_per_iter: int,
            max_iters: int, barrier: bool, lean: bool):  # fmt: skip
    """The kernel of one block of lanes. Equivalent plain Python::

    for _ in range(max_iters):
        if all(lane.done for lane in lanes): break
        for _ in range(steps_per_iter):           # lax.fori_loop, fixed count
            lanes = [step(lane) for lane in lanes]    # one vector op per field
    """

    def kernel(action_ref, goto_ref, rules_ref, sig_ref, kind_ref, value_ref, inv_ref,
               regs_in_ref, stack_in_ref, regs_ref, stack_ref, nodes_ref):  # fmt: skip
        del stack_in_ref  # the same buffer as stack_ref (aliased)
        lane = lax.broadcasted_iota(jnp.int32, (block,), 0)
        n_sig, lex_failed = inv_ref[0, :], inv_ref[1, :] != 0

        def step(_, regs):
            c = P._Carry(stack=None, nodes=None, **dict(zip(_REGS, regs, strict=True)))
            c = c._replace(done=c.done != 0)
            refs = (action_ref, goto_ref, rules_ref, sig_ref, kind_ref, value_ref, stack_ref)
            rd = _reads(refs, lane, ~c.done, T, D, lean)
            new, wr = P._advance(c, T, D, N, n_sig, lex_failed, rd, nnt)
            _store_row(stack_ref, lane, wr.w, wr.row, D)
            _store_row(nodes_ref, lane, wr.nw, wr.nrow, N)
            if barrier:
                # the next step's loads must see these stores: nothing in Triton promises
                # that a lane's loads and stores use one thread (vm_pallas._step)
                plt.debug_barrier()
            return tuple(as_i32(getattr(new, k)) for k in _REGS)

        def live(regs):  # int32: reduce_or does not lower to Triton, reduce_max does
            return jnp.max(jnp.where(regs[_DONE] == 0, 1, 0))

        def iteration(_, regs):
            run = lambda r: lax.fori_loop(0, steps_per_iter, step, r)  # noqa: E731
            return lax.cond(live(regs) > 0, run, lambda r: r, regs)

        regs = tuple(regs_in_ref[k, :] for k in range(len(_REGS)))
        regs = lax.fori_loop(0, max_iters, iteration, regs)
        for k, v in enumerate(regs):
            regs_ref[k, :] = v

    return kernel


def run_automaton(progs: P._Prog, carry: P._Carry, tabs: P._Tabs, nnt: int,
                  steps_per_iter: int, *, block: int = BLOCK, num_warps: int | None = None,
                  interpret: bool | None = None, barrier: bool = True,
                  lean: bool = True) -> P._Carry:  # fmt: skip
    """parser._parse_batch's while loop in one pallas_call: every lane of ``carry``
    (batched, leading axis B) stepped until it is done or the loop's bound; returns the
    carry as that loop would leave it."""
    if interpret is None:
        interpret = _interpret_here()
    B, D, _ = carry.stack.shape
    N = carry.nodes.shape[1]
    T = progs.kv.shape[1]
    if B == 0:
        return carry
    bl = _block_size(B, block)
    pad = -(-B // bl) * bl - B
    max_iters = (8 * T + 64) // steps_per_iter + 1
    regs = jnp.stack([as_i32(getattr(carry, k)) for k in _REGS])  # [14, B]
    inv = jnp.stack([as_i32(progs.n_sig), as_i32(progs.lex_failed)])  # [2, B]
    sig, kind, value, stack = progs.sig, as_i32(progs.kind), as_i32(progs.value), carry.stack
    if pad:  # done lanes: they load and store nothing

        def more(x):
            return jnp.pad(x, ((0, pad),) + ((0, 0),) * (x.ndim - 1))

        sig, kind, value, stack = more(sig), more(kind), more(value), more(stack)
        inv = jnp.pad(inv, ((0, 0), (0, pad)))
        done = jnp.zeros((len(_REGS), pad), I32).at[_DONE].set(1)
        regs = jnp.concatenate([regs, done], axis=1)
    n_pad = B + pad
    # the nodes are an output only, not carry.nodes: rows the loop does not write are
    # left undefined (no zero fill of B x N x 6 words); parser._finish reads no row at or
    # past a lane's node count (tests/test_parser.py: garbage there changes nothing)
    nodes = jax.ShapeDtypeStruct((n_pad, N, 6), I32)
    tables = [jnp.asarray(tabs.action), jnp.asarray(tabs.goto), jnp.asarray(tabs.rules)]
    if num_warps is None:
        num_warps = max(1, min(4, bl // 32))

    def whole(x):
        return pl.BlockSpec(x.shape, lambda i: (0,) * x.ndim)

    def lanes(x):
        return pl.BlockSpec((bl,) + x.shape[1:], lambda i: (i,) + (0,) * (x.ndim - 1))

    def cols(x):
        return pl.BlockSpec((x.shape[0], bl), lambda i: (0, i))

    regs, stack, nodes = pl.pallas_call(
        _kernel(T, D, N, nnt, bl, steps_per_iter, max_iters, barrier and not interpret, lean),
        grid=(n_pad // bl,),
        in_specs=[
            *map(whole, tables),
            lanes(sig),
            lanes(kind),
            lanes(value),
            cols(inv),
            cols(regs),
            lanes(stack),
        ],  # fmt: skip
        out_specs=[cols(regs), lanes(stack), lanes(nodes)],
        out_shape=[jax.ShapeDtypeStruct(x.shape, I32) for x in (regs, stack, nodes)],
        input_output_aliases={8: 1},
        interpret=interpret,
        compiler_params=plt.CompilerParams(num_warps=num_warps, num_stages=1),
        name="jaxcc_parser",
    )(*tables, sig, kind, value, inv, regs, stack)
    fields = {k: regs[i, :B] for i, k in enumerate(_REGS)}
    fields["done"] = fields["done"] != 0
    return P._Carry(stack=stack[:B], nodes=nodes[:B], **fields)


def parse_with_info(tokens: Tokens, limits: Limits = DEFAULT, lex_error: Error | None = None,
                    *, steps_per_iter: int = P.STEPS_PER_ITER, block: int = BLOCK,
                    num_warps: int | None = None, interpret: bool | None = None,
                    barrier: bool = True, lean: bool = True):  # fmt: skip
    """``parser.parse_with_info`` on this backend, with the kernel's knobs: ``block``
    lanes per program instance (a power of two; a small batch gets the power of two that
    holds it, at least 32), Triton's ``num_warps`` (default block // 32, at most 4),
    ``interpret`` (None: where there is no GPU), ``barrier`` (a block barrier after each
    step's stores, as in ``vm_pallas``; off only to measure what it costs), ``lean`` (skip
    the reads whose values go unused, ``_reads``; off only to measure what it saves)."""
    options = dict(block=block, num_warps=num_warps, interpret=interpret, barrier=barrier,
                   lean=lean)  # fmt: skip
    return P.parse_with_info(tokens, limits, lex_error, steps_per_iter, backend="pallas",
                             pallas_options=tuple(sorted(options.items())))  # fmt: skip


def lower_triton(tokens: Tokens, limits: Limits = DEFAULT, lex_error: Error | None = None) -> str:
    """The StableHLO text of the parse lowered for CUDA with the Triton kernel (no GPU
    needed: it shows that every primitive of the kernel lowers to Triton IR; compiling
    that IR to PTX happens on the GPU). ``tokens``: a batch."""
    tokens = Tokens(*[jnp.asarray(x, I32) for x in tokens])
    B = tokens.kind.shape[0]
    if lex_error is None:
        lex_error = Error(*[jnp.zeros(B, I32)] * 4)
    fn = functools.partial(
        P._parse_batch, tabs=P._tables(), limits=limits, steps_per_iter=P.STEPS_PER_ITER,
        backend="pallas", pallas_options=(("interpret", False),),
    )  # fmt: skip
    return cuda_text(fn, tokens, lex_error)


__all__ = ["BLOCK", "lower_triton", "parse_with_info", "run_automaton"]
