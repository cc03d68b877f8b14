"""The JAX lexer against CPython's tokenize on generated programs: the Tokens arrays and
errors against host_lex, and the printed `python -m tokenize` lines against
tokenize.generate_tokens. Batches of programs go through one compiled lexer."""

from __future__ import annotations

import io
import os
import re
import tokenize

import jax
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TOKENIZE_311, TOKENIZE_IS_311
from jaxcc import lexer
from jaxcc.reference.host_lex import host_lex
from jaxcc.testing import near_misses, programs
from property_tests.limits import LEXER as LIM

B = 16
SCALE = 10 if os.environ.get("JAXCC_SLOW") == "1" else 1
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))


def lex_batch(sources: list[bytes], tiers: bool | None = None):
    chunk = list(sources) + [b""] * (B - len(sources))
    src, n = lexer.encode(chunk, LIM)
    toks, err = lexer.lex(src, n, LIM, tiers=tiers)
    toks = jax.tree.map(np.asarray, toks)
    err = [np.asarray(e) for e in err]
    return [
        (jax.tree.map(lambda x, j=j: x[j], toks), tuple(int(e[j]) for e in err))
        for j in range(len(sources))
    ]


def check_against_host(data: bytes, toks, err):
    h_toks, h_err = host_lex(data, LIM)
    assert err == tuple(int(x) for x in h_err), (data, err, tuple(h_err))
    for f in toks._fields:
        np.testing.assert_array_equal(
            getattr(toks, f), getattr(h_toks, f), err_msg=f"{f} of {data!r}"
        )


def tokenize_lines(text: str, exact: bool) -> list[str] | None:
    """`python -m tokenize [-e]` lines (without ENCODING), None when tokenize fails."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    out = []
    for t in toks:
        typ = t.exact_type if exact else t.type
        rng = "%d,%d-%d,%d:" % (t.start + t.end)  # noqa: UP031  (tokenize.main verbatim)
        out.append("%-20s%-15s%-15r" % (rng, tokenize.tok_name[typ], t.string))  # noqa: UP031
    return out


def check_printed(data: bytes, toks, err):
    if err[0] != 0:
        return
    for exact in (False, True):
        want = tokenize_lines(data.decode(), exact)
        got = lexer.format_tokens(data, toks, int(toks.n_tokens), exact)[1:]
        assert got == want, data


def with_tabs(src: str) -> str:
    """Indent with tabs (one per 4 leading spaces, the rest as spaces)."""

    def sub(m):
        n = len(m.group(0))
        return "\t" * (n // 4) + " " * (n % 4)

    return re.sub(r"(?m)^ +", sub, src)


def fits(s: str) -> bool:
    return len(s.encode()) <= LIM.max_source_bytes


@settings(max_examples=12 * SCALE, **SETTINGS)
@given(st.lists(programs().filter(fits), min_size=1, max_size=B), st.booleans())
def test_programs_match_tokenize(srcs, tabs):
    if tabs:
        srcs = [with_tabs(s) for s in srcs]
    data = [s.encode() for s in srcs]
    for d, (toks, err) in zip(data, lex_batch(data), strict=True):
        check_against_host(d, toks, err)
        check_printed(d, toks, err)


@settings(max_examples=8 * SCALE, **SETTINGS)
@given(st.lists(st.tuples(programs().filter(fits), st.integers(0, 420)), min_size=1, max_size=B))
def test_two_widths_match_tokenize(progs):
    """The lexer with tiers (``tiers=True``: what a GPU runs for large batches; the plan of
    fewest padded bytes among 3 N / 8, N / 2 and N, whichever the batch makes cheapest) on
    batches that mix short programs with longer ones (a program and a comment line of up
    to 420 bytes after it; past N bytes: the source-length error)."""
    data = [(s + "#" * k + "\n" if k else s).encode() for s, k in progs]
    for d, (toks, err) in zip(data, lex_batch(data, tiers=True), strict=True):
        check_against_host(d, toks, err)
        check_printed(d, toks, err)


def _near(x):
    return x[0] if isinstance(x, tuple) else x


@TOKENIZE_311
@settings(max_examples=8 * SCALE, **SETTINGS)
@given(st.lists(near_misses().map(_near).filter(fits), min_size=1, max_size=B))
def test_near_misses_match_host_lex(srcs):
    data = [s.encode() for s in srcs]
    for d, (toks, err) in zip(data, lex_batch(data), strict=True):
        check_against_host(d, toks, err)


NOISE = st.sampled_from(
    list(" \t\n\n\n()#\\:=+-*/<>!.,;'\"0123456789abexoj_\f\x0b$?@[]{}~%&|^")
    + [
        "if ",
        "else",
        "class",
        "def ",
        "    ",
        "\\\n",
        "0x",
        "0b",
        "0o",
        "1_0",
        "rb",
        "'''",
        "1.5",
        "\r\n",
    ]
)


@TOKENIZE_311
@settings(max_examples=12 * SCALE, **SETTINGS)
@given(st.lists(st.lists(NOISE, max_size=60).map("".join), min_size=1, max_size=B))
def test_token_soup_matches_host_lex(srcs):
    data = [s.encode() for s in srcs]
    for d, (toks, err) in zip(data, lex_batch(data), strict=True):
        check_against_host(d, toks, err)
        check_printed(d, toks, err)


@settings(max_examples=8 * SCALE, **SETTINGS)
@given(st.lists(st.binary(max_size=600), min_size=1, max_size=B))
def test_arbitrary_bytes_never_crash(data):
    for d, (toks, err) in zip(data, lex_batch(data), strict=True):
        n = int(toks.n_tokens)
        assert 0 <= n <= LIM.max_tokens
        assert (toks.kind[n:] == 0).all()
        if err[0] == 0:  # a complete token list ends with ENDMARKER
            assert toks.kind[n - 1] == 1
        # a bare CR is the documented divergence (docs/lexer.md); the host reference asks
        # this Python's tokenize (conftest.TOKENIZE_IS_311)
        if b"\r" not in d and TOKENIZE_IS_311:
            check_against_host(d, toks, err)
