"""The neural and hybrid compilers as the rest of jaxcc sees them.

* ``choose(...)``: the neural path alone, one jit: lex, sample k candidates per program,
  assemble, probe, verify, pick one per program. Level 2 (``reference=None``): the
  candidate whose behaviour most candidates share (AlphaCode-style clustering); level 3:
  the fastest candidate whose behaviour equals the reference program's.
* ``jaxcc.neural.hybrid.hybrid_compile(...)`` (also ``jaxcc.neural.hybrid_compile``):
  paper Algorithm 3 on the device, jit-composable: the deterministic compiler, the
  complexity router, the neural path with level-3 verification for the programs routed
  to it, and the deterministic code for everything else and for every program whose
  candidates all fail. Its result always behaves as the deterministic compiler's code on
  the probes (it *is* that code unless a verified candidate was chosen).
* ``compile_many(sources, limits, mode=...)``: the host wrapper with the shape of the other
  compilers' ``compile_many`` (the CLI's ``--compiler neural`` and ``--compiler hybrid``).
  The deterministic front end runs first (``compiler.compile_many`` at the caller's
  limits), so compile-time errors are reported exactly as ``--compiler jax`` reports
  them; the model is asked only for programs that pass it and fit the neural path.
  ``mode="hybrid"`` calls ``hybrid_compile`` on those programs.

Candidates are probed with small run-time limits (``VERIFY_LIMITS``): a candidate is
compared with the others (or the reference) on the module body's first 64 printed items
and status, and on every function's status and result for ``n_probes`` argument vectors.
The chosen program then runs under the caller's own limits.
"""

from __future__ import annotations

import concurrent.futures
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcc import compiler, isa, lexer
from jaxcc.errors import Code, Error, Limit
from jaxcc.limits import Limits
from jaxcc.neural import inputs, verify
from jaxcc.neural import sample as S
from jaxcc.neural.hybrid import NEURAL_LIMITS, VERIFY_LIMITS  # re-exported: evaluate uses them
from jaxcc.neural.inputs import Bound
from jaxcc.neural.model import Config


class Chosen(NamedTuple):
    program: isa.Program  # [B, ...]: the chosen candidate (empty where none was found)
    found: object  # Bool[B]
    best: object  # Int32[B]  index of the chosen candidate (-1: none)
    reason: object  # Int32[B, k]  verify.Reason of every candidate
    ok: object  # Bool[B, k]  well-formed candidates
    bound: object  # Int32[B]  inputs.Bound


def _take(cands: isa.Program, best):
    b = best.shape[0]
    idx = jnp.maximum(best, 0)
    return jax.tree.map(lambda x: x[jnp.arange(b), idx], cands)


class _Sampled(NamedTuple):
    """What ``_sample_part`` hands ``_verify_part``."""

    program: isa.Program  # [B, k, ...] the candidates
    ok: object  # Bool[B, k]
    bound: object  # Int32[B]  inputs.Bound


_SAMPLE_STATIC = ("cfg", "k", "nl", "greedy_first", "tier", "branches")


def _sample_part(tokens, lex_error, params, key, temperature, top_p, cfg: Config, k: int,
                 nl: Limits, greedy_first: bool, tier, print_items, branches: int,
                 ret_types=None) -> _Sampled:  # fmt: skip
    """``choose``'s second step: k candidates per program (the first of ``key``'s halves)."""
    ks, _ = jax.random.split(key)
    c = S.compile(tokens, params, ks, nl, k, temperature, top_p, greedy_first, cfg=cfg,
                  nlimits=tier, print_items=print_items, branches=branches,
                  live=lex_error.code == Code.OK, ret_types=ret_types)  # fmt: skip
    return _Sampled(c.program, c.ok, c.bound)


