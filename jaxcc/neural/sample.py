"""Sampling k candidate programs per source on the device, and ``compile``.

``sample(graphdef, params, src, key, ...)`` decodes k sequences per program in one jitted
``lax.while_loop`` over output positions: the source is prefilled once per program and
its keys/values are shared by the program's k samples; every step masks the logits with
the decoding state machine (``grammar.allowed``), so every finished sample is
well-formed bytecode. Sample 0 of each program is greedy when ``greedy_first`` (the
model's single best guess, pass@1), the others are drawn with temperature and top-p
(nucleus) sampling; ``temperature == 0`` makes all of them greedy.

Randomness is per (program, sample, position): ``fold_in(fold_in(fold_in(key, b), j), t)``,
so a program's candidates depend on the key and its index in the batch only, never on the
other programs of the batch.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax import lax

from jaxcc.limits import Limits
from jaxcc.neural import grammar as G
from jaxcc.neural import model as M
from jaxcc.neural import vocab as V
from jaxcc.neural.assemble import assemble, context
from jaxcc.neural.inputs import Bound, Src, source_features
from jaxcc.neural.model import Cache, Config, graphdef


class Samples(NamedTuple):
    tokens: object  # Int32[Array, "B k L"]  emitted tokens (no BOS; EOS then PAD)
    logp: object  # Float32[Array, "B k"]  log-probability under the masked distribution
    done: object  # Bool[Array, "B k"]  reached EOS within max_out tokens
    # with ``sample(..., record_alt=True)`` only (else None), R = ALT_RANKS:
    alt: object = None  # Int32[Array, "B k L R"]  the 2nd, 3rd, ... most likely allowed tokens
    margin: object = None  # Float32[Array, "B k L R"]  the best logit minus theirs (inf: none)


ALT_RANKS = 3  # alternatives recorded per position (the 2nd to 4th most likely tokens)


class Candidates(NamedTuple):
    """What ``compile`` returns: k candidate programs per source, and why not."""

    program: object  # isa.Program with fields shaped [B, k, I] / [B, k, F] / [B, k]
    ok: object  # Bool[Array, "B k"]  complete, grammatical and inside the neural bounds
    bound: object  # Int32[Array, "B"]  inputs.Bound (OK when the source fits the model)
    samples: Samples


# The decoding state machine over [rows, k] samples, each a nested jit: traced once per
# row count (the first span's and the groups'), not once per span's loop (it was most of
# ``sample``'s tracing time on the CPU, which precedes its compile)
_allowed_rows = jax.jit(jax.vmap(jax.vmap(G.allowed, in_axes=(0, None)), in_axes=(0, 0)))
_step_rows = jax.jit(jax.vmap(jax.vmap(G.step, in_axes=(0, 0, None)), in_axes=(0, 0, 0)))


def _nucleus(logits, top_p):
    """Logits with the tokens outside the smallest set of probability >= top_p removed."""
    p = jax.nn.softmax(logits, axis=-1)
    sp = jnp.sort(p, axis=-1)[..., ::-1]
    cum = jnp.cumsum(sp, axis=-1)
    keep = (cum - sp) < top_p[..., None]  # a token is kept if the mass before it < top_p
    thresh = jnp.min(jnp.where(keep, sp, 2.0), axis=-1, keepdims=True)
    return jnp.where(p >= thresh, logits, -jnp.inf)


def spans(n: int, first: int = 64) -> tuple[int, ...]:
    """The output-position spans of the CPU's decode loop for a cache of n positions:
    first, 2 first, 4 first, ... below n, then n. Positions t < spans[0] run in a loop
    whose attention reads the cache's first spans[0] positions, and so on; a loop that
    starts when every sample has ended runs no step."""
    out = []
    s = first
    while s < n:
        out.append(s)
        s *= 2
    return (*out, n)


def cpu_decode_default() -> bool:
    """Whether ``sample`` decodes the CPU's way by default (``cpu_decode=None``): when
    JAX's default backend is the CPU."""
    return jax.default_backend() == "cpu"


