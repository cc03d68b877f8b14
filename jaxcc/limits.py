"""Static limits of every stage. A program over any limit gets Code.LIMIT naming it,
never truncation. ``Limits`` is hashable so it can be a static jit argument."""

from __future__ import annotations

from typing import NamedTuple


class Limits(NamedTuple):
    max_source_bytes: int = 4096  # N: padded source length
    max_tokens: int = 1024  # T: tokens per program (COMMENT and NL included)
    max_indent: int = 32  # indentation stack depth
    max_parse_depth: int = 256  # parser state/node stack depth
    max_nodes: int = 1024  # N_ast: AST nodes per program
    max_code: int = 2048  # I: instructions per program
    max_funcs: int = 32  # F: functions per program (the module body is function 0)
    max_locals: int = 64  # slots per function (params, locals, hidden temporaries)
    max_stack: int = 1024  # S: value-stack slots per lane (all frames' locals and operands)
    max_depth: int = 128  # call frames per lane
    max_output: int = 512  # output items per lane (each printed value and each newline)
    max_steps: int = 1_000_000  # instructions per lane

    def check(self) -> Limits:
        """This Limits, or ValueError naming a field too large for the int32 keys that
        order errors: the lexer's ``4 * byte + kind`` stays below 2**30, the middle end's
        ``64 * node + sub`` below 2**31."""
        if not 0 < self.max_source_bytes < 1 << 28:
            raise ValueError(f"max_source_bytes must be in 1 .. 2**28 - 1: {self.max_source_bytes}")
        if not 0 < self.max_nodes < 1 << 25:
            raise ValueError(f"max_nodes must be in 1 .. 2**25 - 1: {self.max_nodes}")
        return self


# Bulk API defaults (many lanes, memory matters).
DEFAULT = Limits()

# CLI defaults: generous enough for what `python FILE` finishes (see docs/language.md).
CLI = Limits(
    max_source_bytes=65536,
    max_tokens=16384,
    max_indent=100,
    max_parse_depth=1024,
    max_nodes=16384,
    max_code=32768,
    max_funcs=256,
    max_locals=256,
    max_stack=262144,
    max_depth=1000,
    max_output=1 << 20,
    max_steps=200_000_000,
)