def _verify_part(s: _Sampled, tokens, lex_error, n_params, key, reference, vl: Limits,
                 n_probes: int) -> Chosen:  # fmt: skip
    """``choose``'s last step: make the probes (the second of ``key``'s halves), run the
    candidates on them, pick one per program."""
    _, kp = jax.random.split(key)
    probes = verify.make_probes(tokens, n_params, kp, n_probes)
    if reference is None:
        v = verify.cluster(s.program, probes, vl)
    else:
        v = verify.verify_against(s.program, reference, probes, vl)
    found = v.found & (lex_error.code == Code.OK) & (s.bound == 0)
    best = jnp.where(found, v.best, -1)
    prog = _take(s.program, best)
    empty = jax.tree.map(jnp.zeros_like, prog)
    prog = jax.tree.map(lambda a, e: jnp.where(_bcast(found, a), a, e), prog, empty)
    return Chosen(prog, found, best, v.reason, s.ok, s.bound)


_sample_jit = jax.jit(_sample_part, static_argnames=_SAMPLE_STATIC)
_verify_jit = jax.jit(_verify_part, static_argnames=("vl", "n_probes"))


@functools.partial(
    jax.jit,
    static_argnames=("cfg", "k", "nl", "vl", "n_probes", "greedy_first", "tier", "branches"),
)
def choose(source, length, params, key, n_params, reference, temperature, top_p,
           cfg: Config, k: int, nl: Limits = NEURAL_LIMITS, vl: Limits = VERIFY_LIMITS,
           n_probes: int = 64, greedy_first: bool = True, tier=None, print_items=None,
           branches: int = 0, ret_types=None) -> Chosen:  # fmt: skip
    """Sample, verify and choose, for a batch of padded sources (UInt8[B, N], N =
    nl.max_source_bytes). n_params: Int32[B, F] parameters per function (from the front
    end); reference: an isa.Program [B, ...] at nl's shape for level 3, or None (level 2);
    tier: the sampling budget (``sample.tier``), static; default the model's own.
    print_items: Int32[B, PF, PP], the front end's print items (``debuginfo.Debug.print_items``)
    for the typed decoding mask, or None (untyped); ret_types: Int32[B, D], each def's
    return type (``inputs.ret_types``), or None. branches: ``sample.compile``'s (static).
    ``choose_split`` computes the same as three jits compiled side by side.
    """
    tokens, lex_error = lexer.lex(source, length, nl)
    s = _sample_part(tokens, lex_error, params, key, temperature, top_p, cfg, k, nl,
                     greedy_first, tier, print_items, branches, ret_types)  # fmt: skip
    return _verify_part(s, tokens, lex_error, n_params, key, reference, vl, n_probes)


def choose_split(source, length, params, key, n_params, reference, temperature, top_p,
                 cfg: Config, k: int, nl: Limits = NEURAL_LIMITS, vl: Limits = VERIFY_LIMITS,
                 n_probes: int = 64, greedy_first: bool = True, tier=None, print_items=None,
                 branches: int = 0, ret_types=None) -> Chosen:  # fmt: skip
    """``choose`` (same arguments, same result) as three jits, lexing, sampling and
    verifying, whose XLA compiles run on threads at once (XLA:CPU compiles one jit on
    fewer cores than a 2-core machine has). On the CPU a small batch's lexer compiles
    with ``compiler.cpu_fast_compile``'s options, as the front end's does: a third of
    the compile for an integer program whose run time is negligible here (the sampling
    jit's XLA compile on a 2-core Xeon: 42 s with the lexer inside, 28 s without; the
    lexer alone 16 s, 5 s with the options). Host code, not jittable; the last compiled
    triple is kept for the next call with the same shapes."""
    static = dict(cfg=cfg, k=k, nl=nl, greedy_first=greedy_first, tier=tier, branches=branches)
    lex, first, second = _compiled(source, length, params, key, n_params, temperature, top_p,
                                   print_items, ret_types, reference, vl, n_probes, static)  # fmt: skip
    tokens, lex_error = lex(source, length)
    s = first(tokens, lex_error, params, key, temperature, top_p, print_items=print_items,
              ret_types=ret_types)  # fmt: skip
    return second(s, tokens, lex_error, n_params, key, reference)


