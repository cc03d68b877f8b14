"""Does the span decode (``sample(..., span_decode=True)``) pay on a GPU, and what does it
change? For held-out programs of a few levels: the shipped model's k samples per program
by the plain loop and by the span loops (same key), the fraction of identical samples,
the agreement of their verdicts (``verify.verify_against`` on probe inputs) and the
time of each; then candidates per second at k = 16, 256, 1000 both ways
(``evaluate.throughput``). Writes OUT/results.json.

    PYTHONPATH=. python bench/span_decode_check.py OUT [--levels 1,3] [--n 64]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

from jaxcc import lexer
from jaxcc.neural import api, evaluate, weights
from jaxcc.neural import sample as S


def _run(src, length, params, key, ref, cfg, k, nl, vl, tier, span):
    c, accepted = evaluate.judged(src, length, params, key, ref, 0.8, cfg, k, True, 128, nl, vl,
                                  tier, span)  # fmt: skip
    return c.samples.tokens, accepted


_run_jit = jax.jit(_run, static_argnames=("cfg", "k", "nl", "vl", "tier", "span"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--levels", default="1,3")
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--throughput-s", type=float, default=150.0)
    p.add_argument("--ks", default="16,256,1000", help="k of the throughput rows")
    p.add_argument(
        "--tp-max-tokens",
        type=int,
        default=None,
        help="throughput on the level-2 programs of at most this many tokens",
    )
    p.add_argument("--tp-spans", default="0,1", help="span_decode values of the throughput")
    ns = p.parse_args(argv)
    os.makedirs(ns.out, exist_ok=True)
    cfg, params = weights.load()
    nl, vl = api.NEURAL_LIMITS, api.VERIFY_LIMITS
    res = {"device": jax.devices()[0].device_kind, "k": ns.k, "n": ns.n, "levels": {}}

    def save():
        with open(os.path.join(ns.out, "results.json"), "w") as f:
            json.dump(res, f, indent=1)

    for level in [int(x) for x in ns.levels.split(",") if x]:
        srcs = evaluate.heldout_sources(level, ns.n)
        ref, ok = evaluate.reference_programs(srcs, nl)
        tier = S.tier(int(S.n_source_tokens(srcs, nl).max()), cfg)
        src, length = lexer.encode(srcs, nl)
        key = jax.random.key(7)
        row = {"tier": list(tier)}
        out = {}
        for span in (False, True):
            args = (src, length, params, key, ref, cfg, ns.k, nl, vl, tier, span)
            t0 = time.time()
            jax.block_until_ready(_run_jit(*args))
            t_first = time.time() - t0
            t0 = time.time()
            toks, acc = jax.device_get(_run_jit(*args))
            row[f"seconds_span={span}"] = time.time() - t0
            row[f"first_call_s_span={span}"] = t_first
            out[span] = (np.asarray(toks), np.asarray(acc) & ok[:, None])
        (ta, aa), (tb, ab) = out[False], out[True]
        same = np.all(ta == tb, axis=-1)
        row.update(samples=int(same.size), identical=int(same.sum()),
                   verdicts_equal=int((aa == ab).sum()),
                   accepted_plain=int(aa.sum()), accepted_span=int(ab.sum()),
                   any_plain=int(aa.any(1).sum()), any_span=int(ab.any(1).sum()),
                   programs=int(ok.sum()),
                   mean_len=float((ta != 0).sum(-1).mean()))  # fmt: skip
        res["levels"][level] = row
        print(level, row, flush=True)
        save()
    srcs = evaluate.throughput_sources(nl, ns.tp_max_tokens)
    for span in [bool(int(x)) for x in ns.tp_spans.split(",")]:
        res[f"throughput_span={span}"] = evaluate.throughput(
            cfg,
            params,
            srcs,
            nl,
            tuple(int(x) for x in ns.ks.split(",")),
            budget_s=ns.throughput_s,
            span_decode=span,
            typed=False,  # as this check was run (docs/neural.md section 4)
        )
        print("throughput", span, res[f"throughput_span={span}"], flush=True)
        save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
