"""Source to bytecode on the device: lex -> parse -> middle end, one jitted function.

``compile_arrays`` is the on-device compiler (what users call from their own jitted code);
``compile_many`` is its host-facing wrapper (the CLI's ``--compiler jax``), with the same
return shape as ``jaxcc.reference.compiler.compile_many``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import re
from typing import NamedTuple

import jax
import numpy as np

from jaxcc import exec_cache, isa, lexer, middle, parser
from jaxcc import optimize as opt
from jaxcc.debuginfo import Debug, from_arrays
from jaxcc.errors import Code, Error, Limit
from jaxcc.limits import DEFAULT, Limits


class Compiled(NamedTuple):
    program: isa.Program  # Int32 arrays [B, I] / [B, F]
    error: Error  # Int32[B] each: the first compile error of each program
    debug: Debug  # Int32 arrays [B, F] / [B, F, L]: names and types (jaxcc.debuginfo)


@functools.partial(jax.jit, static_argnames=("limits", "tiers"))
def _front_and_middle(source, length, limits: Limits, tiers: bool | None = None) -> Compiled:
    tokens, lex_error = lexer.lex(source, length, limits, tiers=tiers)
    ast, parse_error = parser.parse(tokens, limits, lex_error=lex_error)
    program, error, debug = middle.middle_end_debug(ast, tokens, limits, parse_error, tiers=tiers)
    return Compiled(program, error, debug)


# XLA options that make the compiler's jits compile ~4x faster on the CPU, for the
# host-facing compile_many (the CLI's compiler): LLVM at -O0 (the most of it), XLA's
# older elemental emitters instead of the MLIR fusion emitters, one LLVM module instead
# of 32 (no split cost; the CLI compiles other jits on the other core), no expensive
# LLVM passes. The code is integer code: results are bit-identical. The compiled code
# runs ~4.5x slower (1,024 programs of the medium corpus: front and middle 1.7 s ->
# 7.5 s at run time, 35 s -> 11 s to compile), so compile_many uses them only for
# batches of at most FAST_COMPILE_MAX_BATCH programs, where compiling dominates
# (docs/benchmarks.md, "Compile time"). Not used on other backends, nor by
# compile_arrays, pipeline.evaluate or under the caller's jit (jax takes
# compiler_options only on a top-level jit).
CPU_FAST_COMPILE = {
    "xla_backend_optimization_level": 0,
    "xla_cpu_use_fusion_emitters": False,
    "xla_cpu_parallel_codegen_split_count": 1,
    "xla_llvm_disable_expensive_passes": True,
}
FAST_COMPILE_MAX_BATCH = 256


@functools.cache
def cpu_fast_compile() -> dict:
    """CPU_FAST_COMPILE less the options that this XLA does not know (jax 0.11's XLA:CPU
    has no ``xla_cpu_use_fusion_emitters``, and a compile that names an unknown option
    fails): found by compiling a trivial function, once per process."""
    opts = dict(CPU_FAST_COMPILE)
    while opts:
        try:
            jax.jit(lambda x: x + 1, compiler_options=opts).lower(np.int32(0)).compile()
            break
        except Exception as e:  # jax.errors.JaxRuntimeError, INVALID_ARGUMENT
            m = re.search(r"No such compile option: '([^']+)'", str(e))
            if m is None or m.group(1) not in opts:
                raise
            del opts[m.group(1)]
    return opts


def fast_compile(batch: int, fast: bool | None = None) -> bool:
    """Whether compile_many compiles a batch of ``batch`` programs with CPU_FAST_COMPILE:
    ``fast`` when given, else on the CPU for at most FAST_COMPILE_MAX_BATCH programs."""
    if fast is not None:
        return fast
    return batch <= FAST_COMPILE_MAX_BATCH and jax.default_backend() == "cpu"


def split_compile(batch: int, fast: bool | None = None) -> bool:
    """Whether compile_many compiles a batch of ``batch`` programs on a backend other than
    the CPU as the split jits below, on several threads, with XLA's default options: when
    ``fast`` is None, for at most FAST_COMPILE_MAX_BATCH programs (a one-file run's cold
    compile is what a user waits for), unless the environment sets JAXCC_SPLIT_COMPILE=0
    (the one-jit compile, for comparing the two)."""
    return (
        fast is None
        and batch <= FAST_COMPILE_MAX_BATCH
        and jax.default_backend() != "cpu"
        and os.environ.get("JAXCC_SPLIT_COMPILE", "1") != "0"
    )


# _front_and_middle as three or four jits (the lexer, in two halves off the CPU; the
# parser; the middle end; the optimizer one more), for the fast compile: each compiles on its own thread as soon
# as the one before it has been traced, so the host's cores share the compile (XLA's
# compile releases the GIL), and smaller modules compile in less time than one (XLA's
# per-module costs grow faster than linearly). The same operations in the same order:
# the same results.
def _lex_stage(source, length, limits: Limits):
    return lexer.lex(source, length, limits)


def _lex_front_stage(source, length, limits: Limits):
    return lexer.lex_front(source, length, limits)


def _lex_back_stage(source, length, front, limits: Limits):
    return lexer.lex_back(source, length, front, limits)


def _parse_stage(tokens, lex_error, limits: Limits):
    return parser.parse(tokens, limits, lex_error=lex_error)


def _middle_stage(ast, parse_error, limits: Limits) -> Compiled:
    return Compiled(*middle.middle_end_debug(ast, None, limits, parse_error))


# the middle end as three jits (off the CPU): on an H100 its one jit was the split
# compile's longest (7.6-7.8 s cold), on the critical path of a first `jaxcc run`
def _resolve_stage(ast, parse_error, limits: Limits) -> middle.State:
    limits.check()  # as middle_end_debug does
    return middle.run_passes(middle.initial_state(ast, parse_error), limits, ("resolve_names",))


def _types_stage(st: middle.State, limits: Limits) -> middle.State:
    return middle.run_passes(st, limits, ("infer_types",))


def _emit_stage(st: middle.State, limits: Limits) -> Compiled:
    return Compiled(*middle.outcome(middle.run_passes(st, limits, ("emit_code",))))


def _stage_jits(options: dict | None, split_lexer: bool) -> tuple:
    """(lexer or its first half, its second half or None, parser, middle end (a tuple of
    jits run in turn), optimizer) jits compiled with XLA ``options``. ``split_lexer``:
    the lexer as two jits and the middle end as three, because on a GPU their XLA
    compiles are the longest (the lexer ~590 kernels, ~19 s on an H100; its two halves
    compile in 3.5 and 2.7 s at once; the middle end 7.6-7.8 s); on the 2-core CPU's
    fast path the pieces cost the test suite more than they save."""

    def jit(f, static_argnames=("limits",)):
        return jax.jit(f, static_argnames=static_argnames, compiler_options=options)

    if split_lexer:
        lex = (jit(_lex_front_stage), jit(_lex_back_stage))
        mid = (jit(_resolve_stage), jit(_types_stage), jit(_emit_stage))
    else:
        lex, mid = (jit(_lex_stage), None), (jit(_middle_stage),)
    return (*lex, jit(_parse_stage), mid, jit(opt.optimize_batch, opt.STATIC_ARGNAMES))


@functools.cache
def _fast_stages() -> tuple:
    """The CPU's stage jits (``cpu_fast_compile``'s options: made when first needed, as
    finding them compiles)."""
    return _stage_jits(cpu_fast_compile(), split_lexer=False)


_SPLIT_STAGES = _stage_jits(None, split_lexer=True)  # other backends': XLA's default options
_LEX_JIT = jax.jit(_lex_stage, static_argnames=("limits",))


def lex_jit(batch: int):
    """The lexer as one jit, ``f(source, length, limits)``, for a batch of ``batch``
    programs: the CPU fast-compile stage's (``fast_compile``: compile_many's own on the
    CPU) where that applies, else one with XLA's default options."""
    return _fast_stages()[0] if fast_compile(batch) else _LEX_JIT