# the last compiled (lex, sample, verify) triple: {signature: triple} (one, so that a loop
# of calls at one shape compiles once and nothing else is kept)
_COMPILED: dict = {}


def _compiled(source, length, params, key, n_params, temperature, top_p, print_items,
              ret_types, reference, vl: Limits, n_probes: int, static: dict):  # fmt: skip
    arrays = (source, length, params, key, n_params, temperature, top_p, print_items, ret_types,
              reference)  # fmt: skip
    sig = _signature(arrays, (vl, n_probes, tuple(sorted(static.items()))))
    triple = _COMPILED.get(sig)
    if triple is not None:
        return triple
    nl = static["nl"]
    # each compile starts as soon as its jit is traced (tracing is the main thread's
    # Python; XLA's compiles release the GIL), the longest first
    with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="jaxcc-choose") as pool:
        lex = compiler.lex_jit(source.shape[0]).trace(source, length, nl)
        tokens, lex_error = lex.out_info
        first = _sample_jit.trace(tokens, lex_error, params, key, temperature, top_p,
                                  print_items=print_items, ret_types=ret_types, **static)  # fmt: skip
        jobs = [pool.submit(lambda t=t: t.lower().compile()) for t in (first, lex)]
        second = _verify_jit.trace(first.out_info, tokens, lex_error, n_params, key,
                                   reference, vl=vl, n_probes=n_probes)  # fmt: skip
        verify_exec = second.lower().compile()
        first_exec, lex_exec = (j.result() for j in jobs)
    triple = lex_exec, first_exec, verify_exec
    _COMPILED.clear()
    _COMPILED[sig] = triple
    return triple


def _signature(arrays, static) -> tuple:
    """What the kept triple was compiled for: the arrays' tree, shapes, dtypes and
    placements (a device array's sharding; a host array's is the default device's, where
    the call puts it), and the static arguments."""
    leaves, tree = jax.tree.flatten(arrays)
    dev = jax.config.jax_default_device or jax.devices()[0]
    dev = jax.devices(dev)[0] if isinstance(dev, str) else dev  # a platform's name
    default = jax.sharding.SingleDeviceSharding(dev)
    place = tuple(str(getattr(x, "sharding", default)) for x in leaves)
    return tree, tuple((tuple(x.shape), str(x.dtype)) for x in leaves), place, static


def _bcast(m, a):
    return m.reshape(m.shape + (1,) * (a.ndim - 1))


# ------------------------------------------------------------------ host wrapper


def _pad_into(dst: isa.Program, i: int, src_lane) -> None:
    for f, x in zip(isa.Program._fields, src_lane, strict=True):
        arr = getattr(dst, f)
        x = np.asarray(x)
        if x.ndim == 0:
            arr[i] = x
        else:
            n = min(x.shape[0], arr.shape[1])
            arr[i, :] = 0
            arr[i, :n] = x[:n]


def _fits(program: isa.Program, j: int, nl: Limits) -> bool:
    return int(program.n_code[j]) <= nl.max_code and int(program.n_funcs[j]) <= nl.max_funcs


def _shape(program: isa.Program) -> Limits:
    """The code and function widths of a host program batch, as Limits fields."""
    return Limits(max_code=program.op.shape[1], max_funcs=program.fn_entry.shape[1])


def _slice(program: isa.Program, idx, nl: Limits) -> isa.Program:
    out = []
    for f in isa.Program._fields:
        x = np.asarray(getattr(program, f))[idx]
        if f.startswith("fn_"):
            x = x[:, : nl.max_funcs]
            x = np.pad(x, ((0, 0), (0, nl.max_funcs - x.shape[1])))
        elif x.ndim == 2:
            x = x[:, : nl.max_code]
            x = np.pad(x, ((0, 0), (0, nl.max_code - x.shape[1])))
        out.append(x.astype(np.int32))
    return isa.Program(*out)


