"""The decoding mask's promise: whatever the model's weights, every sample is
well-formed bytecode (docs/neural.md, section "Constrained decoding").

An untrained (random) model is sampled thousands of times at temperature 1 and 2 (so the
mask, not the model, decides what is legal); every candidate is assembled and run in the
VM, its module body and every function on random arguments, and no lane may stop with
InvalidBytecode. The assembler's own grammar check must accept every sample too.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import OPTIMIZED
from jaxcc import vm
from jaxcc.errors import Code
from jaxcc.limits import Limits
from jaxcc.neural import grammar as G
from jaxcc.neural import model as M
from jaxcc.neural import sample as S
from jaxcc.neural import vocab as V
from jaxcc.neural.assemble import assemble, masks
from jaxcc.neural.inputs import source_features
from jaxcc.reference.host_lex import host_lex_many

LIM = Limits(max_source_bytes=512, max_tokens=256, max_code=160, max_funcs=6, max_locals=24,
             max_stack=256, max_depth=12, max_output=16, max_steps=400)  # fmt: skip
CFG = M.Config(d_model=32, n_layers=1, n_heads=2, d_ff=64, max_src=96, max_out=192, remat=False)
SOURCES = [
    "def f(a, b):\n    return a + b\nprint(f(2, 3))\n",
    "x = 3\nwhile x > 0:\n    x -= 1\n    print(x, x < 2)\n",
    "def g(n):\n    if n <= 1:\n        return 1\n    return n * g(n - 1)\n\ndef h(a, b, c):\n    return a < b < c\nprint(g(5), h(1, 2, 3))\n",
    "for i in range(10):\n    if i % 3 == 0:\n        continue\n    print(i)\n",
]


# these tests spend their time running thousands of samples, not compiling: their jits are
# compiled for run time (the suite's default is XLA:CPU's fast compile, conftest.py)
@functools.partial(jax.jit, compiler_options=OPTIMIZED)
def _run(flat, entry, args):
    return vm.run(flat, LIM, entry=entry, args=args).status


@functools.partial(jax.jit, static_argnames=("k",), compiler_options=OPTIMIZED)
def _sample(params, src, key, k, temperature):
    return S.sample(M.graphdef(CFG), params, src, key, k, LIM, temperature, 1.0, False)


def _run_everything(prog):
    """Statuses of the module body and of every function on random arguments."""
    flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), prog)
    n = flat.n_code.shape[0]
    statuses = [
        np.asarray(_run(flat, jnp.zeros((n,), jnp.int32), jnp.zeros((n, V.MAX_PARAMS), jnp.int32)))
    ]
    rng = np.random.default_rng(0)
    for f in range(1, LIM.max_funcs):
        args = rng.integers(-5, 6, size=(n, V.MAX_PARAMS)).astype(np.int32)
        st = _run(flat, jnp.full((n,), f, jnp.int32), args)
        live = np.asarray(flat.n_funcs) > f
        statuses.append(np.where(live, np.asarray(st), Code.OK))
    return np.stack(statuses, axis=1)


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_untrained_samples_are_well_formed(temperature):
    toks, _ = host_lex_many(SOURCES, LIM)
    params = M.init_params(CFG, 1)
    src = source_features(toks, CFG.nlimits)
    # 4 sources x 128 x 2 temperatures: 1024 samples (2048 with --slow); 128 is also
    # test_neural_typed's shape, whose compile the persistent cache then shares
    k = 256 if os.environ.get("JAXCC_SLOW") == "1" else 128
    smp = _sample(params, src, jax.random.key(7), k, temperature)
    assert bool(jnp.all(smp.done)), "every sample reaches EOS within max_out"
    asm = assemble(smp.tokens, src, LIM, CFG.nlimits, check=True)
    assert bool(jnp.all(asm.ok)), "the assembler's grammar check accepts every sample"
    st = _run_everything(asm.program)
    assert not np.any(st == Code.INVALID_BYTECODE), np.unique(st, return_counts=True)
    # the samples are not trivial: they vary and some run to completion
    assert len({tuple(np.asarray(t)) for t in smp.tokens.reshape(-1, CFG.max_out)[:64]}) > 32
    assert np.mean(st[:, 0] == Code.OK) > 0.01


def test_mask_is_what_the_sampler_drew_from():
    """Every sampled token is allowed by the mask recomputed over the finished sequence,
    and log p (masked) is finite."""
    toks, _ = host_lex_many(SOURCES[:2], LIM)
    params = M.init_params(CFG, 2)
    src = source_features(toks, CFG.nlimits)
    smp = S.sample(M.graphdef(CFG), params, src, jax.random.key(3), 8, LIM, 1.0, 0.9, True)
    m = masks(smp.tokens, src, LIM, CFG.nlimits)
    hit = jnp.take_along_axis(m, smp.tokens[..., None], axis=-1)[..., 0]
    assert bool(jnp.all(hit))
    assert bool(jnp.all(jnp.isfinite(smp.logp)))


def test_candidates_do_not_depend_on_other_programs():
    toks_a, _ = host_lex_many([SOURCES[0], SOURCES[1]], LIM)
    toks_b, _ = host_lex_many([SOURCES[0], SOURCES[3]], LIM)
    params = M.init_params(CFG, 3)
    key = jax.random.key(11)
    a = S.compile(toks_a, params, key, k=4, limits=LIM, temperature=1.0, cfg=CFG)
    b = S.compile(toks_b, params, key, k=4, limits=LIM, temperature=1.0, cfg=CFG)
    np.testing.assert_array_equal(a.samples.tokens[0], b.samples.tokens[0])
    for x, y in zip(a.program, b.program, strict=True):
        np.testing.assert_array_equal(x[0], y[0])


def test_one_program_and_vmap_give_the_batch_rows():
    """The array conventions: one unbatched program's candidates are row 0 of a batch's at
    the same key, and ``jax.vmap`` over programs (one key for all) gives each program the
    candidates it gets as row 0 of a batch (or alone)."""
    toks, _ = host_lex_many([SOURCES[0], SOURCES[1]], LIM)
    params = M.init_params(CFG, 3)
    key = jax.random.key(5)
    run = functools.partial(S.compile, params=params, key=key, k=2, limits=LIM,
                            temperature=1.0, cfg=CFG)  # fmt: skip
    batch = run(toks)
    swapped = run(jax.tree.map(lambda x: x[::-1], toks))  # program 1 in row 0
    one = run(jax.tree.map(lambda x: x[0], toks))
    mapped = jax.vmap(lambda t: run(t))(toks)
    assert one.program.op.shape == batch.program.op.shape[1:]

    def same(many, one, i):  # tokens and programs exactly; log-probabilities to rounding
        for x, y in zip((many.program, many.ok, many.bound, many.samples.tokens),
                        (one.program, one.ok, one.bound, one.samples.tokens), strict=True):  # fmt: skip
            jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[i], b), x, y)
        np.testing.assert_allclose(many.samples.logp[i], one.samples.logp, rtol=1e-5)

    same(batch, one, 0)
    same(mapped, one, 0)
    same(mapped, jax.tree.map(lambda x: x[0], swapped), 1)
    assert bool(jnp.any(batch.ok))  # candidates were made, not only rejected


def test_closing_rule_finishes_inside_tiny_budgets():
    """With a budget far smaller than a random walk needs, the mask still closes every
    function and ends with EOS (the closing rule), and the result runs."""
    cfg = CFG._replace(max_out=48)
    toks, _ = host_lex_many([SOURCES[2]], LIM)
    params = M.init_params(cfg, 4)
    src = source_features(toks, cfg.nlimits)
    smp = S.sample(M.graphdef(cfg), params, src, jax.random.key(5), 64, LIM, 2.0, 1.0, False)
    assert bool(jnp.all(smp.done))
    asm = assemble(smp.tokens, src, LIM, cfg.nlimits, check=True)
    assert bool(jnp.all(asm.ok))
    assert not np.any(_run_everything(asm.program) == Code.INVALID_BYTECODE)


def test_grammar_rejects_what_it_must():
    ctx = G.context(2, 3, 64, 64, 16, 4)
    s = G.init()
    m = np.asarray(G.allowed(s, ctx))
    assert m[V.DEF] and m[V.BODY] and not m[V.op_tok(1)] and not m[V.EOS]
    s, _ = G.step(s, V.BODY, ctx)
    m = np.asarray(G.allowed(s, ctx))
    assert not m[V.END], "a function cannot end before an unconditional transfer"
    assert not m[V.op_tok(7)], "ADD needs two operands"
    assert not m[V.op_tok(0)], "NOP is never emitted"
    assert m[V.op_tok(1)] and m[V.LABEL] and m[V.ln_tok(3)] and not m[V.ln_tok(4)]
    s, _ = G.step(s, V.op_tok(1), ctx)  # LOAD_CONST
    m = np.asarray(G.allowed(s, ctx))
    assert m[V.lit_tok(1)] and not m[V.lit_tok(2)] and m[V.SMALL_0]
