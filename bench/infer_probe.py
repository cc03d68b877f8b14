"""Where ``infer_types`` spends its time, on a corpus batch (GPU or CPU):

* ``facts``: ``typecheck._facts`` alone;
* ``solve``: ``_facts`` + ``_solve`` (the fixpoint's while_loop, as many rounds as the
  batch's slowest program needs);
* ``whole``: the pass (``infer_types``: the fixpoint and every check after it);
* ``R steps``: exactly R steps of ``_solve``'s loop body (``_step``: a round and the
  fixpoint test) in a ``fori_loop``: against ``solve``, the while_loop's own cost;
* ``R rounds``: exactly R rounds of ``_round`` in a ``fori_loop`` (per-round cost);
* ``R rounds, no scatter``: the same with ``or_into`` replaced by a gather of the
  target (wrong types, same shapes: what the OR-scatters cost).

    PYTHONPATH=. python bench/infer_probe.py [--size small] [--batch 65536] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
from jax import lax

sys.path.insert(0, os.path.dirname(__file__))

from breakdown import _pass_stage  # noqa: E402
from middle_passes import parsed  # noqa: E402

from jaxcc import typecheck as T  # noqa: E402


def timed(f, *args, repeats=5):
    """Median seconds of ``repeats`` calls of ``f`` jitted and compiled ahead of time."""
    return timed_compiled(jax.jit(f).lower(*args).compile(), *args, repeats=repeats)


def timed_compiled(c, *args, repeats=5):
    """Median seconds of ``repeats`` calls of a compiled function, after one warm-up."""
    jax.block_until_ready(c(*args))
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(c(*args))
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="small")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--json")
    p.add_argument("--trace", help="also write a Perfetto trace of 3 calls of the pass here")
    ns = p.parse_args(argv)
    lim, ast, pe = parsed(ns.size, ns.batch, n=512)
    st = jax.jit(_pass_stage(0, lim).fn)(ast, pe)["state"]
    a, sc = st.ast, st.scopes
    R = ns.rounds

    def rounds(ast, sc, scatter=True):
        f = T._facts(ast, sc)
        lp = T._loop_facts(f, sc)
        zero = jnp.zeros((f.n,), T.M8)
        seeds = (f.seed_var0.astype(T.M8), f.seed_ret0.astype(T.M8))
        rnd = T._round
        if not scatter:

            def rnd(lp, state, seeds):  # noqa: ANN001
                orig = T.or_into
                T.or_into = (
                    lambda n, target, valid, m: jnp.where(  # noqa: E731
                        valid[:n], m[jnp.clip(target[:n], 0, m.shape[0] - 1)], 0
                    )
                )
                try:
                    return T._round(lp, state, seeds)
                finally:
                    T.or_into = orig

        return lax.fori_loop(0, R, lambda _, s: rnd(lp, s, seeds), (zero, zero, zero))

    def steps(ast, sc):
        f = T._facts(ast, sc)
        lp = T._loop_facts(f, sc)
        zero = jnp.zeros((f.n,), T.M8)
        seeds = (f.seed_var0.astype(T.M8), f.seed_ret0.astype(T.M8))
        init = ((zero, zero, zero), seeds, jnp.int32(0), jnp.bool_(False))
        return lax.fori_loop(0, R, lambda _, c: T._step(lp, c), init)

    v = jax.vmap
    out = {"device": jax.devices()[0].device_kind, "size": ns.size, "batch": ns.batch,
           "rounds": R, "ms": {}}  # fmt: skip
    cases = {
        "facts": lambda a, sc: v(lambda a, sc: T._facts(a, sc)[1:])(a, sc),
        "solve": lambda a, sc: v(lambda a, sc: T._solve(T._facts(a, sc), sc))(a, sc),
        "whole": lambda a, sc: v(lambda a, sc: T.infer_types(a, sc, lim))(a, sc),
        f"{R} steps": lambda a, sc: v(steps)(a, sc),
        f"{R} rounds": lambda a, sc: v(rounds)(a, sc),
        f"{R} rounds, no scatter": lambda a, sc: v(lambda a, sc: rounds(a, sc, False))(a, sc),
    }
    for name, f in cases.items():
        out["ms"][name] = 1e3 * timed(f, a, sc)
        print(f"{ns.size} batch {ns.batch}: {name}: {out['ms'][name]:.2f} ms", flush=True)
    if ns.trace:  # kernel by kernel (jax.profiler; read with bench/trace_kernels.py)
        whole = jax.jit(cases["whole"]).lower(a, sc).compile()
        jax.block_until_ready(whole(a, sc))
        with jax.profiler.trace(ns.trace, create_perfetto_trace=True):
            for _ in range(3):
                jax.block_until_ready(whole(a, sc))
    if ns.json:
        with open(ns.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
