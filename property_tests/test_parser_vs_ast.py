"""Differential tests of the parser against CPython's ``ast.parse`` (and the host oracle
``reference.flatten``) on generated programs, near misses and token-level mutations of
generated programs. ``--slow`` (JAXCC_SLOW=1) runs 10x more examples."""

from __future__ import annotations

import ast
import os

import jax
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxcc.errors import Code
from jaxcc.limits import Limits
from jaxcc.parser import parse
from jaxcc.pyast import to_python_ast
from jaxcc.reference.flatten import flatten
from jaxcc.reference.host_lex import host_lex
from jaxcc.syntax import Ast
from jaxcc.testing import near_misses, programs
from jaxcc.tokens import Tok

SCALE = 10 if os.environ.get("JAXCC_SLOW") == "1" else 1
L = Limits(max_source_bytes=8192, max_tokens=2048, max_nodes=2048, max_parse_depth=128)
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))


def _parse(src):
    toks, lerr = host_lex(src, L)
    tree, err = jax.tree.map(np.asarray, parse(toks, L, lerr))
    return tree, err, toks, lerr


def _cpython(src):
    """None if ast.parse accepts src, else (Code, line) of its error."""
    try:
        ast.parse(src)
    except IndentationError as e:
        return Code.INDENTATION, e.lineno
    except SyntaxError as e:
        return Code.SYNTAX, e.lineno
    return None


def check(src, exact_line=True):
    """The parser's result against CPython's: the same error class at the same line (with
    ``exact_line=False``: at the same line or before it), or the same AST."""
    tree, err, toks, lerr = _parse(src)
    ref, _, rerr = flatten(src, L)
    cp = _cpython(src)
    code = int(err.code)
    if int(lerr.code) != Code.OK and code == int(lerr.code):
        return  # the lexer's own error (tested with the lexer)
    if cp is not None:
        assert code == cp[0], (src, err, cp)
        if exact_line:
            assert int(err.line) == cp[1], (src, err, cp)
        else:
            assert 1 <= int(err.line) <= cp[1], (src, err, cp)
        return
    assert code == int(rerr.code), (src, err, rerr)
    if code != Code.OK:
        return
    mine = ast.dump(to_python_ast(tree, toks, src), include_attributes=True, indent=1)
    assert mine == ast.dump(ast.parse(src), include_attributes=True, indent=1), src
    for f in Ast._fields:
        np.testing.assert_array_equal(getattr(tree, f), getattr(ref, f), err_msg=f"{f}: {src!r}")


@settings(max_examples=40 * SCALE, **SETTINGS)
@given(programs())
def test_programs_parse_like_cpython(src):
    tree, err, _, lerr = _parse(src)
    if int(lerr.code) == Code.LIMIT:  # too long for L: the lexer's error, kept
        assert tuple(map(int, err)) == tuple(map(int, lerr))
        return
    assert int(err.code) == Code.OK, (src, err)
    check(src)


@settings(max_examples=40 * SCALE, **SETTINGS)
@given(near_misses(["syntax", "indentation", "unsupported"]))
def test_near_misses_fail_like_cpython(case):
    check(case[0])


@st.composite
def _mutants(draw):
    """A generated program with one token deleted, duplicated or swapped with the next."""
    src = draw(programs(max_functions=2, fuel=2, max_statements=3))
    toks, _ = host_lex(src, L)
    n = int(toks.n_tokens)
    spans = [
        (int(toks.start[i]), int(toks.end[i]))
        for i in range(n)
        if int(toks.kind[i]) not in (Tok.DEDENT, Tok.ENDMARKER, Tok.COMMENT)
        and toks.start[i] < toks.end[i]
    ]
    i = draw(st.integers(0, len(spans) - 1))
    s, e = spans[i]
    how = draw(st.sampled_from(["delete", "duplicate", "swap"]))
    if how == "delete":
        return src[:s] + src[e:]
    if how == "duplicate":
        return src[:e] + " " + src[s:e] + src[e:]
    if i + 1 < len(spans):
        s2, e2 = spans[i + 1]
        return src[:s] + src[s2:e2] + src[e:s2] + src[s:e] + src[e2:]
    return src


@settings(max_examples=60 * SCALE, **SETTINGS)
@given(_mutants())
def test_token_mutations_fail_like_cpython(src):
    # Random damage reaches corners where CPython's error position comes from its
    # second-pass special rules or its tokenizer's look at the rest of the file; the LR
    # automaton stops at the first token that cannot continue a valid program, which is
    # never after CPython's line.
    check(src, exact_line=False)
