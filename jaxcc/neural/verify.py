"""Deciding which candidate to trust, on the device (paper section 4.3, Algorithm 2).

The neural compiler samples k candidate programs per source (an ``isa.Program`` whose
every field has the leading axes ``[B, k]``). Candidates are untrusted: they may be wrong,
trap, loop or be malformed. Everything here is a pure, jit-compatible function of arrays
(``limits`` and the other sizes static): running and choosing happen in one device
computation, and one program's candidates never affect another program's verdict (every
lane reads only its own program, and every comparison is within one program's row).

Probes (``make_probes``): per program and function, argument vectors made of boundary
values (0, 1, -1, 2, -2, the int32 limits and their neighbours), each integer literal of
the source with its neighbours v - 1 and v + 1 (every comparison threshold written as a
literal, so an off-by-one constant is caught) and the negated ones (for ``x < -5``), then
random small, medium and full-range values (at least a quarter of the probes).

Behaviour (``behaviour``): each program runs as lanes of ONE ``vm._run_lanes`` call: its
module body (function 0, no arguments) and each function 1 .. F-1 on every probe. What
is recorded is compared exactly (full arrays): the module body's status, error detail,
error line and printed output; each (function, probe) lane's status, detail, error line
and return value; plus a 32-bit hash of each function lane's printed output (functions
may print; the hash is the only inexact item, and only an extra check).

Three levels, each returning a verdict of arrays with a ``Reason`` per candidate:

1. ``verify_tests`` (Algorithm 2): the caller's test cases (``pipeline.Cases``). A
   candidate is accepted iff every valid case returns normally with the expected value
   (``pipeline.evaluate``'s PASS); among the accepted the fastest (fewest VM steps over
   the cases) is chosen, as Algorithm 2 line 7 says.
2. ``cluster``: no tests. Candidates are grouped by identical behaviour on the probes (and
   identical function count and parameter counts); the largest group wins (ties: the group
   holding the lowest candidate index) and its fastest member is chosen. Malformed
   candidates never win and form no group. This is a vote: a majority of candidates that
   agree on a wrong behaviour wins.
3. ``verify_against``: the differential check against a reference program (the
   deterministic compiler's code), what the hybrid compiler uses. A candidate is accepted
   iff its function count and parameter counts equal the reference's, its module body
   ends with the same status (with the same detail and line when not OK) and printed the
   same output, and every (function, probe) lane on which the reference FINISHED (did not
   time out: equivalent code may take a different number of steps) ends the same way
   (status, detail and line, return value, output hash). The fastest accepted candidate
   is chosen.

Errors are data: a candidate that is malformed, has another signature, traps or loops
where the reference does not, or disagrees, is rejected with its ``Reason``; nothing
raises. Only functions ``0 .. F-1`` (F = the probes' function axis) are probed: a program
with more functions cannot be verified (reason SIGNATURE at levels 2 and 3). The
verdicts hold on the probes only; that is what "probabilistic" verification means.

Cost: a candidate is 1 + (F - 1) * P lanes (levels 2 and 3) or K lanes (level 1, K test
cases). Lanes of absent functions, and of parameterless functions beyond probe 0, stop
at once; ``shrink`` (default ``shrink_levels``: ``SHRINK`` halvings, more on the CPU)
lets the VM drop them from the lockstep array.
To probe fewer functions, give ``make_probes`` ``n_params[:, :F]``.
"""

from __future__ import annotations

import enum
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcc import isa, vm
from jaxcc.errors import Code
from jaxcc.limits import Limits
from jaxcc.neural import vocab as V
from jaxcc.tokens import Tok

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
BOUNDARY = (0, 1, -1, 2, -2, INT_MAX, INT_MIN, INT_MAX - 1, INT_MIN + 1)
MAX_LITS = 64  # literals (NUMBER tokens) per program that make probes; later ones are not used
SKIPPED = -1  # status of a (function, probe) lane that was not run
_INNER_STEPS = 16  # VM steps between "any lane running?" checks
# How many times the VM's lockstep array may halve as lanes stop (vm._run_lanes; no result
# changes). Most probe lanes stop at once (absent functions, parameterless ones after
# probe 0) or early: on the H100, level 3 on 8 programs x 512 candidates (VERIFY_LIMITS,
# 16 functions, 32 probes) took 14.7 s with 0 and 3.6 s with 2.
SHRINK = 2
# On the CPU (``shrink=None``, the default) the array halves until about CPU_SHRINK_LANES
# lanes are left: each level is one more compiled loop body (about 1 s of XLA compile
# each), but a few lanes that run to the step limit no longer keep a quarter of the
# array running. Level 2 on the 2-core CPU, 12 programs x 16 candidates x 961 lanes (the
# CLI's ``jaxcc run --compiler neural examples/*.py``): 184 s with 2 levels, 13 s with 8
# (compile included).
CPU_SHRINK_LANES = 1024