def _compile_fast(source, length, t: Limits, optimize, passes, max_rounds,
                  stages: tuple | None = None, workers: int = 2) -> Compiled:  # fmt: skip
    """compile_arrays(source, length, t, ...) by the split jits ``stages`` (None: the
    CPU's, ``_fast_stages``): each traced in turn (from the shapes the one before gives),
    compiled on a pool of ``workers`` threads meanwhile, then run in order. With
    ``jaxcc.exec_cache`` enabled (the CLI) the compiled jits are loaded from it when an
    earlier run stored them (no tracing), and stored after compiling otherwise."""
    options = cpu_fast_compile() if stages is None else None
    stages = _fast_stages() if stages is None else stages
    k = exec_cache.key("compiler._compile_fast", len(stages[3]), repr(options), source.shape,
                       str(source.dtype), length.shape, str(length.dtype), t,
                       bool(optimize), passes, max_rounds)  # fmt: skip

    def compile_all(fresh: bool):
        return _compile_stages(source, length, t, optimize, passes, max_rounds, stages,
                               workers, fresh)  # fmt: skip

    def run(execs):
        if stages[1] is None:
            tokens, lex_error = execs[0](source, length)
            execs = execs[1:]
        else:
            tokens, lex_error = execs[1](source, length, execs[0](source, length))
            execs = execs[2:]
        parse, mids, rest = execs[0], execs[1 : 1 + len(stages[3])], execs[1 + len(stages[3]) :]
        out = mids[0](*parse(tokens, lex_error))
        for f in mids[1:]:
            out = f(out)
        if optimize:
            out = out._replace(program=rest[0](out.program))
        return out

    return exec_cache.call(k, compile_all, run)


