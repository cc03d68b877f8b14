"""A/B of ``arrays.by_width``'s full-width plan, and the cost of the lexer's name sort.

    PYTHONPATH=. python bench/lexer_plan_ab.py --out $OUT/lexer_plan_ab.json

``lexer.lex`` on 65,536 programs of each corpus size (seeded, bench/corpus.py) with
``by_width`` as committed (``new``: a batch no narrower width serves is lexed as it
comes) and as it was before 2026-12-06 (``old``: the batch sorted by length and put back
whatever the plan), alternating, each a fresh jit; outputs compared equal. Then
``lax.sort`` of the interning's shape (``[chunk, T + 1]`` per size) with its five
operands as the lexer sorts them against fewer packed operands, to price the sort alone.
Medians of ``--repeats`` single calls (call and wait), ms.
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
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench import corpus  # noqa: E402
from jaxcc import arrays, lexer  # noqa: E402
from jaxcc.arrays import I32, map_batch, width_plan  # noqa: E402


def old_by_width(one_at, xs, size, full: int, widths: tuple[int, ...], cut, chunks):
    """``by_width`` as it was at 74d347c: sorted and put back whatever the plan."""
    narrow, wide, chunk = chunks
    B = size.shape[0]
    order = jnp.argsort(size, stable=True)
    xs = jax.tree.map(lambda x: x[order], xs)
    m = min(B, max(1, wide))
    k, n_loop = width_plan(size, full, widths, m)
    one_full = one_at(full)
    passes = [lambda w=w: map_batch(one_at(w), cut(xs, w), narrow(w)) for w in widths]
    out = jax.lax.switch(k, [*passes, lambda: map_batch(one_full, xs, chunk)])

    def body(carry):
        i, out = carry
        s0 = jnp.maximum(B - (i + 1) * m, 0)
        res = jax.vmap(one_full)(jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, s0, m), xs))
        put = lambda o, r: jax.lax.dynamic_update_slice_in_dim(o, r, s0, 0)  # noqa: E731
        return i + 1, jax.tree.map(put, out, res)

    out = jax.lax.while_loop(lambda c: c[0] < n_loop, body, (jnp.int32(0), out))[1]
    inv = jnp.zeros(B, I32).at[order].set(jnp.arange(B, dtype=I32))
    return jax.tree.map(lambda x: x[inv], out)


def _time(fn, args, repeats: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3, first, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="small,medium,large")
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    res = dict(device=jax.devices()[0].device_kind, jax=jax.__version__, rows=[])
    new_by_width = arrays.by_width

    def add(**row):
        res["rows"].append(row)
        print(json.dumps(row), flush=True)
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=1)

    for size in a.sizes.split(","):
        lim = corpus.LIMITS[size]
        progs = corpus.generate(0, size, 512, with_tests=False)
        src, ln = lexer.encode([p["source"] for p in progs], lim)
        idx = np.arange(a.batch) % len(progs)
        args = jax.device_put((np.asarray(src)[idx], np.asarray(ln)[idx]))
        real = int(np.asarray(ln)[idx].sum())
        ref = None
        for r in range(a.rounds):
            for name, bw in (("old", old_by_width), ("new", new_by_width)):
                lexer.by_width = bw  # read when the fresh jit traces
                fn = jax.jit(lambda s, n, lim=lim: lexer.lex(s, n, lim))
                ms, first, out = _time(fn, args, a.repeats)
                got = jax.tree.leaves(jax.tree.map(np.asarray, out))
                if ref is None:
                    ref = got
                same = all(map(np.array_equal, ref, got))
                add(size=size, variant=name, round=r, ms=round(ms, 3), first_s=round(first, 1),
                    real_bytes_per_s=real / ms * 1e3, equal=same)  # fmt: skip
                del out, got
        lexer.by_width = new_by_width
    # the interning sort alone, at the lexer's chunk of each size
    for size in a.sizes.split(","):
        lim = corpus.LIMITS[size]
        ts_ = lim.max_tokens + 1
        b = min(a.batch, lexer.CHUNK_BYTES // lim.max_source_bytes)
        rng = np.random.default_rng(0)
        flag = jnp.asarray(rng.integers(0, 2, (b, ts_)), jnp.int32)
        h1 = jnp.asarray(rng.integers(0, 2**32, (b, ts_)), jnp.uint32)
        h2 = jnp.asarray(rng.integers(0, 2**32, (b, ts_)), jnp.uint32)
        nlen = jnp.asarray(rng.integers(0, 20, (b, ts_)), jnp.int32)
        slots = jnp.broadcast_to(jnp.arange(ts_, dtype=jnp.int32), (b, ts_))
        forms = {
            "5 operands (as lexed)": lambda f, a1, a2, n, s: jax.lax.sort(
                (f, a1, a2, n, s), num_keys=5, dimension=1),
            "4 operands (flag and length packed)": lambda f, a1, a2, n, s: jax.lax.sort(
                (a1, a2, (f << 30) | n, s), num_keys=4, dimension=1),
            "3 operands (one hash)": lambda f, a1, a2, n, s: jax.lax.sort(
                (a1, (f << 30) | n, s), num_keys=3, dimension=1),
        }  # fmt: skip
        for name, f in forms.items():
            ms, first, _ = _time(jax.jit(f), (flag, h1, h2, nlen, slots), a.repeats)
            add(size=size, sort=name, rows=b, width=ts_, ms=round(ms, 3),
                ms_per_65536=round(ms * 65536 / b, 3))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
