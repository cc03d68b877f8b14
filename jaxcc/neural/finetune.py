"""Fine-tuning from execution (paper eq. 5): the model samples, the VM judges, one jit.

This is the loop jaxcc exists for: a code model's training step that compiles and tests
its own samples without leaving the device. One ``rl_step``:

1. samples k programs per source with the current parameters (temperature 1, the
   grammar mask on, so every sample is well-formed bytecode) and assembles them;
2. runs them in the VM to decide, per sample, whether it ``passed`` -- one of two ways:

   * **your own test cases** (``rl_step(..., tests=Tests(entry, args, expected))``):
     ``vm.run_tests`` on the B * k samples, each program's cases repeated for its k
     samples; a sample passes when its function ``entry[b]`` returns ``expected[b, c]``
     on every ``args[b, c]`` (return values only: what is printed is not looked at);
   * **the deterministic compiler's behaviour** (``tests=None``, the default):
     ``verify.verify_against`` on the reference code (``target``) -- the module body's
     status and printed output, every function on boundary and random probe inputs made
     from the source's literals. This is what ``python -m jaxcc.neural.finetune`` uses on
     generated programs, which come with no tests of their own;

3. rewards each sample ``R = 10 * passed + 1 * well_formed - alpha * vm_steps``
   (``Reward``; vm_steps over the sample's test lanes, or its probe lanes) and takes a
   policy-gradient step on ``-mean(A * log p(sample))`` with the group-relative
   advantage ``A = (R - mean_k R) / (std_k R + eps)`` (GRPO-style: the other samples of
   the same program are the baseline), plus ``beta`` times the supervised loss on the
   reference tokens to keep the model close to the compiler's code.

``log p`` is taken under the *masked* distribution the sample was drawn from
(``assemble.masks``), so the gradient is that of the sampler's own policy. Steps 1-3
without the gradient are ``sample_and_reward`` (it returns the samples, their programs
and rewards: a ``Rollout``); ``rl_step`` is that plus the update.

To train against your own tests, copy this (shapes: B programs, K cases of A arguments;
function 0 is the module body, 1, 2, ... the ``def``s in source order)::

    from jaxcc.neural import finetune, train

    src = train.prepare(source, length, limits, cfg.nlimits)        # the model's input
    tests = finetune.Tests(entry=jnp.ones(B, jnp.int32),            # test f, function 1
                           args=args,                               # Int32[B, K, A]
                           expected=expected)                       # Int32[B, K]
    tx = optax.adam(1e-5)
    opt_state = tx.init(params)
    for step in range(n):
        params, opt_state, m = finetune.rl_step(
            params, opt_state, tokens, src, target, target_len, jax.random.key(step),
            cfg, tx, 8, limits, tests=tests)
        print(float(m["pass"]), m["passed_per_sample"])            # Bool[B, k]

(``tokens``: the programs' lexer Tokens, read only by the ``tests=None`` path;
``target``/``target_len``: the reference tokens for the ``beta`` term, e.g. from
``corpus.label``.) ``tests`` is traced, so new cases of the same shapes reuse the
compiled step.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxcc import isa, vm
from jaxcc.limits import Limits
from jaxcc.neural import verify
from jaxcc.neural import vocab as V
from jaxcc.neural.assemble import assemble, masks
from jaxcc.neural.model import Config, _mixed, graphdef
from jaxcc.neural.sample import sample
from jaxcc.neural.train import loss_fn


class Reward(NamedTuple):
    passed: float = 10.0
    well_formed: float = 1.0
    alpha: float = 1e-4  # per VM step (over all test or probe lanes of the sample)
    beta: float = 0.1  # weight of the supervised loss


DEFAULT_REWARD = Reward()


class Tests(NamedTuple):
    """Test cases per program, ``vm.run_tests``' arguments: program b passes when its
    function ``entry[b]`` returns ``expected[b, c]`` for every case c called with
    ``args[b, c]`` (parameter i gets ``args[b, c, i]``, 0 for i >= A)."""

    __test__ = False  # not a pytest class

    entry: object  # Int32[Array, "B"]  the function under test (0: the module body)
    args: object  # Int32[Array, "B K A"]  K cases of A arguments each
    expected: object  # Int32[Array, "B K"]  the return value each case must give


class Rollout(NamedTuple):
    """``sample_and_reward``'s k samples per program, judged."""

    tokens: object  # Int32[Array, "B k L"]  the samples (no BOS; EOS then PAD)
    program: isa.Program  # the samples assembled: fields [B, k, I] / [B, k, F] / [B, k]
    well_formed: object  # Bool[Array, "B k"]  assembled, and reached EOS
    passed: object  # Bool[Array, "B k"]  passed the tests (or verify_against)
    steps: object  # Int32[Array, "B k"]  VM steps over its test (or probe) lanes, saturating
    reward: object  # Float32[Array, "B k"]  R of eq. 5 (``rewards``)