@functools.partial(
    jax.jit,
    static_argnames=("graphdef", "k", "limits", "greedy_first", "max_steps", "nlimits",
                     "cpu_decode", "cpu_group", "span_decode", "record_alt"),
)  # fmt: skip
def sample(graphdef, params, src: Src, key, k: int, limits: Limits, temperature=1.0,
           top_p=0.95, greedy_first: bool = True, max_steps: int | None = None,
           nlimits: V.NeuralLimits | None = None,
           cpu_decode: bool | None = None, cpu_group: int | None = None,
           span_decode: bool | None = None, force=None, record_alt: bool = False,
           skip=None) -> Samples:  # fmt: skip
    """k samples per program of src (batched). temperature, top_p: Float32 scalars.
    ``nlimits`` (default the model's): a shorter output budget (models with
    ``Config.features >= 2`` only) makes a smaller cache and a shorter loop; the mask's
    closing rule then finishes every sample within it.

    ``cpu_decode`` (static; None: ``cpu_decode_default()``, i.e. on the CPU) changes how
    the samples are computed, not the sampling rule: float32 compute instead of the
    model's bfloat16 (XLA's CPU dots are several times slower in bfloat16), and the loop
    split at ``spans(max_out)`` so the attention reads only the part of the cache that
    can be filled (each part is its own ``while_loop`` that stops when every sample has
    ended), the output cache one [B * k * H, span, dh] array per layer, padded to the
    next span's length between loops (``model.Cache``: so that no dot reads a copy of
    a slice; with ``span_decode=False``, one heads-major array); after the first span the
    programs still running are decoded ``cpu_group`` at a time (static; None:
    ``group_rows(B)``), each group to its own end (``_in_groups``: a batch's short
    programs stop paying for its longest one). The float32 logits differ
    from the bfloat16 ones in their last bits, so a sample can differ from the GPU's
    where two tokens are nearly tied; the spans alone change nothing but the order of
    float additions. Elsewhere (the default on a GPU): bfloat16 in the GPU's layout.

    ``span_decode`` (static; None: True) splits the loop at the spans on any device,
    without the CPU's other changes where ``cpu_decode`` is off (the model's dtype, the
    GPU's cache layout, no groups): a decode step, bound by reading the output cache,
    reads only the first span(t) positions. On an H100 it gave the plain loop's samples
    (2,048 of 2,048) 1.6-1.9x faster (docs/neural.md, section 4); ``False`` is the one
    loop the shipped model was first evaluated with.

    ``skip`` (Bool[B] or None): programs not decoded at all (their samples are PAD
    throughout and not done): ``compile`` skips the sources it would reject anyway.

    ``force`` (Int32[B, k, 2] or None): per sample a (position, token) pair; a sample
    with position >= 0 is decoded greedily except that at that position it takes the
    given token, where the mask allows it there (else the greedy one): the branches of
    ``branch_force``. ``record_alt`` (static): also return, per position, the 2nd to
    (``ALT_RANKS`` + 1)-th most likely allowed tokens under the mask and the logit
    margin from the most likely one to each (``Samples.alt``, ``Samples.margin``; inf
    where fewer are allowed)."""
    cpu = cpu_decode_default() if cpu_decode is None else cpu_decode
    by_span = True if span_decode is None else span_decode
    model = nnx.merge(graphdef, params)
    cfg = model.cfg
    if cpu and cfg.dtype != "float32":  # the same parameters (float32) in a float32 model
        model = nnx.merge(M.graphdef(cfg._replace(dtype="float32")), params)
    nl = nlimits or cfg.nlimits
    if cfg.features < 2 and nl != cfg.nlimits:
        raise ValueError("a features=1 model samples at its own nlimits only")
    b = src.n.shape[0]
    L = nl.max_out if max_steps is None else min(max_steps, nl.max_out)
    table = model.table()
    src_k, src_v, valid = model.prefill(src)
    dt = src_k.dtype
    hd = cfg.d_model // cfg.n_heads
    shape = (cfg.n_layers, b, k) + (
        (cfg.n_heads, nl.max_out, hd) if cpu else (nl.max_out, cfg.n_heads, hd)
    )
    # on the CPU with spans: one array per layer, grown to each span's length when its
    # loop starts (model.Block._step_per_layer), so that no dot reads a slice
    grown = cpu and by_span
    if grown:
        none = tuple(jnp.zeros((b * k * cfg.n_heads, 0, hd), dt) for _ in range(cfg.n_layers))
        cache = Cache(src_k, src_v, valid, none, none)
    else:
        cache = Cache(src_k, src_v, valid, jnp.zeros(shape, dt), jnp.zeros(shape, dt))
    ctx = context(src, limits, nl)
    ctx = G.broadcast(ctx, b)
    gs = jax.vmap(jax.vmap(lambda _: G.init()))(jnp.zeros((b, k)))
    keys = jax.vmap(lambda i: jax.vmap(lambda j: jax.random.fold_in(jax.random.fold_in(key, i), j))(
        jnp.arange(k)))(jnp.arange(b))  # fmt: skip
    temp = jnp.asarray(temperature, jnp.float32)
    top_p = jnp.asarray(top_p, jnp.float32)
    greedy = (temp <= 0) | ((jnp.arange(k) == 0) & greedy_first)[None, :]
    greedy = jnp.broadcast_to(greedy, (b, k))
    if force is None:
        force = jnp.full((b, k, 2), -1, jnp.int32)
    force = jnp.asarray(force, jnp.int32)
    greedy = greedy | (force[..., 0] >= 0)

    class Carry(NamedTuple):
        t: object
        tok: object
        cache: Cache
        gs: G.State
        out: object
        logp: object
        done: object
        alt: object = None
        margin: object = None

    def cond(c: Carry, end: int):
        return (c.t < end) & ~jnp.all(c.done)

    def body(c: Carry, span: int | None, ctx, keys, greedy, force):
        rows = c.tok.shape[0]
        logits, cache = model.decode(c.cache, c.tok, c.t, table, cpu, span)
        mask = _allowed_rows(c.gs, ctx)
        logits = jnp.where(mask, G.fold_prints(logits, mask), -jnp.inf)
        logz = jax.nn.log_softmax(logits, axis=-1)
        scaled = _nucleus(logits / jnp.maximum(temp, 1e-6), jnp.broadcast_to(top_p, (rows, k)))
        step_keys = jax.vmap(jax.vmap(lambda kk: jax.random.fold_in(kk, c.t)))(keys)
        g = jax.vmap(jax.vmap(lambda kk: jax.random.gumbel(kk, (V.VOCAB,))))(step_keys)
        drawn = jnp.argmax(scaled + g, axis=-1)
        tok = jnp.where(greedy, jnp.argmax(logits, axis=-1), drawn).astype(jnp.int32)
        # a forced branch, only where the mask allows it (a prefix computed in another
        # batch shape can differ in a near-tie, and the state machine must stay sound)
        ftok = jnp.clip(force[..., 1], 0, V.VOCAB - 1)
        here = (force[..., 0] == c.t) & jnp.take_along_axis(mask, ftok[..., None], axis=-1)[..., 0]
        tok = jnp.where(here, ftok, tok)
        tok = jnp.where(c.done, V.PAD, tok)
        lp = jnp.take_along_axis(logz, tok[..., None], axis=-1)[..., 0]
        gs, _ = _step_rows(c.gs, tok, ctx)
        out = lax.dynamic_update_slice_in_dim(c.out, tok[..., None], c.t, axis=2)
        alt, margin = c.alt, c.margin
        if record_alt:
            top, idx = lax.top_k(logits, ALT_RANKS + 1)
            gap = jnp.where(jnp.isfinite(top[..., 1:]), top[..., :1] - top[..., 1:], jnp.inf)
            gap = jnp.where(c.done[..., None], jnp.inf, gap)
            alt = lax.dynamic_update_slice_in_dim(alt, idx[..., None, 1:].astype(jnp.int32), c.t,
                                                  axis=2)  # fmt: skip
            margin = lax.dynamic_update_slice_in_dim(margin, gap[..., None, :], c.t, axis=2)
        return Carry(c.t + 1, tok, cache, gs, out, c.logp + jnp.where(c.done, 0.0, lp),
                     c.done | (tok == V.EOS), alt, margin)  # fmt: skip

    def loop(c: Carry, end: int, span: int | None, ctx=ctx, keys=keys, greedy=greedy, force=force):
        return lax.while_loop(functools.partial(cond, end=end),
                              functools.partial(body, span=span, ctx=ctx, keys=keys,
                                                greedy=greedy, force=force), c)  # fmt: skip

    skip = jnp.zeros((b, k), bool) if skip is None else jnp.broadcast_to(skip[:, None], (b, k))
    c0 = Carry(jnp.int32(0), jnp.full((b, k), V.BOS, jnp.int32), cache, gs,
               jnp.zeros((b, k, nl.max_out), jnp.int32), jnp.zeros((b, k), jnp.float32),
               skip,
               jnp.zeros((b, k, nl.max_out, ALT_RANKS), jnp.int32) if record_alt else None,
               jnp.full((b, k, nl.max_out, ALT_RANKS), jnp.inf) if record_alt else None)  # fmt: skip
    if by_span:  # one loop per span: positions t < span attend to the first span positions
        c = c0
        for i, span in enumerate(spans(nl.max_out)):
            end = min(span, L)
            if grown:
                pad = ((0, 0), (0, span - c.cache.out_k[0].shape[1]), (0, 0))
                c = c._replace(cache=c.cache._replace(
                    out_k=tuple(jnp.pad(x, pad) for x in c.cache.out_k),
                    out_v=tuple(jnp.pad(x, pad) for x in c.cache.out_v)))  # fmt: skip
            rows = b if i == 0 or not cpu else min(b, cpu_group or group_rows(b))
            if rows == b:
                c = loop(c, end, span)
            else:  # the programs still running, a group of `rows` at a time
                c = _in_groups(c, rows, lambda g, gctx, gkeys, ggreedy, gforce, end=end, span=span:
                               loop(g, end, span, gctx, gkeys, ggreedy, gforce), ctx, keys,
                               greedy, force)  # fmt: skip
            if end == L:
                break
    else:
        c = loop(c0, L, None)
    return Samples(c.out, c.logp, c.done & ~skip, c.alt, c.margin)