def _compile_stages(source, length, t, optimize, passes, max_rounds, stages, workers,
                    fresh: bool = False) -> list:  # fmt: skip
    """The compiled split jits (lexer, parser, middle end, and the optimizer when
    ``optimize``) for these shapes, not yet run; ``fresh``: lowered and compiled
    bypassing JAX's persistent cache (``exec_cache.fresh``), for the executable cache."""
    lex_front, lex_back, parse, mid, optimize_batch = stages
    compile_ = exec_cache.compile_fresh if fresh else (lambda low: low.compile())
    with (
        concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="jaxcc-compile") as pool,
        exec_cache.fresh() if fresh else contextlib.nullcontext(),
    ):
        low = lex_front.lower(source, length, t)
        futures = [pool.submit(compile_, low)]
        if lex_back is not None:
            low = lex_back.lower(source, length, low.out_info, t)
            futures.append(pool.submit(compile_, low))
        low = parse.lower(*low.out_info, t)
        futures.append(pool.submit(compile_, low))
        low = mid[0].lower(*low.out_info, t)
        futures.append(pool.submit(compile_, low))
        for m in mid[1:]:
            low = m.lower(low.out_info, t)
            futures.append(pool.submit(compile_, low))
        if optimize:
            low = optimize_batch.lower(low.out_info.program, t, passes, max_rounds)
            futures.append(pool.submit(compile_, low))
        return [f.result() for f in futures]


def compile_arrays(source, length, limits: Limits = DEFAULT, optimize: int = False,
                   passes: tuple | None = None, max_rounds: int | None = None,
                   tiers: bool | None = None) -> Compiled:  # fmt: skip
    """Compile a batch of padded sources to bytecode without leaving the device.

    source: UInt8[B, N] (N = limits.max_source_bytes), length: Int32[B].
    Each stage takes the previous stage's Error and keeps the first error, so a program
    that fails early flows on as an empty program and the batch keeps its shape.
    ``optimize`` (static, as ``limits``, ``passes`` and ``max_rounds``): run
    jaxcc.optimize on the bytecode at that level (True or 1: -O1, the cheap preset
    optimize.O1_PASSES in O1_ROUNDS rounds; 2: -O2, every pass to a fixpoint;
    ``passes``/``max_rounds``, when given, replace the level's); off by default, so that
    the code is the reference compiler's instruction for instruction. Lexer to middle
    end is one jitted function and the optimizer another (so turning the optimizer on
    does not recompile the compiler); under the caller's jit they are one computation.
    ``tiers`` (static): the lexer's and the middle end's narrow widths (3 N / 8 or N / 2,
    chosen per batch: ``lexer.lex``, ``middle.middle_end``); None: on a GPU for a batch of
    at least 4,096 programs, where on an H200 they made the small loop 32.4 -> 23.5 ms
    and its cold compile 56.6 -> 80.1 s against N / 2 alone, which had taken 19-24% off
    (docs/lexer.md and docs/middle_end.md, "Two widths"): False for a batch shape
    compiled once and run only a few times. The result is the same either way.
    """
    compiled = _front_and_middle(source, length, limits, tiers)
    if optimize:
        passes, max_rounds = opt.level(optimize, passes, max_rounds)
        # the barrier keeps XLA from fusing the middle end's last operations into the
        # optimizer's (recomputing them in each consumer: without it the optimizer cost
        # 3.6x its own time in the loop on the CPU; docs/middle_end.md section 7, "Levels")
        program = jax.lax.optimization_barrier(compiled.program)
        compiled = compiled._replace(program=opt.optimize(program, limits, passes, max_rounds))
    return compiled


