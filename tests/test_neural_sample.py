"""The sampler's CPU decode path (``sample(..., cpu_decode=True)``: float32 compute, an
output cache of one array per layer, one ``while_loop`` per span of output positions) computes the
same samples as the plain loop (one ``while_loop`` over the whole cache), on a tiny
random float32 model where both compute in float32, with the programs still running
after the first span decoded in groups of any size; and it stops as early."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxcc.limits import Limits
from jaxcc.neural import model as M
from jaxcc.neural import sample as S
from jaxcc.neural.inputs import source_features
from jaxcc.reference.host_lex import host_lex_many

LIM = Limits(max_source_bytes=512, max_tokens=256, max_code=160, max_funcs=6, max_locals=24,
             max_stack=256, max_depth=12, max_output=16, max_steps=400)  # fmt: skip
CFG = M.Config(d_model=32, n_layers=2, n_heads=2, d_ff=64, max_src=96, max_out=192,
               remat=False, dtype="float32", features=2)  # fmt: skip
SOURCES = [
    "def f(a, b):\n    return a + b\nprint(f(2, 3))\n",
    "x = 3\nwhile x > 0:\n    x -= 1\n    print(x, x < 2)\n",
    "for i in range(10):\n    if i % 3 == 0:\n        continue\n    print(i)\n",
]


def test_group_rows():
    assert [S.group_rows(b) for b in (1, 3, 12, 16, 64)] == [1, 1, 1, 2, 8]


def test_spans():
    assert S.spans(640) == (64, 128, 256, 512, 640)
    assert S.spans(512) == (64, 128, 256, 512)
    assert S.spans(160) == (64, 128, 160)
    assert S.spans(64) == (64,)
    assert S.spans(40) == (40,)


@pytest.mark.parametrize(
    "temperature, max_steps, group", [(1.0, None, None), (0.0, None, None), (1.0, 150, None),
                                      (1.0, None, 2), (1.0, 150, 3)]
)  # fmt: skip
def test_cpu_decode_equals_plain_loop(temperature, max_steps, group):
    """group: programs per group after the first span (None: group_rows(3) = 1, each
    program alone; 2: a group and a group with an empty slot; 3: the whole batch)."""
    toks, _ = host_lex_many(SOURCES, LIM)
    params = M.init_params(CFG, 3)
    src = source_features(toks, CFG.nlimits)
    run = lambda cpu: S.sample(M.graphdef(CFG), params, src, jax.random.key(11), 8, LIM,  # noqa: E731
                               temperature, 0.95, True, max_steps, cpu_decode=cpu,
                               cpu_group=group, span_decode=cpu)  # fmt: skip
    plain, cpu = run(False), run(True)
    np.testing.assert_array_equal(np.asarray(cpu.tokens), np.asarray(plain.tokens))
    np.testing.assert_array_equal(np.asarray(cpu.done), np.asarray(plain.done))
    np.testing.assert_allclose(np.asarray(cpu.logp), np.asarray(plain.logp), rtol=1e-4, atol=1e-4)
    lens = (np.asarray(plain.tokens) != 0).sum(-1)
    if max_steps is None:
        assert bool(np.all(np.asarray(plain.done)))
    else:
        assert lens.max() <= max_steps
    if temperature > 0:  # the samples run into the later spans: every loop is exercised
        assert lens.max() > S.spans(CFG.max_out)[1], lens.max()


def test_skipped_rows_are_not_decoded_and_change_no_other_row():
    """``sample(..., skip=)`` (the CPU path, where the groups read ``done``): a skipped
    program's samples are PAD throughout and not done; the others are exactly the samples
    without the skip. ``compile(..., live=)`` marks a program that is not live not ok
    (``api.compile_many`` pads its batches so)."""
    toks, _ = host_lex_many(SOURCES, LIM)
    params = M.init_params(CFG, 3)
    src = source_features(toks, CFG.nlimits)
    skip = np.array([False, True, False])
    run = lambda sk: S.sample(M.graphdef(CFG), params, src, jax.random.key(11), 8, LIM,  # noqa: E731
                              1.0, 0.95, True, cpu_decode=True, span_decode=True, skip=sk)  # fmt: skip
    full, part = run(None), run(skip)
    assert not np.asarray(part.tokens)[1].any() and not np.asarray(part.done)[1].any()
    assert np.asarray(full.done)[1].all() and np.asarray(full.tokens)[1].any()
    for r in (0, 2):
        np.testing.assert_array_equal(np.asarray(part.tokens)[r], np.asarray(full.tokens)[r])
        np.testing.assert_array_equal(np.asarray(part.logp)[r], np.asarray(full.logp)[r])
    c = S.compile(toks, params, jax.random.key(11), LIM, 4, cfg=CFG, live=~skip)
    assert not np.asarray(c.ok)[1].any()
    assert not np.asarray(c.samples.tokens)[1].any()


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_span_decode_in_the_gpu_layout_equals_plain_loop(temperature):
    """``span_decode=True`` without the CPU path (the GPU's cache layout and dtype, no
    groups): the plain loop's samples, stopping as early."""
    toks, _ = host_lex_many(SOURCES, LIM)
    params = M.init_params(CFG, 3)
    src = source_features(toks, CFG.nlimits)
    run = lambda by_span: S.sample(M.graphdef(CFG), params, src, jax.random.key(11), 8, LIM,  # noqa: E731
                                   temperature, 0.95, True, cpu_decode=False,
                                   span_decode=by_span)  # fmt: skip
    plain, spans = run(False), run(True)
    np.testing.assert_array_equal(np.asarray(spans.tokens), np.asarray(plain.tokens))
    np.testing.assert_array_equal(np.asarray(spans.done), np.asarray(plain.done))
    np.testing.assert_allclose(np.asarray(spans.logp), np.asarray(plain.logp), rtol=1e-4,
                               atol=1e-4)  # fmt: skip
    if temperature > 0:
        assert (np.asarray(plain.tokens) != 0).sum(-1).max() > S.spans(CFG.max_out)[1]


def test_cpu_decode_of_a_bfloat16_model_is_float32():
    """A bfloat16 model (the shipped dtype) samples in float32 on the CPU path: the same
    samples as the same parameters in a float32 model on the plain loop."""
    toks, _ = host_lex_many(SOURCES[:2], LIM)
    params = M.init_params(CFG, 4)
    src = source_features(toks, CFG.nlimits)
    bf16 = M.graphdef(CFG._replace(dtype="bfloat16"))
    a = S.sample(bf16, params, src, jax.random.key(5), 4, LIM, 1.0, 0.95, cpu_decode=True)
    b = S.sample(M.graphdef(CFG), params, src, jax.random.key(5), 4, LIM, 1.0, 0.95,
                 cpu_decode=False)  # fmt: skip
    np.testing.assert_array_equal(np.asarray(a.tokens), np.asarray(b.tokens))
