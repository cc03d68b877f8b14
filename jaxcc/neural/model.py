"""The neural compiler's network: a prefix-LM transformer decoder in Flax NNX.

One sequence is ``[source tokens ; BOS ; bytecode tokens]`` at fixed positions: the
source occupies positions ``0 .. max_src-1`` (padded; padding is never attended to) and
the bytecode starts at position ``max_src``. Source tokens attend to every source token
(bidirectional: the whole program is known before compiling); bytecode tokens attend to
the source and causally to the bytecode so far.

Embeddings are built so that copying is easy: a source NAME token carries the embedding
of its name id and the output token ``VAR_k`` carries the same one (``LIT_i`` / the
literal slot and ``LN_l`` / the line likewise); the output head is tied to the output
token table, so "emit the name I attend to" is a dot product with what was attended.

``Config`` is static and hashable. ``Model.__call__`` is the teacher-forced forward pass
(training); ``prefill`` and ``decode`` are the two halves used by the sampler: the
source's keys and values are computed once per program and *shared* (broadcast, never
copied) by its k samples, whose own keys and values live in a per-sample cache.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from jaxcc.neural import vocab as V
from jaxcc.neural.inputs import N_BUCKETS, Src
from jaxcc.tokens import N_TOK

_NEG = -1e9


def _mixed(f):
    """Run a method with standard dtype promotion: the model computes in bfloat16 with
    float32 parameters on purpose (the test suite turns strict promotion on)."""

    @functools.wraps(f)
    def g(*a, **kw):
        with jax.numpy_dtype_promotion("standard"):
            return f(*a, **kw)

    return g


class Config(NamedTuple):
    d_model: int = 256
    n_layers: int = 6
    n_heads: int = 8
    d_ff: int = 1024
    max_src: int = 384
    max_out: int = 640
    dtype: str = "bfloat16"  # compute dtype (parameters are float32)
    remat: bool = True  # recompute each block's activations in the backward pass
    # 1: the first shipped model (source described by kind, name, literal slot, value
    # bucket, line; one position table over [source ; bytecode]). 2: NUMBER tokens carry
    # their canonical literal slot (what LIT_i names), plus block depth, bracket depth and
    # position in the line; source and bytecode have position tables of their own, so a
    # batch may be cut to shorter shapes (train.TIERS) without moving any position.
    features: int = 1
    # how attention is computed, not what it computes: "xla" (the einsums below, on any
    # device) or "cudnn" (jax.nn.dot_product_attention's fused kernel, NVIDIA GPUs only;
    # training uses it when it matches "xla" on the first batch, train.pick_attention).
    # Never saved: checkpoints and shipped weights record "xla".
    attention: str = "xla"

    @property
    def nlimits(self) -> V.NeuralLimits:
        return V.NeuralLimits(self.max_src, self.max_out)


class Cache(NamedTuple):
    """Keys/values of one batch of samples. Shapes: src [layers, B, S, H, dh] (shared by
    the k samples of a program), out [layers, B, k, L, H, dh], or [layers, B, k, H, L, dh]
    ("heads-major", ``decode(..., heads_major=True)``: where XLA's CPU backend otherwise
    transposes the whole cache for the attention's dots every step), or tuples of one
    array per layer, each [B * k * H, n, dh] (the sampler's layout on the CPU with spans:
    n grows to each span's length; ``Block._step_per_layer``)."""

    src_k: object
    src_v: object
    src_valid: object  # Bool[B, S]
    out_k: object
    out_v: object


class Block(nnx.Module):
    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        d, dt = cfg.d_model, jnp.dtype(cfg.dtype)
        self.h = cfg.n_heads
        self.attention = cfg.attention
        self.norm1 = nnx.RMSNorm(d, dtype=dt, rngs=rngs)
        self.qkv = nnx.Linear(d, 3 * d, use_bias=False, dtype=dt, rngs=rngs)
        self.proj = nnx.Linear(d, d, use_bias=False, dtype=dt, rngs=rngs)
        self.norm2 = nnx.RMSNorm(d, dtype=dt, rngs=rngs)
        self.up = nnx.Linear(d, 2 * cfg.d_ff, use_bias=False, dtype=dt, rngs=rngs)
        self.down = nnx.Linear(cfg.d_ff, d, use_bias=False, dtype=dt, rngs=rngs)

    def _split(self, x):
        q, k, v = jnp.split(self.qkv(self.norm1(x)), 3, axis=-1)
        shape = (*x.shape[:-1], self.h, x.shape[-1] // self.h)
        return q.reshape(shape), k.reshape(shape), v.reshape(shape)

    def _mlp(self, x):
        a, g = jnp.split(self.up(self.norm2(x)), 2, axis=-1)
        return x + self.down(a * jax.nn.silu(g))

    def __call__(self, x, allow):
        """x: [B, T, d]; allow: Bool[B, T, T] (query, key)."""
        q, k, v = self._split(x)
        if self.attention == "cudnn":  # fused: the [B, H, T, T] scores never reach memory
            o = jax.nn.dot_product_attention(q, k, v, mask=allow[:, None], implementation="cudnn")
            return self._mlp(x + self.proj(o.reshape(x.shape))), (k, v)
        scale = q.shape[-1] ** -0.5
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) * scale
        s = jnp.where(allow[:, None], s, _NEG)
        p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
        o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(x.shape)
        return self._mlp(x + self.proj(o)), (k, v)

    def step(self, x, src_k, src_v, src_valid, out_k, out_v, layer: int, t,
             heads_major: bool = False, span: int | None = None):  # fmt: skip
        """One decoding step of this block (layer ``layer``). x: [B, k, d] at output
        position t; src_*: [B, S, H, dh]; out_*: [layers, B, k, L, H, dh], or [layers, B,
        k, H, L, dh] when ``heads_major`` (entries < t filled), updated in place at (layer,
        t). ``span`` (static; None: L): attend to output positions < span only (t < span:
        the later positions are masked anyway). Returns (x, out_k, out_v)."""
        q, k1, v1 = self._split(x)  # [B, k, H, dh]
        pos = 4 if heads_major else 3  # the position axis of out_*
        if isinstance(out_k, tuple):  # one array per layer, attended to whole
            return self._step_per_layer(x, q, k1, v1, src_k, src_v, src_valid, out_k, out_v,
                                        layer, t)  # fmt: skip
        at = tuple(t if i == pos else (layer if i == 0 else 0) for i in range(6))
        new_k, new_v = (jnp.expand_dims(a, pos - 1)[None] for a in (k1, v1))
        out_k = jax.lax.dynamic_update_slice(out_k, new_k.astype(out_k.dtype), at)
        out_v = jax.lax.dynamic_update_slice(out_v, new_v.astype(out_v.dtype), at)
        ck, cv = out_k[layer], out_v[layer]
        if span is not None and span < ck.shape[pos - 1]:
            ck = jax.lax.slice_in_dim(ck, 0, span, axis=pos - 1)
            cv = jax.lax.slice_in_dim(cv, 0, span, axis=pos - 1)
        o_sub = "bjhld" if heads_major else "bjlhd"
        s2 = jnp.einsum(f"bjhd,{o_sub}->bjhl", q, ck)
        x = self._attend(x, q, src_k, src_v, src_valid, s2, t,
                         lambda p: jnp.einsum(f"bjhl,{o_sub}->bjhd", p, cv))  # fmt: skip
        return x, out_k, out_v

    def _attend(self, x, q, src_k, src_v, src_valid, s2, t, values):
        """The rest of a decoding step from the query q [B, k, H, dh] and its raw scores
        s2 [B, k, H, L] over output positions (those after t masked here): attention over
        [source ; output positions] and the block's MLP. ``values(p)``: the output part
        of the attention's sum, [B, k, H, dh], from its weights p [B, k, H, L]."""
        scale = q.shape[-1] ** -0.5
        s1 = jnp.einsum("bjhd,bshd->bjhs", q, src_k).astype(jnp.float32) * scale
        s1 = jnp.where(src_valid[:, None, None, :], s1, _NEG)
        s2 = s2.astype(jnp.float32) * scale
        s2 = jnp.where((jnp.arange(s2.shape[-1]) <= t)[None, None, None], s2, _NEG)
        p = jax.nn.softmax(jnp.concatenate([s1, s2], axis=-1), axis=-1).astype(x.dtype)
        n = src_k.shape[1]
        o = jnp.einsum("bjhs,bshd->bjhd", p[..., :n], src_v) + values(p[..., n:])
        return self._mlp(x + self.proj(o.reshape(x.shape)))

    def _step_per_layer(self, x, q, k1, v1, src_k, src_v, src_valid, out_k, out_v,
                        layer: int, t):  # fmt: skip
        """``step`` over a cache held as one array per layer (``out_k``, ``out_v``: tuples
        of [B * k * H, n, dh], row (b, j, h)), all of whose n positions are attended to
        (the ones after t masked): the sampler's CPU path, which grows the arrays to each
        span's length between its loops. The same attention; the layout is for XLA's CPU
        backend, which copied a stacked cache's layer and span slices for every dot, and
        where a [B, k, H, n, dh] array with B = 1 made it fuse the in-place update twice
        (into the dot's operand, for the size-1 axis, and into the loop's result) and copy
        the whole array for each. Here the dots read the updated arrays as they are."""
        b, kk, h, dh = q.shape
        at = (0, t, 0)
        ck, cv = (jax.lax.dynamic_update_slice(c[layer], a.reshape(-1, 1, dh).astype(c[layer].dtype), at)
                  for c, a in ((out_k, k1), (out_v, v1)))  # fmt: skip
        s2 = jnp.einsum("nd,nld->nl", q.reshape(-1, dh), ck).reshape(b, kk, h, -1)
        x = self._attend(x, q, src_k, src_v, src_valid, s2, t,
                         lambda p: jnp.einsum("nl,nld->nd", p.reshape(b * kk * h, -1), cv)
                         .reshape(q.shape))  # fmt: skip
        out_k = (*out_k[:layer], ck, *out_k[layer + 1 :])
        out_v = (*out_v[:layer], cv, *out_v[layer + 1 :])
        return x, out_k, out_v


class Model(nnx.Module):
    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        d = cfg.d_model
        self.cfg = cfg
        emb = lambda n: nnx.Embed(n, d, rngs=rngs)  # noqa: E731
        self.kind = emb(N_TOK)
        self.name = emb(V.N_VARS)
        self.lit = emb(V.N_LITS)
        self.bucket = emb(N_BUCKETS)
        self.line = emb(V.N_LINES + 1)
        self.out = emb(V.VOCAB)
        if cfg.features >= 2:
            self.indent = emb(16)
            self.paren = emb(16)
            self.col = emb(64)
            self.pos = emb(cfg.max_src)
            self.opos = emb(cfg.max_out)
        else:
            self.pos = emb(cfg.max_src + cfg.max_out)
        self.blocks = nnx.List([Block(cfg, rngs) for _ in range(cfg.n_layers)])
        self.norm = nnx.RMSNorm(d, dtype=jnp.dtype(cfg.dtype), rngs=rngs)

    # -- embeddings
    @_mixed
    def table(self):
        """Float32[VOCAB, d]: output token embeddings (input side and tied head)."""
        t = self.out.embedding[...]
        t = t.at[V.VAR_BASE : V.VAR_BASE + V.N_VARS].add(self.name.embedding[...])
        t = t.at[V.LIT_BASE : V.LIT_BASE + V.N_LITS].add(self.lit.embedding[...])
        return t.at[V.LN_BASE : V.LN_BASE + V.N_LINES].add(self.line.embedding[1:])

    def embed_src(self, src: Src):
        is_name = (src.kind == 2)[..., None]  # Tok.NAME
        is_num = (src.kind == 3)[..., None]  # Tok.NUMBER
        v2 = self.cfg.features >= 2
        lit = self.lit(src.clit if v2 else src.lit)
        x = (self.kind(src.kind) + self.line(src.line) + self.bucket(src.bucket)
             + jnp.where(is_name, self.name(src.name), 0.0) + jnp.where(is_num, lit, 0.0))  # fmt: skip
        if v2:
            x = x + self.indent(src.indent) + self.paren(src.paren) + self.col(src.col)
        return x + self.pos.embedding[None, : src.kind.shape[-1]]

    def out_pos(self, s: int, t):
        """Position embedding(s) of output position(s) t (s: the source length)."""
        if self.cfg.features >= 2:
            return self.opos.embedding[t]
        return self.pos.embedding[s + t]

    def _logits(self, h, table):
        h = self.norm(h)
        return jnp.einsum("...d,vd->...v", h, table.astype(h.dtype)).astype(jnp.float32) * (
            self.cfg.d_model**-0.5
        )

    # -- teacher forcing
    @_mixed
    def __call__(self, src: Src, tgt_in):
        """Logits Float32[B, L, VOCAB] for each next token given tgt_in Int32[B, L]
        (BOS followed by the target shifted right)."""
        cfg = self.cfg
        s, n_out = src.kind.shape[-1], tgt_in.shape[-1]
        table = self.table()
        x = jnp.concatenate(
            [self.embed_src(src), table[tgt_in] + self.out_pos(s, jnp.arange(n_out))[None]], axis=1
        ).astype(jnp.dtype(cfg.dtype))
        i = jnp.arange(s + n_out)
        src_ok = (i < s)[None, :] & (
            i[None, :] < src.n[:, None]
        )  # [B, T] key is a real source token
        causal = (i[None, :] >= s) & (i[None, :] <= i[:, None])  # [T, T] key is an earlier output
        allow = src_ok[:, None, :] | causal[None]
        for blk in self.blocks:
            if cfg.remat:
                x, _ = nnx.remat(lambda b, x, a: b(x, a))(blk, x, allow)
            else:
                x, _ = blk(x, allow)
        return self._logits(x[:, s:], table)

    # -- sampling
    @_mixed
    def prefill(self, src: Src) -> tuple:
        """Keys/values of the source, per layer: ([layers, B, S, H, dh] x2, valid [B, S])."""
        s = src.kind.shape[-1]
        x = self.embed_src(src).astype(jnp.dtype(self.cfg.dtype))
        valid = jnp.arange(s)[None, :] < src.n[:, None]
        allow = jnp.broadcast_to(valid[:, None, :], (x.shape[0], s, s))
        ks, vs = [], []
        for blk in self.blocks:
            x, (k, v) = blk(x, allow)
            ks.append(k)
            vs.append(v)
        return jnp.stack(ks), jnp.stack(vs), valid

    @_mixed
    def decode(self, cache: Cache, tok, t, table, heads_major: bool = False,
               span: int | None = None):  # fmt: skip
        """Logits Float32[B, k, VOCAB] of the token after ``tok`` (Int32[B, k], the token at
        output position t; BOS at t = 0), and the cache with position t filled.
        ``heads_major`` (static): the cache's out_* are [layers, B, k, H, L, dh] (see
        ``Cache``); ``span`` (static): attend to output positions < span only (t < span)."""
        s = cache.src_k.shape[2]
        x = (table[tok] + self.out_pos(s, t)[None, None]).astype(jnp.dtype(self.cfg.dtype))
        ok, ov = cache.out_k, cache.out_v
        for i, blk in enumerate(self.blocks):
            x, ok, ov = blk.step(x, cache.src_k[i], cache.src_v[i], cache.src_valid, ok, ov, i,
                                 t, heads_major, span)  # fmt: skip
        return self._logits(x, table), cache._replace(out_k=ok, out_v=ov)


@functools.lru_cache(maxsize=8)
def graphdef(cfg: Config):
    """The (hashable, static) graph definition of a model of this config."""
    return nnx.split(nnx.eval_shape(lambda: Model(cfg, nnx.Rngs(0))))[0]


def init_params(cfg: Config, seed: int):
    """Freshly initialised parameters (an nnx.State) for ``cfg``."""
    return nnx.split(Model(cfg, nnx.Rngs(seed)))[1]


def n_params(model: Model) -> int:
    return sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
