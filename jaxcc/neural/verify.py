"""Deciding which candidate to trust, on the device (paper section 4.3, Algorithm 2).

Every candidate program is run as lanes of ONE VM call: its module body, and each of its
first ``N_FUNCS - 1`` functions on every probe argument vector. Three levels:

1. ``verify_tests``: the caller's test cases (``pipeline.Cases``); accepted when every
   valid case returns the expected value; the fastest accepted (fewest VM steps over the
   cases) is chosen, as Algorithm 2 line 7 says.
2. ``cluster``: no tests. Candidates are grouped by identical behaviour (module body
   status, error line and output; each function's status and result on every probe;
   the function count and parameter counts); the largest group wins (ties: the group
   holding the lowest index). Malformed candidates never win.
3. ``verify_against``: accepted when the behaviour equals the reference program's (the
   deterministic compiler's): module status (and its error line and detail when not OK)
   and output, function count and parameters, and every function's status and result on
   every probe where the reference finished (a probe on which the reference times out
   is skipped: equivalent code may take a different number of steps). The fastest
   accepted candidate is chosen.

Errors are data: each candidate gets a ``Reason``. Probes (``make_probes``) are boundary
values (0, +-1, +-2, the int32 limits and their neighbours), each integer literal of the
program and its neighbours (which covers every comparison threshold written as a
literal), then random small, medium and full-range values. A program with more than
``N_FUNCS - 1`` functions cannot be verified (reason SIGNATURE).

All functions are pure and jit-compatible (``limits`` static); one program's candidates
never affect another program's verdict (each lane reads only its own program).
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

N_FUNCS = 6  # functions probed per program (the module body and 5 defs)
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
_BOUNDARY = np.array([0, 1, -1, 2, -2, INT_MAX, INT_MIN, INT_MAX - 1, INT_MIN + 1], np.int64)


class Reason(enum.IntEnum):
    ACCEPTED = 0
    MALFORMED = 1  # some lane stopped with InvalidBytecode (or the candidate is empty)
    SIGNATURE = 2  # function count or parameter counts differ (or too many functions)
    MODULE_STATUS = 3
    MODULE_OUTPUT = 4
    FUNCTION_STATUS = 5
    FUNCTION_RESULT = 6
    TIMEOUT = 7  # timed out where the reference finished
    TEST_FAILED = 8  # level 1: some test case failed
    OUTVOTED = 9  # level 2: not in the largest behaviour group


def reason_counts(reason) -> dict[str, int]:
    r = np.asarray(reason).ravel()
    return {Reason(int(v)).name: int((r == v).sum()) for v in np.unique(r)}


class Probes(NamedTuple):
    args: object  # Int32[Array, "B F P A"]  F = N_FUNCS, A = vocab.MAX_PARAMS


def _one_probe(kind, value, n_tokens, key, n_probes: int):
    t = kind.shape[0]
    is_num = (jnp.arange(t) < n_tokens) & (kind == Tok.NUMBER)
    order = jnp.argsort(~is_num, stable=True)[: V.N_LITS]  # literal positions first
    n_lit = jnp.minimum(jnp.sum(is_num), V.N_LITS)
    lits = value[order].astype(jnp.int32)
    n_pool = 3 * n_lit  # each literal, then each minus 1, then each plus 1
    p = jnp.arange(n_probes)[:, None]
    a = jnp.arange(V.MAX_PARAMS)[None, :]
    boundary = jnp.asarray(_BOUNDARY.astype(np.int32))[(p + a) % len(_BOUNDARY)]
    lit_idx = jnp.where(n_pool > 0, (p - len(_BOUNDARY) + 5 * a) % jnp.maximum(n_pool, 1), 0)
    k1, k2, k3 = jax.random.split(key, 3)
    shape = (n_probes, V.MAX_PARAMS)
    small = jax.random.randint(k1, shape, -10, 11, jnp.int32)
    medium = jax.random.randint(k2, shape, -1000, 1001, jnp.int32)
    full = jax.random.randint(k3, shape, INT_MIN, INT_MAX, jnp.int32)
    rnd = jnp.where((p + a) % 3 == 0, small, jnp.where((p + a) % 3 == 1, medium, full))
    in_lit = (p >= len(_BOUNDARY)) & (p < len(_BOUNDARY) + n_pool)
    n1 = jnp.maximum(n_lit, 1)
    from_lit = (
        lits[lit_idx % n1]
        + (lit_idx // n1 == 2).astype(jnp.int32)
        - (lit_idx // n1 == 1).astype(jnp.int32)
    )
    return jnp.where(p < len(_BOUNDARY), boundary, jnp.where(in_lit, from_lit, rnd))


@functools.partial(jax.jit, static_argnames=("n_probes",))
def make_probes(tokens, n_params, key, n_probes: int = 32) -> Probes:
    """Probe arguments per program and function (the same vectors for every function of
    a program; parameters beyond a function's count are ignored by the VM).
    tokens: the programs' ``Tokens`` [B, T]; n_params: Int32[B, F] (unused beyond
    documenting the functions; kept for the signature)."""
    b = tokens.kind.shape[0]
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(b))
    per = jax.vmap(lambda k, v, n, kk: _one_probe(k, v, n, kk, n_probes))(
        tokens.kind, tokens.value, tokens.n_tokens, keys
    )  # [B, P, A]
    del n_params
    return Probes(jnp.broadcast_to(per[:, None], (b, N_FUNCS, n_probes, V.MAX_PARAMS)))


class Behaviour(NamedTuple):
    """What a batch of N programs did (leading axis N)."""

    status: object  # Int32[N]  module body
    detail: object  # Int32[N]
    line: object  # Int32[N]
    n_out: object  # Int32[N]
    out: object  # Int32[N, O, 2]  (kind, value), zero beyond n_out
    f_status: object  # Int32[N, F-1, P]
    f_result: object  # Int32[N, F-1, P]
    steps: object  # Int32[N]  all lanes
    malformed: object  # Bool[N]
    n_funcs: object  # Int32[N]
    nparams: object  # Int32[N, F]


def behaviour(program: isa.Program, probe_args, limits: Limits) -> Behaviour:
    """Run N programs (leading axis N) on their probes (Int32[N, F, P, A]) as lanes of
    one VM call."""
    n = program.op.shape[0]
    _, f, p, a = probe_args.shape
    per = 1 + (f - 1) * p
    t = vm._tables(program)
    pid = jnp.repeat(jnp.arange(n, dtype=jnp.int32), per)
    fid = jnp.concatenate(
        [jnp.zeros(1, jnp.int32), jnp.repeat(jnp.arange(1, f, dtype=jnp.int32), p)]
    )
    entry = jnp.tile(fid, n)
    args = jnp.concatenate(
        [jnp.zeros((n, 1, a), jnp.int32), probe_args[:, 1:].reshape(n, (f - 1) * p, a)], axis=1
    ).reshape(n * per, a)
    live = entry < jnp.repeat(jnp.clip(program.n_funcs, 0, f), per)
    budget = jnp.where(live, limits.max_steps, 0).astype(jnp.int32)
    r = vm._run_lanes(t, pid, entry, args, budget, limits, 16, 1, 0)
    st = r.status.reshape(n, per)
    mod = lambda x: x.reshape(n, per, *x.shape[1:])[:, 0]  # noqa: E731
    n_out = mod(r.n_out)
    o = jnp.arange(r.out_kind.shape[-1])[None, :] < n_out[:, None]
    out = jnp.stack([jnp.where(o, mod(r.out_kind), 0), jnp.where(o, mod(r.out_val), 0)], -1)
    live2 = live.reshape(n, per)
    malformed = jnp.any((st == Code.INVALID_BYTECODE) & live2, axis=1) | (program.n_code <= 0)
    return Behaviour(
        status=st[:, 0], detail=mod(r.detail), line=mod(r.line), n_out=n_out, out=out,
        f_status=jnp.where(live2[:, 1:], st[:, 1:], -2).reshape(n, f - 1, p),
        f_result=r.result.reshape(n, per)[:, 1:].reshape(n, f - 1, p),
        steps=jnp.sum(r.steps.reshape(n, per), axis=1), malformed=malformed,
        n_funcs=program.n_funcs, nparams=program.fn_nparams[:, :f],
    )  # fmt: skip


def _flat(program):
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), program)


class DiffVerdict(NamedTuple):
    accepted: object  # Bool[B, k]
    steps: object  # Int32[B, k]  VM steps over all probe lanes
    best: object  # Int32[B]  fastest accepted candidate (-1: none)
    found: object  # Bool[B]
    reason: object  # Int32[B, k]  Reason


def _best(ok, steps):
    key = jnp.where(ok, steps, jnp.iinfo(jnp.int32).max)
    found = jnp.any(ok, axis=1)
    return jnp.where(found, jnp.argmin(key, axis=1), -1).astype(jnp.int32), found


@functools.partial(jax.jit, static_argnames=("limits",))
def verify_against(candidates: isa.Program, reference: isa.Program, probes: Probes,
                   limits: Limits) -> DiffVerdict:  # fmt: skip
    """Level 3: candidates [B, k, ...] against reference [B, ...] on the probes."""
    b, k = candidates.op.shape[:2]
    progs = jax.tree.map(lambda c, r: jnp.concatenate([c.reshape(b * k, *c.shape[2:]), r]),
                         candidates, reference)  # fmt: skip
    args = jnp.concatenate([jnp.repeat(probes.args, k, axis=0), probes.args])
    beh = behaviour(progs, args, limits)
    c = jax.tree.map(lambda x: x[: b * k].reshape(b, k, *x.shape[1:]), beh)
    r = jax.tree.map(lambda x: x[b * k :][:, None], beh)
    f = probes.args.shape[1]
    sig = ((c.n_funcs == r.n_funcs) & jnp.all(c.nparams == r.nparams, axis=-1)
           & (r.n_funcs <= f))  # fmt: skip
    mstat = (c.status == r.status) & (
        (r.status == Code.OK) | ((c.line == r.line) & (c.detail == r.detail))
    )
    mout = (c.n_out == r.n_out) & jnp.all(c.out == r.out, axis=(-1, -2))
    check = (r.f_status != Code.TIMEOUT) & (r.f_status != -2)
    timeout = jnp.any(check & (c.f_status == Code.TIMEOUT), axis=(-1, -2))
    fstat = jnp.all(~check | (c.f_status == r.f_status), axis=(-1, -2))
    fres = jnp.all(~check | (r.f_status != Code.OK) | (c.f_result == r.f_result), axis=(-1, -2))
    reason = jnp.select(
        [c.malformed, ~sig, ~mstat, ~mout, timeout, ~fstat, ~fres],
        [Reason.MALFORMED, Reason.SIGNATURE, Reason.MODULE_STATUS, Reason.MODULE_OUTPUT,
         Reason.TIMEOUT, Reason.FUNCTION_STATUS, Reason.FUNCTION_RESULT], Reason.ACCEPTED,
    ).astype(jnp.int32)  # fmt: skip
    ok = reason == Reason.ACCEPTED
    best, found = _best(ok, c.steps)
    return DiffVerdict(ok, c.steps, best, found, reason)


class ClusterVerdict(NamedTuple):
    best: object  # Int32[B]  a member of the largest behaviour group (-1: none)
    size: object  # Int32[B, k]  size of each candidate's group (0 for malformed ones)
    found: object  # Bool[B]
    reason: object  # Int32[B, k]  ACCEPTED for the winning group, else OUTVOTED/MALFORMED


@functools.partial(jax.jit, static_argnames=("limits",))
def cluster(candidates: isa.Program, probes: Probes, limits: Limits) -> ClusterVerdict:
    """Level 2: the largest group of candidates [B, k, ...] with identical behaviour."""
    b, k = candidates.op.shape[:2]
    beh = behaviour(_flat(candidates), jnp.repeat(probes.args, k, axis=0), limits)
    err_line = jnp.where(beh.status == Code.OK, 0, beh.line)
    vec = jnp.concatenate([
        jnp.stack([beh.status, beh.detail, err_line, beh.n_out, beh.n_funcs], -1),
        beh.nparams, beh.out.reshape(b * k, -1), beh.f_status.reshape(b * k, -1),
        jnp.where(beh.f_status == Code.OK, beh.f_result, 0).reshape(b * k, -1),
    ], axis=-1).reshape(b, k, -1)  # fmt: skip
    valid = ~beh.malformed.reshape(b, k)
    same = (
        jnp.all(vec[:, :, None] == vec[:, None, :], axis=-1) & valid[:, None, :] & valid[:, :, None]
    )
    size = jnp.sum(same, axis=-1).astype(jnp.int32)
    found = jnp.any(valid, axis=1)
    best = jnp.where(found, jnp.argmax(size, axis=1), -1).astype(jnp.int32)
    win = jnp.take_along_axis(same, jnp.maximum(best, 0)[:, None, None], axis=1)[:, 0]
    reason = jnp.where(
        ~valid, Reason.MALFORMED, jnp.where(win & found[:, None], Reason.ACCEPTED, Reason.OUTVOTED)
    )
    return ClusterVerdict(best, size, found, reason.astype(jnp.int32))


class TestVerdict(NamedTuple):
    accepted: object  # Bool[B, k]
    steps: object  # Int32[B, k]  VM steps over the valid cases
    best: object  # Int32[B]  fastest accepted (-1: none)
    found: object  # Bool[B]
    reason: object  # Int32[B, k]


@functools.partial(jax.jit, static_argnames=("limits",))
def verify_tests(candidates: isa.Program, cases, limits: Limits) -> TestVerdict:
    """Level 1 (Algorithm 2): every valid case of ``cases`` (pipeline.Cases, [B, K])
    must return its expected value; the fastest accepted candidate is chosen."""
    b, k = candidates.op.shape[:2]
    kc, a = cases.args.shape[1], cases.args.shape[2]
    n = b * k
    t = vm._tables(_flat(candidates))
    pid = jnp.repeat(jnp.arange(n, dtype=jnp.int32), kc)
    entry = jnp.repeat(jnp.repeat(jnp.asarray(cases.entry, jnp.int32), k), kc)
    args = jnp.repeat(jnp.asarray(cases.args, jnp.int32), k, axis=0).reshape(n * kc, a)
    valid = jnp.repeat(cases.valid, k, axis=0)  # [n, K]
    budget = jnp.where(valid.reshape(-1), limits.max_steps, 0).astype(jnp.int32)
    r = vm._run_lanes(t, pid, entry, args, budget, limits, 16, 1, 0)
    st = r.status.reshape(n, kc)
    want = jnp.repeat(jnp.asarray(cases.expected, jnp.int32), k, axis=0)
    passed = (st == Code.OK) & (r.result.reshape(n, kc) == want)
    ok = jnp.all(passed | ~valid, axis=1).reshape(b, k)
    malformed = jnp.any((st == Code.INVALID_BYTECODE) & valid, axis=1).reshape(b, k)
    steps = jnp.sum(jnp.where(valid, r.steps.reshape(n, kc), 0), axis=1).reshape(b, k)
    reason = jnp.where(
        ok, Reason.ACCEPTED, jnp.where(malformed, Reason.MALFORMED, Reason.TEST_FAILED)
    )
    best, found = _best(ok, steps)
    return TestVerdict(ok, steps.astype(jnp.int32), best, found, reason.astype(jnp.int32))
