"""A/B of two versions of the lexer on the GPU: ``lexer.lex`` on 65,536 programs of each
corpus size, the working tree's ``jaxcc/lexer.py`` (``new``) against another file of it
(``old``, e.g. ``git show REV:jaxcc/lexer.py > /tmp/lexer_old.py``), loaded as a module
of its own, alternating in rounds, outputs compared field by field:

    git show 74d347c:jaxcc/lexer.py > bench/_lexer_old.py
    PYTHONPATH=. python bench/lexer_ab.py --old bench/_lexer_old.py \\
        --old-muls 16777619,2654435769 --out $OUT/lexer_ab.json

``--old-muls``: the hash multipliers the old file's tables take (its lexer_tables may
differ from the working tree's). The persistent compilation cache (``--cache``) makes
every round after the first load its executables instead of compiling them. Medians of
``--repeats`` single calls (call and wait), ms per batch, and real source bytes/s.

``--sorts`` prices ``lax.sort`` alone at the name interning's shape (the lexer's chunk
of programs, T + 1 slots each) with the five operands the lexer sorted until 2026-12-06,
four, three and the two it sorts now (``--old`` is then not needed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench import corpus  # noqa: E402
from jaxcc import lexer  # noqa: E402


def _load(path: str):
    spec = importlib.util.spec_from_file_location("jaxcc._lexer_old", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _lex_fn(mod, lim, muls):
    """``mod.lex`` as a fresh jit, its hash tables those of ``muls`` (None: the module's)."""

    def f(src, n):
        B, N = src.shape
        tables = mod.dfa_tables(N) if muls is None else mod.dfa_tables(N, muls)
        widths = mod.tier_widths(N, B, None)
        return mod._lex_jit(src, n, tables, lim, mod._chunk(None, N), widths)

    return jax.jit(f)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old")
    ap.add_argument("--sorts", action="store_true")
    ap.add_argument("--old-muls", default="")
    ap.add_argument("--sizes", default="small,medium,large")
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cache", default="/tmp/jaxcc_ab_cache")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.cache:
        jax.config.update("jax_compilation_cache_dir", a.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    if a.sorts:
        return price_sorts(a)
    if not a.old:
        ap.error("--old is needed (or --sorts)")
    old = _load(a.old)
    old_muls = tuple(int(x) for x in a.old_muls.split(",")) if a.old_muls else None
    res = dict(device=jax.devices()[0].device_kind, jax=jax.__version__, old=a.old, rows=[])

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
            for name, mod, muls in (("old", old, old_muls), ("new", lexer, None)):
                fn = _lex_fn(mod, lim, muls)
                t0 = time.perf_counter()
                out = jax.block_until_ready(fn(*args))
                first = time.perf_counter() - t0
                got = jax.tree.leaves(jax.tree.map(np.asarray, out))
                ref = got if ref is None else ref
                same = all(map(np.array_equal, ref, got))
                ts = []
                for _ in range(a.repeats):
                    t0 = time.perf_counter()
                    jax.block_until_ready(fn(*args))
                    ts.append(time.perf_counter() - t0)
                ms = statistics.median(ts) * 1e3
                add(size=size, variant=name, round=r, ms=round(ms, 3), min_ms=round(min(ts) * 1e3, 3),
                    first_s=round(first, 1), real_bytes_per_s=real / ms * 1e3, equal=same)  # fmt: skip
                del out, got
    return 0


def _sort_forms(n_bits: int, s_bits: int) -> dict:
    """The interning's sort with 5, 4, 3 and 2 operands, each f(flag, h1, h2, nlen, slots)."""
    sort = jax.lax.sort
    return {
        "5: flag, two hashes, length, slot": lambda f, a1, a2, n, s: sort(
            (f, a1, a2, n, s), num_keys=5, dimension=1),
        "4: two hashes, flag and length, slot": lambda f, a1, a2, n, s: sort(
            (a1, a2, (f << 30) | n, s), num_keys=4, dimension=1),
        "3: one hash, flag and length, slot": lambda f, a1, a2, n, s: sort(
            (a1, (f << 30) | n, s), num_keys=3, dimension=1),
        "2: one hash, flag, length and slot": lambda f, a1, a2, n, s: sort(
            (a1, (f << (n_bits + s_bits)) | (n << s_bits) | s), num_keys=2, dimension=1),
    }  # fmt: skip


def price_sorts(a) -> int:
    res = dict(device=jax.devices()[0].device_kind, jax=jax.__version__, rows=[])
    import jax.numpy as jnp

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
        forms = _sort_forms(*lexer._intern_key_bits(lim.max_source_bytes, ts_))
        for name, f in forms.items():
            fn = jax.jit(f)
            fargs = (flag, h1, h2, nlen, slots)
            jax.block_until_ready(fn(*fargs))
            ts = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                jax.block_until_ready(fn(*fargs))
                ts.append(time.perf_counter() - t0)
            ms = statistics.median(ts) * 1e3
            row = dict(size=size, sort=name, rows=b, width=ts_, ms=round(ms, 3),
                       ms_per_65536=round(ms * 65536 / b, 3))  # fmt: skip
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
