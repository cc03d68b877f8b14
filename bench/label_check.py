"""Check that the typed decoding mask never excludes a token of the labeller's sequence
(docs/neural.md section 3): label each program (``corpus.label`` at the sampling tier of
its batch of 32, as ``evaluate.judge`` samples it), run the mask along the sequence
(``assemble.masks`` with the front end's print items and return types) and print every
program with an excluded token (its index, the position and the token).

    PYTHONPATH=. python bench/label_check.py [--level 5] [--n 1024] [--train 150]

``--level``/``--n``: the first n held-out programs of that level (``evaluate``'s);
``--train``: that many generated programs of each level 0-5 (training seeds 777 + level).
A CPU minute or so per 100 level-5 programs.
"""

from __future__ import annotations

import argparse

import jax.numpy as jnp
import numpy as np

from jaxcc import lexer
from jaxcc.neural import api, corpus, weights
from jaxcc.neural import evaluate as E
from jaxcc.neural import sample as S
from jaxcc.neural import vocab as V
from jaxcc.neural.assemble import masks
from jaxcc.neural.inputs import source_features, typing


def check(srcs: list[str], tag: str, cfg, batch: int = 32) -> tuple[int, list[tuple]]:
    """(sequences checked, [(program index, position, token name)] of the excluded)."""
    nl = api.NEURAL_LIMITS
    n_src = S.n_source_tokens(srcs, nl)
    checked, bad = 0, []
    for i in range(0, len(srcs), batch):
        tier = S.tier(int(n_src[i : i + batch].max()), cfg)
        rows = [
            (j, corpus.label(srcs[j], nl, tier).tokens) for j in range(i, min(i + batch, len(srcs)))
        ]
        rows = [(j, t) for j, t in rows if t is not None]
        if not rows:
            continue
        src, length = lexer.encode([srcs[j] for j, _ in rows], nl)
        tokens, lex_error = lexer.lex(src, length, nl)
        pt, rt = typing(tokens, nl, lex_error)
        feats = source_features(tokens, tier)._replace(print_items=pt, ret_types=rt)
        seq = np.zeros((len(rows), tier.max_out), np.int32)
        for r, (_, t) in enumerate(rows):
            seq[r, : len(t)] = t
        m = np.asarray(masks(jnp.asarray(seq), feats, nl, tier))
        for r, (j, t) in enumerate(rows):
            checked += 1
            ok = m[r, np.arange(len(t)), t]
            if not ok.all():
                p = int(np.argmin(ok))
                bad.append((j, p, V.name(int(t[p]))))
                print(tag, "program", j, "excluded at", p, V.name(int(t[p])), flush=True)
    print(tag, "checked", checked, "excluded", len(bad), flush=True)
    return checked, bad


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/label_check.py")
    p.add_argument("--level", type=int, default=5)
    p.add_argument("--n", type=int, default=1024, help="held-out programs (0: none)")
    p.add_argument("--train", type=int, default=150, help="training programs a level (0: none)")
    ns = p.parse_args(argv)
    cfg, _ = weights.load(weights.DEFAULT)
    bad = []
    if ns.n:
        bad += check(E.heldout_sources(ns.level, ns.n), f"heldout level {ns.level}", cfg)[1]
    for level in range(6) if ns.train else ():
        bad += check(corpus.generate(777 + level, ns.train, level), f"train level {level}", cfg)[1]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
