"""The lexer with each DFA mode (jaxcc.lexer.DFA_MODE): compile time and time per batch.

PYTHONPATH=. python bench/lexer_dfa_modes.py [BATCH]   # one JSON line per (size, mode)
"""

import json
import sys
import time

import jax
import numpy as np

from bench import corpus
from jaxcc import lexer


def main() -> None:
    b = int(sys.argv[1]) if len(sys.argv) > 1 else 65536
    for size in ("small", "medium"):
        lim = corpus.LIMITS[size]
        progs = corpus.tile(corpus.generate(0, size, 256, with_tests=False), b)
        src, length = lexer.encode([p["source"] for p in progs], lim)
        src, length = jax.device_put(src), jax.device_put(length)
        for mode in ("merge", "vector"):
            lexer.DFA_MODE = mode
            f = jax.jit(lambda s, n, lim=lim: lexer.lex(s, n, lim))
            t0 = time.perf_counter()
            c = f.lower(src, length).compile()
            compile_s = time.perf_counter() - t0
            out = jax.block_until_ready(c(src, length))
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                jax.block_until_ready(c(src, length))
                times.append(time.perf_counter() - t0)
            kinds = np.asarray(out[0].kind)
            print(
                json.dumps(
                    dict(
                        device=jax.devices()[0].device_kind,
                        size=size,
                        batch=b,
                        mode=mode,
                        compile_s=round(compile_s, 2),
                        seconds=round(float(np.median(times)), 5),
                        bytes_per_s=float(np.asarray(length).sum() / np.median(times)),
                        kind_checksum=int(kinds.astype(np.int64).sum()),
                    )
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