class Report(NamedTuple):
    """Per source, what the neural path did (for the CLI's --json and the benchmarks)."""

    used_neural: list  # bool per source
    reasons: list  # dict reason name -> count per source (empty when not asked)


def compile_many(sources, limits: Limits, mode: str = "neural", k: int = 16,
                 temperature: float = 0.8, top_p: float = 0.95, seed: int = 0,
                 weights_path: str | None = None, n_probes: int = 64, report: list | None = None,
                 typed: bool = True, branches: int = 0):  # fmt: skip
    """Host wrapper: (Program [B, ...] at ``limits``' shape, Error [B], debug list).

    mode "neural": level-2 choice; a program outside the neural bounds (its source
    bytes, code or functions over ``NEURAL_LIMITS``, or its tokens, names, literals or
    lines over the model's: ``inputs.Bound``) gets Code.LIMIT / Limit.NEURAL_BOUNDS
    without being sampled, one with no acceptable candidate Code.LIMIT / Limit.NEURAL.
    mode "hybrid": ``hybrid_compile`` (the router of ``weights/router.json`` when it
    exists, else every program is routed; level-3 verification) on the programs that
    compiled and fit the neural path, all in one sub-batch; the deterministic code wherever no candidate is verified. ``report``
    (a list) gets ``(index, verify.reason_counts)`` for each program that was sampled.
    ``typed``: sample with the typed decoding mask (the print items of the front end that
    has just compiled the program: ``DebugInfo.print_items``); False: the untyped mask.
    ``branches``: that many of the k candidates are branches of the greedy sequence
    (``sample.compile``)."""
    from jaxcc.neural import weights

    cfg, params = weights.load(weights_path or weights.DEFAULT)
    program, error, debug = compiler.compile_many(sources, limits)
    program = isa.Program(*(np.array(x) for x in program))
    error = Error(*(np.array(x) for x in error))
    data = [
        s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s) for s in sources
    ]
    nl = NEURAL_LIMITS
    todo = [
        j for j in range(len(sources))
        if int(error.code[j]) == Code.OK and len(data[j]) <= nl.max_source_bytes
        and _fits(program, j, nl)
    ]  # fmt: skip
    used = [False] * len(sources)
    if mode == "hybrid":
        if todo:
            _hybrid_into(program, todo, data, cfg, params, k, temperature, top_p, seed,
                         n_probes, used, report, branches)  # fmt: skip
        debug = [d._replace(local_names=()) if used[j] else d for j, d in enumerate(debug)]
        return program, error, debug
    found_at: dict[int, int] = {}
    outside = {j for j in range(len(sources)) if int(error.code[j]) == Code.OK} - set(todo)
    if todo:
        # padding rows: a source that does not lex (as _hybrid_into's), never decoded
        pad = batch_size(len(todo)) - len(todo)
        idx = todo + [todo[0]] * pad
        src, length = lexer.encode([data[j] for j in todo] + [b"("] * pad, nl)
        det = _slice(program, idx, nl)
        ch = jax.device_get(
            choose_split(
                src,
                length,
                params,
                jax.random.key(seed),
                det.fn_nparams,
                None,
                jnp.float32(temperature),
                jnp.float32(top_p),
                cfg,
                k,
                nl,
                VERIFY_LIMITS,
                n_probes,
                tier=_tier([data[j] for j in todo], cfg, nl),
                print_items=_print_item_table([debug[j] for j in idx]) if typed else None,
                branches=branches,
                ret_types=inputs.ret_types(det) if typed else None,
            )  # fmt: skip
        )
        for r, j in enumerate(todo):
            if int(ch.bound[r]) not in (Bound.OK, Bound.OUTPUT):
                outside.add(j)
            if bool(ch.found[r]):
                found_at[j] = r
                used[j] = True
                _pad_into(program, j, [np.asarray(x)[r] for x in ch.program])
            if report is not None:
                report.append((j, verify.reason_counts(np.asarray(ch.reason[r]))))
    if mode == "neural":
        for j in range(len(sources)):
            if int(error.code[j]) == Code.OK and j not in found_at:
                error.code[j] = Code.LIMIT
                error.detail[j] = Limit.NEURAL_BOUNDS if j in outside else Limit.NEURAL
                error.line[j], error.col[j] = 0, 0
                _pad_into(program, j, [np.zeros_like(np.asarray(x)[j]) for x in program])
    # the neural program's slots are numbered its own way: no local names
    debug = [d._replace(local_names=()) if used[j] else d for j, d in enumerate(debug)]
    return program, error, debug


