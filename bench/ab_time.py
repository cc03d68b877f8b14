"""Time one jaxcc tree's stages or whole loop, for before/after comparisons on a device:

    PYTHONPATH=. python bench/ab_time.py NAME [--loop] [--size small] [--batch 65536]

Run in a copy of the repository whose ``jaxcc/`` holds the variant under test (one
process per variant: ``bench/ab_run.sh``). Without ``--loop``: every stage of the loop as
``bench/breakdown.py`` splits it (``breakdown.stages``), each jitted alone on the previous
stage's outputs; with ``--loop``: ``pipeline.evaluate`` whole. Prints one JSON line: per
stage (or for the loop) the median and minimum of 7 (15) timed calls in ms, the compile
seconds and XLA's memory per program in KB (arguments + outputs + temporaries - aliased),
and the number of programs that passed. The inputs (bench.corpus.generate(0, size, 512),
tiled to the batch) are cached in /tmp/ab_inputs_SIZE.npz, so every variant of a device
call reads the same arrays.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np


def _kb(compiled, b: int) -> float:
    from bench.breakdown import memory  # the breakdown's own reading of memory_analysis()

    m = memory(compiled)
    total = m["argument_bytes"] + m["output_bytes"] + m["temp_bytes"] - m["alias_bytes"]
    return round(total / b / 1e3, 1)


def _time(compiled, args, n: int):
    import jax

    out = jax.block_until_ready(compiled(*args))
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        ts.append(time.perf_counter() - t0)
    return out, round(1e3 * statistics.median(ts), 2), round(1e3 * min(ts), 2)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("--loop", action="store_true", help="pipeline.evaluate whole")
    p.add_argument("--size", default="small")
    p.add_argument("--batch", type=int, default=65536)
    ns = p.parse_args(argv)
    sys.path.insert(0, ".")
    import jax

    from bench import baselines, breakdown
    from bench import corpus as C
    from jaxcc import lexer, pipeline

    lim, b = C.LIMITS[ns.size], ns.batch
    cache = f"/tmp/ab_inputs_{ns.size}.npz"
    if not os.path.exists(cache):
        progs = C.generate(0, ns.size, 512)
        src, length = lexer.encode([q["source"] for q in progs], lim)
        t = baselines.test_arrays(progs)
        np.savez(cache, src=src, length=length, entry=t["entry"], args=t["args"],
                 expected=t["expected"])  # fmt: skip
    z = np.load(cache)
    i = np.arange(b) % z["src"].shape[0]
    cases = breakdown.cases_of(z["entry"][i], z["args"][i], z["expected"][i])
    carry = jax.device_put({"source": z["src"][i], "length": z["length"][i], "cases": cases})
    out = {"variant": ns.name, "size": ns.size, "batch": b,
           "device": jax.devices()[0].device_kind}  # fmt: skip
    if ns.loop:
        f = jax.jit(lambda s, n, c: pipeline.evaluate(s, n, c, lim))
        args = (carry["source"], carry["length"], carry["cases"])
        t0 = time.perf_counter()
        compiled = f.lower(*args).compile()
        cs = time.perf_counter() - t0
        ev, ms, mn = _time(compiled, args, 15)
        out["loop"] = {"ms": ms, "min_ms": mn, "compile_s": round(cs, 1), "KB": _kb(compiled, b)}
    else:
        for st in breakdown.stages(lim):  # "middle end" too: the passes as the loop calls them
            args = tuple(carry[k] for k in st.inputs)
            t0 = time.perf_counter()
            compiled = jax.jit(st.fn).lower(*args).compile()
            cs = time.perf_counter() - t0
            r, ms, mn = _time(compiled, args, 7)
            breakdown.carry_forward(carry, r)
            out[st.name] = {"ms": ms, "min_ms": mn, "compile_s": round(cs, 1),
                            "KB": _kb(compiled, b)}  # fmt: skip
        ev = carry["evaluation"]
    out["passed"] = int((np.asarray(ev.verdict) == 0).sum())
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
