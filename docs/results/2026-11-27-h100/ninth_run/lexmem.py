"""The lexer-storage probe of the ninth run (run from the repository root on the GPU:
``python lexmem.py NAME small``, once per tree, the tree's jaxcc/lexer.py the variant):
the lexer alone and pipeline.evaluate whole on 65,536 programs, ms, KB a program
(bench/ab_time.py's reading) and the lexer's temporaries."""

import json
import sys

sys.path.insert(0, ".")
import jax
import numpy as np

from bench import baselines, breakdown
from bench import corpus as C
from bench.ab_time import _kb, _time
from jaxcc import lexer, pipeline

name, size = sys.argv[1], sys.argv[2]
lim, b = C.LIMITS[size], 65536
progs = C.generate(0, size, 512)
src, length = lexer.encode([q["source"] for q in progs], lim)
t = baselines.test_arrays(progs)
i = np.arange(b) % src.shape[0]
cases = breakdown.cases_of(t["entry"][i], t["args"][i], t["expected"][i])
src, length, cases = jax.device_put((src[i], length[i], cases))
out = {"name": name, "size": size}
c = jax.jit(lambda s, n: lexer.lex(s, n, lim)).lower(src, length).compile()
toks, ms, mn = _time(c, (src, length), 11)
out["lexer"] = {
    "ms": ms,
    "min_ms": mn,
    "kb": _kb(c, b),
    "temp_kb": round(c.memory_analysis().temp_size_in_bytes / b / 1e3, 1),
    "sum": int(
        np.asarray(toks[0].kind, np.int64).sum()
        + np.asarray(toks[0].start, np.int64).sum()
        + np.asarray(toks[1].code).sum()
    ),
}
print(json.dumps(out), flush=True)
c = jax.jit(lambda s, n, k: pipeline.evaluate(s, n, k, lim)).lower(src, length, cases).compile()
ev, ms, mn = _time(c, (src, length, cases), 11)
out["loop"] = {
    "ms": ms,
    "min_ms": mn,
    "kb": _kb(c, b),
    "passed": int((np.asarray(ev.verdict) == 0).sum()),
}
print(json.dumps(out), flush=True)
