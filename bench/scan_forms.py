"""Prefix scans along the minor axis of a [B, N] batch, in several forms, timed side by side.

The lexer and the middle end run dozens of prefix sums, maxima and minima per program
(``lax.cumsum`` / ``lax.cummax`` / ``lax.cummin`` under ``vmap``). On a GPU XLA lowers
each to a reduce-window and rewrites it into a tree (``ReduceWindowRewriter``), which does
several operations per element; this tool measures what that costs against other forms
of the same scan, each checked equal to ``lax``'s::

    PYTHONPATH=. python bench/scan_forms.py --out DIR [--batch 65536] [--widths 256,512]

Forms (each a function of one program's 1-D array, vmapped as the stages call it):

- ``lax``: ``lax.cumsum`` / ``lax.cummax`` / ``lax.cummin(reverse=True)``;
- ``assoc``: ``lax.associative_scan`` (log-depth slices);
- ``block16`` / ``block32``: the array as [N / k, k]; a scan of each row of k by k - 1
  unrolled elementwise steps, then the rows' totals scanned (``lax``) and combined;
- ``dot_bf16`` (sums only): the product with a triangular matrix of ones, bf16 inputs
  and f32 accumulation (exact for 0 / 1 inputs and sums below 2**24);
- ``dot_i8`` (sums only): the same in int8 with int32 accumulation.

Each call runs ``--chain`` scans, each of its own cheap elementwise producer of the input
(fused into it, as in the stages), summed. Writes ``scan_forms.jsonl`` (one row per op,
dtype, width and form: median and minimum ms of ``--calls`` calls divided by the chain,
first-call seconds, equal to ``lax``) under ``--out``.
"""

import argparse
import json
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

OPS = {
    "cumsum": (lax.add, lambda x: lax.cumsum(x, axis=0), False),
    "cummax": (lax.max, lambda x: lax.cummax(x, axis=0), False),
    "rcummin": (lax.min, lambda x: lax.cummin(x, axis=0, reverse=True), True),
}


def _block(op, rev, k):
    def fwd(x):
        n = x.shape[0]
        r = x.reshape(n // k, k)
        cols = [r[:, 0]]
        for j in range(1, k):  # k - 1 elementwise steps, fused by XLA into one kernel
            cols.append(op(cols[-1], r[:, j]))
        inner = jnp.stack(cols, axis=1)
        tot = inner[:, -1]
        scan = {lax.add: lax.cumsum, lax.max: lax.cummax, lax.min: lax.cummin}[op]
        carry = scan(tot, axis=0)
        ident = {lax.add: 0, lax.max: jnp.iinfo(x.dtype).min, lax.min: jnp.iinfo(x.dtype).max}
        carry = jnp.concatenate([jnp.full((1,), ident[op], x.dtype), carry[:-1]])
        return op(inner, carry[:, None]).reshape(n)

    return (lambda x: fwd(x[::-1])[::-1]) if rev else fwd


def _dot(dtype, acc):
    def f(x):
        n = x.shape[0]
        tri = jnp.triu(jnp.ones((n, n), dtype))  # tri[i, j] = 1 for i <= j
        y = lax.dot_general(x.astype(dtype), tri, (((0,), (0,)), ((), ())),
                            preferred_element_type=acc)  # fmt: skip
        return y.astype(x.dtype)

    return f


def forms(name):
    op, ref, rev = OPS[name]
    out = {
        "lax": ref,
        "assoc": lambda x: lax.associative_scan(op, x, axis=0, reverse=rev),
        "barrier": lambda x: ref(lax.optimization_barrier(x)),
        "block16": _block(op, rev, 16),
        "block32": _block(op, rev, 32),
    }
    if name == "cumsum":
        out["dot_bf16"] = _dot(jnp.bfloat16, jnp.float32)
        out["dot_i8"] = _dot(jnp.int8, jnp.int32)
    return out


def _chain(name, f, r_links):
    """r_links scans of one call, each of its own cheap producer of x (fused into it, as
    in the stages), summed: the time per scan without the call's dispatch."""

    def g(x):
        acc = jnp.zeros_like(x)
        for r in range(r_links):
            if name == "cumsum":
                z = f(((x + r) & 1).astype(x.dtype))
            else:
                z = f(x ^ r)
            acc = acc + z
        return acc

    return g


def _inputs(name, B, N, dtype, rng):
    if name == "cumsum":  # 0 / 1 flags, as the lexer's counts of newlines, brackets, ...
        return (rng.random((B, N)) < 0.1).astype(dtype)
    pos = np.broadcast_to(np.arange(N), (B, N))  # positions at marks, as line starts
    keep = rng.random((B, N)) < 0.1
    fill = 0 if name == "cummax" else N
    return np.where(keep, pos, fill).astype(dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--widths", default="256,512")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--chain", type=int, default=8, help="scans per call")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(0)
    rows = []
    dev = jax.devices()[0].device_kind
    for N in [int(w) for w in a.widths.split(",")]:
        for dtype in (jnp.int16, jnp.int32):
            for name in OPS:
                x = jax.device_put(_inputs(name, a.batch, N, dtype, rng))
                ref = None
                for form, f in forms(name).items():
                    g = jax.jit(jax.vmap(_chain(name, f, a.chain)))
                    row = {"device": dev, "op": name, "dtype": jnp.dtype(dtype).name,
                           "N": N, "B": a.batch, "form": form}  # fmt: skip
                    try:
                        t0 = time.perf_counter()
                        y = jax.block_until_ready(g(x))
                        row["first_call_s"] = round(time.perf_counter() - t0, 2)
                        ts = []
                        for _ in range(a.calls):
                            t0 = time.perf_counter()
                            jax.block_until_ready(g(x))
                            ts.append(time.perf_counter() - t0)
                        row["ms_per_scan"] = round(1e3 * statistics.median(ts) / a.chain, 4)
                        row["min_ms_per_scan"] = round(1e3 * min(ts) / a.chain, 4)
                        y = np.asarray(y)
                        if ref is None:
                            ref = y
                        row["equal_to_lax"] = bool((y == ref).all())
                    except Exception as e:  # a form the backend cannot run is reported
                        row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    with open(os.path.join(a.out, "scan_forms.jsonl"), "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
