"""The heaviest GPU kernels of two stages, each with the source lines it was fused from:

    PYTHONPATH=. python bench/hot_kernels.py        # writes $OUT/hot.json (default /tmp)

The lexer on the small corpus and the middle end on the medium one (its input the
reference AST, as the ``middle`` entry's), 512 programs of seed 0 tiled to HOT_B (default
65,536) programs, each jitted whole as the loop runs it (the widths chosen per batch) and
traced for two calls (``trace_kernels.trace_top``: name, ms per call, launches, share,
source lines). Two compiles instead of a breakdown's dozen: it fits a device call of
about two minutes. On a machine without a GPU the kernel lists are empty.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def main() -> int:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import jax

    from bench import corpus as C
    from bench.middle_passes import encoded
    from bench.trace_kernels import trace_top
    from jaxcc import lexer, middle
    from jaxcc.reference import flatten

    b = int(os.environ.get("HOT_B", 65536))
    out = {"device": jax.devices()[0].device_kind, "batch": b}
    t0 = time.time()
    lim, src, length = encoded("small", b, n=512)
    args = jax.device_put((src, length))
    c = jax.jit(lambda s, n: lexer.lex(s, n, lim)).lower(*args).compile()
    out["lexer_small"] = trace_top(c, args, "/tmp/hot_lexer", top=10)
    print(json.dumps(out["lexer_small"]), round(time.time() - t0, 1), flush=True)
    lim = C.LIMITS["medium"]
    progs = C.generate(0, "medium", 512)
    ast, toks, _ = flatten.flatten_many([q["source"] for q in progs], lim)
    i = np.arange(b) % len(progs)
    args = jax.device_put(jax.tree.map(lambda x: np.asarray(x)[i], (ast, toks)))
    c = jax.jit(lambda a, t: middle.middle_end(a, t, lim)).lower(*args).compile()
    out["middle_medium"] = trace_top(c, args, "/tmp/hot_middle", top=10)
    print(json.dumps(out["middle_medium"]), round(time.time() - t0, 1), flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "hot.json"), "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
