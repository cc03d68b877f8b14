"""The hybrid compiler (paper section 5, Algorithm 3) as one jit-composable function.

``hybrid_compile(source, length, params, router_params, threshold, key, ...)`` does, for
a batch of B padded sources and without leaving the device:

1. the deterministic compiler (lex, parse, middle end: what ``compiler.compile_arrays``
   does) on all B sources, at ``limits``' shapes;
2. the router (``router.features`` / ``router.score``, eq. 13) on all B programs; a
   program is *eligible* when it compiled and fits the neural path (``nl``: code length
   and function count, and the functions the verifier probes), and *routed* when it is
   eligible and its score is at least ``threshold`` (every eligible program when
   ``router_params`` is None);
3. the first ``m`` routed programs (in batch order) are gathered into a sub-batch of the
   static capacity ``m``; routed programs beyond it take the deterministic path
   (``Path.OVERFLOW``);
4. ``k`` candidates per sub-batch program (``sample.compile``) and level-3 verification
   against that program's deterministic code (``hybrid_select``);
5. each program's result is the verified candidate with the fewest VM steps on the
   probes where there is one (``Path.NEURAL``), the deterministic code everywhere else.

The result therefore behaves as the deterministic compiler's code on every program,
exactly where no candidate was chosen, and on every probe input (and, by the property
tests, on further inputs) where one was.

Randomness: program b's candidates and probes come from ``fold_in(key, b)`` (b its index
in the whole batch, not its slot in the sub-batch), so a program's result depends only
on its source, the key and its index, never on the rest of the batch, as long as the
sub-batch has room for it.

``hybrid_select`` is step 4's choice on its own (candidates given by the caller), which
the property tests feed with the deterministic code and mutated copies of it.
"""

from __future__ import annotations

import enum
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxcc import isa, lexer, middle, parser
from jaxcc.errors import Code, Error
from jaxcc.limits import Limits
from jaxcc.neural import inputs, router, verify
from jaxcc.neural import sample as S
from jaxcc.neural.grammar import MAX_FUNCS
from jaxcc.neural.model import Config
from jaxcc.neural.verify import Reason

# Shapes of the neural path (what the shipped model was trained on).
NEURAL_LIMITS = Limits(
    max_source_bytes=2048, max_tokens=768, max_indent=16, max_parse_depth=256,
    max_nodes=1024, max_code=512, max_funcs=MAX_FUNCS, max_locals=64, max_stack=512,
    max_depth=64, max_output=64, max_steps=100_000,
)  # fmt: skip
# Run-time limits of the verification lanes (many lanes per candidate: keep them small).
VERIFY_LIMITS = NEURAL_LIMITS._replace(max_stack=256, max_depth=48, max_output=64, max_steps=20_000)

NOT_SAMPLED = -1  # reason of every candidate slot of a program that was not sampled


class Path(enum.IntEnum):
    """Which way a program went through ``hybrid_compile``."""

    DETERMINISTIC = 0  # eligible, routed to the deterministic compiler (score < threshold)
    INELIGIBLE = 1  # a compile error, or outside the neural path's bounds: never routed
    OVERFLOW = 2  # routed, but the neural sub-batch (capacity m) was full
    FALLBACK = 3  # routed and sampled, no candidate verified: the deterministic code
    NEURAL = 4  # a verified neural candidate was chosen


class Selection(NamedTuple):
    """What ``hybrid_select`` chose, per program (leading axis M)."""

    program: isa.Program  # [M, ...] at the reference's widths: the chosen candidate where
    #                       found, else the reference itself
    found: object  # Bool[Array, "M"]
    best: object  # Int32[Array, "M"]  index of the chosen candidate (-1: none)
    reason: object  # Int32[Array, "M k"]  verify.Reason of every candidate
    steps: object  # Int32[Array, "M"]  VM steps of the chosen program over the probe lanes
    ref_steps: object  # Int32[Array, "M"]  the reference's VM steps over the same lanes


class Hybrid(NamedTuple):
    """What ``hybrid_compile`` returns, per program (leading axis B)."""

    program: isa.Program  # [B, ...] at ``limits``' widths: the verified candidate
    #                       (Path.NEURAL) or the deterministic code (all-zero where
    #                       error.code != OK, as compile_arrays gives it)
    error: Error  # Int32[B] each: the deterministic front end's compile error
    path: object  # Int32[Array, "B"]  Path
    score: object  # Float32[Array, "B"]  the router's score (1 without a router)
    slot: object  # Int32[Array, "B"]  row in the neural sub-batch (-1: not sampled)
    best: object  # Int32[Array, "B"]  chosen candidate (-1: none)
    reason: object  # Int32[Array, "B k"]  verify.Reason per candidate, NOT_SAMPLED if none
    steps: (
        object  # Int32[Array, "B"]  the chosen program's VM steps on the probes (-1: not sampled)
    )
    ref_steps: object  # Int32[Array, "B"]  the deterministic code's (-1: not sampled)
    bound: object  # Int32[Array, "B"]  inputs.Bound of the sampled programs (0 elsewhere)