def shrink_levels(shrink: int | None, n_lanes: int) -> int:
    """The VM's ``shrink`` for a call of n_lanes lanes: ``shrink`` itself when given, else
    SHRINK on an accelerator and, on the CPU, as many halvings as leave at least about
    CPU_SHRINK_LANES lanes (at least SHRINK). No result depends on it."""
    if shrink is not None:
        return shrink
    if jax.default_backend() != "cpu":
        return SHRINK
    return max(SHRINK, (n_lanes // CPU_SHRINK_LANES).bit_length())


class Reason(enum.IntEnum):
    """Why a candidate was rejected (ACCEPTED when it was not)."""

    ACCEPTED = 0
    MALFORMED = 1  # some lane stopped with InvalidBytecode, or n_code <= 0
    SIGNATURE = 2  # function count / parameter counts differ, or more functions than probed
    MODULE_STATUS = 3  # the module body ended otherwise (status, or detail / line of its error)
    MODULE_OUTPUT = 4  # the module body printed something else
    FUNCTION_STATUS = 5  # a (function, probe) lane ended otherwise (status, detail, line)
    FUNCTION_RESULT = 6  # a (function, probe) lane returned another value
    TIMEOUT = 7  # timed out where the reference finished (level 1: on a test case)
    TEST_FAILED = 8  # level 1: a test case returned another value or trapped
    OUTVOTED = 9  # level 2: not in the largest behaviour group
    FUNCTION_OUTPUT = 10  # a (function, probe) lane printed something else (by hash)
    TOO_LARGE = 11  # hybrid only: more code, functions or frame space than the reference


def reason_counts(reason) -> dict[str, int]:
    """Host helper: how many candidates have each ``Reason`` (every name, zeros included)."""
    r = np.asarray(reason).ravel()
    return {x.name: int(np.sum(r == x)) for x in Reason}


# ----------------------------------------------------------------------------------------
# probes


class Probes(NamedTuple):
    """Argument vectors per program and function (A = vocab.MAX_PARAMS; arguments at or
    beyond the function's parameter count are 0)."""

    args: object  # Int32[Array, "B F P A"]


def _literal_pool(kind, value, n_tokens):
    """One program's literal probe values: each literal v, then v - 1, v + 1, then -v,
    -v - 1, -v + 1 (each group in source order); then the int32 overflow edges that v
    sets for ``x + v``, ``x - v`` and ``x * v``: INT_MAX - v and the value after it,
    INT_MIN + v and the value before it, INT_MAX // v and INT_MIN // v (floor) and their
    outer neighbours (v >= 2 only); without repeats and without values that are already
    boundary probes. Returns (pool Int32[14 L], n_pool Int32[]).

    Why the edges: a candidate whose constant is off by one agrees with the reference on
    every input except those where one of them overflows; on the GPU, 33 of 2,604
    accepted candidates were wrong on further inputs before these probes existed
    (docs/neural.md section 9)."""
    t = kind.shape[0]
    n_lits = min(MAX_LITS, t)
    is_num = (jnp.arange(t) < n_tokens) & (kind == Tok.NUMBER)
    order = jnp.argsort(~is_num, stable=True)[:n_lits]  # NUMBER tokens first, in order
    lits = jnp.asarray(value, jnp.int32)[order]
    ok = jnp.arange(n_lits) < jnp.sum(is_num)
    big, small = jnp.int32(INT_MAX), jnp.int32(INT_MIN)
    div = jnp.maximum(lits, 2)
    # int32 arithmetic wraps: INT_MAX + 1 is INT_MIN, a boundary value anyway
    groups = [lits, lits - 1, lits + 1, -lits, -lits - 1, -lits + 1,
              big - lits, big - lits + 1, small + lits, small + lits - 1,
              big // div, big // div + 1, small // div, small // div - 1]  # fmt: skip
    pool = jnp.concatenate(groups)
    multiplier = lits >= 2
    ok = jnp.concatenate([ok] * 10 + [ok & multiplier] * 4)
    n = pool.shape[0]
    earlier = jnp.arange(n)[None, :] < jnp.arange(n)[:, None]
    repeat = jnp.any((pool[:, None] == pool[None, :]) & earlier & ok[None, :], axis=1)
    boundary = jnp.any(pool[:, None] == jnp.asarray(BOUNDARY, jnp.int32)[None, :], axis=1)
    keep = ok & ~repeat & ~boundary
    return pool[jnp.argsort(~keep, stable=True)], jnp.sum(keep).astype(jnp.int32)


def _random(key, n_probes: int):
    """Random argument vectors Int32[P, A]: small (-10..10), medium (-1000..1000) and
    full-range values, uniform within a vector for some probes and mixed for others;
    every fourth vector repeats its first value in every position (f(x, x) cases)."""
    shape = (n_probes, V.MAX_PARAMS)
    k1, k2, k3 = jax.random.split(key, 3)
    small = jax.random.randint(k1, shape, -10, 11, jnp.int32)
    medium = jax.random.randint(k2, shape, -1000, 1001, jnp.int32)
    full = jax.random.bits(k3, shape, jnp.uint32)
    full = jax.lax.bitcast_convert_type(full, jnp.int32)
    r = jnp.arange(n_probes)[:, None]
    a = jnp.arange(V.MAX_PARAMS)[None, :]
    cls = (r + a * (r // 3)) % 3
    x = jnp.where(cls == 0, small, jnp.where(cls == 1, medium, full))
    return jnp.where(r % 4 == 3, x[:, :1], x)


def _program_probes(kind, value, n_tokens, n_params, key, n_probes: int):
    """One program's probes: Int32[F, P, A] (see ``make_probes``)."""
    n_b = len(BOUNDARY)
    p = jnp.arange(n_probes)[:, None]
    a = jnp.arange(V.MAX_PARAMS)[None, :]
    boundary = jnp.asarray(BOUNDARY, jnp.int32)[(p + a) % n_b]
    pool, n_pool = _literal_pool(kind, value, n_tokens)
    # at least a quarter of the probes stay random, so a program with many literals still
    # gets random probes (wrong mutants chosen in the property test: 6 -> 3 of 2,002
    # programs, docs/neural.md section 7); the pool's first m values are used, each in
    # every argument position (pool order: literals and neighbours before overflow edges)
    m = jnp.minimum(n_pool, max(n_probes - n_b - n_probes // 4, 0))
    q = p - n_b  # index within the literal section
    lit = pool[jnp.clip((q + a) % jnp.maximum(m, 1), 0, pool.shape[0] - 1)]
    fixed = jnp.where(p < n_b, boundary, lit)
    is_fixed = p < n_b + m
    n_f = n_params.shape[0]
    keys = jax.vmap(lambda f: jax.random.fold_in(key, f))(jnp.arange(n_f))
    rnd = jax.vmap(lambda k: _random(k, n_probes))(keys)  # [F, P, A]
    args = jnp.where(is_fixed[None], fixed[None], rnd)
    used = a[None] < jnp.asarray(n_params, jnp.int32)[:, None, None]
    return jnp.where(used, args, 0)


@functools.partial(jax.jit, static_argnames=("n_probes",))
def make_probes(tokens, n_params, key, n_probes: int = 128) -> Probes:
    """Probe argument vectors per program and function.

    tokens: the programs' ``Tokens`` [B, T] (NUMBER tokens' values are the literals);
    n_params: Int32[B, F] parameters of each function (function 0 is the module body),
    normally the deterministic compiler's ``fn_nparams``; F is the number of functions the
    verifiers probe (pass ``n_params[:, :F]`` to probe fewer); key: a PRNG key.

    Probe p of function f of program b, argument position a (a < n_params[b, f], else 0):
    probes 0..8 are the boundary values ``BOUNDARY[(p + a) % 9]`` (every position sees
    every boundary value); then one probe per value of the program's literal pool (each
    literal v, then v - 1 and v + 1, then -v, -v - 1, -v + 1, repeats and boundary values
    dropped), position a taking pool[(i + a) % n_pool], for at most P - 9 - P // 4
    probes (every position sees every value when the pool is that small); the rest, at
    least P // 4, are random (``_random``), drawn from ``fold_in(fold_in(key, b), f)``.
    Deterministic for a key; program b's probes depend on nothing else in the batch.
    """
    b = tokens.kind.shape[0]
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(b))
    args = jax.vmap(lambda kd, v, n, np_, k: _program_probes(kd, v, n, np_, k, n_probes))(
        tokens.kind, tokens.value, tokens.n_tokens, n_params, keys
    )
    return Probes(args.astype(jnp.int32))


# ----------------------------------------------------------------------------------------
# behaviour


class Behaviour(NamedTuple):
    """What programs did on their probes. Leading axes L = [B] or [B, k] (as the programs);
    F = the functions probed, P = probes, O = limits.max_output. Everything a verifier
    compares is here exactly, except ``f_out`` (a hash)."""

    status: object  # Int32[Array, "*L"]  module body: errors.Code
    detail: object  # Int32[Array, "*L"]  errors.Value for Code.VALUE, else 0
    line: object  # Int32[Array, "*L"]  source line of the error (0 when status is OK)
    n_out: object  # Int32[Array, "*L"]
    out_kind: object  # Int32[Array, "*L O"]  isa.OUT_*, 0 beyond n_out
    out_val: object  # Int32[Array, "*L O"]  0 beyond n_out
    steps: object  # Int32[Array, "*L"]  module body's VM steps
    f_status: object  # Int32[Array, "*L F-1 P"]  function f+1 on probe p; SKIPPED if not run
    f_detail: object  # Int32[Array, "*L F-1 P"]
    f_line: object  # Int32[Array, "*L F-1 P"]  error line (0 when OK or not run)
    f_result: object  # Int32[Array, "*L F-1 P"]  return value (0 unless OK)
    f_out: object  # Int32[Array, "*L F-1 P"]  hash of the printed output (0 if not run)
    f_steps: object  # Int32[Array, "*L F-1 P"]
    total_steps: object  # Int32[Array, "*L"]  all lanes (saturates at INT_MAX)
    malformed: object  # Bool[Array, "*L"]  a run lane stopped with InvalidBytecode, or n_code <= 0
    complete: object  # Bool[Array, "*L"]  1 <= n_funcs <= F: every function was probed
    n_funcs: object  # Int32[Array, "*L"]
    nparams: object  # Int32[Array, "*L F"]  fn_nparams, 0 at and beyond n_funcs


def _u32(x):
    return jax.lax.bitcast_convert_type(jnp.asarray(x, jnp.int32), jnp.uint32)


def _fmix(x):
    """murmur3's 32-bit finalizer (uint32 -> uint32)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def _hash(x, seed: int):
    """A 32-bit hash (as int32) of the last axis of an int32 array, position-sensitive."""
    pos = _fmix(jnp.arange(x.shape[-1], dtype=jnp.uint32) + jnp.uint32(seed))
    pos = pos.reshape((1,) * (x.ndim - 1) + pos.shape)
    h = jnp.sum(_fmix(_u32(x) ^ pos), axis=-1, dtype=jnp.uint32)
    return jax.lax.bitcast_convert_type(_fmix(h), jnp.int32)


def _sat_sum(x, axis):
    """Sum of non-negative int32 along axis, INT_MAX where it would not fit in int32."""
    exact = jnp.sum(x, axis=axis)  # wraps past INT_MAX; the float sum says when
    approx = jnp.sum(x.astype(jnp.float32), axis=axis)
    return jnp.where(approx > 2.0e9, INT_MAX, exact).astype(jnp.int32)


def _cols(x, n: int):
    """Int32[N, W] -> Int32[N, n]: truncated or zero-padded on the last axis."""
    w = x.shape[-1]
    return x[:, :n] if w >= n else jnp.pad(x, ((0, 0), (0, n - w)))


def _fit(program: isa.Program, n_code: int, n_fn: int) -> isa.Program:
    """A flat program batch padded (with padding's values, zeros) to I = n_code, F = n_fn."""
    fields = {}
    for name, x in zip(isa.Program._fields, program, strict=True):
        x = jnp.asarray(x, jnp.int32)
        if x.ndim == 2:
            x = _cols(x, n_fn if name.startswith("fn_") else n_code)
        fields[name] = x
    return isa.Program(**fields)


def _behave(program: isa.Program, rows, args, limits: Limits, n_funcs: int,
            shrink: int | None):  # fmt: skip
    """Behaviour of N flat programs; program n runs on probes ``args[rows[n]]``.

    Equivalent sequential Python (all lanes in ONE VM call)::

        for n in range(N):
            module[n] = run(program[n], entry=0, args=())
            for f in range(1, n_funcs):
                for p in range(P):
                    if f < program[n].n_funcs and (p == 0 or nparams[n][f] > 0):
                        lane[n, f, p] = run(program[n], entry=f, args=args[rows[n], f, p])

    (a function without parameters behaves the same on every probe: only probe 0 runs).
    """
    n = program.op.shape[0]
    _, f_all, n_p, n_a = args.shape
    if not 1 <= n_funcs <= f_all:
        raise ValueError(f"n_funcs={n_funcs} must be in [1, {f_all}] (the probes' F)")
    per = 1 + (n_funcs - 1) * n_p
    j = np.arange(per)
    f_of = np.where(j == 0, 0, 1 + (j - 1) // n_p).astype(np.int32)  # static lane layout
    p_of = np.where(j == 0, 0, (j - 1) % n_p).astype(np.int32)

    nf = jnp.asarray(program.n_funcs, jnp.int32)
    nparams = jnp.where(
        jnp.arange(n_funcs)[None, :] < nf[:, None],
        _cols(jnp.asarray(program.fn_nparams, jnp.int32), n_funcs),
        0,
    )
    run_f = (f_of[None, :] < nf[:, None]) & ((p_of[None, :] == 0) | (nparams[:, f_of] > 0))
    live = jnp.where(j[None, :] == 0, True, run_f)  # [N, per]
    lane_args = args[rows[:, None], f_of[None, :], p_of[None, :]]  # [N, per, A]
    lane_args = jnp.where(live[..., None] & (j[None, :, None] > 0), lane_args, 0)

    t = vm._tables(program)
    pid = jnp.repeat(jnp.arange(n, dtype=jnp.int32), per)
    entry = jnp.where(live, jnp.asarray(f_of)[None, :], 0).reshape(-1)
    budget = jnp.where(live, limits.max_steps, 0).astype(jnp.int32).reshape(-1)
    r = vm._run_lanes(
        t,
        pid,
        entry,
        lane_args.reshape(n * per, n_a),
        budget,
        limits,
        _INNER_STEPS,
        1,
        shrink_levels(shrink, n * per),
    )
    r = jax.tree.map(lambda x: x.reshape(n, per, *x.shape[1:]), r)

    o = jnp.arange(r.out_kind.shape[-1])[None, None, :] < r.n_out[..., None]
    out_kind = jnp.where(o, r.out_kind, 0)
    out_val = jnp.where(o, r.out_val, 0)
    status = jnp.where(live, r.status, SKIPPED)
    err_line = jnp.where(live & (r.status != Code.OK), r.line, 0)
    out_hash = _hash(jnp.concatenate([r.n_out[..., None], out_kind, out_val], axis=-1), 1)
    steps = jnp.where(live, r.steps, 0)
    fn = lambda x: x[:, 1:].reshape(n, n_funcs - 1, n_p)  # noqa: E731
    malformed = jnp.any(live & (r.status == Code.INVALID_BYTECODE), axis=1)
    return Behaviour(
        status=status[:, 0],
        detail=r.detail[:, 0],
        line=err_line[:, 0],
        n_out=r.n_out[:, 0],
        out_kind=out_kind[:, 0],
        out_val=out_val[:, 0],
        steps=steps[:, 0],
        f_status=fn(status),
        f_detail=fn(jnp.where(live, r.detail, 0)),
        f_line=fn(err_line),
        f_result=fn(jnp.where(live, r.result, 0)),
        f_out=fn(jnp.where(live, out_hash, 0)),
        f_steps=fn(steps),
        total_steps=_sat_sum(steps, axis=1),
        malformed=malformed | (jnp.asarray(program.n_code, jnp.int32) <= 0),
        complete=(nf >= 1) & (nf <= n_funcs),
        n_funcs=nf,
        nparams=nparams,
    )


def _flat(program: isa.Program) -> isa.Program:
    return jax.tree.map(lambda x: jnp.reshape(x, (-1, *jnp.shape(x)[2:])), program)


@functools.partial(jax.jit, static_argnames=("limits", "n_funcs", "shrink"))
def behaviour(
    program: isa.Program, probes: Probes, limits: Limits, n_funcs: int | None = None,
    shrink: int | None = None,
) -> Behaviour:  # fmt: skip
    """Run programs [B, ...] or candidates [B, k, ...] on their probes [B, F, P, A].

    Each program (each candidate) runs its module body (function 0, no arguments) and
    every function f in 1 .. n_funcs - 1 on every probe of ``probes.args[b, f]`` (a
    function without parameters on probe 0 only), all as lanes of ONE ``vm._run_lanes``
    call under ``limits`` (max_stack, max_depth, max_output, max_steps). n_funcs (static,
    default F) is the number of functions probed. shrink (static) is passed to the VM: it
    changes no result, it lets the lockstep array halve as lanes stop (None:
    ``shrink_levels``). Returns ``Behaviour``
    with the program's leading axes.
    """
    lead = program.op.shape[:-1]
    nf = probes.args.shape[1] if n_funcs is None else n_funcs
    b = lead[0]
    rows = jnp.repeat(jnp.arange(b, dtype=jnp.int32), int(np.prod(lead[1:], dtype=np.int64)))
    flat = _flat(program) if len(lead) == 2 else program
    beh = _behave(flat, rows, jnp.asarray(probes.args, jnp.int32), limits, nf, shrink)
    return jax.tree.map(lambda x: x.reshape(*lead, *x.shape[1:]), beh)


def fastest(ok, steps):
    """(best Int32[B], found Bool[B]): the accepted candidate (ok Bool[B, k]) with the
    fewest steps (Int32[B, k]), the lowest index among equals; -1 where none is accepted."""
    found = jnp.any(ok, axis=1)
    key = jnp.where(ok, steps, INT_MAX)
    best = jnp.where(found, jnp.argmin(key, axis=1), -1)
    return best.astype(jnp.int32), found


# ----------------------------------------------------------------------------------------
# level 1: the caller's tests


class TestVerdict(NamedTuple):
    """Level 1 verdict (``verify_tests``)."""

    __test__ = False  # not a pytest class

    accepted: object  # Bool[Array, "B k"]  passed every valid case
    steps: object  # Int32[Array, "B k"]  VM steps over the valid cases (saturating)
    best: object  # Int32[Array, "B"]  fastest accepted candidate (-1: none)
    found: object  # Bool[Array, "B"]
    reason: object  # Int32[Array, "B k"]  Reason: ACCEPTED, MALFORMED, TIMEOUT, TEST_FAILED


@functools.partial(jax.jit, static_argnames=("limits", "shrink"))
def verify_tests(
    candidates: isa.Program, cases, limits: Limits, shrink: int | None = None
) -> TestVerdict:
    """Level 1 (Algorithm 2): candidates [B, k, ...] on the caller's ``pipeline.Cases``
    [B, K] (entry Int32[B], args Int32[B, K, A], expected Int32[B, K], valid Bool[B, K]).

    Every (candidate, valid case) pair is a lane of one VM call: the case's entry function
    called with its args. A candidate is accepted iff every valid case returns normally
    (Code.OK) with ``expected`` (``pipeline.evaluate``'s PASS; a program without valid
    cases passes). Rejected: MALFORMED (a case lane stopped with InvalidBytecode, which
    includes an entry function the candidate does not have), else TIMEOUT (a case ran out
    of steps), else TEST_FAILED. ``best`` is the accepted candidate with the fewest VM
    steps over the valid cases (ties: the lowest index). shrink: as in ``behaviour``.
    """
    b, k = candidates.op.shape[:2]
    kc, n_a = cases.args.shape[1], cases.args.shape[2]
    n = b * k
    t = vm._tables(_flat(candidates))
    pid = jnp.repeat(jnp.arange(n, dtype=jnp.int32), kc)
    entry = jnp.repeat(jnp.asarray(cases.entry, jnp.int32), k * kc)
    args = jnp.repeat(jnp.asarray(cases.args, jnp.int32), k, axis=0).reshape(n * kc, n_a)
    valid = jnp.repeat(jnp.asarray(cases.valid, bool), k, axis=0)  # [n, K]
    budget = jnp.where(valid, limits.max_steps, 0).astype(jnp.int32).reshape(-1)
    r = vm._run_lanes(t, pid, entry, args, budget, limits, _INNER_STEPS, 1,
                      shrink_levels(shrink, n * kc))  # fmt: skip
    st = r.status.reshape(n, kc)
    want = jnp.repeat(jnp.asarray(cases.expected, jnp.int32), k, axis=0)
    passed = (st == Code.OK) & (r.result.reshape(n, kc) == want)
    ok = jnp.all(passed | ~valid, axis=1).reshape(b, k)
    bad = lambda code: jnp.any(valid & (st == code), axis=1).reshape(b, k)  # noqa: E731
    steps = _sat_sum(jnp.where(valid, r.steps.reshape(n, kc), 0), axis=1).reshape(b, k)
    reason = jnp.select(
        [ok, bad(Code.INVALID_BYTECODE), bad(Code.TIMEOUT)],
        [Reason.ACCEPTED, Reason.MALFORMED, Reason.TIMEOUT],
        Reason.TEST_FAILED,
    ).astype(jnp.int32)
    best, found = fastest(ok, steps)
    return TestVerdict(ok, steps, best, found, reason)


# ----------------------------------------------------------------------------------------
# level 2: clustering


class ClusterVerdict(NamedTuple):
    """Level 2 verdict (``cluster``)."""

    best: object  # Int32[Array, "B"]  fastest member of the largest group (-1: none)
    size: object  # Int32[Array, "B k"]  size of each candidate's group (0: in none)
    found: object  # Bool[Array, "B"]
    reason: object  # Int32[Array, "B k"]  ACCEPTED (in the winning group), OUTVOTED,
    #                 MALFORMED, SIGNATURE (more functions than probed, or none)
    steps: object  # Int32[Array, "B k"]  VM steps over all probe lanes (saturating)


def _signature_vector(beh: Behaviour):
    """Everything ``cluster`` compares, per candidate: Int32[B, k, D]."""
    lead = beh.status.shape
    parts = [
        beh.status, beh.detail, beh.line, beh.n_out, beh.out_kind, beh.out_val,
        beh.n_funcs, beh.nparams, beh.f_status, beh.f_detail, beh.f_line, beh.f_result,
        beh.f_out,
    ]  # fmt: skip
    return jnp.concatenate([jnp.reshape(x, (*lead, -1)) for x in parts], axis=-1)


@functools.partial(jax.jit, static_argnames=("limits", "shrink"))
def cluster(candidates: isa.Program, probes: Probes, limits: Limits, shrink: int | None = None) -> ClusterVerdict:  # fmt: skip
    """Level 2: group candidates [B, k, ...] by identical behaviour on the probes.

    Two candidates are in one group iff these are equal (``behaviour``): the module body's
    status, detail, error line, n_out and output items; n_funcs and fn_nparams (of the
    first n_funcs functions); and for every (function, probe) lane its status, detail,
    error line, return value and output hash. Grouping first buckets candidates by a 64-bit
    hash of that vector, then checks each one exactly against its bucket's first member;
    a candidate that differs from it (a hash collision) is put in a group of its own, so a
    group never holds two behaviours. Malformed candidates, and candidates with more
    functions than probed (or none), are in no group (size 0).

    The largest group wins (ties: the group holding the lowest candidate index); ``best``
    is its member with the fewest VM steps (ties: the lowest index).
    """
    b, k = candidates.op.shape[:2]
    beh = behaviour(candidates, probes, limits, shrink=shrink)
    valid = ~beh.malformed & beh.complete  # [B, k]
    vec = _signature_vector(beh)  # [B, k, D]
    h1, h2 = _hash(vec, 0x9E3779B9), _hash(vec, 0x7F4A7C15)
    same_hash = (h1[:, :, None] == h1[:, None, :]) & (h2[:, :, None] == h2[:, None, :])
    same_hash = same_hash & valid[:, None, :]
    rep = jnp.argmax(same_hash, axis=2)  # first valid candidate with my hash (me if valid)
    exact = jnp.all(vec == vec[jnp.arange(b)[:, None], rep], axis=-1)
    idx = jnp.arange(k)[None, :]
    group = jnp.where(valid, jnp.where(exact, rep, idx), -1)  # a collision: its own group
    same = (group[:, :, None] == group[:, None, :]) & valid[:, None, :] & valid[:, :, None]
    size = jnp.sum(same, axis=2).astype(jnp.int32)
    found = jnp.any(valid, axis=1)
    leader = jnp.argmax(size, axis=1)  # lowest index of the largest (earliest) group
    win = valid & (group == jnp.take_along_axis(group, leader[:, None], axis=1)) & found[:, None]
    best, _ = fastest(win, beh.total_steps)
    reason = jnp.select(
        [beh.malformed, ~beh.complete, win],
        [Reason.MALFORMED, Reason.SIGNATURE, Reason.ACCEPTED],
        Reason.OUTVOTED,
    ).astype(jnp.int32)
    return ClusterVerdict(best, size, found, reason, beh.total_steps)


# ----------------------------------------------------------------------------------------
# level 3: differential against a reference program


class DiffVerdict(NamedTuple):
    """Level 3 verdict (``verify_against``)."""

    accepted: object  # Bool[Array, "B k"]
    steps: object  # Int32[Array, "B k"]  VM steps over all probe lanes (saturating)
    best: object  # Int32[Array, "B"]  fastest accepted candidate (-1: none)
    found: object  # Bool[Array, "B"]
    reason: object  # Int32[Array, "B k"]  Reason
    ref_steps: object  # Int32[Array, "B"]  the reference's VM steps over the same lanes


@functools.partial(jax.jit, static_argnames=("limits", "shrink"))
def verify_against(
    candidates: isa.Program, reference: isa.Program, probes: Probes, limits: Limits,
    shrink: int | None = None,
) -> DiffVerdict:  # fmt: skip
    """Level 3: candidates [B, k, ...] against the reference programs [B, ...] (the
    deterministic compiler's code), all in one VM call, on the probes [B, F, P, A].

    A candidate is accepted iff, compared with its program's reference (in this order;
    the first failing check is its reason):

    * MALFORMED: none of its lanes stopped with InvalidBytecode, and n_code > 0;
    * SIGNATURE: n_funcs and fn_nparams (of the first n_funcs functions) are equal, and
      the reference is verifiable (1 <= n_funcs <= F, not malformed itself);
    * TIMEOUT: the module body did not time out unless the reference's did, and no
      (function, probe) lane checked below timed out;
    * MODULE_STATUS: the module body's status is equal, and when it is not OK its error
      detail and line too (a module body that times out in the reference is compared
      the same way, so only a candidate that times out at the same line passes);
    * MODULE_OUTPUT: n_out and the output items are equal;
    * FUNCTION_RESULT / FUNCTION_STATUS / FUNCTION_OUTPUT: on every (function, probe)
      lane that the reference ran and FINISHED (any status but TimeoutError: equivalent
      code may take a different number of steps): where both returned, the return values
      are equal; the status, error detail and error line are equal; the output hash is
      equal.

    ``best`` is the accepted candidate with the fewest VM steps over all its lanes (ties:
    the lowest index). Candidates and reference may have different I and F widths.
    """
    b, k = candidates.op.shape[:2]
    flat = _flat(candidates)
    n_i = max(flat.op.shape[1], reference.op.shape[1])
    n_f = max(flat.fn_entry.shape[1], reference.fn_entry.shape[1])
    progs = jax.tree.map(
        lambda c, r: jnp.concatenate([c, r]), _fit(flat, n_i, n_f), _fit(reference, n_i, n_f)
    )
    rows = jnp.concatenate(
        [jnp.repeat(jnp.arange(b, dtype=jnp.int32), k), jnp.arange(b, dtype=jnp.int32)]
    )
    args = jnp.asarray(probes.args, jnp.int32)
    beh = _behave(progs, rows, args, limits, args.shape[1], shrink)
    c = jax.tree.map(lambda x: x[: b * k].reshape(b, k, *x.shape[1:]), beh)
    r = jax.tree.map(lambda x: x[b * k :][:, None], beh)  # broadcast over k

    fn_axes = (-2, -1)
    sig = (
        (c.n_funcs == r.n_funcs)
        & jnp.all(c.nparams == r.nparams, axis=-1)
        & r.complete
        & ~r.malformed
    )
    check = (r.f_status != Code.TIMEOUT) & (r.f_status != SKIPPED)
    timeout = ((c.status == Code.TIMEOUT) & (r.status != Code.TIMEOUT)) | jnp.any(
        check & (c.f_status == Code.TIMEOUT), axis=fn_axes
    )
    m_status = (c.status == r.status) & (c.detail == r.detail) & (c.line == r.line)
    m_out = (
        (c.n_out == r.n_out)
        & jnp.all(c.out_kind == r.out_kind, axis=-1)
        & jnp.all(c.out_val == r.out_val, axis=-1)
    )
    both_ok = check & (c.f_status == Code.OK) & (r.f_status == Code.OK)
    f_result = jnp.all(~both_ok | (c.f_result == r.f_result), axis=fn_axes)
    f_status = (c.f_status == r.f_status) & (c.f_detail == r.f_detail) & (c.f_line == r.f_line)
    f_status = jnp.all(~check | f_status, axis=fn_axes)
    f_out = jnp.all(~check | (c.f_out == r.f_out), axis=fn_axes)
    reason = jnp.select(
        [c.malformed, ~sig, timeout, ~m_status, ~m_out, ~f_result, ~f_status, ~f_out],
        [Reason.MALFORMED, Reason.SIGNATURE, Reason.TIMEOUT, Reason.MODULE_STATUS,
         Reason.MODULE_OUTPUT, Reason.FUNCTION_RESULT, Reason.FUNCTION_STATUS,
         Reason.FUNCTION_OUTPUT],
        Reason.ACCEPTED,
    ).astype(jnp.int32)  # fmt: skip
    ok = reason == Reason.ACCEPTED
    best, found = fastest(ok, c.total_steps)
    return DiffVerdict(ok, c.total_steps, best, found, reason, beh.total_steps[b * k :])
