"""Source to bytecode on the device: lex -> parse -> middle end, one jitted function.

``compile_arrays`` is the on-device compiler (what users call from their own jitted code);
``compile_many`` is its host-facing wrapper (the CLI's ``--compiler jax``), with the same
return shape as ``jaxcc.reference.compiler.compile_many``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import numpy as np

from jaxcc import isa, lexer, middle, parser
from jaxcc import optimize as opt
from jaxcc.debuginfo import Debug, from_arrays
from jaxcc.errors import Code, Error, Limit
from jaxcc.limits import DEFAULT, Limits


class Compiled(NamedTuple):
    program: isa.Program  # Int32 arrays [B, I] / [B, F]
    error: Error  # Int32[B] each: the first compile error of each program
    debug: Debug  # Int32 arrays [B, F] / [B, F, L]: names and types (jaxcc.debuginfo)


@functools.partial(jax.jit, static_argnames=("limits",))
def _front_and_middle(source, length, limits: Limits) -> Compiled:
    tokens, lex_error = lexer.lex(source, length, limits)
    ast, parse_error = parser.parse(tokens, limits, lex_error=lex_error)
    program, error, debug = middle.middle_end_debug(ast, tokens, limits, parse_error)
    return Compiled(program, error, debug)


def compile_arrays(source, length, limits: Limits = DEFAULT, optimize: int = False,
                   passes: tuple | None = None, max_rounds: int | None = None) -> Compiled:  # fmt: skip
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
    """
    compiled = _front_and_middle(source, length, limits)
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
                 passes: tuple | None = None, max_rounds: int | None = None):  # fmt: skip
    """Compile a list of sources on the device: (Program [B, ...], Error [B], debug list).

    Every source is compiled at the smallest shape tier that holds it, and again at the
    next tier when it hits a size limit that the tier (not ``limits``) imposed (each tier's
    group padded with empty programs to a power of two), so the
    result is what compiling with ``limits`` itself would give. The Program arrays are
    padded to ``limits.max_code`` / ``max_funcs`` as the reference compiler's are.
    ``optimize``, ``passes``, ``max_rounds``: as compile_arrays' (the optimizer runs on
    the device).
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
            out = jax.device_get(compile_arrays(source, length, t, optimize, passes, max_rounds))
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