def group_rows(b: int) -> int:
    """Programs per group in the CPU decode's later spans (``sample``): an eighth of the
    batch, at least one."""
    return max(1, b // 8)


def _in_groups(c, rows: int, run, ctx, keys, greedy, force):
    """``run`` (a span's decode loop) over the programs of carry ``c`` that still have a
    running sample, ``rows`` programs at a time: each group is gathered out of the
    batch, run from the span's start to its own end and scattered back; a program all
    of whose samples have ended stays as it is. The same samples as one loop over the
    whole batch (each row's computation reads its own row only, and randomness is per
    program, sample and position); what it saves is that in lockstep every program pays
    for the batch's longest sample, here only for its group's."""
    b = c.tok.shape[0]
    # batch axis of each carry field (the caches are [layers, B, ...]); t is shared
    # the stacked cache's batch axis is 1; per-layer arrays hold B blocks of rows on axis 0
    o = "blocks" if isinstance(c.cache.out_k, tuple) else 1
    axes = type(c)(t=None, tok=0, cache=Cache(1, 1, 0, o, o), gs=0, out=0, logp=0, done=0,
                   alt=0, margin=0)  # fmt: skip

    def fields(f, *trees):  # f(leaf, ..., axis) over the carry's leaves
        return jax.tree.map(lambda a, *xs: jax.tree.map(lambda *ys: f(*ys, a), *xs),
                            axes, *trees, is_leaf=lambda x: x is None)  # fmt: skip

    def take(x, idx, axis):
        if axis == "blocks":
            return take(x.reshape(b, -1, *x.shape[1:]), idx, 0).reshape(-1, *x.shape[1:])
        return x if axis is None else jnp.take(x, jnp.minimum(idx, b - 1), axis=axis)

    def put(x, idx, part, axis):
        if axis is None:
            return x
        if axis == "blocks":
            blocks = lambda y: y.reshape(-1, x.shape[0] // b, *x.shape[1:])  # noqa: E731
            return put(blocks(x), idx, blocks(part), 0).reshape(x.shape)
        moved = jnp.moveaxis(x, axis, 0).at[idx].set(jnp.moveaxis(part, axis, 0), mode="drop")
        return jnp.moveaxis(moved, 0, axis)

    def group(state):
        full, todo, t_end = state
        idx = jnp.nonzero(todo, size=rows, fill_value=b)[0]  # b: an empty slot
        g = fields(lambda x, a: take(x, idx, a), full)
        g = g._replace(t=c.t, done=g.done | (idx >= b)[:, None])  # empty slots never run
        g = run(g, jax.tree.map(lambda x: take(x, idx, 0), ctx), take(keys, idx, 0),
                take(greedy, idx, 0), take(force, idx, 0))  # fmt: skip
        full = fields(lambda x, part, a: put(x, idx, part, a), full, g)
        return full, todo.at[idx].set(False, mode="drop"), jnp.maximum(t_end, g.t)

    todo = ~jnp.all(c.done, axis=1)
    full, _, t_end = lax.while_loop(lambda st: jnp.any(st[1]), group, (c, todo, c.t))
    return full._replace(t=t_end)


def branch_force(greedy: Samples, k: int, n: int | None = None):
    """Int32[B, k, 2]: the (position, token) branches of ``compile(..., branches=n)``
    from a greedy decode with ``record_alt`` (its sample 0). Row 0 is (-1, 0): the greedy
    sequence itself. Rows 1..n (default k - 1) are the n single-token departures from it
    that cost the least, the cost of putting the r-th most likely token at position t
    being the logit margin from the best token to it (positions up to and including the
    sequence's EOS, ranks 2 to ``ALT_RANKS + 1``), cheapest first. Rows after those, and
    rows a short sequence has no departures for, are (-1, 0): sampled as usual."""
    n = k - 1 if n is None else min(n, k - 1)
    margin, alt, tokens = greedy.margin[:, 0], greedy.alt[:, 0], greedy.tokens[:, 0]
    b, n_out, r = margin.shape
    eos = (tokens == V.EOS).astype(jnp.int32)
    ended = jnp.cumsum(eos, axis=-1) - eos  # EOSes before t
    cost = jnp.where((ended == 0)[..., None] & jnp.isfinite(margin), margin, jnp.inf)
    neg, order = lax.top_k(-cost.reshape(b, n_out * r), min(n, n_out * r))  # cheapest first
    ok = jnp.isfinite(neg)
    tok = jnp.take_along_axis(alt.reshape(b, n_out * r), order, axis=-1)
    rows = jnp.stack([jnp.where(ok, order // r, -1), jnp.where(ok, tok, 0)], -1)
    none = jnp.tile(jnp.array([-1, 0], jnp.int32), (b, k - rows.shape[1], 1))
    return jnp.concatenate([none[:, :1], rows.astype(jnp.int32), none[:, 1:]], axis=1)


def compile(tokens, params, key, limits: Limits | None = None, k: int = 16,  # noqa: A001
            temperature=0.8, top_p=0.95, greedy_first: bool = True,
            cfg: Config | None = None, nlimits: V.NeuralLimits | None = None,
            span_decode: bool | None = None, print_items=None,
            branches: int = 0, live=None, ret_types=None) -> Candidates:  # fmt: skip
    """k candidate programs per source: ``jaxcc.tokens.Tokens`` (batched) to Program
    arrays shaped [B, k, ...]; reshape to [B * k, ...] for ``vm.run`` (candidate j of
    program b is row b * k + j). One unbatched program's Tokens give its k candidates
    unbatched ([k, ...]), the same as row 0 of a batch with the same key (candidates do
    not depend on the other rows), so ``jax.vmap`` over programs (and keys) composes.
    ``params``: the model's parameters (``weights.load``), ``cfg`` its Config (default:
    the shipped model's). ``nlimits``: the source and output
    token budget of this call (default the model's; ``tier(...)`` picks a smaller one for
    short sources, which makes sampling several times cheaper). Jit-composable: k,
    limits, cfg and nlimits are static. Candidates of a source outside the neural bounds
    (or longer than nlimits.max_src) are marked not ok. ``span_decode``: ``sample``'s.
    ``print_items``: Int32[B, PF, PP], the front end's print items
    (``debuginfo.Debug.print_items``, ``inputs.print_items``): the typed decoding mask
    (``grammar``); None: the untyped mask. ``ret_types``: Int32[B, D], each def's return
    type from the front end (``inputs.typing``), part of the typed mask; None: not known.

    ``branches`` (static int, at most k - 1): decode greedily once first, then make
    candidates 1..branches that greedy sequence with one token changed, the departures
    the model found least sure (``branch_force``: the smallest logit margins over the
    2nd to 4th most likely tokens of each position), greedy after the change; the other
    candidates are sampled as without it (candidate 0 greedy). Where the model's slip is
    one token it nearly got right, a branch finds the right program that temperature
    samples, which mostly repeat the slip, miss (docs/neural.md section 4).

    ``live`` (Bool[B] or None: all): the sources to sample. The others, and the sources
    outside the neural bounds, are not decoded (``sample``'s ``skip``): their candidates
    are not ok, and they cost only their share of the first span's lockstep steps
    (``api.compile_many`` pads its batches with such rows)."""
    from jaxcc.limits import DEFAULT

    if jnp.ndim(tokens.kind) == 1:  # one program (and so under vmap): a batch of one
        one = lambda x: None if x is None else jnp.asarray(x)[None]  # noqa: E731
        c = compile(jax.tree.map(one, tokens), params, key, limits, k, temperature, top_p,
                    greedy_first, cfg, nlimits, span_decode, one(print_items), branches,
                    one(live), one(ret_types))  # fmt: skip
        return jax.tree.map(lambda x: x[0], c)
    limits = limits or DEFAULT
    cfg = cfg or Config()
    nl = nlimits or cfg.nlimits
    src = source_features(tokens, nl)._replace(print_items=print_items, ret_types=ret_types)
    skip = src.error != 0
    if live is not None:
        skip = skip | ~live
    force = None
    if branches > 0 and k > 1:
        first = sample(graphdef(cfg), params, src, key, 1, limits, 0.0, top_p, True,
                       nlimits=nl, span_decode=span_decode, record_alt=True, skip=skip)  # fmt: skip
        force = branch_force(first, k, branches)
        greedy_first = True
    smp = sample(graphdef(cfg), params, src, key, k, limits, temperature, top_p, greedy_first,
                 nlimits=nl, span_decode=span_decode, force=force, skip=skip)  # fmt: skip
    asm = assemble(smp.tokens, src, limits, nl)
    ok = asm.ok & smp.done & ~skip[:, None]
    bound = jnp.where((src.error == 0) & ~jnp.any(ok, axis=1), Bound.OUTPUT, src.error)
    return Candidates(asm.program, ok, bound.astype(jnp.int32), smp)


# Source / output token budgets for sampling (models with Config.features >= 2): outputs
# run to about 1.3 and at most about 1.7 tokens per source token on generated programs.
SAMPLE_TIERS = ((64, 160), (128, 288), (256, 512), (384, 640))


def tier(n_src: int, cfg: Config, among: tuple[int, ...] | None = None) -> V.NeuralLimits:
    """The smallest sampling budget for sources of at most ``n_src`` tokens (COMMENT and
    NL not counted): the model's own for features=1 models and long sources. ``among``:
    only the ``SAMPLE_TIERS`` whose source budget is in it (each budget is one more
    compile of the sampler; the model's own is always allowed)."""
    if cfg.features >= 2:
        for s, o in SAMPLE_TIERS:
            if among is not None and s not in among:
                continue
            if n_src <= s and s <= cfg.max_src and o <= cfg.max_out:
                return V.NeuralLimits(s, o)
    return cfg.nlimits


def n_source_tokens(sources, limits) -> np.ndarray:
    """Host: Int[len]: tokens the model reads per source (COMMENT and NL dropped; host lexer)."""
    from jaxcc.reference.host_lex import host_lex
    from jaxcc.tokens import Tok

    out = []
    for s in sources:
        t, _ = host_lex(s, limits)
        kind = np.asarray(t.kind)[: int(t.n_tokens)]
        out.append(int(np.sum((kind != Tok.COMMENT) & (kind != Tok.NL))))
    return np.array(out)