def rewards(passed, well_formed, steps, reward: Reward = DEFAULT_REWARD):
    """R = passed * reward.passed + well_formed * reward.well_formed - alpha * steps
    (Float32, the shape of the arguments)."""
    return (reward.passed * passed.astype(jnp.float32)
            + reward.well_formed * well_formed.astype(jnp.float32)
            - reward.alpha * steps.astype(jnp.float32))  # fmt: skip


def run_cases(candidates: isa.Program, tests: Tests, limits: Limits):
    """(passed Bool[B, k], steps Int32[B, k]) of candidates [B, k, ...] on ``tests`` [B]:
    one ``vm.run_tests`` over the B * k candidates, program b's cases repeated for each
    of its k candidates; steps is the sum of the candidate's case lanes' ``res.steps``
    (INT32_MAX where that would not fit). Jit-compatible (``limits`` static)."""
    b, k = candidates.op.shape[:2]
    n_cases = tests.args.shape[1]
    flat = jax.tree.map(lambda x: x.reshape(b * k, *x.shape[2:]), candidates)
    rep = lambda x: jnp.repeat(jnp.asarray(x, jnp.int32), k, axis=0)  # noqa: E731
    passed, _, res = vm.run_tests(flat, rep(tests.entry), rep(tests.args), rep(tests.expected),
                                  limits, with_result=True)  # fmt: skip
    steps = verify._sat_sum(res.steps.reshape(b * k, n_cases), axis=1)
    return passed.reshape(b, k), steps.reshape(b, k)


@functools.partial(jax.jit, static_argnames=("cfg", "k", "limits", "nlimits", "reward", "n_probes"))
@_mixed
def sample_and_reward(params, tokens, src, target, key, cfg: Config, k: int, limits: Limits,
                      nlimits: V.NeuralLimits | None = None, reward: Reward = DEFAULT_REWARD,
                      n_probes: int = 32, tests: Tests | None = None) -> Rollout:  # fmt: skip
    """``rl_step``'s samples and rewards (steps 1-3 of the module docstring) without the
    gradient step, for the same arguments: with the same key, the same samples.

    tests given: ``passed`` from ``run_cases`` (``vm.run_tests``); None: from
    ``verify.verify_against`` against ``target`` assembled, on ``n_probes`` probes per
    function made from ``tokens``. ``tokens`` and ``target`` are read only then."""
    nl = nlimits or cfg.nlimits
    ks, kp = jax.random.split(key)
    smp = sample(graphdef(cfg), jax.lax.stop_gradient(params), src, ks, k, limits,
                 1.0, 1.0, False, nlimits=nl)  # fmt: skip
    cand = assemble(smp.tokens, src, limits, nl)
    if tests is None:
        ref = assemble(target, src, limits, nl).program
        probes = verify.make_probes(tokens, ref.fn_nparams, kp, n_probes)
        v = verify.verify_against(cand.program, ref, probes, limits)
        passed, steps = v.accepted, v.steps
    else:
        passed, steps = run_cases(cand.program, tests, limits)
    well = cand.ok & smp.done
    r = rewards(passed, well, steps, reward)
    return Rollout(smp.tokens, cand.program, well, passed, steps, r)


def seq_logp(params, cfg: Config, src, tokens, mask):
    """Sum of masked log-probabilities of each sequence. tokens: [N, L], mask [N, L, V]."""
    model = nnx.merge(graphdef(cfg), params)
    tgt_in = jnp.concatenate([jnp.full_like(tokens[:, :1], V.BOS), tokens[:, :-1]], axis=1)
    logits = model(src, tgt_in)
    logits = jnp.where(mask, logits, -1e9)
    lp = jax.nn.log_softmax(logits, axis=-1)
    tok_lp = jnp.take_along_axis(lp, tokens[..., None], axis=-1)[..., 0]
    live = jnp.cumsum(tokens == V.EOS, axis=1) - (tokens == V.EOS) == 0  # up to EOS
    return jnp.sum(jnp.where(live & (tokens != V.PAD), tok_lp, 0.0), axis=1)


