"""Hard-example mining (jaxcc.neural.mine): candidates judged as the evaluation judges
them; the programs with a wrong candidate kept, with the right counts."""

from __future__ import annotations

import jax

from jaxcc.neural import api, corpus, mine, weights
from jaxcc.neural import model as M

CFG = M.Config(d_model=32, n_layers=1, n_heads=2, d_ff=64, max_src=96, max_out=192, remat=False)


def test_an_untrained_model_gets_every_program_wrong():
    # the untyped mask: with the print items fixed, a random model writes a level-0
    # program (a few prints of constants) right now and then
    params = M.init_params(CFG, 0)
    r = mine.mine_level(0, 6, CFG, params, jax.random.key(0), 2, 0.8, 8, api.NEURAL_LIMITS,
                        api.VERIFY_LIMITS, batch=8, typed=False)  # fmt: skip
    s = r["stats"]
    assert s["programs"] == 6  # level 0 programs all compile
    # every greedy candidate is wrong, so every program has a wrong candidate; a random
    # sample can still be right where a program prints nothing (2026-11-30: one of 2 for
    # `_g_1 = 3 ** (245 % 4)` ...), so "none right" is counted, not assumed
    assert s["greedy_wrong"] == s["any_wrong"] == 6
    want = set(corpus.generate(mine.MINE_SEED, 6, 0, split="train"))
    assert {h["source"] for h in r["hard"]} == want
    assert all(not h["greedy"] and h["level"] == 0 and 0 <= h["correct"] < 2 for h in r["hard"])
    assert s["none_right"] == sum(h["correct"] == 0 for h in r["hard"]) >= 4


def test_the_shipped_model_gets_small_programs_right():
    cfg, params = weights.load(weights.DEFAULT)
    r = mine.mine_level(0, 4, cfg, params, jax.random.key(0), 2, 0.8, 16, api.NEURAL_LIMITS,
                        api.VERIFY_LIMITS, batch=4)  # fmt: skip
    s = r["stats"]
    assert s["programs"] == 4 and s["greedy_wrong"] == 0 and s["none_right"] == 0
    assert len(r["hard"]) == s["any_wrong"]
    assert all(h["greedy"] and h["correct"] >= 1 for h in r["hard"])
