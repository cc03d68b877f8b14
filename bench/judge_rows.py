"""Judge chosen held-out programs of one level again (``evaluate.judge``), e.g. the ones
an evaluation left with no right candidate, with branch decoding:

    PYTHONPATH=. python bench/judge_rows.py --level 5 --n 512 --rows 79,166,197 \
        [--k 16] [--branches 8,15] [--probes 128] [--temperatures 0.8,1.2]

``--rows`` index the level's live programs (``evaluate.main``'s rows: the first ``--n``
held-out sources that the reference compiler accepts). Prints, per branches setting,
how many of the k candidates of each row behave as the reference compiler's code.
Candidates are sampled with ``jax.random.key(1234)`` folded with 0 (one batch), so
the temperature samples differ from the evaluation's; greedy and branch candidates
do not depend on the key.
"""

from __future__ import annotations

import argparse
import json

import jax

from jaxcc.neural import api, weights
from jaxcc.neural import evaluate as E


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--level", type=int, required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--rows", required=True)
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--branches", default="8")
    p.add_argument("--probes", type=int, default=128)
    p.add_argument("--temperatures", default="0.8", help="comma-separated sampling temperatures")
    p.add_argument("--weights", default=weights.DEFAULT)
    ns = p.parse_args(argv)
    nl, vl = api.NEURAL_LIMITS, api.VERIFY_LIMITS
    srcs = E.heldout_sources(ns.level, ns.n)
    _, ok = E.reference_programs(srcs, nl)
    live = [s for s, o in zip(srcs, ok, strict=True) if o]
    rows = [int(r) for r in ns.rows.split(",")]
    sel = [live[r] for r in rows]
    cfg, params = weights.load(ns.weights)
    for temp in [float(x) for x in ns.temperatures.split(",")]:
        for b in [int(x) for x in ns.branches.split(",")]:
            out, _, t = E.judge(sel, cfg, params, jax.random.key(1234), ns.k, temp, True,
                                ns.probes, nl, vl, len(sel), True, b)  # fmt: skip
            right = {r: int(c) for r, c in zip(rows, out.sum(axis=1), strict=True)}
            print(json.dumps({"level": ns.level, "temperature": temp, "branches": b, "k": ns.k,
                              "right_of_k": right, "device": jax.devices()[0].device_kind,
                              "seconds": round(t, 1)}), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