@functools.partial(
    jax.jit, static_argnames=("cfg", "tx", "k", "limits", "reward", "n_probes", "nlimits")
)
@_mixed
def rl_step(params, opt_state, tokens, src, target, target_len, key, cfg: Config, tx, k: int,
            limits: Limits, reward: Reward = DEFAULT_REWARD, n_probes: int = 32,
            nlimits: V.NeuralLimits | None = None, tests: Tests | None = None):  # fmt: skip
    """One policy-gradient step on a batch of B programs (B * k samples).

    tokens: the programs' lexer Tokens (for the verification probes); src: their Src;
    target/target_len: the deterministic compiler's code as tokens (the reference).
    nlimits: the source/output budget src and target are cut to (default the model's;
    ``features >= 2`` models may use a shorter one, see ``train.cut``).
    tests: your own cases (``Tests``, traced: new cases of the same shapes reuse the
    compiled step); a sample passes when it passes them all (``run_cases``). None: when
    it behaves as ``target`` does (``verify.verify_against``).
    Returns (params, opt_state, metrics): metrics' scalars, and per sample ``rewards``
    (Float32[B, k]) and ``passed_per_sample`` (Bool[B, k]); ``sample_and_reward`` with
    the same arguments gives the samples themselves."""
    nl = nlimits or cfg.nlimits
    b = src.n.shape[0]
    ro = sample_and_reward(params, tokens, src, target, key, cfg, k, limits, nl, reward,
                           n_probes, tests)  # fmt: skip
    r = ro.reward
    adv = (r - jnp.mean(r, axis=1, keepdims=True)) / (jnp.std(r, axis=1, keepdims=True) + 1e-3)
    adv = jax.lax.stop_gradient(adv).reshape(b * k)
    flat_tok = ro.tokens.reshape(b * k, -1)
    m = masks(ro.tokens, src, limits, nl).reshape(b * k, flat_tok.shape[1], V.VOCAB)
    src_k = jax.tree.map(lambda x: jnp.repeat(x, k, axis=0), src)

    def loss(p):
        pg = -jnp.mean(adv * seq_logp(p, cfg, src_k, flat_tok, m))
        sup, _ = loss_fn(p, cfg, src, target, target_len)
        return pg + reward.beta * sup, (pg, sup)

    (total, (pg, sup)), grads = jax.value_and_grad(loss, has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    metrics = {"reward": jnp.mean(r), "pass": jnp.mean(ro.passed), "any_pass":
               jnp.mean(jnp.any(ro.passed, axis=1)), "well_formed": jnp.mean(ro.well_formed),
               "pg": pg, "sup": sup, "rewards": r, "passed_per_sample": ro.passed}  # fmt: skip
    return params, opt_state, metrics


def main(argv=None) -> int:
    """python -m jaxcc.neural.finetune --weights IN.npz --export OUT.npz --time-limit S

    Policy-gradient fine-tuning of shipped weights on generated programs (levels given by
    --levels), k samples per program, rewards from the VM; writes float16 weights and a
    JSON log of the reward, pass rate and losses per step."""
    import argparse
    import json
    import time

    from jaxcc import lexer
    from jaxcc.neural import corpus, weights
    from jaxcc.neural.train import TRAIN_LIMITS, cut, export, prepare, tier_of

    p = argparse.ArgumentParser(prog="python -m jaxcc.neural.finetune")
    p.add_argument("--weights", default=weights.DEFAULT)
    p.add_argument("--export", required=True)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--time-limit", type=float, default=240)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--levels", default="0,1,2")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tier", default=None,
                   help="train and sample every batch at this source,output budget, e.g. "
                   "768,1280 (one compile; default: the smallest of train.TIERS that holds "
                   "the batch, one compile per budget met)")  # fmt: skip
    ns = p.parse_args(argv)
    t0 = time.time()
    cfg, params = weights.load(ns.weights)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(ns.lr))
    opt_state = tx.init(params)
    levels = [int(x) for x in ns.levels.split(",")]
    log = []
    key = jax.random.key(ns.seed)
    lim = TRAIN_LIMITS
    for step in range(ns.steps):
        b = corpus.batch_at(
            ns.seed + 7919, step, ns.batch, levels[step % len(levels)], lim, cfg.nlimits
        )
        src = prepare(b["source"], b["length"], lim, cfg.nlimits)
        tokens, _ = jax.jit(lexer.lex, static_argnames="limits")(b["source"], b["length"], lim)
        # cut to the shortest training shape that holds the batch (sampling budget too)
        ts, to = tier_of(int(b["n_src"].max()), int(b["target_len"].max()), cfg)
        if ns.tier:
            ts, to = (int(x) for x in ns.tier.split(","))
            if int(b["n_src"].max()) > ts or int(b["target_len"].max()) > to:
                print(step, "skipped: the batch is over --tier", flush=True)
                continue
        src, target = cut(src, jnp.asarray(b["target"]), ts, to)
        params, opt_state, m = rl_step(params, opt_state, tokens, src, target,
                                       jnp.asarray(b["target_len"]), jax.random.fold_in(key, step),
                                       cfg, tx, ns.k, lim, nlimits=V.NeuralLimits(ts, to))  # fmt: skip
        m = {k: float(v) for k, v in m.items() if jnp.ndim(v) == 0}  # scalars only
        log.append({"step": step, "level": int(b["level"][0]), **m})
        print(step, {k: round(v, 4) for k, v in m.items()}, flush=True)
        if time.time() - t0 > ns.time_limit:
            break
    export(params, cfg, ns.export, {"finetuned_from": ns.weights, "rl_steps": len(log),
                                    "rl_hyper": vars(ns), "rl_log_tail": log[-5:]})  # fmt: skip
    with open(ns.export[:-4] + "_rl_log.json", "w") as f:
        json.dump(log, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
