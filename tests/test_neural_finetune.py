"""Fine-tuning from execution (jaxcc/neural/finetune.py, paper eq. 5) on the CPU with a
tiny random-init model: the rewards of ``rl_step`` are the VM's verdicts on its own
samples, recomputed here with ``vm.run_tests``; a step moves the parameters, the
``tests=None`` path (``verify.verify_against``) runs too, and a second step at the same
shapes compiles nothing.

Every program is ``f`` (function 1; function 0 is the module body) with 3 test cases of
2 arguments (unused ones are 0); B = 3 programs, K = 4 samples each. A random model's
samples (almost) never pass, so the verdict itself is checked on the deterministic
compiler's code (``test_reference_code_passes_its_tests``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcc import lexer, vm
from jaxcc.neural import corpus, train
from jaxcc.neural import finetune as FT
from jaxcc.neural import model as M
from jaxcc.neural import vocab as V
from jaxcc.neural.assemble import assemble
from jaxcc.reference.compiler import compile_source
from jaxcc.reference.host_lex import host_lex_many
from property_tests.limits import NEURAL_SMALL

LIM = NEURAL_SMALL
CFG = M.Config(d_model=32, n_layers=1, n_heads=2, d_ff=64, max_src=64, max_out=64, remat=False)
K = 4  # samples per program
# alpha large enough that the steps term shows in the rewards (the default is 1e-4)
REWARD = FT.Reward(alpha=0.01)
TX = optax.adam(1e-2)  # one object: a static argument, so the compiled step is reused
SOURCES = [
    "def f(x: int) -> int:\n    return x + 1\n",
    "def f(a: int, b: int) -> int:\n    return a * b - 1\n",
    "def f(n: int) -> int:\n    if n < 0:\n        return -n\n    return n\nprint(f(-3))\n",
]
FNS = [lambda x, _: x + 1, lambda a, b: a * b - 1, lambda n, _: abs(n)]
ARGS = np.array([[[1, 0], [-5, 0], [41, 0]], [[2, 3], [0, 7], [-4, 5]],
                 [[3, 0], [-3, 0], [0, 0]]], np.int32)  # fmt: skip
EXPECTED = np.array([[fn(a, b) for a, b in case] for fn, case in zip(FNS, ARGS, strict=True)],
                    np.int32)  # fmt: skip
B, NC = ARGS.shape[:2]


def _tests(expected=EXPECTED):
    return FT.Tests(jnp.ones(B, jnp.int32), jnp.asarray(ARGS), jnp.asarray(expected))


@pytest.fixture(scope="module")
def batch():
    labels = [corpus.label(s, LIM, CFG.nlimits) for s in SOURCES]
    assert all(lb.tokens is not None for lb in labels), [lb.reason for lb in labels]
    target = np.zeros((B, CFG.max_out), np.int32)
    for i, lb in enumerate(labels):
        target[i, : len(lb.tokens)] = lb.tokens
    tlen = np.array([len(lb.tokens) for lb in labels], np.int32)
    source, length = lexer.encode(SOURCES, LIM)
    src = train.prepare(source, length, LIM, CFG.nlimits)  # the model's input
    tokens, err = host_lex_many(SOURCES, LIM)  # the probes' literals (tests=None only)
    assert np.asarray(err.code).tolist() == [0] * B
    return tokens, src, jnp.asarray(target), jnp.asarray(tlen)


@pytest.fixture(scope="module")
def stepped(batch):
    """One rl_step with tests= from fresh parameters, and the same step's rollout."""
    tokens, src, target, tlen = batch
    params = M.init_params(CFG, 0)
    opt_state = TX.init(params)
    key = jax.random.key(3)
    out = FT.rl_step(params, opt_state, tokens, src, target, tlen, key, CFG, TX, K, LIM, REWARD,
                     tests=_tests())  # fmt: skip
    ro = FT.sample_and_reward(params, tokens, src, target, key, CFG, K, LIM, reward=REWARD,
                              tests=_tests())  # fmt: skip
    return params, opt_state, out, ro


def _finite_scalars(metrics):
    scalars = {k: float(v) for k, v in metrics.items() if np.ndim(v) == 0}
    assert set(scalars) >= {"reward", "pass", "any_pass", "well_formed", "pg", "sup"}
    assert all(np.isfinite(v) for v in scalars.values()), scalars
    return scalars


