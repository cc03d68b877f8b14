"""What the model gets wrong: the first token where its greedy sequence leaves the
labeller's, for mined programs that no candidate compiled right (``mine.py``'s
hard.json, ``correct == 0``), classified by the two tokens' kinds (a wrong variable,
literal, line, label or opcode; or a different kind of token: a statement left out,
added or reordered).

    PYTHONPATH=. python bench/neural_failures.py HARD_JSON [--n 40] [--out FILE]
        [--print-oracle] [--typed]

The greedy sequence examined is the untyped mask's (how the programs were mined);
``--typed`` also samples greedily with the typed mask (the front end's print items,
``grammar.fold_prints``) and judges that sequence.
"""

from __future__ import annotations

import argparse
import collections
import json

import jax
import numpy as np

from jaxcc import isa, lexer
from jaxcc.neural import api, corpus, weights
from jaxcc.neural import sample as S
from jaxcc.neural import vocab as V
from jaxcc.neural.inputs import typing


def kind(tok: int) -> str:
    name = V.name(tok)
    for pre in ("OP_", "VAR_", "LIT_", "LAB_", "N_", "LN_"):
        if name.startswith(pre):
            return pre[:-1]
    return name


def first_divergence(got, want) -> tuple[int, int, int]:
    """(position, got token, wanted token) of the first difference (EOS-padded)."""
    n = max(len(got), len(want))
    g = np.pad(got, (0, n - len(got)), constant_values=V.EOS)
    w = np.pad(want, (0, n - len(want)), constant_values=V.EOS)
    i = int(np.argmax(g != w)) if (g != w).any() else n
    return i, int(g[min(i, n - 1)]), int(w[min(i, n - 1)])


PRINTS = (V.op_tok(isa.Op.PRINT_INT), V.op_tok(isa.Op.PRINT_BOOL))


def _with_label_prints(src, tokens, c, got, want, cfg, nl, tier) -> bool | None:
    """The greedy sequence with its print opcodes replaced, in order, by the labeller's
    (None when the two have different numbers of prints), judged as the evaluation
    judges (the reference's code on the module body and 128 probes per function)."""
    from jaxcc.neural import verify
    from jaxcc.neural.assemble import assemble
    from jaxcc.neural.evaluate import reference_programs
    from jaxcc.neural.inputs import source_features

    g = np.array(got)
    gp = np.flatnonzero(np.isin(g, PRINTS))
    wp = np.asarray(want)[np.isin(want, PRINTS)]
    if len(gp) != len(wp):
        return None
    g[gp] = wp
    seq = np.zeros((1, 1, c.samples.tokens.shape[-1]), np.int32)
    seq[0, 0, : min(len(g), seq.shape[-1])] = g[: seq.shape[-1]]
    srcf = source_features(tokens, tier)
    asm = assemble(jax.numpy.asarray(seq), srcf, nl, tier)
    ref, ok = reference_programs([src], nl)
    probes = verify.make_probes(tokens, ref.fn_nparams, jax.random.key(1), 128)
    v = verify.verify_against(asm.program, ref, probes, api.VERIFY_LIMITS)
    return bool(np.asarray(v.accepted & asm.ok)[0, 0] and ok[0])


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("hard")
    p.add_argument("--n", type=int, default=40)
    p.add_argument("--weights", default=weights.DEFAULT)
    p.add_argument("--out")
    p.add_argument("--print-oracle", action="store_true",
                   help="also: is the greedy sequence right once its print opcodes are the "
                   "labeller's (in order)? (what knowing each printed value's type would buy)")  # fmt: skip
    p.add_argument("--typed", action="store_true",
                   help="also: is the typed mask's greedy sequence right?")  # fmt: skip
    ns = p.parse_args(argv)
    cfg, params = weights.load(ns.weights)
    nl = api.NEURAL_LIMITS
    with open(ns.hard) as f:
        progs = [q for q in json.load(f)["programs"] if q["correct"] == 0]
    progs.sort(key=lambda q: len(q["source"]))
    progs = progs[: ns.n]
    rows = []
    for q in progs:
        src = q["source"]
        want = corpus.label(src, nl, cfg.nlimits).tokens
        n_src = int(S.n_source_tokens([src], nl)[0])
        s, length = lexer.encode([src], nl)
        tokens, lex_error = lexer.lex(s, length, nl)
        c = S.compile(tokens, params, jax.random.key(0), nl, 1, 0.0, 1.0, True, cfg=cfg,
                      nlimits=S.tier(n_src, cfg))  # fmt: skip
        got = np.asarray(c.samples.tokens)[0, 0]
        end = int(np.argmax(got == V.EOS)) + 1 if (got == V.EOS).any() else len(got)
        i, g, w = first_divergence(got[:end], want)
        rows.append({"level": q["level"], "bytes": len(src.encode()), "position": i,
                     "of": len(want), "got": V.name(g), "want": V.name(w),
                     "kinds": f"{kind(w)} -> {kind(g)}"})  # fmt: skip
        if ns.typed:
            pt, rt = typing(tokens, nl, lex_error)
            ct = S.compile(tokens, params, jax.random.key(0), nl, 1, 0.0, 1.0, True, cfg=cfg,
                           nlimits=S.tier(n_src, cfg),
                           print_items=pt, ret_types=rt)  # fmt: skip
            gt = np.asarray(ct.samples.tokens)[0, 0]
            et = int(np.argmax(gt == V.EOS)) + 1 if (gt == V.EOS).any() else len(gt)
            rows[-1]["typed_greedy_right"] = _with_label_prints(
                src, tokens, ct, gt[:et], gt[:et], cfg, nl, S.tier(n_src, cfg)
            )
        if ns.print_oracle:
            t = S.tier(n_src, cfg)
            rows[-1]["right_with_label_prints"] = _with_label_prints(
                src, tokens, c, got[:end], want, cfg, nl, t
            )
            # the harness itself: the labeller's own sequence must be judged right
            rows[-1]["label_judged_right"] = _with_label_prints(
                src, tokens, c, want, want, cfg, nl, t
            )
        print(rows[-1], flush=True)
    if ns.print_oracle:
        fixed = [r for r in rows if r.get("right_with_label_prints")]
        print(
            f"\nright once the print opcodes are the labeller's: {len(fixed)} of {len(rows)} "
            f"(the labeller's own sequence judged right: "
            f"{sum(bool(r.get('label_judged_right')) for r in rows)} of {len(rows)})"
        )
    if ns.typed:
        print(
            f"\ngreedy right with the typed mask: "
            f"{sum(bool(r.get('typed_greedy_right')) for r in rows)} of {len(rows)}"
        )
    tally = collections.Counter(r["kinds"] for r in rows)
    print("\nfirst divergence, wanted kind -> got kind:")
    for k, v in tally.most_common():
        print(f"{v:4d}  {k}")
    if ns.out:
        with open(ns.out, "w") as f:
            json.dump({"weights": ns.weights, "rows": rows, "tally": dict(tally)}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
