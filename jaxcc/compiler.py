"""Source to bytecode on the device: lex -> parse -> middle end, one jitted function.

``compile_arrays`` is the on-device compiler (what users call from their own jitted code);
``compile_many`` is its host-facing wrapper (the CLI's ``--compiler jax``), with the same
return shape as ``jaxcc.reference.compiler.compile_many``.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import jax
import numpy as np

from jaxcc import isa, lexer, middle, parser
from jaxcc.errors import Error
from jaxcc.limits import DEFAULT, Limits

# The stages in order, by name: bench/ times each and a driver can dump after any one.
STAGES = ("lex", "parse", "middle_end")


class Compiled(NamedTuple):
    program: isa.Program  # Int32 arrays [B, I] / [B, F]
    error: Error  # Int32[B] each: the first compile error of each program


@functools.partial(jax.jit, static_argnames=("limits",))
def compile_arrays(source, length, limits: Limits = DEFAULT) -> Compiled:
    """Compile a batch of padded sources to bytecode without leaving the device.

    source: UInt8[B, N] (N = limits.max_source_bytes), length: Int32[B].
    Each stage takes the previous stage's Error and keeps the first error, so a program
    that fails early flows on as an empty program and the batch keeps its shape.
    """
    tokens, lex_error = lexer.lex(source, length, limits)
    ast, parse_error = parser.parse(tokens, limits, lex_error=lex_error)
    program, error = middle.middle_end(ast, tokens, limits, parse_error)
    return Compiled(program, error)


class DebugInfo(NamedTuple):
    """Host-side names for messages and dis (function ids follow definition order)."""

    fn_names: tuple
    fn_lines: tuple
    local_names: tuple
    param_types: tuple
    source_lines: tuple
    message: str


_DEF = re.compile(r"^[ \t]*def[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)


def _debug(source: str | bytes) -> DebugInfo:
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    defs = [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in _DEF.finditer(text)]
    names = ("<module>", *(d[0] for d in defs))
    lines = (1, *(d[1] for d in defs))
    return DebugInfo(names, lines, (), (), tuple(text.splitlines()), "")


def compile_many(sources, limits: Limits = DEFAULT):
    """Compile a list of sources on the device: (Program [B, ...], Error [B], debug list)."""
    source, length = lexer.encode(sources, limits)
    out = jax.device_get(compile_arrays(source, length, limits))
    program = isa.Program(*(np.asarray(x) for x in out.program))
    error = Error(*(np.asarray(x) for x in out.error))
    return program, error, [_debug(s) for s in sources]
