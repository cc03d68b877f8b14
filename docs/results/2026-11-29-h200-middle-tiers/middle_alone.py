"""The middle end alone (``middle.middle_end``) at one width and at two, 65,536 programs of
each size given; run in the repository root as it was (336003f):

    JAX_COMPILATION_CACHE_DIR=/tmp/cc PYTHONPATH=. python <this file> small

Writes middle_alone.jsonl under $OUT: per round and setting the median and minimum of 9
timed calls, the first call's seconds (compile included), and whether the two widths'
Program and Error equal the one width's.
"""

import json
import os
import statistics
import sys
import time

import jax
import numpy as np

from bench import corpus
from jaxcc import lexer, middle, parser


def _timed(f, *args):
    t0 = time.perf_counter()
    r = jax.block_until_ready(f(*args))
    return r, time.perf_counter() - t0


def main(sizes):
    out, B = [], 65536
    for size in sizes:
        lim = corpus.LIMITS[size]
        src, n = lexer.encode([p["source"] for p in corpus.generate(0, size, 512)], lim)
        src = jax.device_put(np.tile(src, (B // 512, 1)))
        n = jax.device_put(np.tile(n, B // 512))
        tok, err = lexer.lex(src, n, lim)
        ast, err = jax.block_until_ready(parser.parse(tok, lim, err))
        for rnd in range(2):
            for tiers in (False, True):
                f = jax.jit(
                    lambda a, e, t=tiers, lim=lim: middle.middle_end(a, None, lim, e, tiers=t)
                )
                r, first = _timed(f, ast, err)
                ts = [_timed(f, ast, err)[1] for _ in range(9)]
                med = statistics.median(ts)
                row = {"size": size, "round": rnd, "tiers": tiers, "ms": round(1e3 * med, 2),
                       "min_ms": round(1e3 * min(ts), 2), "first_call_s": round(first, 1),
                       "programs_per_s": round(B / med)}  # fmt: skip
                if not tiers:
                    ref = r
                else:
                    row["equal_to_one_width"] = all(
                        bool((np.asarray(a) == np.asarray(b)).all())
                        for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(r), strict=True)
                    )
                print(json.dumps(row), flush=True)
                out.append(row)
    d = os.environ.get("OUT", "/tmp")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "middle_alone.jsonl"), "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in out)
    print(jax.devices()[0].device_kind)


if __name__ == "__main__":
    main(sys.argv[1:])