def _cols(x, n: int):
    """[..., W] -> [..., n]: truncated or zero-padded on the last axis (static sizes)."""
    w = x.shape[-1]
    if w >= n:
        return x[..., :n]
    return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, n - w)])


def _widths(program: isa.Program, n_code: int, n_funcs: int) -> isa.Program:
    """A program batch with its instruction axis at n_code and function axis at n_funcs
    (padding is zeros, as the compilers write it; callers make sure only padding is cut)."""
    return isa.Program(**{
        f: _cols(jnp.asarray(x, jnp.int32), n_funcs if f.startswith("fn_") else n_code)
        if f not in ("n_code", "n_funcs") else jnp.asarray(x, jnp.int32)
        for f, x in zip(isa.Program._fields, program, strict=True)
    })  # fmt: skip


def _frame(program: isa.Program, n_funcs: int):
    """Stack slots per frame (locals + operand stack) per function: Int32[..., n_funcs]."""
    return _cols(jnp.asarray(program.fn_nlocals, jnp.int32), n_funcs) + _cols(
        jnp.asarray(program.fn_maxstack, jnp.int32), n_funcs
    )


def _bcast(m, a):
    return m.reshape(m.shape + (1,) * (a.ndim - m.ndim))


@functools.partial(jax.jit, static_argnames=("limits", "shrink"))
def hybrid_select(reference: isa.Program, candidates: isa.Program, ok, probes: verify.Probes,
                  limits: Limits, shrink: int | None = None) -> Selection:  # fmt: skip
    """Algorithm 3 lines 6-11 for M programs: level-3 verification and the choice.

    reference: the deterministic code, an isa.Program [M, I, F]; candidates: [M, k, I', F']
    (any widths); ok: Bool[M, k] the candidates the sampler vouches for (complete and
    well-formed; pass all True for injected candidates); probes: [M, F_p, P, A]
    (``verify.make_probes``); limits: the verification lanes' run-time limits.

    A candidate is accepted iff ``verify.verify_against`` accepts it (same signature,
    module body status and output, every function's status and result on every probe
    where the reference finishes), ``ok`` is set (else MALFORMED), and it fits where the
    reference lives: n_code <= I, n_funcs <= F and, per function, a frame (locals +
    operand stack) no larger than the reference's, so it cannot hit a stack limit that
    the reference does not (else TOO_LARGE). The chosen program is the accepted
    candidate with the fewest VM steps over the probe lanes (ties: the lowest index),
    written at the reference's widths; where none is accepted it is the reference.
    """
    m, k = candidates.op.shape[:2]
    n_i, n_f = reference.op.shape[-1], reference.fn_entry.shape[-1]
    v = verify.verify_against(candidates, reference, probes, limits, shrink)
    n_fc = max(n_f, candidates.fn_entry.shape[-1])
    bigger = jnp.any(_frame(candidates, n_fc) > _frame(reference, n_fc)[:, None], axis=-1)
    fits = (candidates.n_code <= n_i) & (candidates.n_funcs <= n_f) & ~bigger
    reason = jnp.where(v.accepted & ~ok, Reason.MALFORMED, v.reason)
    reason = jnp.where((reason == Reason.ACCEPTED) & ~fits, Reason.TOO_LARGE, reason)
    accepted = reason == Reason.ACCEPTED
    best, found = verify.fastest(accepted, v.steps)
    rows = jnp.arange(m)
    chosen = _widths(jax.tree.map(lambda x: x[rows, jnp.maximum(best, 0)], candidates), n_i, n_f)
    program = jax.tree.map(
        lambda c, r: jnp.where(_bcast(found, r), c, jnp.asarray(r, jnp.int32)), chosen, reference
    )
    steps = jnp.where(found, v.steps[rows, jnp.maximum(best, 0)], v.ref_steps)
    return Selection(program, found, best, reason.astype(jnp.int32), steps, v.ref_steps)


