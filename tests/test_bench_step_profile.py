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


def test_loop_attribution_by_stage_and_step():
    names = {"lex", "_lex_one", "_dfa_tokens", "parse", "middle_end", "map_batch",
             "resolve_names", "_scopes", "run_cases"}  # fmt: skip
    ops = {
        "a_fusion": ["jit(evaluate)/lex/_lex_one/_dfa_tokens/add"],
        "b_fusion": ["jit(evaluate)/middle_end/map_batch/resolve_names/_scopes/mul"],
        "c_fusion": ["jit(evaluate)/parse/while/body/gather"],
        "d_fusion": ["jit(evaluate)/run_cases/pallas_call"],
        "e_fusion": ["jit(evaluate)/select_n"],
    }
    times = {"a_fusion": 3000.0, "b_fusion": 2000.0, "c_fusion": 1000.0,
             "d_fusion": 500.0, "e_fusion": 100.0, "jaxcc_parser": 400.0}  # fmt: skip
    res = sp.by_stage(times, {k: 2 for k in times}, ops, names, n_calls=2)
    stage, step = dict(res["stage"]), dict(res["step"])
    # the Pallas kernel has no HLO op_name: its trace name says its stage
    assert stage == {"lexer": 1.5, "middle end": 1.0, "parser": 0.7, "vm": 0.25,
                     "(other)": 0.05}  # fmt: skip
    assert step["parser: jaxcc_parser"] == 0.2
    assert step["lexer: _dfa_tokens"] == 1.5 and step["middle end: _scopes"] == 1.0
    assert step["parser: -"] == 0.5 and res["launches"]["lexer"] == 1
    assert abs(res["total_ms"] - 3.5) < 1e-9
