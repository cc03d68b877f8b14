"""Where the lexer's heaviest GPU kernel comes from (docs/benchmarks.md, "Kernel by
kernel"): the one-jit lexer against the same steps with an ``optimization_barrier`` at
two places, on a corpus batch (GPU or CPU), outputs checked equal:

* ``one``: ``lexer.lex`` as the loop runs it;
* ``barrier_front``: ``_lex_front``, a barrier over everything it computed, ``_lex_back``
  (the split compile's boundary, inside one jit);
* ``barrier_keys``: ``_lex_back``'s steps with a barrier over the inputs of
  ``_first_error`` only (the token, string, glued-number and indentation facts), so its
  min/argmin reductions read materialized arrays instead of fusing their producers.

    PYTHONPATH=. python bench/lexer_probe.py [--size small] [--batch 65536] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
from jax import lax

sys.path.insert(0, os.path.dirname(__file__))

from infer_probe import timed_compiled  # noqa: E402
from middle_passes import encoded  # noqa: E402

from jaxcc import lexer as L  # noqa: E402


def _back_keys(src, length, f, tables, limits):
    """``lexer._lex_back`` with a barrier before ``_first_error`` (the same steps)."""
    T = limits.max_tokens
    K = T + 2
    x = L._read_bytes(src, length)
    d, tok, ln, c, st, ind, num, w, ops, se, s, em, te, g = f
    key_str = jnp.where(c.t_quote, 4 * s.str_at + 2, L._BIG)
    eof = L._eof(x, tok, ln, st, ind)
    ind, te, key_str, g, eof = lax.optimization_barrier((ind, te, key_str, g, eof))
    fe = L._first_error(x, ln, ind, te, key_str, g, eof)
    e = L._ErrAt(L._error_code(fe, te, s, g, ind), *L._error_position(x, ln, ind, se, s, fe, eof))
    cnt = L._token_count(x, ind, te.emit, fe, eof, T)
    sl = L._slot_events(x, ind, te.emit, cnt, fe, T)
    line_ev = L._line_events(ind, sl, K)
    tid = jnp.clip(sl.eid, 0, x.N - 1)
    tok_ev = L._token_events(ln, em, tid)
    eof_ev = L._eof_events(x, ind, eof, sl)
    o = L._merge_events(sl, cnt.n_emit, line_ev, tok_ev, eof_ev, T)
    value_out = L._name_values(x, tok, c, w, sl, o, tid, T, tables)
    return L._finish(src, x, ln, cnt, sl, o, value_out, fe.has_err, e, T)


def _variant(name: str, limits):
    def one(src, length, tables):
        f = L._lex_front(src, length, tables, limits)
        if name == "barrier_front":
            return L._lex_back(src, length, lax.optimization_barrier(f), tables, limits)
        return _back_keys(src, length, f, tables, limits)

    if name == "one":
        return lambda s, n, t: L._lex_batched(s, n, t, limits)
    return lambda s, n, t: jax.vmap(one, in_axes=(0, 0, None))(s, n, t)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="small")
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--json")
    ns = p.parse_args(argv)
    lim, src, length = encoded(ns.size, ns.batch)
    src, length = jnp.asarray(src), jnp.asarray(length)
    tables = L.dfa_tables(src.shape[-1])
    rows, ref = [], None
    for name in ("one", "barrier_front", "barrier_keys"):
        t0 = time.perf_counter()
        c = jax.jit(_variant(name, lim)).lower(src, length, tables).compile()
        compile_s = time.perf_counter() - t0
        out = jax.block_until_ready(c(src, length, tables))
        same = None
        if ref is None:
            ref = out
        else:
            pairs = zip(jax.tree.leaves(out), jax.tree.leaves(ref), strict=True)
            same = all(bool(jnp.array_equal(a, b)) for a, b in pairs)
        mem = c.memory_analysis()
        temp = getattr(mem, "temp_size_in_bytes", 0) if mem is not None else 0
        sec = timed_compiled(c, src, length, tables)
        rows.append({"variant": name, "seconds": sec, "programs_per_s": ns.batch / sec,
                     "compile_s": compile_s, "temp_bytes_per_program": temp / ns.batch,
                     "equal_to_one": same})  # fmt: skip
        print(rows[-1], flush=True)
    info = {"device": jax.devices()[0].device_kind, "size": ns.size, "batch": ns.batch,
            "rows": rows}  # fmt: skip
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(info, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
