"""Hard-example mining: training programs that a model compiles wrongly.

    python -m jaxcc.neural.mine --out DIR [--weights W] --levels 1,3,4,5 --n 4096 --k 8

generates ``--n`` programs per level from training seeds (``corpus.TRAIN_SEEDS``; never
the held-out ones), samples ``--k`` candidates of each (the first greedy, the others at
``--temperature``), judges every candidate by running it in the VM against the
deterministic compiler's code on the module body and ``--probes`` inputs per function
(``evaluate.judge``, exactly as the held-out evaluation judges), and writes
``DIR/hard.json``: per level how many programs had a wrong greedy candidate, a wrong
candidate at all, or no right one, and the sources of every program with any wrong
candidate. ``python -m jaxcc.neural.train --hard DIR/hard.json --hard-frac F`` then puts
those programs (labelled by the deterministic compiler, as every training pair is) in a
fraction F of every batch's rows.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

from jaxcc.neural import corpus
from jaxcc.neural import sample as S

# mining seeds (training seeds, far from the small ones training batches are made from)
MINE_SEED = 1 << 20


def mine_level(level: int, n: int, cfg, params, key, k: int, temperature: float,
               n_probes: int, nl, vl, seed: int = MINE_SEED, batch: int = 64,
               typed: bool = True) -> dict:  # fmt: skip
    """Judge k candidates (greedy first) of n training programs of ``level``; the stats
    and the programs with any wrong candidate. ``typed``: ``evaluate.judged``'s (the typed
    mask; the 2026-11-27 mining of docs/neural.md was untyped)."""
    from jaxcc.neural import evaluate

    srcs = corpus.generate(seed + level, n, level, split="train")
    # sorted by length: a judging call's sampling budget is its longest source's tier,
    # so similar lengths together compile few shapes and decode little padding
    n_src = S.n_source_tokens(srcs, nl)
    order = np.argsort(n_src, kind="stable")
    srcs = [srcs[i] for i in order]
    t0 = time.time()
    right, ok, _ = evaluate.judge(srcs, cfg, params, key, k, temperature, True, n_probes, nl,
                                  vl, batch, typed)  # fmt: skip
    c = right.sum(axis=1)
    hard = [{"level": level, "source": s, "correct": int(c[i]), "greedy": bool(right[i, 0])}
            for i, s in enumerate(srcs) if ok[i] and c[i] < k]  # fmt: skip
    live = int(ok.sum())
    stats = {"programs": live, "greedy_wrong": int((ok & ~right[:, 0]).sum()),
             "any_wrong": len(hard), "none_right": int((ok & (c == 0)).sum()),
             "seed": seed + level, "seconds": time.time() - t0}  # fmt: skip
    return {"stats": stats, "hard": hard}


def load_hard(path: str) -> list[dict]:
    """The mined programs of ``hard.json`` (a list of {level, source, correct, greedy})."""
    with open(path) as f:
        return json.load(f)["programs"]


def main(argv=None) -> int:
    from jaxcc.neural import api, weights

    p = argparse.ArgumentParser(
        prog="python -m jaxcc.neural.mine", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--out", required=True)
    p.add_argument("--weights", default=weights.DEFAULT)
    p.add_argument("--levels", default="1,3,4,5")
    p.add_argument("--n", type=int, default=4096, help="training programs per level")
    p.add_argument("--k", type=int, default=8, help="candidates per program (the first greedy)")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--probes", type=int, default=64)
    p.add_argument("--batch", type=int, default=64, help="programs per judging call")
    p.add_argument("--seed", type=int, default=MINE_SEED, help="a training seed (+ level)")
    p.add_argument("--untyped", action="store_true", help="sample with the untyped mask")
    p.add_argument("--time-limit", type=float, default=0,
                   help="skip the levels not started after this many seconds")  # fmt: skip
    ns = p.parse_args(argv)
    from jaxcc.cli import enable_compilation_cache

    enable_compilation_cache()
    os.makedirs(ns.out, exist_ok=True)
    t0 = time.time()
    cfg, params = weights.load(ns.weights)
    key = jax.random.key(ns.seed)
    out = {"device": jax.devices()[0].device_kind, "weights": ns.weights,
           "weights_info": {k: v for k, v in weights.info(ns.weights).items() if k != "history"},
           "k": ns.k, "temperature": ns.temperature, "probes": ns.probes, "n": ns.n,
           "typed_mask": not ns.untyped,
           "levels": {}, "programs": []}  # fmt: skip
    for level in [int(x) for x in ns.levels.split(",") if x]:
        if ns.time_limit and time.time() - t0 > ns.time_limit:
            print(f"level {level} skipped: out of time", flush=True)
            continue
        r = mine_level(level, ns.n, cfg, params, jax.random.fold_in(key, level), ns.k,
                       ns.temperature, ns.probes, api.NEURAL_LIMITS, api.VERIFY_LIMITS,
                       ns.seed, ns.batch, not ns.untyped)  # fmt: skip
        out["levels"][level] = r["stats"]
        out["programs"] += r["hard"]
        print(level, r["stats"], flush=True)
        with open(os.path.join(ns.out, "hard.json"), "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