def _eligible(error: Error, program: isa.Program, nl: Limits, n_probed: int):
    """Bool[B]: compiled, and small enough for the neural path and its verifier."""
    return (
        (error.code == Code.OK)
        & (program.n_code <= nl.max_code)
        & (program.n_funcs >= 1)
        & (program.n_funcs <= min(nl.max_funcs, n_probed))
    )


def _slots(routed, m: int):
    """The sub-batch: (src Int32[m] rows of the batch, live Bool[m], slot Int32[B]).

    The first m routed programs in batch order take slots 0..; slots beyond the routed
    count are dead (they hold row 0 and are ignored); slot[b] is program b's slot or -1.
    """
    b = routed.shape[0]
    order = jnp.argsort(~routed, stable=True).astype(jnp.int32)  # routed rows first
    order = _cols(order, m)  # [m] (padded with row 0 when m > B)
    live = jnp.arange(m) < jnp.minimum(jnp.sum(routed), b)
    slot = (
        jnp.full(b, -1, jnp.int32)
        .at[jnp.where(live, order, b)]
        .set(jnp.arange(m, dtype=jnp.int32), mode="drop")
    )
    return order, live, slot


def sample_each(tokens, params, keys, k: int, nl: Limits, temperature, top_p,
                greedy_first: bool, cfg: Config, tier=None, print_items=None,
                branches: int = 0, ret_types=None):  # fmt: skip
    """k candidates per program: ``sample.compile`` on each program (Tokens [m, T]) with
    its own key (keys: [m]), vmapped over programs, so a program's candidates do not
    depend on its position in the batch. Returns (program [m, k, ...], ok Bool[m, k],
    bound Int32[m]). tier: the sampling budget (``sample.tier``; default the model's).
    print_items: Int32[m, PF, PP], the typed mask's print items, or None (untyped);
    ret_types: Int32[m, D], its return types (``inputs.typing``), or None.
    branches: ``sample.compile``'s."""

    def one(tok, key, pt, rt):  # one unbatched program: compile makes it a batch of one
        c = S.compile(tok, params, key, nl, k, temperature, top_p, greedy_first, cfg=cfg,
                      nlimits=tier, print_items=pt, branches=branches, ret_types=rt)  # fmt: skip
        return c.program, c.ok, c.bound

    return jax.vmap(one)(tokens, keys, print_items, ret_types)


