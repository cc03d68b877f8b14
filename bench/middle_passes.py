"""Each middle-end pass alone on a corpus batch: XLA compile seconds, run time (median of
5) and memory per program (``memory_analysis``), the passes jitted as
``bench/breakdown.py`` jits them (``_pass_stage``). With ``--save FILE`` the middle end's
Program and Error arrays are pickled; ``--compare FILE`` checks them equal to a saved
run's (a change to a pass that should not change its output).

    PYTHONPATH=. python bench/middle_passes.py [--size small] [--batch 256] [--save F | --compare F]
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

import corpus as C  # noqa: E402
from breakdown import _pass_stage, carry_forward, memory  # noqa: E402

from jaxcc import lexer, middle, parser  # noqa: E402


def encoded(size: str, batch: int, seed: int = 0, n: int = 64):
    """(limits, source, length): ``n`` corpus programs of ``size`` tiled to ``batch``."""
    lim = C.LIMITS[size]
    progs = C.tile(C.generate(seed, size, n, with_tests=False), batch)
    src, length = lexer.encode([q["source"] for q in progs], lim)
    return lim, src, length


def parsed(size: str, batch: int, seed: int = 0, n: int = 64):
    """(limits, ast, parse_error) of ``encoded``'s batch, lexed and parsed (jitted)."""
    lim, src, length = encoded(size, batch, seed, n)
    tok, le = jax.jit(lexer.lex, static_argnames="limits")(src, length, lim)
    ast, pe = jax.jit(parser.parse, static_argnames="limits")(tok, lim, lex_error=le)
    return lim, ast, pe


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="small")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save")
    p.add_argument("--compare")
    ns = p.parse_args(argv)
    lim, ast, pe = parsed(ns.size, ns.batch, ns.seed)
    carry = {"ast": ast, "parse_error": pe}
    print(f"device {jax.devices()[0].device_kind}, {ns.size} corpus, batch {ns.batch}")
    for i in range(len(middle.PASSES)):
        st = _pass_stage(i, lim)
        args = tuple(carry[k] for k in st.inputs)
        t0 = time.perf_counter()
        comp = jax.jit(st.fn).lower(*args).compile()
        compile_s = time.perf_counter() - t0
        out = comp(*args)
        jax.block_until_ready(comp(*args))
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            jax.block_until_ready(comp(*args))
            times.append(time.perf_counter() - t0)
        m = memory(comp)
        per = {k: round(v / ns.batch) for k, v in m.items() if v is not None}
        print(f"{st.name}: {1e3 * float(np.median(times)):.2f} ms, compile {compile_s:.1f} s, "
              f"bytes per program {per}", flush=True)  # fmt: skip
        carry_forward(carry, out)
    result = jax.tree.map(np.asarray, (carry["program"], carry["error"]))
    if ns.save:
        with open(ns.save, "wb") as f:
            pickle.dump(result, f)
    if ns.compare:
        with open(ns.compare, "rb") as f:
            want = pickle.load(f)
        same = all(np.array_equal(a, b) for a, b in
                   zip(jax.tree.leaves(result), jax.tree.leaves(want), strict=True))  # fmt: skip
        print("outputs equal to", ns.compare, ":", same)
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
