"""Token sequences to ``isa.Program`` arrays, on the device.

``assemble(tokens, src, limits)`` runs the decoding state machine (``grammar.step``) over
each sequence with ``lax.scan`` and lays out what it emits: instructions at their
indices, labels resolved to instruction indices, the temporary's slot after the named
ones, and the function table (entry, parameters, locals, the exact reachable stack
depth, result type). Equivalent sequential Python for one sequence::

    state = grammar.init()
    for tok in tokens:
        ok &= grammar.allowed(state)[tok]      # only when check=True
        state, emitted = grammar.step(state, tok)
        if emitted.ins >= 0: op[emitted.ins], arg[...], line[...] = ...
    resolve labels and TEMP; fill fn_* from the declarations and each END

A sequence that breaks the grammar (only possible for input that did not come from the
masked sampler, or with ``check=True`` to find out) or does not end with EOS gives
``ok = False`` and an empty program (``n_code = 0``), which the VM rejects as invalid
bytecode: errors are data, and a bad sequence never becomes a plausible program.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxcc import isa
from jaxcc.limits import Limits
from jaxcc.neural import grammar as G
from jaxcc.neural import vocab as V
from jaxcc.neural.inputs import Src


class Assembled(NamedTuple):
    program: isa.Program  # Int32 arrays [B, I] / [B, F] (limits.max_code / max_funcs)
    ok: object  # Bool[Array, "B"]  the sequence was complete (and, with check, grammatical)


def context(src: Src, limits: Limits, nlimits: V.NeuralLimits):
    return G.context(src.n_lits, src.n_lines, nlimits.max_out, limits.max_code,
                     limits.max_locals, limits.max_funcs, src.print_items,
                     src.block_end, src.ret_types, src.code_lines, src.stmt_end,
                     src.multi_lines, src.cond_lines, src.expr_lines, src.body_last,
                     src.lit_min)  # fmt: skip


def _one(tokens, lits, ctx, limits: Limits, check: bool):
    n_i, n_f = limits.max_code, limits.max_funcs

    def body(s, tok):
        ok = G.allowed(s, ctx)[tok] if check else jnp.bool_(True)
        snap = (s.entry, s.n_slots, s.uses_temp, s.max_depth)
        s2, em = G.step(s, tok, ctx, lits)
        return s2, (em, ok, snap)

    s, (em, oks, (entry, n_slots, uses_temp, max_depth)) = lax.scan(body, G.init(), tokens)
    ok = jnp.all(oks) & (s.phase == G.DONE) & (s.n_instr <= n_i) & (s.n_decl + 1 <= n_f)
    n_code = jnp.minimum(s.n_instr, n_i)

    # function table, from each END token's snapshot
    fend = jnp.where(em.fn_end, em.fn, n_f)
    put = lambda x: jnp.zeros(n_f, jnp.int32).at[fend].set(x.astype(jnp.int32), mode="drop")  # noqa: E731
    fn_entry = put(entry)
    slots = put(n_slots)
    temp = put(uses_temp)
    fn_maxstack = put(max_depth)
    f = jnp.arange(n_f)
    decl = jnp.clip(f - 1, 0, G.MAX_DECLS - 1)
    in_decl = (f >= 1) & (f <= s.n_decl)
    fn_nparams = jnp.where(in_decl, s.decl_np[decl], 0)
    fn_rettype = jnp.where(f == 0, isa.T_NONE, jnp.where(in_decl, s.decl_ret[decl], 0))
    live = f <= s.n_decl
    fn_rettype = jnp.where(live, fn_rettype, 0)
    fn_nlocals = slots + temp

    # labels, then arguments
    ldef = em.label_def >= 0
    lab_at = (
        jnp.zeros((G.MAX_FUNCS, V.N_LABELS), jnp.int32)
        .at[jnp.where(ldef, em.fn, G.MAX_FUNCS), jnp.maximum(em.label_def, 0)]
        .set(em.label_at, mode="drop")
    )
    target = jnp.clip(lab_at[jnp.clip(em.fn, 0, G.MAX_FUNCS - 1), jnp.maximum(em.arg_label, 0)],
                      0, jnp.maximum(n_code - 1, 0))  # fmt: skip
    temp_slot = slots[jnp.clip(em.fn, 0, n_f - 1)]
    arg = jnp.where(em.arg_label >= 0, target, jnp.where(em.arg_temp, temp_slot, em.arg))
    at = jnp.where(em.ins >= 0, em.ins, n_i)
    op = jnp.zeros(n_i, jnp.int32).at[at].set(em.op, mode="drop")
    arg = jnp.zeros(n_i, jnp.int32).at[at].set(arg, mode="drop")
    line = jnp.zeros(n_i, jnp.int32).at[at].set(em.line, mode="drop")

    prog = isa.Program(op, arg, line, n_code, fn_entry, fn_nparams, fn_nlocals,
                       fn_maxstack, fn_rettype.astype(jnp.int32), s.n_decl + 1)  # fmt: skip
    empty = jax.tree.map(jnp.zeros_like, prog)
    prog = jax.tree.map(lambda a, b: jnp.where(ok, a, b), prog, empty)
    return prog, ok


@functools.partial(jax.jit, static_argnames=("limits", "nlimits", "check"))
def assemble(
    tokens,
    src: Src,
    limits: Limits,
    nlimits: V.NeuralLimits = V.NEURAL_DEFAULT,
    check: bool = False,
) -> Assembled:
    """Programs from token sequences. tokens: Int32[B, L] (no BOS; EOS then PAD), src: the
    Src of the same programs (for literal values and the mask's context). Leading axes
    beyond the batch (e.g. [B, k, L]) are allowed: src is broadcast over them."""
    lead = tokens.shape[:-1]
    b = src.n.shape[0]
    k = int(jnp.size(tokens)) // (b * tokens.shape[-1])
    per = tokens.reshape(b, k, tokens.shape[-1])
    ctx = G.broadcast(context(src, limits, nlimits), b)
    # programs outside, their k sequences inside: a program's context is not copied k times
    one = lambda t, lit, c: _one(t, lit, c, limits, check)  # noqa: E731
    prog, ok = jax.vmap(jax.vmap(one, in_axes=(0, None, None)))(per, src.lits, ctx)
    prog = jax.tree.map(lambda x: x.reshape(*lead, *x.shape[2:]), prog)
    return Assembled(prog, ok.reshape(lead))


@functools.partial(jax.jit, static_argnames=("limits", "nlimits"))
def masks(tokens, src: Src, limits: Limits, nlimits: V.NeuralLimits = V.NEURAL_DEFAULT):
    """Bool[..., L, VOCAB]: the decoding mask before each token of each sequence (the
    distribution the sampler drew from; the fine-tuning loss needs it). Shapes as in
    ``assemble``."""
    lead = tokens.shape[:-1]
    b = src.n.shape[0]
    k = int(jnp.size(tokens)) // (b * tokens.shape[-1])
    per = tokens.reshape(b, k, tokens.shape[-1])
    ctx = G.broadcast(context(src, limits, nlimits), b)

    def one(toks, c):
        def body(s, tok):
            m = G.allowed(s, c)
            return G.step(s, tok, c)[0], m

        return lax.scan(body, G.init(), toks)[1]

    return jax.vmap(jax.vmap(one, in_axes=(0, None)))(per, ctx).reshape(
        *lead, tokens.shape[-1], V.VOCAB
    )