def test_rewards_are_the_vms_verdicts(batch, stepped):
    """Per-sample rewards = 10 * passed + 1 * well_formed - alpha * steps, with passed and
    steps from vm.run_tests on the samples (each program's cases repeated K times)."""
    _, src, _, _ = batch
    _, _, (_, _, m), ro = stepped
    _finite_scalars(m)
    assert np.asarray(m["rewards"]).shape == (B, K)
    assert np.asarray(m["passed_per_sample"]).shape == (B, K)
    assert np.asarray(ro.tokens).shape == (B, K, CFG.max_out)
    # the samples again, assembled and run here
    asm = assemble(ro.tokens, src, LIM, CFG.nlimits)
    done = np.any(np.asarray(ro.tokens) == V.EOS, axis=-1)
    well = np.asarray(asm.ok) & done
    flat = jax.tree.map(lambda x: x.reshape(B * K, *x.shape[2:]), asm.program)
    rep = lambda x: np.repeat(np.asarray(x), K, axis=0)  # noqa: E731
    passed, per_case, res = vm.run_tests(flat, rep(np.ones(B, np.int32)), rep(ARGS),
                                         rep(EXPECTED), LIM, with_result=True)  # fmt: skip
    passed = np.asarray(passed).reshape(B, K)
    steps = np.asarray(res.steps).reshape(B, K, NC).sum(axis=-1)
    assert np.asarray(per_case).shape == (B * K, NC)
    assert steps.max() > 0  # the samples ran
    want = 10.0 * passed + 1.0 * well - REWARD.alpha * steps
    np.testing.assert_array_equal(np.asarray(ro.passed), passed)
    np.testing.assert_array_equal(np.asarray(ro.well_formed), well)
    np.testing.assert_array_equal(np.asarray(ro.steps), steps)
    np.testing.assert_allclose(np.asarray(ro.reward), want, rtol=1e-6, atol=1e-5)
    # rl_step judged the same samples (same key)
    np.testing.assert_allclose(np.asarray(m["rewards"]), want, rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(m["passed_per_sample"]), passed)
    np.testing.assert_allclose(float(m["reward"]), want.mean(), rtol=1e-5)
    np.testing.assert_allclose(float(m["pass"]), passed.mean())
    np.testing.assert_allclose(float(m["well_formed"]), well.mean())


def test_reference_code_passes_its_tests(batch):
    """The verdict itself: the deterministic compiler's code (the reference compiler's
    program, and the labelled tokens assembled) passes correct expected values and fails
    when one of them is changed; only that program's candidates fail."""
    _, src, target, _ = batch
    host = jax.tree.map(
        lambda *xs: np.stack(xs), *(compile_source(s, LIM).program for s in SOURCES)
    )
    asm = assemble(target, src, LIM, CFG.nlimits)
    assert np.asarray(asm.ok).all()
    cands = jax.tree.map(lambda a, b: np.stack([np.asarray(a), np.asarray(b)], axis=1),
                         host, asm.program)  # fmt: skip
    passed, steps = FT.run_cases(cands, _tests(), LIM)
    assert np.asarray(passed).tolist() == [[True, True]] * B
    assert (np.asarray(steps) > 0).all()
    ones = np.ones((B, 2), bool)
    r = FT.rewards(passed, ones, steps, REWARD)
    np.testing.assert_allclose(np.asarray(r), 11.0 - REWARD.alpha * np.asarray(steps), rtol=1e-6)
    wrong = EXPECTED.copy()
    wrong[1, 2] += 1
    passed_w, steps_w = FT.run_cases(cands, _tests(wrong), LIM)
    assert np.asarray(passed_w).tolist() == [[True, True], [False, False], [True, True]]
    np.testing.assert_array_equal(np.asarray(steps_w), np.asarray(steps))
    r_w = np.asarray(FT.rewards(passed_w, ones, steps_w, REWARD))
    np.testing.assert_allclose(r_w[1], 1.0 - REWARD.alpha * np.asarray(steps)[1], rtol=1e-6)


def test_step_moves_parameters_and_traces_once(batch, stepped):
    tokens, src, target, tlen = batch
    params, _, (p1, o1, _), _ = stepped
    before, after = jax.tree.leaves(params), jax.tree.leaves(p1)
    assert len(before) == len(after)
    assert any(
        not np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(before, after, strict=True)
    )
    n = FT.rl_step._cache_size()
    # same shapes, a new key and new expected values (tests is traced): no new trace
    p2, _, m2 = FT.rl_step(p1, o1, tokens, src, target, tlen, jax.random.key(4), CFG, TX, K, LIM,
                           REWARD, tests=_tests(EXPECTED + 1))  # fmt: skip
    assert FT.rl_step._cache_size() == n
    _finite_scalars(m2)
    assert jax.tree.structure(p2) == jax.tree.structure(p1)


def test_verify_against_path(batch):
    """tests=None: passed from verify.verify_against against the reference code."""
    tokens, src, target, tlen = batch
    params = M.init_params(CFG, 1)
    p1, _, m = FT.rl_step(params, TX.init(params), tokens, src, target, tlen, jax.random.key(5),
                          CFG, TX, K, LIM, REWARD, n_probes=8)  # fmt: skip
    s = _finite_scalars(m)
    r = np.asarray(m["rewards"])
    assert r.shape == (B, K) and np.isfinite(r).all()
    assert np.asarray(m["passed_per_sample"]).dtype == bool
    assert 0.0 <= s["pass"] <= 1.0 and 0.0 <= s["well_formed"] <= 1.0
    assert any(
        not np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(p1), strict=True)
    )
