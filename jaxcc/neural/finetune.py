"""Fine-tuning from execution (paper eq. 5): the model samples, the VM judges, one jit.

This is the loop jaxcc exists for: a code model's training step that compiles and tests
its own samples without leaving the device. One ``rl_step``:

1. samples k programs per source with the current parameters (temperature 1, the
   grammar mask on, so every sample is well-formed bytecode);
2. assembles them and runs them in the VM against the deterministic compiler's
   behaviour (``verify.verify_against``: the module body's output and status, every
   function on boundary and random inputs) -- the "tests";
3. rewards each sample ``R = 10 * passed + 1 * well_formed - alpha * vm_steps`` and
   takes a policy-gradient step on ``-mean(A * log p(sample))`` with the group-relative
   advantage ``A = (R - mean_k R) / (std_k R + eps)`` (GRPO-style: the other samples of
   the same program are the baseline), plus ``beta`` times the supervised loss on the
   reference tokens to keep the model close to the compiler's code.

``log p`` is taken under the *masked* distribution the sample was drawn from
(``assemble.masks``), so the gradient is that of the sampler's own policy.

Copy this module to train your own model against your own tests: replace
``verify.verify_against`` with ``vm.run_tests`` on your cases.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

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
    alpha: float = 1e-4  # per VM step (over all probe lanes)
    beta: float = 0.1  # weight of the supervised loss


DEFAULT_REWARD = Reward()


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
            nlimits: V.NeuralLimits | None = None):  # fmt: skip
    """One policy-gradient step on a batch of B programs (B * k samples).

    tokens: the programs' lexer Tokens (for the verification probes); src: their Src;
    target/target_len: the deterministic compiler's code as tokens (the reference).
    nlimits: the source/output budget src and target are cut to (default the model's;
    ``features >= 2`` models may use a shorter one, see ``train.cut``).
    Returns (params, opt_state, metrics)."""
    nl = nlimits or cfg.nlimits
    b = src.n.shape[0]
    ks, kp = jax.random.split(key)
    smp = sample(graphdef(cfg), jax.lax.stop_gradient(params), src, ks, k, limits,
                 1.0, 1.0, False, nlimits=nl)  # fmt: skip
    cand = assemble(smp.tokens, src, limits, nl)
    ref = assemble(target, src, limits, nl).program
    probes = verify.make_probes(tokens, ref.fn_nparams, kp, n_probes)
    v = verify.verify_against(cand.program, ref, probes, limits)
    well = cand.ok & smp.done
    r = (reward.passed * v.accepted + reward.well_formed * well
         - reward.alpha * v.steps.astype(jnp.float32))  # fmt: skip
    adv = (r - jnp.mean(r, axis=1, keepdims=True)) / (jnp.std(r, axis=1, keepdims=True) + 1e-3)
    adv = jax.lax.stop_gradient(adv).reshape(b * k)
    flat_tok = smp.tokens.reshape(b * k, -1)
    m = masks(smp.tokens, src, limits, nl).reshape(b * k, flat_tok.shape[1], V.VOCAB)
    src_k = jax.tree.map(lambda x: jnp.repeat(x, k, axis=0), src)

    def loss(p):
        pg = -jnp.mean(adv * seq_logp(p, cfg, src_k, flat_tok, m))
        sup, _ = loss_fn(p, cfg, src, target, target_len)
        return pg + reward.beta * sup, (pg, sup)

    (total, (pg, sup)), grads = jax.value_and_grad(loss, has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    metrics = {"reward": jnp.mean(r), "pass": jnp.mean(v.accepted), "any_pass":
               jnp.mean(jnp.any(v.accepted, axis=1)), "well_formed": jnp.mean(well),
               "pg": pg, "sup": sup}  # fmt: skip
    return params, opt_state, metrics


def main(argv=None) -> int:
    """python -m jaxcc.neural.finetune --weights IN.npz --export OUT.npz --time-limit S

    Policy-gradient fine-tuning of shipped weights on generated programs (levels given by
    --levels), k samples per program, rewards from the VM; writes float16 weights and a
    JSON log of the reward, pass rate and losses per step."""
    import argparse
    import json
    import time

    import numpy as np

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
        src, target = cut(src, jnp.asarray(b["target"]), ts, to)
        params, opt_state, m = rl_step(params, opt_state, tokens, src, target,
                                       jnp.asarray(b["target_len"]), jax.random.fold_in(key, step),
                                       cfg, tx, ns.k, lim, nlimits=V.NeuralLimits(ts, to))  # fmt: skip
        m = {k: float(v) for k, v in m.items()}
        log.append({"step": step, "level": int(b["level"][0]), **m})
        print(step, {k: round(v, 4) for k, v in m.items()}, flush=True)
        if time.time() - t0 > ns.time_limit:
            break
    export(params, cfg, ns.export, {"finetuned_from": ns.weights, "rl_steps": len(log),
                                    "rl_hyper": vars(ns), "rl_log_tail": log[-5:]})  # fmt: skip
    with open(ns.export[:-4] + "_rl_log.json", "w") as f:
        json.dump(log, f)
    del np
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
