"""bench/step_profile.py's attribution (the GPU trace itself is not available on the CPU):
instructions of a compiled function are found by the trace's spelling of their names and
attributed to the named scopes they were traced under, outermost and innermost."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, "bench")
import step_profile as sp  # noqa: E402


def _toy(x):
    with jax.named_scope("_alpha"):
        y = jnp.sin(x) * 2
        with jax.named_scope("_inner"):
            y = y + jnp.cos(y)
    with jax.named_scope("_beta"):
        z = jnp.sort(y) + jnp.cumsum(y)
    return z


def test_attribution_by_named_scope():
    hlo = jax.jit(_toy).lower(jnp.ones(64)).compile().as_text()
    ops = sp.op_names(hlo)
    assert ops and all("." not in k for k in ops)  # the trace's spelling: x_fusion_2
    names = {"_alpha", "_beta", "_inner"}
    scoped = {k: v for k, v in ops.items() if any(sp.scopes(o, names) for o in v)}
    assert scoped, ops
    times = {k: 2000.0 for k in ops}  # trace microseconds: 1 ms per kernel per call
    res = sp.attribute(times, {k: 2 for k in ops}, ops, names, n_calls=2)
    outer, inner = dict(res["outer"]), dict(res["inner"])
    assert "_beta" in outer and "_inner" not in outer  # outermost scopes
    assert set(inner) - {"(none)"} <= names
    assert abs(res["total_ms"] - len(ops)) < 1e-6
    assert abs(sum(outer.values()) - res["total_ms"]) < 1e-3
    assert sp.scopes("jit(f)/_alpha/_inner/add", names) == ["_alpha", "_inner"]
    assert sp._below_entry(["lex", "_lex_one", "_dfa_tokens"]) == ["_dfa_tokens"]