# Shape tiers for the host-facing wrapper: sources are padded to the smallest tier that
# holds them, so a CLI run compiles (or finds in the persistent cache) one of a few
# shapes instead of the large CLI limits. Sizes scale with the source bytes.
TIER_BYTES = (1024, 4096, 16384, 65536, 262144)
# Limit errors that a larger tier may cure (it raises exactly these fields).
_TIER_FIELDS = {
    Limit.TOKENS: "max_tokens",
    Limit.NODES: "max_nodes",
    Limit.CODE: "max_code",
    Limit.PARSE_DEPTH: "max_parse_depth",
}


def tier(limits: Limits, nbytes: int) -> Limits:
    """The tier's limits for a source of ``nbytes``: never above ``limits``."""
    for b in TIER_BYTES:
        if nbytes <= b or b >= limits.max_source_bytes:
            break
    b = min(b, limits.max_source_bytes)
    sized = dict(max_tokens=b, max_nodes=b, max_code=2 * b, max_parse_depth=max(64, b // 4))
    return limits._replace(
        max_source_bytes=b, **{k: min(v, getattr(limits, k)) for k, v in sized.items()}
    )


def _row(tree, j: int):
    return type(tree)(*(np.asarray(x)[j] for x in tree))


def compile_many(sources, limits: Limits = DEFAULT, optimize: int = False,
                 passes: tuple | None = None, max_rounds: int | None = None,
                 fast: bool | None = None):  # fmt: skip
    """Compile a list of sources on the device: (Program [B, ...], Error [B], debug list).

    Every source is compiled at the smallest shape tier that holds it, and again at the
    next tier when it hits a size limit that the tier (not ``limits``) imposed (each tier's
    group padded with empty programs to a power of two), so the
    result is what compiling with ``limits`` itself would give. The Program arrays are
    padded to ``limits.max_code`` / ``max_funcs`` as the reference compiler's are.
    ``optimize``, ``passes``, ``max_rounds``: as compile_arrays' (the optimizer runs on
    the device). ``fast``: compile with CPU_FAST_COMPILE (None: ``fast_compile``'s
    choice, on the CPU for small batches; on other backends small batches compile as
    split jits on several threads, ``split_compile``); the results are the same either
    way.
    """
    if optimize:
        passes, max_rounds = opt.level(optimize, passes, max_rounds)
    data = [
        s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s) for s in sources
    ]
    B = len(data)
    n_i, n_f = limits.max_code, limits.max_funcs
    program = isa.Program(*(np.zeros((B, n_f if f.startswith("fn_") else n_i), np.int32)
                            if f not in ("n_code", "n_funcs") else np.zeros(B, np.int32)
                            for f in isa.Program._fields))  # fmt: skip
    error = Error(*(np.zeros(B, np.int32) for _ in range(4)))
    debug: list = [None] * B
    todo = {i: tier(limits, len(d)) for i, d in enumerate(data)}
    while todo:
        groups: dict[Limits, list[int]] = {}
        for i, t in todo.items():
            groups.setdefault(t, []).append(i)
        todo = {}
        for t, idx in groups.items():
            # groups padded to a power of two (empty programs) so that a CLI run over a
            # varying number of files meets only a few batch shapes
            pad = (1 << (len(idx) - 1).bit_length()) - len(idx)
            source, length = lexer.encode([data[i] for i in idx] + [b""] * pad, t)
            if fast_compile(len(idx) + pad, fast):
                out = _compile_fast(source, length, t, optimize, passes, max_rounds)
            elif split_compile(len(idx) + pad, fast):
                out = _compile_fast(source, length, t, optimize, passes, max_rounds,
                                    _SPLIT_STAGES, min(8, os.cpu_count() or 1))  # fmt: skip
            else:
                out = compile_arrays(source, length, t, optimize, passes, max_rounds)
            out = jax.device_get(out)
            for j, i in enumerate(idx):
                code, detail = int(out.error.code[j]), int(out.error.detail[j])
                field = _TIER_FIELDS.get(detail) if code == Code.LIMIT else None
                if field is not None and getattr(t, field) < getattr(limits, field):
                    bigger = tier(limits, 2 * t.max_source_bytes)
                    if bigger != t:
                        todo[i] = bigger
                        continue
                for k in range(len(isa.Program._fields)):
                    x = np.asarray(out.program[k][j])
                    if x.ndim == 0:
                        program[k][i] = x
                    else:
                        program[k][i, : x.shape[0]] = x[: program[k].shape[1]]
                for k in range(4):
                    error[k][i] = out.error[k][j]
                debug[i] = from_arrays(_row(out.debug, j), _row(out.program, j), data[i],
                                       compiled=code == Code.OK)  # fmt: skip
    return program, error, debug
