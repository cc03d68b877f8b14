"""The middle end: flat AST (jaxcc.syntax) -> bytecode (jaxcc.isa), for a whole batch.

``middle_end(ast, tokens, limits, error=None) -> (Program, Error)`` is one pure,
jittable function; ``middle_end_debug`` also gives the debug arrays (jaxcc.debuginfo). ``PASSES`` names the passes in order; each takes and returns a
``State`` for ONE program (``middle_end`` runs them in order under one vmap).
docs/middle_end.md describes them.

Errors: the incoming error (lexer/parser) wins; then, as the reference compiler's
phases: CPython's compile()-time SyntaxErrors, the int-literal check, names, types,
limits. A program with an error gets an all-zero Program (as the reference's).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxcc import arrays, debuginfo, isa, lexer
from jaxcc.codegen import emit_code
from jaxcc.errors import Code, Error
from jaxcc.limits import Limits
from jaxcc.resolve import Err, first_of, resolve_names
from jaxcc.typecheck import infer_types


class State(NamedTuple):
    """What the passes have computed so far, for one program (None: not yet)."""

    ast: object  # syntax.Ast (unbatched)
    error: Err  # the incoming error
    scopes: object = None  # resolve.Scopes
    types: object = None  # typecheck.Types
    program: object = None  # isa.Program
    final: object = None  # Err: the program's error after all passes
    debug: object = None  # debuginfo.Debug


def _resolve(st: State, limits: Limits) -> State:
    return st._replace(scopes=resolve_names(st.ast, limits))


def _types(st: State, limits: Limits) -> State:
    return st._replace(types=infer_types(st.ast, st.scopes, limits))


def _emit(st: State, limits: Limits) -> State:
    code = emit_code(st.ast, st.scopes, st.types, limits)
    sc = st.scopes
    err = first_of(st.error, sc.err_compile, sc.err_literal, sc.err_names, st.types.err, code.err)
    bad = err.code != 0
    err = Err(*(jnp.where(bad, x, 0) for x in err))
    prog = isa.Program(*(jnp.where(bad, jnp.zeros_like(x), x) for x in code.program))
    dbg = debuginfo.debug_arrays(st.ast, sc, st.types, limits)
    empty = debuginfo.empty(limits)
    dbg = debuginfo.Debug(*(jnp.where(bad, e, x) for x, e in zip(dbg, empty, strict=True)))
    dbg = dbg._replace(error_args=jnp.where(err.code == Code.TYPE, st.types.err_args, 0))
    return st._replace(program=prog, final=err, debug=dbg)


PASSES = (
    ("resolve_names", _resolve),
    ("infer_types", _types),
    ("emit_code", _emit),
)


def initial_state(ast, error: Error | None = None) -> State:
    """The passes' input, batched (leading axis B) or one program: the flat AST and the
    incoming lexer/parser Error as int32 (no error: all zeros)."""
    if error is None:
        z = jnp.zeros(ast.kind.shape[:-1], jnp.int32)
        error = Error(z, z, z, z)
    ast = type(ast)(*(jnp.asarray(x, jnp.int32) for x in ast))
    err = Err(
        *(jnp.asarray(x, jnp.int32) for x in (error.code, error.line, error.col, error.detail))
    )
    return State(ast=ast, error=err)


def outcome(st: State):
    """(Program, Error, Debug) of a State that has been through every pass."""
    e = st.final
    return st.program, Error(e.code, e.line, e.col, e.detail), st.debug


# A batch of more than CHUNK programs goes through the passes CHUNK programs at a time,
# one chunk after another (lax.map): the passes' temporaries (per-node columns, 40-44 KB
# a small program at the peak) are then CHUNK programs' worth, not the batch's. On an
# H100, with the lexer's chunks, the loop of 65,536 small programs held 58.2 -> 25.5 KB a
# program and ran 10% faster; chunks of 8,192 held less but were 5-12% slower than 16,384
# (each pass's while_loop runs once per chunk) (docs/benchmarks.md, "GPU results, tenth
# run").
CHUNK = 16384


def run_passes(st: State, limits: Limits, names: tuple[str, ...] | None = None,
               chunk: int = CHUNK) -> State:  # fmt: skip
    """The passes ``names`` (a run of consecutive ``PASSES``, in order; None: all) on a State,
    batched (leading axis B, under vmap) or one program: ``middle_end_debug`` cut into
    pieces that can be jitted apart (the compiler's split compile); ``outcome`` of the
    State after the last pass is ``middle_end_debug``'s result. ``chunk`` (static): a
    batch of more than ``chunk`` programs runs ``chunk`` at a time (``lax.map``; 0: the
    whole batch at once); the same result either way."""
    order = [n for n, _ in PASSES]
    names = tuple(order) if names is None else tuple(names)
    i = order.index(names[0])
    if tuple(order[i : i + len(names)]) != tuple(names):
        raise ValueError(f"not consecutive passes in order {order}: {names}")
    fs = [f for n, f in PASSES if n in names]

    def one(st: State) -> State:
        for f in fs:
            st = f(st, limits)
        return st

    return one(st) if jnp.ndim(st.ast.kind) != 2 else arrays.map_batch(one, st, chunk)


def middle_end(ast, tokens, limits: Limits, error: Error | None = None, chunk: int = CHUNK,
               tiers: bool | None = None):  # fmt: skip
    """Compile a batch (leading axis B) or one program's flat AST to bytecode.

    ``middle_end_debug`` without its debug arrays (XLA drops their computation).
    """
    program, error, _ = middle_end_debug(ast, tokens, limits, error, chunk, tiers)
    return program, error


# Two widths, as the lexer's (docs/lexer.md "Two widths"): a program's Program, Error and
# Debug do not depend on how far its AST is padded past n_nodes (tests/test_middle_end.py
# checks it), so with ``tiers`` the programs that fit 3 N / 8 or N / 2 nodes (the cheaper
# in nodes passed: ``arrays.by_width``) go through the passes at that width (the small
# corpus has at most 43 nodes of N = 128, the medium 99% at most 128 of 256).
# ``tiers=None`` follows ``lexer.use_tiers``' rule, as the lexer's: on an H200 N / 2 took
# 19-24% off the whole loop and 3 N / 8 (with the lexer's) 27% more off the small one
# (docs/middle_end.md "Two widths"), each width for more cold compile.
TIER_MIN_NODES = 32


def middle_end_debug(ast, tokens, limits: Limits, error: Error | None = None,
                     chunk: int = CHUNK, tiers: bool | None = None):  # fmt: skip
    """Compile a batch (leading axis B) or one program's flat AST to bytecode:
    (Program, Error, debuginfo.Debug). ``chunk``: as ``run_passes``'. ``tiers`` (static):
    a batch's programs that fit a narrower width (3 N / 8 or N / 2, the cheaper) go through
    the passes at it (``arrays.by_width``; None: ``lexer.use_tiers``' rule); the same
    result.

    ``tokens`` is accepted for the pipeline's uniformity (positions are in the Ast).
    ``error``: the lexer/parser's Error for each program; a program that has one keeps
    it and gets an all-zero Program.
    """
    del tokens
    limits.check()  # the passes order errors by 64 * node + sub in int32
    st = initial_state(ast, error)
    N = ast.kind.shape[-1]
    widths = lexer.narrow_widths(N, TIER_MIN_NODES)  # 3 N / 8 and N / 2, as the lexer's
    if jnp.ndim(ast.kind) != 2 or not lexer.use_tiers(tiers, ast.kind.shape[0]) or not widths:
        return outcome(run_passes(st, limits, chunk=chunk))
    one = lambda w: lambda s: outcome(run_passes(s, limits))  # noqa: E731  (one program)
    cut = lambda s, w: s._replace(ast=type(s.ast)(*(x[:, :w] if x.ndim == 2 else x for x in s.ast)))  # noqa: E731
    narrow = lambda w: 2 * chunk  # noqa: E731  (0: all at once, as chunk 0)
    chunks = (narrow, chunk // 4, chunk) if chunk else (narrow, ast.kind.shape[0], 0)
    return arrays.by_width(one, st, st.ast.n_nodes, N, widths, cut, chunks)