@functools.partial(
    jax.jit,
    static_argnames=(
        "cfg",
        "k",
        "m",
        "limits",
        "nl",
        "vl",
        "n_probes",
        "greedy_first",
        "shrink",
        "propose",
        "tier",
        "typed",
        "branches",
    ),
)
def hybrid_compile(source, length, params, router_params, threshold, key,
                   limits: Limits = NEURAL_LIMITS, temperature=0.8, top_p=0.95, *,
                   cfg: Config, k: int = 16, m: int = 16, nl: Limits = NEURAL_LIMITS,
                   vl: Limits = VERIFY_LIMITS, n_probes: int = 64, greedy_first: bool = True,
                   shrink: int | None = None, propose=None, tier=None,
                   typed: bool = True, branches: int = 0) -> Hybrid:  # fmt: skip
    """Paper Algorithm 3 for a batch, on the device, in one jit (composable in yours).

    source: UInt8[B, N] padded sources (N = limits.max_source_bytes), length: Int32[B]
    (``lexer.encode``); params: the model's parameters (``weights.load``), cfg its
    Config (static); router_params: the router's dict (``router.load()[0]``) or None
    (route every eligible program); threshold: Float32[] (programs with score >=
    threshold are routed); key: a PRNG key; temperature, top_p: Float32[] (sampling).

    Static: k candidates per routed program; m the neural sub-batch's capacity; limits
    the deterministic compiler's limits (the result's widths); nl the neural path's
    bounds (n_code <= nl.max_code, n_funcs <= nl.max_funcs; nl.max_code / max_funcs /
    max_locals also size the candidates); vl the verification lanes' run-time limits;
    n_probes probe vectors per function (``verify.make_probes``); greedy_first: sample 0
    of each program is greedy; shrink: passed to the VM (no result changes); propose:
    None (sample from the model) or a function ``propose(params, tokens, reference, keys)
    -> (program [m, k, ...], ok Bool[m, k], bound Int32[m])`` that makes the candidates
    instead (tokens: the sub-batch's Tokens [m, T]; reference: its deterministic code at
    the verifier's widths; keys: one PRNG key per program): the tests inject the
    deterministic code and mutations of it this way. tier: the model's source/output
    token budget (``sample.tier(n, cfg)`` for sources of at most n tokens; default the
    model's own): a shorter one makes sampling several times cheaper, and a source over
    it gets no candidate (FALLBACK). typed: sample with the typed decoding mask (the
    deterministic front end's print items, ``Debug.print_items``, and return types). branches: that many of
    the k candidates are branches of the greedy sequence (``sample.compile``).

    Returns ``Hybrid`` (see the module docstring for what is computed). Cost: the
    deterministic compiler on B programs plus k samples and k * (1 + (F - 1) * n_probes)
    verification lanes on each of m programs (F = min(limits.max_funcs, nl.max_funcs)),
    whatever the number routed.
    """
    b = source.shape[0]
    # 1. the deterministic compiler (compiler.compile_arrays, keeping the tokens)
    tokens, lex_error = lexer.lex(source, length, limits)
    ast, parse_error = parser.parse(tokens, limits, lex_error=lex_error)
    det, error, debug = middle.middle_end_debug(ast, tokens, limits, parse_error)
    n_i, n_f = limits.max_code, limits.max_funcs
    n_fp = min(n_f, nl.max_funcs)  # functions the verifier probes

    # 2. route (eq. 13)
    if router_params is None:
        score = jnp.ones(b, jnp.float32)
    else:
        score = router.score(router_params, router.features(tokens, det.n_code))
    eligible = _eligible(error, det, nl, n_fp)
    routed = eligible & (score >= threshold)

    # 3. the neural sub-batch: the first m routed programs
    rows, live, slot = _slots(routed, m)
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(b))
    take = lambda x: x[rows]  # noqa: E731
    sub_tokens = jax.tree.map(take, tokens)
    sub_keys = keys[rows]
    sub_det = jax.tree.map(take, det)
    ref = _widths(sub_det, min(n_i, nl.max_code), n_fp)

    # 4. k candidates each, level-3 verification against the deterministic code
    ks = jax.vmap(lambda kk: jax.random.split(kk))(sub_keys)  # [m, 2] keys
    if propose is None:
        print_items = debug.print_items[rows] if typed else None
        rets = inputs.ret_types(sub_det) if typed else None
        cands, ok, bound = sample_each(
            sub_tokens, params, ks[:, 0], k, nl, temperature, top_p, greedy_first, cfg, tier,
            print_items, branches, rets,
        )  # fmt: skip
    else:
        cands, ok, bound = propose(params, sub_tokens, ref, ks[:, 0])
        if cands.op.shape[:2] != (m, k):
            raise ValueError(f"propose made candidates {cands.op.shape[:2]}, not (m, k) = {(m, k)}")
    probe_args = jax.vmap(
        lambda t, n_p, kk: verify.make_probes(
            jax.tree.map(lambda x: x[None], t), n_p[None], kk, n_probes
        ).args[0]
    )(sub_tokens, ref.fn_nparams, ks[:, 1])
    sel = hybrid_select(ref, cands, ok, verify.Probes(probe_args), vl, shrink)
    found = sel.found & live & (bound == 0)

    # 5. scatter the verified candidates back; the deterministic code everywhere else
    s = jnp.maximum(slot, 0)
    sampled = slot >= 0
    neural = sampled & found[s]
    chosen = _widths(sel.program, n_i, n_f)
    program = jax.tree.map(
        lambda c, d: jnp.where(_bcast(neural, d), c[s], d), chosen, _widths(det, n_i, n_f)
    )
    path = jnp.select(
        [~eligible, ~routed, ~sampled, ~neural],
        [Path.INELIGIBLE, Path.DETERMINISTIC, Path.OVERFLOW, Path.FALLBACK],
        Path.NEURAL,
    ).astype(jnp.int32)
    none = jnp.int32(-1)
    return Hybrid(
        program=program,
        error=error,
        path=path,
        score=score,
        slot=slot,
        best=jnp.where(neural, sel.best[s], none),
        reason=jnp.where(sampled[:, None], sel.reason[s], NOT_SAMPLED).astype(jnp.int32),
        steps=jnp.where(sampled, sel.steps[s], none),
        ref_steps=jnp.where(sampled, sel.ref_steps[s], none),
        bound=jnp.where(sampled, bound[s], 0).astype(jnp.int32),
    )


def path_counts(path) -> dict[str, int]:
    """Host helper: how many programs took each ``Path`` (every name, zeros included)."""
    import numpy as np

    p = np.asarray(path).ravel()
    return {x.name: int(np.sum(p == x)) for x in Path}
