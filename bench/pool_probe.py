"""How ``cpython_pool``'s rate depends on the batch and on the run: one pool, timed runs
of 16,384, 65,536 and 262,144 programs of a corpus, one JSON line each (docs/benchmarks.md,
twelfth run: the first run after the pool starts is the slowest).

    PYTHONPATH=. python bench/pool_probe.py CORPUS_JSON   # e.g. a bench/run.py --out's corpus.json
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import baselines  # noqa: E402
import corpus as corpus_mod  # noqa: E402

SIZES = (16384, 16384, 16384, 65536, 65536, 65536, 16384, 262144)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    corpus = json.load(open(argv[0]))["corpus"]
    pool = baselines.Pool()
    try:
        for size in ("small", "medium"):
            pool.run(corpus_mod.tile(corpus[size], 64))  # bench/run.py's warm-up until 2026-11-28
            for n in SIZES:
                r = pool.run(corpus_mod.tile(corpus[size], n))
                row = dict(size=size, n=n, s=round(r["seconds"], 4),
                           rate=round(n / r["seconds"]), passed=r["passed"])  # fmt: skip
                print(json.dumps(row), flush=True)
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