def _print_item_table(debug) -> np.ndarray:
    """Int32[B, PF, PP]: ``Debug.print_items`` rebuilt from host DebugInfo records (a
    function the program does not have has no items: ITEM_END first)."""
    from jaxcc.debuginfo import ITEM_END, MAX_PRINTS, PRINT_FUNCS

    out = np.full((len(debug), PRINT_FUNCS, MAX_PRINTS), -1, np.int32)
    for i, d in enumerate(debug):
        for f in range(PRINT_FUNCS):
            items = d.print_items[f][:MAX_PRINTS] if f < len(d.print_items) else ()
            out[i, f, : len(items)] = items
            if len(items) < MAX_PRINTS:
                out[i, f, len(items)] = ITEM_END
    return out


def batch_size(n: int) -> int:
    """The batch a call for n programs is padded to: the smallest of 1, 2, 3, 4, 6, 8, 12,
    16, 24, ... (powers of two and 1.5 times them) that holds n. A padding row is a
    source that does not lex, never decoded, but it costs a little in the first span's
    lockstep decode and in verification, and a finer ladder costs a compile per batch
    size (10 programs: 12 rows, where powers of two gave 16)."""
    if n <= 2:
        return max(n, 1)
    p = 1 << (n - 1).bit_length()
    return 3 * p // 4 if n <= 3 * p // 4 else p


def _tier(sources, cfg: Config, nl: Limits):
    """The smallest sampling budget that holds the longest of ``sources`` (host lexer)."""
    return S.tier(int(S.n_source_tokens(sources, nl).max()), cfg)


def _hybrid_into(program, todo, data, cfg, params, k, temperature, top_p, seed, n_probes,
                 used, report, branches: int = 0) -> None:  # fmt: skip
    """``hybrid_compile`` on the sources ``todo`` (indices into data), padded to a power of
    two with a source that does not compile (so padding is never sampled); the verified
    candidates are written into ``program`` (host arrays at the caller's widths)."""
    from jaxcc.neural import hybrid, router

    nl = NEURAL_LIMITS
    pad = (1 << (len(todo) - 1).bit_length()) - len(todo)
    src, length = lexer.encode([data[j] for j in todo] + [b"("] * pad, nl)
    got = router.load()
    rparams, threshold = got if got is not None else (None, 0.0)
    h = jax.device_get(
        hybrid.hybrid_compile(
            src,
            length,
            params,
            rparams,
            jnp.float32(threshold),
            jax.random.key(seed),
            nl,
            jnp.float32(temperature),
            jnp.float32(top_p),
            cfg=cfg,
            k=k,
            m=len(todo) + pad,
            nl=nl,
            vl=VERIFY_LIMITS,
            n_probes=n_probes,
            tier=_tier([data[j] for j in todo], cfg, nl),
            branches=branches,
        )  # fmt: skip
    )
    for r, j in enumerate(todo):
        # the candidate must fit the caller's arrays too (it fits the neural path's)
        if int(h.path[r]) == hybrid.Path.NEURAL and _fits(h.program, r, _shape(program)):
            used[j] = True
            _pad_into(program, j, [np.asarray(x)[r] for x in h.program])
        if report is not None and int(h.slot[r]) >= 0:
            report.append((j, verify.reason_counts(np.asarray(h.reason[r]))))
