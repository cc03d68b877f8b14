"""The lexer: padded source bytes -> Tokens, as pure JAX array code (docs/lexer.md).

``lex(source[B, N], length[B], limits)`` follows CPython 3.11's ``tokenize`` exactly on
the subset (COMMENT and NL included) and reports the first error of each program, as
``jaxcc.reference.host_lex`` does. Every step is a whole-array operation over the bytes
of a program (vmapped over the batch): a DFA run by ``lax.associative_scan`` over
composed transition functions, prefix sums/maxes for positions, brackets and lines,
a sparse table + pointer jumping for the indentation stack, and a sort for interning.

``python -m jaxcc.lexer [-e] FILE`` prints what ``python -m tokenize [-e] FILE`` prints.
"""

from __future__ import annotations

import functools
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxcc import lexer_tables as LT
from jaxcc.arrays import I32, by_width, gather, index, map_batch, set_at, set_rows
from jaxcc.errors import (
    INT_MAX_STR_DIGITS,
    MAX_INDENT_LEVEL,
    MAX_PAREN_LEVEL,
    Code,
    Error,
    Limit,
    Syntax,
    Unsupported,
    without_bom,
)
from jaxcc.lexer_tables import C, S
from jaxcc.limits import DEFAULT, Limits
from jaxcc.tokens import KEYWORDS_AFTER_NUMBER, N_RESERVED_NAMES, Tok, Tokens

# how lex's DFA scan composes transition functions (read at trace time): "merge" looks up
# the merge table (2 bytes per element and level of the scan); "vector" composes the
# 41-state int8 vectors (41 bytes per element and level). Merge is the default since the
# memory-traffic work of docs/lexer.md ("Memory traffic"); on an H100 the two ran alike on
# small programs and vector 7% faster on medium ones (docs/lexer.md)
DFA_MODE = "merge"
u32 = jnp.uint32
_BIG = 1 << 30  # above every event key 4 * byte + kind (Limits.check bounds the bytes)


def _c(x, dtype=None):
    return jnp.asarray(x, dtype)


_I16_TOP = int(np.iinfo(np.int16).max)  # stands for _BIG in an int16 scan


def _narrow_scan(scan, x):
    """``scan(x)`` for x holding positions in [-1, len(x) + 1] or _BIG (every caller's
    contract), run in int16 where they fit (half the bytes per pass of the scan), the
    result int32 and equal to the int32 scan's."""
    if x.dtype != I32 or x.shape[0] + 2 >= _I16_TOP:
        return scan(x)
    y = scan(jnp.where(x >= _BIG, _I16_TOP, x).astype(jnp.int16)).astype(I32)
    return jnp.where(y == _I16_TOP, _BIG, y)


def _cumsum(x, hi: int):
    """Prefix sum of small integers whose prefix sums stay within [-hi, hi] (hi static):
    in int16 where hi fits, the result int32."""
    if hi >= _I16_TOP:
        return jnp.cumsum(x.astype(I32))
    return lax.cumsum(x.astype(jnp.int16), axis=0).astype(I32)


def _cummax(x):
    """Prefix max of positions (see _narrow_scan)."""
    return _narrow_scan(lambda v: lax.cummax(v, axis=0), x)


def _rcummin(x):
    """Suffix min of positions (see _narrow_scan)."""
    return _narrow_scan(lambda v: lax.cummin(v, axis=0, reverse=True), x)


def _shift_right(x, fill):
    """y[i] = x[i-1], y[0] = fill."""
    return jnp.concatenate([jnp.full((1,), fill, x.dtype), x[:-1]])


def _shift_left(x, fill):
    """y[i] = x[i+1], y[-1] = fill."""
    return jnp.concatenate([x[1:], jnp.full((1,), fill, x.dtype)])


def _shift_left_by(x, k: int, fill):
    """y[i] = x[i+k] (k static), fill past the end."""
    if k == 0:
        return x
    k = min(k, x.shape[0])
    return jnp.concatenate([x[k:], jnp.full((k,), fill, x.dtype)])


# --------------------------------------------------------------------------- DFA


def _dfa_states(cls, mode: str, tables=None):
    """State of the restart DFA after each byte.

    Equivalent sequential Python::

        s, out = S0, []
        for c in cls:
            s = TRANS[c, s]
            out.append(s)

    Each byte's transition function f[s] = TRANS[c, s]; composition (f then g)[s] =
    g[f[s]] is associative, so an associative scan gives every prefix composition, whose
    entry S0 is the state. mode "vector": the 41-entry vectors themselves are composed
    by a gather; mode "merge" (what ``lex`` uses, ``DFA_MODE``): functions are ids of the
    ~1.7k distinct compositions and combining is one lookup in the merge table ``tables``
    (2 bytes per element).
    """
    if mode == "merge":
        # the tables come in as arguments: a multi-MB constant would be copied into
        # every level of the scan and compile slowly
        # ids (< 2**15) and states travel as int16 / int8: the scan's levels move 2
        # bytes per element, the index into the table alone is int32
        gen_id, merge, state_of = tables[:3]
        F = state_of.shape[0]

        def combine(a, b):  # a earlier, b later
            return merge[a.astype(I32) * F + b.astype(I32)]

        prefix = lax.associative_scan(combine, gen_id.astype(jnp.int16)[cls], axis=0)
        return state_of.astype(jnp.int8)[prefix]
    f = _c(LT.TRANS)[cls]  # Int8[N, S]

    def compose(a, b):  # a earlier, b later
        return jnp.take_along_axis(b, a, axis=-1)

    prefix = lax.associative_scan(compose, f, axis=0)
    return prefix[:, 0].astype(I32)


def _indent_columns(b, idx, line_start, pos):
    """tokenize's indentation column of each line (tabs to multiples of 8, form feed
    resets), evaluated at every byte for the line it starts; pos is the line's first
    byte not in [ \\t\\f].

    Equivalent sequential Python::

        col = 0
        for ch in line[:pos]:
            if ch == ' ': col += 1
            elif ch == '\\t': col = (col // 8 + 1) * 8
            elif ch == '\\f': col = 0

    Closed form: after the last form feed, a tab ending a run of s spaces adds
    s // 8 + 1 eights, and the spaces after the last tab add one each; so prefix sums
    of per-tab contributions and prefix maxes of the last tab / form feed suffice.
    """
    sp = b == ord(" ")
    tab = b == ord("\t")
    ff = b == ord("\f")
    last_nonsp = _cummax(jnp.where(sp, -1, idx))
    run_before = idx - _shift_right(last_nonsp, -1) - 1  # spaces just before i
    contrib = jnp.where(tab, run_before // 8 + 1, 0).astype(I32)
    tc = _cumsum(contrib, idx.shape[0])  # at most one per byte
    last_ff = _cummax(jnp.where(ff, idx, -1))
    last_tab = _cummax(jnp.where(tab, idx, -1))
    p1 = pos - 1
    seg = jnp.maximum(line_start, gather(last_ff, p1, -1) + 1)  # after the last form feed
    tabs8 = gather(tc, p1, 0) - gather(tc, seg - 1, 0)
    lt = gather(last_tab, p1, -1)
    tail = pos - jnp.maximum(jnp.where(lt >= seg, lt + 1, seg), seg)
    return jnp.where(pos > line_start, 8 * tabs8 + tail, 0)


# --------------------------------------------------------------------------- one program


class _Ev(NamedTuple):
    """Attributes of the tokens an event emits (per byte or per statement line)."""

    kind: object
    start: object
    end: object
    line: object
    col: object
    end_line: object
    end_col: object
    value: object


def _bounds(is_start, idx, n):
    """Start of the token holding each byte, and one past the end of each token (at its
    start): a prefix max and a reverse prefix min of the start positions."""
    tok_start = _cummax(jnp.where(is_start, idx, 0))
    nxt = _rcummin(jnp.where(is_start, idx, n))
    tok_end = jnp.where(idx >= n, n, _shift_left(nxt, n))
    return tok_start, tok_end


class _Bytes(NamedTuple):
    """The program's bytes and what most steps read about each."""

    N: int  # the padded length (static)
    idx: object  # Int32[N]  0 .. N-1
    length: object  # the length as given (beyond N: an error)
    n: object  # the length clipped to N
    valid: object  # Bool[N]  idx < n
    b: object  # Int16[N]  the byte (PAD_BYTE past the end)
    cls: object  # Int8[N]  its DFA byte class
    b_next: object  # b[i + 1]
    b_next2: object  # b[i + 2]
    b_prev: object  # b[i - 1]
    is_word: object  # Bool[N]  a digit or a letter


def _read_bytes(src, length) -> _Bytes:
    """Pad the program past its length and read each byte's class and neighbours."""
    N = src.shape[0]
    idx = jnp.arange(N, dtype=I32)
    length = jnp.asarray(length, I32)
    n = jnp.minimum(length, N)
    valid = idx < n
    # narrow per-byte columns: bytes 0..256 (PAD_BYTE) in int16, 30 classes in int8
    b = jnp.where(valid, src.astype(jnp.int16), jnp.int16(LT.PAD_BYTE))  # Int16[N]
    cls = _c(LT.BYTE_CLASS, jnp.int8)[b]
    b_next = _shift_left(b, LT.PAD_BYTE)
    b_next2 = _shift_left(b_next, LT.PAD_BYTE)
    b_prev = _shift_right(b, LT.PAD_BYTE)
    is_word = (cls >= C.D0) & (cls <= C.LET)
    return _Bytes(N, idx, length, n, valid, b, cls, b_next, b_next2, b_prev, is_word)


class _Dfa(NamedTuple):
    """The DFA's tokens, and where each number token's NUMBER ends."""

    start: object  # Bool[N]  the DFA starts a token here
    tok_end: object  # Int32[N]  (at a start) one past the end of the DFA's token
    last: object  # Int32[N]  (at a start) the last byte of the DFA's token
    fa_last: object  # Int32[N]  the latest byte <= i where a float literal is accepted
    im_last: object  # Int32[N]  the latest byte <= i where an imaginary one is
    t_num: object  # Bool[N]  a number token starts here
    m_end: object  # Int32[N]  (at a number start) one past its NUMBER, else 0
    n_imag: object  # Bool[N]  (at a number start) an imaginary literal
    n_float: object  # Bool[N]  (at a number start) a float literal


def _dfa_tokens(x: _Bytes, tables) -> _Dfa:
    """Run the DFA: a token starts where it restarts. A number token's NUMBER ends at
    its last Int-accepting byte (tokenize's regex alternation, not maximal munch);
    float and imaginary literals are errors."""
    state = _dfa_states(x.cls, DFA_MODE, tables)
    state_before = _shift_right(state, S.S0)
    # a flat table: one index column, not a [N, 2] pair (states and classes are in range)
    n_cls = LT.RESTART.shape[1]
    restart = _c(LT.RESTART.reshape(-1))[state_before.astype(I32) * n_cls + x.cls.astype(I32)]
    dfa_start = restart & x.valid
    _, tok_end = _bounds(dfa_start, x.idx, x.n)
    ia = _c(LT.INT_ACCEPT)[state] & x.valid
    fa = _c(LT.FLOAT_ACCEPT)[state] & x.valid
    im = (state == S.IMAG) & x.valid
    last = jnp.maximum(tok_end - 1, 0)
    ia_last = _cummax(jnp.where(ia, x.idx + 1, 0))
    fa_last = _cummax(jnp.where(fa, x.idx, -1))
    im_last = _cummax(jnp.where(im, x.idx, -1))
    t_num = dfa_start & (x.cls >= C.D0) & (x.cls <= C.D89)
    m_end = jnp.where(t_num, index(ia_last, last), 0)  # for a number token start: its NUMBER's end
    n_imag = t_num & (index(im_last, last) >= x.idx)
    n_float = t_num & ~n_imag & (index(fa_last, last) >= x.idx)
    return _Dfa(dfa_start, tok_end, last, fa_last, im_last, t_num, m_end, n_imag, n_float)


class _Toks(NamedTuple):
    """The tokens' extents."""

    is_start: object  # Bool[N]  a token starts here
    tok_start: object  # Int32[N]  the start of the token holding this byte
    tok_end: object  # Int32[N]  (at a start) one past the token's end
    first_cls: object  # Int32[N]  the class of that token's first byte
    last_b: object  # Int32[N]  (at a start) the token's last byte


def _split_numbers(x: _Bytes, d: _Dfa) -> _Toks:
    """Split words after a NUMBER cut short: what follows is a NAME (`0or` is NUMBER 0,
    NAME or), so it starts a token and the DFA's starts inside that word are dropped."""
    is_letter = (x.cls >= C.HEXL) & (x.cls <= C.LET)
    split = d.t_num & ~d.n_imag & ~d.n_float & (d.m_end < d.tok_end)
    # jnp's batched scatter: arrays.set_at here measured 1 ms slower (seventh run)
    split_at = jnp.zeros(x.N + 1, bool).at[jnp.where(split, d.m_end, x.N)].set(True)[: x.N]
    split_at = split_at & is_letter
    word_end = _rcummin(jnp.where(x.is_word & x.valid, x.N + 1, x.idx))
    word_end = jnp.minimum(word_end, x.n)
    sp_cover = _cummax(jnp.where(split_at, word_end, 0))  # inside a split word: idx < this
    sp_from = _cummax(jnp.where(split_at, x.idx, -1))
    inside = (x.idx > sp_from) & (x.idx < sp_cover)
    is_start = (d.start & ~inside) | split_at
    tok_start, tok_end = _bounds(is_start, x.idx, x.n)
    first_cls = index(x.cls, tok_start)
    last_b = gather(x.b, tok_end - 1, LT.PAD_BYTE)
    return _Toks(is_start, tok_start, tok_end, first_cls, last_b)


class _Lines(NamedTuple):
    """Each byte's line."""

    is_nl: object  # Bool[N]  a newline byte
    line_no: object  # Int32[N]  its line, from 1
    is_ls: object  # Bool[N]  the first byte of a line
    line_start: object  # Int32[N]  the first byte of its line
    col: object  # Int32[N]  its column (idx - line_start)


def _lines(x: _Bytes) -> _Lines:
    """Number the lines (a prefix sum of newlines) and find each byte's column."""
    is_nl = (x.b == ord("\n")) & x.valid
    n_nl_before = _cumsum(is_nl, x.N) - is_nl.astype(I32)
    line_no = n_nl_before + 1
    is_ls = x.valid & ((x.idx == 0) | (x.b_prev == ord("\n")))
    line_start = _cummax(jnp.where(is_ls, x.idx, 0))
    col = x.idx - line_start
    return _Lines(is_nl, line_no, is_ls, line_start, col)


class _Kinds(NamedTuple):
    """What starts at each token start, by its first byte (False elsewhere)."""

    t_name: object  # a NAME or a keyword
    t_comment: object  # a COMMENT
    tok_len: object  # Int32[N]  (at a start) the token's length
    t_newline: object  # a line break: NEWLINE or NL
    t_bsl_bad: object  # a backslash not followed by a newline (an error)
    t_op: object  # an operator or bracket
    t_dot: object  # '.' (an error: attribute, float or ellipsis)
    t_quote: object  # a string (an error)
    t_bad: object  # a byte outside the language (an error)


def _classify(x: _Bytes, tok: _Toks) -> _Kinds:
    """Classify each token by the class of its first byte (and its length)."""
    is_start, cls = tok.is_start, x.cls
    t_name = is_start & (cls >= C.HEXL) & (cls <= C.LET)
    t_comment = is_start & (cls == C.HASH)
    tok_len = tok.tok_end - x.idx
    t_newline = is_start & ((cls == C.NL) | ((cls == C.CR) & (tok_len == 2)))
    t_bsl_bad = is_start & (cls == C.BSL) & (tok.last_b != ord("\n"))
    t_op = is_start & (cls >= C.STAR) & (cls <= C.OP1) & (cls != C.DOT)
    t_dot = is_start & (cls == C.DOT)
    t_quote = is_start & (cls == C.QUOTE)
    t_bad = is_start & (cls == C.BAD)
    return _Kinds(t_name, t_comment, tok_len, t_newline, t_bsl_bad, t_op, t_dot, t_quote, t_bad)


class _Stmts(NamedTuple):
    """Brackets, and the lines that start statements."""

    opens: object  # Bool[N]  an opening bracket
    paren_before: object  # Int32[N]  brackets open before this byte
    paren_final: object  # brackets open at the end
    is_stmt_mode: object  # Bool[N]  a line start outside brackets and continuations
    ws3: object  # Bool[N]  one of [ \t\f]
    pos: object  # Int32[N]  the first byte at or after i not in [ \t\f] (n when none)
    column: object  # Int32[N]  (at a line start) its indentation column
    stmt_line: object  # Bool[N]  (at a line start) the line takes part in indentation
    line_blank_stmt: object  # Bool[N]  this byte's line is a blank statement line


def _statements(x: _Bytes, tok: _Toks, ln: _Lines) -> _Stmts:
    """Count open brackets (a prefix sum); a line outside brackets and continuations
    starts a statement, and one that is not blank takes part in indentation."""
    b, idx = x.b, x.idx
    opens = tok.is_start & ((b == ord("(")) | (b == ord("[")) | (b == ord("{")))
    closes = tok.is_start & ((b == ord(")")) | (b == ord("]")) | (b == ord("}")))
    delta = opens.astype(I32) - closes.astype(I32)
    paren_incl = _cumsum(delta, x.N)
    paren_before = paren_incl - delta
    paren_final = paren_incl[-1]
    # the '\n' before a line start belongs to a continuation token
    cont_line = _shift_right(ln.is_nl & (tok.first_cls == C.BSL), False)
    is_stmt_mode = ln.is_ls & (paren_before == 0) & ~cont_line  # tokenize's "new statement"

    # first byte not in [ \t\f] from each byte on (n when none)
    ws3 = (b == ord(" ")) | (b == ord("\t")) | (b == ord("\f"))
    first_nonws = _rcummin(jnp.where(ws3 & x.valid, x.N + 1, idx))
    first_nonws = jnp.minimum(first_nonws, x.n)
    pos = first_nonws  # at line starts: tokenize's `pos`
    pos_b = gather(b, pos, LT.PAD_BYTE)
    blank = (pos >= x.n) | (pos_b == ord("#")) | (pos_b == ord("\r")) | (pos_b == ord("\n"))
    column = _indent_columns(b, idx, idx, pos)  # meaningful at line starts
    stmt_line = is_stmt_mode & ~blank  # lines that take part in indentation
    line_blank_stmt = (is_stmt_mode & blank)[ln.line_start]  # per byte: its line is a blank one
    return _Stmts(
        opens, paren_before, paren_final, is_stmt_mode, ws3, pos, column, stmt_line, line_blank_stmt
    )


class _Indent(NamedTuple):
    """The statement lines, compacted to K slots, and their INDENT / DEDENT tokens."""

    k_pos: object  # Int32[K]  the line's first byte not in [ \t\f]
    k_ls: object  # Int32[K]  the line's first byte
    k_line: object  # Int32[K]  its line number
    kk: object  # Int32[K]  0 .. K-1
    k_ok: object  # Bool[K]  the slot holds a line
    k_indent: object  # Bool[K]  the line indents
    k_bad_dedent: object  # Bool[K]  it dedents to a column not on the stack
    k_too_deep: object  # Bool[K]  it indents past limits.max_indent
    k_too_many: object  # Bool[K]  it indents past CPython's MAX_INDENT_LEVEL
    k_count: object  # Int32[K]  the INDENT / DEDENT tokens it emits
    depth_final: object  # the depth at the end (DEDENTs at EOF)
    cnt_line: object  # Int32[N]  (at a line's pos) the tokens it emits before its first


def _indentation(x: _Bytes, ln: _Lines, st: _Stmts, limits: Limits, K: int) -> _Indent:
    """Gather the statement lines into K slots and run the indentation stack over them:
    INDENT / DEDENT counts and indentation errors per line."""
    sidx = _cumsum(st.stmt_line, x.N) - 1
    n_stmt = jnp.minimum(sidx[-1] + 1, K)
    tgt = jnp.where(st.stmt_line, sidx, K)
    # one scatter of four columns (the kept targets are distinct: a running count)
    init = jnp.broadcast_to(jnp.asarray([0, _BIG, 0, 0], I32), (K, 4))
    cols = jnp.stack([st.pos, st.column, x.idx, ln.line_no], axis=1).astype(I32)
    k_pos, k_col, k_ls, k_line = set_rows(init, tgt, cols).T
    kk = jnp.arange(K, dtype=I32)
    k_ok = kk < n_stmt
    # a column is at most 8 per byte (tabs)
    ind = _indent_stack(k_col, k_ok, limits.max_indent, col_hi=8 * x.N)
    k_prev_col = _shift_right(k_col, 0)
    k_indent = k_ok & (k_col > k_prev_col)
    k_dedent = k_ok & (k_col < k_prev_col)
    k_n_ded = jnp.where(k_dedent, _shift_right(ind.depth, 0) - ind.depth, 0)
    k_bad_dedent = k_dedent & ind.mismatch
    k_too_deep = k_indent & (ind.depth > limits.max_indent)
    # CPython's own limit (IndentationError) before ours (LimitError) on the same line;
    # the depth is exact up to max_indent + 1, so a smaller max_indent stops earlier
    k_too_many = k_indent & (ind.depth > MAX_INDENT_LEVEL)
    k_count = jnp.where(k_indent, 1, k_n_ded)
    depth_final = jnp.where(n_stmt > 0, gather(ind.depth, n_stmt - 1, 0), 0)

    # per byte: tokens the statement line at this byte emits before its first token
    N = x.N
    # jnp's batched scatter: arrays.add_at here made the lexer 18.8 -> 24.6 ms per 65,536
    # small programs on an H100 (docs/benchmarks.md, seventh run)
    cnt_line = jnp.zeros(N + 1, I32).at[jnp.where(k_ok, k_pos, N + 1)].add(k_count, mode="drop")[:N]
    return _Indent(
        k_pos,
        k_ls,
        k_line,
        kk,
        k_ok,
        k_indent,
        k_bad_dedent,
        k_too_deep,
        k_too_many,
        k_count,
        depth_final,
        cnt_line,
    )


class _Num(NamedTuple):
    """The value of each NUMBER (at its start)."""

    base_ix: object  # Int32[N]  0 decimal, 1 hex, 2 octal, 3 binary
    sig: object  # Int32[N]  its significant digits
    too_big: object  # Bool[N]  too large for the language's ints (Limit.INT_LITERAL)
    num_value: object  # Int32[N]  its value (mod 2**32)
    nxt_digit: object  # Bool[N]  a digit follows the NUMBER (an error)


def _number_values(x: _Bytes, d: _Dfa, tok: _Toks) -> _Num:
    """Evaluate the NUMBERs: each digit times base**(digits after it), prefix-summed
    mod 2**32, with the significant digits counted to tell literals too large."""
    b, idx, m_end = x.b, x.idx, d.m_end
    b1 = x.b_next | 0x20
    prefixed = (b == ord("0")) & ((b1 == ord("x")) | (b1 == ord("o")) | (b1 == ord("b")))
    prefixed = prefixed & (m_end > idx + 1)
    base_ix = jnp.where(prefixed, jnp.where(b1 == ord("x"), 1, jnp.where(b1 == ord("o"), 2, 3)), 0)
    # per byte: the number token it belongs to
    # (one gather of the four fields packed: m_end << 4 | base_ix << 2 | prefixed << 1 |
    # t_num; m_end >= 0)
    s_of = tok.tok_start
    packed = (m_end << 4) | (base_ix << 2) | (prefixed.astype(I32) << 1) | d.t_num.astype(I32)
    g = index(packed, s_of)
    num_of = (g & 1) != 0
    me_of = g >> 4
    pre_of = (g & 2) != 0
    base_of = (g >> 2) & 3
    in_m = num_of & (idx < me_of) & (idx >= s_of + jnp.where(pre_of, 2, 0)) & (b != ord("_"))
    dig = _c(LT.DIGIT_VALUE, jnp.int8)[b]  # 0..15
    dc = _cumsum(in_m, x.N)  # digits up to and including i
    e_after = gather(dc, me_of - 1, 0) - dc  # digits of the literal after this one
    n_pow = LT.POW.shape[1]  # a flat table (base_of is 0..3, the exponent 0..32)
    pw = _c(LT.POW.reshape(-1))[base_of * n_pow + jnp.clip(e_after, 0, n_pow - 1)]
    contrib = jnp.where(in_m, dig.astype(u32) * pw, _c(0, u32))
    vc = jnp.cumsum(contrib, dtype=u32)
    vc_before = _shift_right(vc, _c(0, u32))
    value_u = gather(vc, m_end - 1, 0).astype(u32) - vc_before
    nz = _rcummin(jnp.where(in_m & (dig > 0), idx, _BIG))
    p1 = nz
    has_sig = p1 < m_end
    sig = jnp.where(has_sig, gather(dc, m_end - 1, 0) - gather(dc, p1, 0) + 1, 0)
    d1 = gather(dig, p1, 0)
    lim = _c(LT.SIG_LIMIT)[base_ix]
    too_big = (sig > lim) | (
        (sig == lim) & ((_c(LT.LEAD_CHECK)[base_ix] & (d1 >= 3)) | (value_u > _c(2**31, u32)))
    )
    num_value = lax.bitcast_convert_type(value_u, I32)
    # a NUMBER glued to a digit, or to a name that is not a keyword (host_lex: `1if` is
    # fine, `1x` and `007` are not); an unsupported keyword reports itself instead
    nxt_digit = gather((x.cls >= C.D0) & (x.cls <= C.D89), m_end, False)
    return _Num(base_ix, sig, too_big, num_value, nxt_digit)


# the word table's length + 1 (0 for an empty slot), kind and value packed in one int32
assert LT.WORD_LEN.min() >= -1 and LT.WORD_LEN.max() < 255
assert LT.WORD_KIND.min() >= 0 and LT.WORD_KIND.max() < 256
assert LT.WORD_VALUE.min() >= 0 and LT.WORD_VALUE.max() < 128
_WORD_META = (
    (LT.WORD_LEN.astype(np.int32) + 1)
    | (LT.WORD_KIND.astype(np.int32) << 8)
    | (LT.WORD_VALUE.astype(np.int32) << 16)
)


class _Words(NamedTuple):
    """What each name is (at its start)."""

    word_kind: object  # Int8[N]  LT.WORD_KIND_*, 0 for a user name
    word_val: object  # Int8[N]  the keyword's Tok or the reserved name's value
    n_kw: object  # Bool[N]  a keyword of the language
    n_unsup: object  # Bool[N]  a keyword outside the language (an error)
    n_reserved: object  # Bool[N]  a reserved name (builtins, annotations: fixed ids)
    n_user: object  # Bool[N]  a user name (interned later)


def _keywords(x: _Bytes, c: _Kinds) -> _Words:
    """Look names of up to 8 bytes up in the perfect-hash word table (exact compare)."""
    tok_len = c.tok_len
    # the 4 bytes from i packed little-endian (static shifts, 0 past N), then masked to
    # the token's first 8 bytes: two words per byte, not 8 gathered byte columns (the
    # bytes under the mask are in the source, so PAD_BYTE's 9th bit never shows)
    b8 = (x.b & 0xFF).astype(u32)
    p4 = b8
    for k in range(1, 4):
        p4 = p4 | (_shift_left_by(b8, k, 0) << (8 * k))

    def mask(nb):  # the low nb bytes of a word, nb clipped to 0..4
        nb = jnp.clip(nb, 0, 4).astype(u32)
        return jnp.where(nb >= 4, _c(0xFFFFFFFF, u32), (_c(1, u32) << (8 * nb)) - 1)

    w0 = p4 & mask(tok_len)
    w1 = _shift_left_by(p4, 4, 0) & mask(tok_len - 4)
    slot = LT.word_slot(w0, w1, tok_len, LT.WORD_MUL0, LT.WORD_MUL1, xp=jnp)
    meta = _c(_WORD_META)[slot]  # one lookup for the length, kind and value
    word_hit = (
        (tok_len <= 8)
        & ((meta & 0xFF) == tok_len + 1)
        & (_c(LT.WORD_W0)[slot] == w0)
        & (_c(LT.WORD_W1)[slot] == w1)
    )
    word_kind = jnp.where(word_hit, ((meta >> 8) & 0xFF).astype(jnp.int8), 0)
    word_val = (meta >> 16).astype(jnp.int8)  # a Tok or a reserved id: < 128
    n_kw = c.t_name & (word_kind == LT.WORD_KIND_KEYWORD)
    n_unsup = c.t_name & (word_kind == LT.WORD_KIND_UNSUPPORTED)
    n_reserved = c.t_name & (word_kind == LT.WORD_KIND_RESERVED)
    n_user = c.t_name & (word_kind == 0)
    return _Words(word_kind, word_val, n_kw, n_unsup, n_reserved, n_user)


class _Ops(NamedTuple):
    """Each operator (at its start)."""

    op_kind: object  # Int8[N]  its Tok, 0 for none of the language's
    op_err: object  # Int16[N]  (where op_kind is 0) its error: code * 64 + detail


def _operators(x: _Bytes, c: _Kinds) -> _Ops:
    """Look operators up by their first one or two bytes and length (at most 3)."""
    o_len = jnp.minimum(c.tok_len, 3)
    bb0 = jnp.clip(x.b, 0, 127).astype(I32)
    bb1 = jnp.clip(x.b_next, 0, 127).astype(I32)
    k8, e16 = jnp.int8, jnp.int16  # Tok < 128, code * 64 + detail < 2**15
    op_kind = jnp.where(
        o_len == 1,
        _c(LT.OP_KIND1, k8)[bb0],
        jnp.where(o_len == 2, _c(LT.OP_KIND2, k8)[bb0 * 128 + bb1], _c(LT.OP_KIND3, k8)[bb0]),
    )
    op_err = jnp.where(
        o_len == 1,
        _c(LT.OP_ERR1, e16)[bb0],
        jnp.where(o_len == 2, _c(LT.OP_ERR2, e16)[bb0 * 128 + bb1], _c(LT.OP_ERR3, e16)[bb0]),
    )
    return _Ops(op_kind, op_err)


class _StrEnds(NamedTuple):
    """How a string starting at each quote would end (strings are errors)."""

    nl_next: object  # Int32[N]  the '\n' ending this byte's line (or n)
    tri: object  # Bool[N]  a triple quote
    closed: object  # Bool[N]  its closing (single) quote is on its line
    tri_close: object  # Int32[N]  the next closing triple quote (_BIG when none)
    cont: object  # Bool[N]  its line ends in an unescaped backslash
    stop: object  # Int32[N]  the line start a continued string stops at (_BIG: EOF)
    stop_has: object  # Bool[N]  that line holds the closing quote


def _string_ends(x: _Bytes, ln: _Lines) -> _StrEnds:
    """Find where tokenize's STRING from each quote ends: the next unescaped quote (an
    odd run of backslashes escapes), the next triple quote, or the lines it continues
    over."""
    b, b_next, b_next2, idx, valid, n = x.b, x.b_next, x.b_next2, x.idx, x.valid, x.n
    bs = valid & (b == ord("\\"))
    lnb = _cummax(jnp.where(bs, -1, idx))  # last non-backslash at or before i
    escaped = _shift_right(((idx - lnb) % 2) == 1, False)  # odd backslash run before i
    sq, dq = ord("'"), ord('"')
    uq_s = valid & (b == sq) & ~escaped
    uq_d = valid & (b == dq) & ~escaped
    nxt_uq_s = _rcummin(jnp.where(uq_s, idx, _BIG))
    nxt_uq_d = _rcummin(jnp.where(uq_d, idx, _BIG))
    nxt_tri_s = _rcummin(jnp.where(uq_s & (b_next == sq) & (b_next2 == sq), idx, _BIG))
    nxt_tri_d = _rcummin(jnp.where(uq_d & (b_next == dq) & (b_next2 == dq), idx, _BIG))
    nl_next = _rcummin(jnp.where(ln.is_nl | ~valid, idx, n))  # the '\n' ending i's line (or n)
    is_sq = b == sq
    tri = (b_next == b) & (b_next2 == b)
    close1 = jnp.where(is_sq, gather(nxt_uq_s, idx + 1, _BIG), gather(nxt_uq_d, idx + 1, _BIG))
    closed = close1 < nl_next
    tri_close = jnp.where(is_sq, gather(nxt_tri_s, idx + 3, _BIG), gather(nxt_tri_d, idx + 3, _BIG))
    e_nl = nl_next
    bm1, bm2 = gather(b, e_nl - 1, 0), gather(b, e_nl - 2, 0)
    em1, em2 = gather(escaped, e_nl - 1, True), gather(escaped, e_nl - 2, True)
    cont = (e_nl < n) & (
        ((bm1 == ord("\\")) & ~em1) | ((bm1 == ord("\r")) & (bm2 == ord("\\")) & ~em2)
    )
    # a continued string goes on over lines until one holds its quote (STRING) or does
    # not end in a backslash (tokenize: ERRORTOKEN) or the file ends (TokenError)
    ln_end = nl_next
    raw_bsl = (ln_end < n) & (
        (gather(b, ln_end - 1, 0) == ord("\\"))
        | ((gather(b, ln_end - 1, 0) == ord("\r")) & (gather(b, ln_end - 2, 0) == ord("\\")))
    )
    has_s = nxt_uq_s < ln_end
    has_d = nxt_uq_d < ln_end
    stop_s = _rcummin(jnp.where(ln.is_ls & (has_s | ~raw_bsl), idx, _BIG))
    stop_d = _rcummin(jnp.where(ln.is_ls & (has_d | ~raw_bsl), idx, _BIG))
    stop = jnp.where(is_sq, gather(stop_s, e_nl + 1, _BIG), gather(stop_d, e_nl + 1, _BIG))
    stop_has = jnp.where(is_sq, gather(has_s, stop, False), gather(has_d, stop, False))
    return _StrEnds(nl_next, tri, closed, tri_close, cont, stop, stop_has)


class _Str(NamedTuple):
    """The error of a string starting at each quote."""

    str_at: object  # Int32[N]  where the STRING starts (at its prefix, if any)
    str_err: object  # Int32[N]  its error: code * 64 + detail


def _string_errors(x: _Bytes, tok: _Toks, c: _Kinds, se: _StrEnds) -> _Str:
    """Give each string its error and its start: a name of one or two prefix letters
    (r u f b, br rb fr rf) just before the quote belongs to it."""
    b, idx = x.b, x.idx
    prev_s = gather(tok.tok_start, idx - 1, 0)
    prev_name = (
        (idx > 0) & gather(c.t_name, prev_s, False) & (gather(tok.tok_end, prev_s, 0) == idx)
    )
    plen = idx - prev_s
    pc0 = gather(b, prev_s, 0) | 0x20
    pc1 = gather(b, prev_s + 1, 0) | 0x20
    one = (pc0 == ord("r")) | (pc0 == ord("u")) | (pc0 == ord("f")) | (pc0 == ord("b"))
    two = (((pc0 == ord("b")) | (pc0 == ord("f"))) & (pc1 == ord("r"))) | (
        (pc0 == ord("r")) & ((pc1 == ord("b")) | (pc1 == ord("f")))
    )
    has_prefix = prev_name & (((plen == 1) & one) | ((plen == 2) & two))
    single_cont = ~se.tri & ~se.closed & se.cont
    str_at = jnp.where(has_prefix & (se.tri | se.closed | se.cont), prev_s, idx)
    E_STR = Code.UNSUPPORTED * 64 + Unsupported.STRING
    E_EOFM = Code.SYNTAX * 64 + Syntax.EOF_IN_MULTILINE
    str_err = jnp.where(
        se.tri,
        jnp.where(se.tri_close < _BIG, E_STR, E_EOFM),
        jnp.where(
            single_cont,
            jnp.where(
                se.stop >= _BIG,
                E_EOFM,
                jnp.where(se.stop_has, E_STR, Code.SYNTAX * 64 + Syntax.INVALID_CHARACTER),
            ),
            E_STR,
        ),
    )
    return _Str(str_at, str_err)


class _Emit(NamedTuple):
    """The token each token start emits (if no error comes first)."""

    kind: object  # Int8[N]  its Tok, 0 for none
    emit: object  # Bool[N]  a token of the output starts here
    real_end: object  # Int32[N]  one past its end (a NUMBER's own end)
    value: object  # Int32[N]  a NUMBER's value, a reserved name's value, else 0


def _token_kinds(tok: _Toks, d: _Dfa, c: _Kinds, st: _Stmts, num: _Num, w: _Words, ops: _Ops):
    """Choose each token's kind and value; a line break is NL inside brackets and on a
    blank line, NEWLINE elsewhere."""
    nl_kind = jnp.where((st.paren_before > 0) | st.line_blank_stmt, Tok.NL, Tok.NEWLINE)
    nl_kind = nl_kind.astype(jnp.int8)  # the per-byte kind is int8 (Tok < 128)
    kind = jnp.where(c.t_name, jnp.where(w.n_kw, w.word_val, Tok.NAME), 0)
    kind = jnp.where(d.t_num, Tok.NUMBER, kind)
    kind = jnp.where(c.t_comment, Tok.COMMENT, kind)
    kind = jnp.where(c.t_newline, nl_kind, kind)
    kind = jnp.where(c.t_op, ops.op_kind, kind)
    emit = (kind > 0) & tok.is_start
    real_end = jnp.where(d.t_num, d.m_end, tok.tok_end)
    value = jnp.where(d.t_num, num.num_value, jnp.where(w.n_reserved, w.word_val.astype(I32), 0))
    return _Emit(kind, emit, real_end, value)


class _TokErr(NamedTuple):
    """Errors of single tokens: code * 64 + detail at the token's start, 0 = none."""

    err: object  # Int16[N]  the token's error
    num_err: object  # Int16[N]  (at a number start) the NUMBER's own error
    emit: object  # Bool[N]  _Emit.emit less the tokens in error
    key_tok: object  # Int32[N]  the error's key 4 * byte + 2 (_BIG when none)


def _number_errors(d: _Dfa, num: _Num):
    """A NUMBER's own error (at its start): imaginary and float literals, and ints too
    long or too large."""
    # CPython refuses to convert a decimal literal of more significant digits than this
    too_long_dec = (num.base_ix == 0) & (num.sig > INT_MAX_STR_DIGITS)
    return jnp.where(
        d.n_imag,
        Code.UNSUPPORTED * 64 + Unsupported.IMAGINARY,
        jnp.where(
            d.n_float,
            Code.UNSUPPORTED * 64 + Unsupported.FLOAT,
            jnp.where(
                too_long_dec,
                Code.SYNTAX * 64 + Syntax.INT_MAX_STR_DIGITS,
                jnp.where(num.too_big, Code.LIMIT * 64 + Limit.INT_LITERAL, 0),
            ),
        ),
    )


def _token_errors(
    x: _Bytes, d: _Dfa, c: _Kinds, st: _Stmts, num: _Num, w: _Words, ops: _Ops, emit
) -> _TokErr:
    """Find each token's own error: bytes outside the language, operators outside it,
    too many brackets, dots, unsupported keywords, and the NUMBERs' own errors."""
    b, idx, N = x.b, x.idx, x.N
    E_INVCH = Code.SYNTAX * 64 + Syntax.INVALID_CHARACTER
    err = jnp.zeros(N, jnp.int16)  # code * 64 + detail < 2**15
    # a printable ASCII byte outside the language (`$ ? \``) is CPython's "invalid syntax";
    # a control character its "invalid non-printable character"
    printable = (b >= ord("!")) & (b <= ord("~"))
    err = jnp.where(c.t_bad | c.t_bsl_bad, E_INVCH, err)
    err = jnp.where(c.t_bad & printable, Code.SYNTAX * 64 + Syntax.INVALID, err)
    err = jnp.where(c.t_op & (ops.op_kind == 0), ops.op_err, err)
    # CPython's tokenizer holds at most MAX_PAREN_LEVEL brackets open (before it looks
    # at which bracket it is)
    err = jnp.where(
        st.opens & (st.paren_before >= MAX_PAREN_LEVEL),
        Code.SYNTAX * 64 + Syntax.TOO_MANY_PARENS,
        err,
    )
    dot_detail = jnp.where(
        index(d.im_last, d.last) >= idx,
        Unsupported.IMAGINARY,
        jnp.where(
            index(d.fa_last, d.last) >= idx,
            Unsupported.FLOAT,
            jnp.where(
                (x.b_next == ord(".")) & (x.b_next2 == ord(".")),
                Unsupported.ELLIPSIS,
                Unsupported.ATTRIBUTE,
            ),
        ),
    )
    err = jnp.where(c.t_dot, (Code.UNSUPPORTED * 64 + dot_detail).astype(err.dtype), err)
    err = jnp.where(w.n_unsup, Code.UNSUPPORTED * 64 + Unsupported.KEYWORD, err)
    num_err = _number_errors(d, num).astype(err.dtype)
    err = jnp.where(d.t_num, num_err, err)
    emit = emit & (err == 0)
    # error keys: 4*byte + 0 line-level, + 2 token-level (a number glued to a word: +2
    # at the word's byte, losing ties to that word's own error)
    key_tok = jnp.where(err != 0, 4 * idx + 2, _BIG)
    return _TokErr(err, num_err, emit, key_tok)


class _Glue(NamedTuple):
    """NUMBERs glued to what follows them (errors)."""

    gl_dec: object  # Bool[N]  the error is CPython's "leading zeros" one
    key_gl: object  # Int32[N]  the error's key 4 * m_end + 2 (_BIG when none)


def _glued_numbers(x: _Bytes, d: _Dfa, c: _Kinds, num: _Num, w: _Words, num_err) -> _Glue:
    """Find NUMBERs glued to a digit, a name or a keyword that may not follow one, and
    which of them CPython reports as leading zeros."""
    b, idx, valid, N, m_end = x.b, x.idx, x.valid, x.N, d.m_end
    nxt_name = gather(c.t_name & (w.word_kind != LT.WORD_KIND_KEYWORD), m_end, False)
    # a keyword glued to a number: CPython lets only these follow one (`1if`), and reads
    # `0or` as the octal prefix `0o`
    kw_kind = jnp.where(w.n_kw, w.word_val, 0)
    after_ok = functools.reduce(
        jnp.logical_or, [kw_kind == k for k in KEYWORDS_AFTER_NUMBER], jnp.zeros_like(w.n_kw)
    )
    nxt_kw = gather(w.n_kw & ~after_ok, m_end, False) | (
        (m_end == idx + 1) & (b == ord("0")) & gather(kw_kind == Tok.KW_OR, m_end, False)
    )
    gl = d.t_num & (num_err == 0) & ~d.n_imag & ~d.n_float & (num.nxt_digit | nxt_name | nxt_kw)
    # CPython's "leading zeros in decimal integer literals" (`007`, `0_7`, `01x`): a number
    # of zeros, then `_`? [1-9], a run of digits and single `_` not followed by `_ . e j`
    is_dig = (b >= ord("0")) & (b <= ord("9"))
    is_19 = is_dig & (b != ord("0"))
    du_end = _rcummin(jnp.where(valid & (is_dig | (b == ord("_"))), N, idx))
    bad_us = (b == ord("_")) & ~_shift_left(is_dig, False)
    bad_us_next = _rcummin(jnp.where(valid & bad_us, idx, _BIG))
    after_run = gather(b, du_end, 0)
    tail_ok = (
        (is_19 | ((b == ord("_")) & _shift_left(is_19, False)))
        & (bad_us_next >= du_end)
        & (after_run != ord("_"))
        & (after_run != ord("."))
        & (after_run != ord("e"))
        & (after_run != ord("E"))
        & (after_run != ord("j"))
        & (after_run != ord("J"))
    )
    not_zu = valid & (b != ord("0")) & (b != ord("_"))
    zeros_to = _rcummin(jnp.where(not_zu, idx, _BIG))  # first byte at/after i not 0 or _
    only_zeros = (b == ord("0")) & (gather(zeros_to, idx + 1, _BIG) >= m_end)
    gl_dec = gl & only_zeros & gather(tail_ok, m_end, False)
    key_gl = jnp.where(gl, 4 * m_end + 2, _BIG)
    return _Glue(gl_dec, key_gl)


class _Eof(NamedTuple):
    """What the end of the file emits."""

    n_nl_total: object  # newlines in the file
    ls_last: object  # the first byte of the last line
    ws_only_break: object  # the last line, unterminated, holds only [ \t\f]
    l_end: object  # the line of ENDMARKER
    eof_nl: object  # an NL '' for an unterminated last comment line
    eof_newline: object  # a NEWLINE '' for an unterminated last line
    eof_err: object  # EOF inside brackets or a continuation (an error)
    last_len: object  # the last line's length
    eof_count: object  # the tokens after the last byte: [NL] [NEWLINE] DEDENT* ENDMARKER


def _eof(x: _Bytes, tok: _Toks, ln: _Lines, st: _Stmts, ind: _Indent) -> _Eof:
    """Work out the tokens at EOF from how the last line ends (tokenize adds a NEWLINE
    to an unterminated line), and whether the file ends inside brackets or a
    continuation."""
    b, n = x.b, x.n
    n_nl_total = jnp.sum(ln.is_nl.astype(I32))
    last_b_file = gather(b, n - 1, ord("\n"))
    partial = (n > 0) & (last_b_file != ord("\n"))
    ls_last = gather(ln.line_start, n - 1, 0)
    last_stmt_mode = gather(st.is_stmt_mode, ls_last, False)
    last_pos = gather(st.pos, ls_last, n)
    ws_only_break = partial & last_stmt_mode & (last_pos >= n)
    l_end = n_nl_total + 1 + (partial & ~ws_only_break).astype(I32)
    strip_ws = st.ws3 | (b == 0x0B) | ((b >= 0x1C) & (b <= 0x1F)) | (b == ord("\r"))
    first_nonstrip = _rcummin(jnp.where(strip_ws & x.valid, _BIG, x.idx))
    last_is_comment = gather(b, gather(first_nonstrip, ls_last, _BIG), 0) == ord("#")
    eof_nl = partial & last_stmt_mode & (gather(b, last_pos, 0) == ord("#"))
    eof_newline = partial & ~ws_only_break & (last_b_file != ord("\r")) & ~last_is_comment
    ends_cont = (n > 0) & (last_b_file == ord("\n")) & gather(tok.first_cls == C.BSL, n - 1, False)
    eof_err = (st.paren_final != 0) | ends_cont
    last_len = n - ls_last
    eof_count = eof_nl.astype(I32) + eof_newline.astype(I32) + ind.depth_final + 1
    return _Eof(
        n_nl_total,
        ls_last,
        ws_only_break,
        l_end,
        eof_nl,
        eof_newline,
        eof_err,
        last_len,
        eof_count,
    )


class _First(NamedTuple):
    """The first error of the program (before the global checks)."""

    e_key: object  # its key 4 * byte + kind (_BIG when none)
    which: object  # 0 token, 1 string, 2 glued number, 3 indentation, 4 EOF, 5 NUL, -1 none
    has_err: object  # there is one
    i_tok: object  # the first token error's byte
    i_str: object  # the first string error's byte
    i_gl: object  # the first glued number's byte
    i_k: object  # the first indentation error's statement line
    nul_ls: object  # the start of the line of the first NUL byte


def _first_error(
    x: _Bytes, ln: _Lines, ind: _Indent, te: _TokErr, key_str, g: _Glue, eof: _Eof
) -> _First:
    """Pick the first error by its key (a min of each kind's keys, ties broken by kind),
    and where each kind's first one is."""
    k_err_key = jnp.where(
        ind.k_ok & (ind.k_bad_dedent | ind.k_too_deep | ind.k_too_many), 4 * ind.k_pos + 0, _BIG
    )
    keys = [jnp.min(te.key_tok), jnp.min(key_str), jnp.min(g.key_gl), jnp.min(k_err_key)]
    keys.append(jnp.where(eof.eof_err, 4 * x.n + 0, _BIG))
    # ties: token error < string < glued number (strings and glued words share bytes)
    e_key = _c(_BIG, I32)
    which = _c(-1, I32)
    for j, kj in enumerate(keys):  # strict: on a tie the earlier kind wins
        better = kj < e_key
        e_key = jnp.where(better, kj, e_key)
        which = jnp.where(better, j, which)
    # kind 5, a NUL byte: `python FILE` stops when it reads the line holding the first
    # one, before that line's tokens and their errors (so it wins ties there)
    is_nul = x.valid & (x.b == 0)
    nul_ls = ln.line_start[jnp.argmax(is_nul)]
    nul_key = jnp.where(jnp.any(is_nul), 4 * nul_ls + 0, _BIG)
    take_nul = (nul_key < _BIG) & (nul_key <= e_key)
    e_key = jnp.where(take_nul, nul_key, e_key)
    which = jnp.where(take_nul, 5, which)
    has_err = e_key < _BIG
    i_tok = jnp.argmin(te.key_tok)
    i_str = jnp.argmin(key_str)
    i_gl = jnp.argmin(g.key_gl)
    i_k = jnp.argmin(k_err_key)
    return _First(e_key, which, has_err, i_tok, i_str, i_gl, i_k, nul_ls)


def _error_code(fe: _First, te: _TokErr, s: _Str, g: _Glue, ind: _Indent):
    """The first error's code * 64 + detail, from the kind that holds it."""
    which, i_k, gl_dec = fe.which, fe.i_k, g.gl_dec
    return jnp.select(
        [which == 0, which == 1, which == 2, which == 3, which == 4, which == 5],
        [
            index(te.err, fe.i_tok).astype(I32),
            index(s.str_err, fe.i_str),
            Code.SYNTAX * 64
            + jnp.where(
                index(gl_dec, fe.i_gl), Syntax.INVALID_DECIMAL, Syntax.INVALID_NUMBER
            ).astype(I32),
            jnp.where(
                index(ind.k_bad_dedent, i_k),
                Code.INDENTATION * 64 + Syntax.UNINDENT_MISMATCH,
                jnp.where(
                    index(ind.k_too_many, i_k),
                    Code.INDENTATION * 64 + Syntax.TOO_DEEP,
                    Code.LIMIT * 64 + Limit.INDENT_DEPTH,
                ),
            ),
            _c(Code.SYNTAX * 64 + Syntax.EOF_IN_MULTILINE, I32),
            _c(Code.SYNTAX * 64 + Syntax.NULL_BYTES, I32),
        ],
        0,
    )


def _error_position(
    x: _Bytes, ln: _Lines, ind: _Indent, se: _StrEnds, s: _Str, fe: _First, eof: _Eof
):
    """The first error's line and column: at its byte, but at ENDMARKER's line for EOF
    and after the line's last byte for an unindent."""
    which, i_k = fe.which, fe.i_k
    i_k_pos = index(ind.k_pos, i_k)
    k_end = gather(se.nl_next, i_k_pos, 0)
    line_len = k_end - index(ind.k_ls, i_k) - (gather(x.b, k_end - 1, 0) == ord("\r")).astype(I32)
    e_byte = jnp.select(
        [which == 0, which == 1, which == 2, which == 3, which == 5],
        [fe.i_tok, index(s.str_at, fe.i_str), fe.i_gl, i_k_pos, fe.nul_ls],
        0,
    )
    e_line = jnp.where(which == 4, eof.l_end, gather(ln.line_no, e_byte, 0))
    e_col = jnp.select(
        [which == 3, which == 4, which == 5],
        [
            # CPython's compile() puts an unindent's caret after the line's last byte
            # (tokenize: before the first non-blank one)
            jnp.where(index(ind.k_bad_dedent, i_k), line_len, 0),
            0,
            0,
        ],
        gather(ln.col, e_byte, 0),
    )
    return e_line, e_col


class _Count(NamedTuple):
    """How many tokens come out, and where each byte's go."""

    base: object  # Int32[N]  the output slot of the byte's first token
    total_bytes: object  # the tokens of all bytes (without EOF's)
    n_emit: object  # the tokens emitted before the error (or all, with EOF's)
    over: object  # more tokens than the limit T (an error)


def _token_count(x: _Bytes, ind: _Indent, emit, fe: _First, eof: _Eof, T: int) -> _Count:
    """Number the tokens in order (events keyed 4*byte + 1 for line tokens, + 2 for a
    token): a prefix sum of the tokens per byte, cut at the first error."""
    cnt_line = ind.cnt_line
    cnt_tok = emit.astype(I32)
    per_byte = cnt_line + cnt_tok
    base = jnp.cumsum(per_byte) - per_byte
    total_bytes = jnp.sum(per_byte)
    # tokens strictly before the error event
    eb = fe.e_key // 4
    esub = fe.e_key % 4
    before_err = jnp.where(
        fe.e_key >= 4 * x.n,
        total_bytes,
        gather(base, eb, 0) + jnp.where(esub >= 2, gather(cnt_line, eb, 0), 0),
    )
    n_emit = jnp.where(fe.has_err, before_err, total_bytes + eof.eof_count)
    # the token limit: the first token that does not fit is the error
    # (host_lex checks the token count before the depth of an INDENT at index T)
    depth_err = (fe.which == 3) & ~index(ind.k_bad_dedent, fe.i_k)
    over = (n_emit > T) | (fe.has_err & depth_err & (n_emit >= T))
    return _Count(base, total_bytes, n_emit, over)


class _Slots(NamedTuple):
    """The event that covers each of the T + 1 output slots."""

    TS: int  # T + 1 (static)
    slots: object  # Int32[TS]  0 .. TS-1
    tok_base: object  # Int32[N]  (at a token start) its slot
    typ: object  # Int32[TS]  1 a line's INDENT / DEDENT, 2 a token, 3 EOF, 0 none
    eid: object  # Int32[TS]  the event's statement line (1) or byte (2)
    off: object  # Int32[TS]  the slot's offset within its event's tokens


def _slot_events(x: _Bytes, ind: _Indent, emit, cnt: _Count, fe: _First, T: int) -> _Slots:
    """Scatter each event to the slot of its first token; every slot then finds the
    event covering it by a prefix max."""
    TS = T + 1
    slots = jnp.arange(TS, dtype=I32)
    tok_base = cnt.base + ind.cnt_line
    # one scatter per kind of event, of type | id << 2 (-1: no event starts at the slot;
    # no two events share a slot)
    ev = jnp.full(TS, -1, I32)

    def put(ev, bases, ok, typ, ids):
        return ev.at[jnp.where(ok, bases, TS)].set(typ | (ids << 2), mode="drop")

    k_base = gather(cnt.base, ind.k_pos, 0)
    ev = put(ev, k_base, ind.k_ok & (ind.k_count > 0), 1, ind.kk)
    ev = put(ev, tok_base, emit, 2, x.idx)
    ev = put(ev, cnt.total_bytes[None], ~fe.has_err[None], 3, jnp.zeros(1, I32))
    cover = _cummax(jnp.where(ev >= 0, slots, -1))
    pk = ev[jnp.maximum(cover, 0)]
    typ = jnp.where(cover >= 0, pk & 3, 0)
    eid = jnp.where(cover >= 0, pk >> 2, 0)
    off = slots - cover
    return _Slots(TS, slots, tok_base, typ, eid, off)


def _line_events(ind: _Indent, sl: _Slots, K: int) -> _Ev:
    """The INDENT (at the line's start) or DEDENTs (at its first token) of a slot's
    statement line."""
    kid = jnp.clip(sl.eid, 0, K - 1)
    l_ind = index(ind.k_indent, kid)
    l_line = index(ind.k_line, kid)
    l_pos = index(ind.k_pos, kid)
    l_pcol = l_pos - index(ind.k_ls, kid)
    return _Ev(
        kind=jnp.where(l_ind, Tok.INDENT, Tok.DEDENT),
        start=jnp.where(l_ind, index(ind.k_ls, kid), l_pos),
        end=l_pos,
        line=l_line,
        col=jnp.where(l_ind, 0, l_pcol),
        end_line=l_line,
        end_col=l_pcol,
        value=jnp.zeros(sl.TS, I32),
    )


def _token_events(ln: _Lines, em: _Emit, tid) -> _Ev:
    """The token at byte tid of each slot."""
    t_s = tid
    t_e = index(em.real_end, tid)
    t_line = index(ln.line_no, tid)
    t_col = index(ln.col, tid)
    return _Ev(
        kind=index(em.kind, tid),
        start=t_s,
        end=t_e,
        line=t_line,
        col=t_col,
        end_line=t_line,
        end_col=t_col + t_e - t_s,
        value=index(em.value, tid),
    )


def _eof_events(x: _Bytes, ind: _Indent, eof: _Eof, sl: _Slots) -> _Ev:
    """The EOF tokens of each slot: [NL ''] [NEWLINE ''] DEDENT* ENDMARKER."""
    off, n = sl.off, x.n
    o_nl = eof.eof_nl.astype(I32)
    o_nw = o_nl + eof.eof_newline.astype(I32)
    o_dd = o_nw + ind.depth_final
    e_kind = jnp.where(
        off < o_nl,
        Tok.NL,
        jnp.where(off < o_nw, Tok.NEWLINE, jnp.where(off < o_dd, Tok.DEDENT, Tok.ENDMARKER)),
    )
    at_last = off < o_nw
    last_line_no = eof.n_nl_total + 1
    # host_lex's byte offset of (l_end, 0): the start of that line when it exists
    eof_at = jnp.where(eof.ws_only_break, eof.ls_last, n)
    l_end, last_len = eof.l_end, eof.last_len
    return _Ev(
        kind=e_kind,
        start=jnp.where(at_last, n, eof_at),
        end=jnp.where(at_last, n, eof_at),
        line=jnp.where(at_last, last_line_no, l_end),
        col=jnp.where(at_last, last_len, 0),
        end_line=jnp.where(at_last, last_line_no, l_end),
        end_col=jnp.where(at_last, last_len + jnp.where(off >= o_nl, 1, 0), 0),
        value=jnp.zeros(sl.TS, I32),
    )


class _Out(NamedTuple):
    """The filled output slots."""

    live: object  # Bool[TS]  the slot holds a token
    ev: _Ev  # Int32[TS] each  the tokens' fields (0 past the last)
    over_line: object  # the line of token T (where the token limit's error goes)
    over_col: object  # its column
    n_tokens: object  # the tokens kept (at most T)


def _merge_events(sl: _Slots, n_emit, line_ev: _Ev, tok_ev: _Ev, eof_ev: _Ev, T: int) -> _Out:
    """Fill each slot from the kind of event that covers it."""
    live = sl.slots < n_emit
    fields = []
    for f_line, f_tok, f_eof in zip(line_ev, tok_ev, eof_ev, strict=True):
        v = jnp.where(sl.typ == 1, f_line, jnp.where(sl.typ == 2, f_tok, f_eof))
        fields.append(jnp.where(live, v, 0).astype(I32))
    out = _Ev(*fields)

    # the token limit error at token T (if it comes before any other error)
    over_line = out.line[T]
    over_col = out.col[T]
    n_tokens = jnp.minimum(n_emit, T)
    return _Out(live, out, over_line, over_col, n_tokens)


def _name_values(x: _Bytes, tok: _Toks, c: _Kinds, w: _Words, sl: _Slots, o: _Out, tid, T, tables):
    """The values of the output slots, with user names interned."""
    value_out = _intern(
        o.ev,
        sl.typ,
        sl.eid,
        x.b,
        x.idx,
        tok.is_start,
        c.t_name & w.n_user,
        tok.tok_start,
        tok.tok_end,
        sl.tok_base,
        x.N,
        T,
        tables[3:],
    )
    return jnp.where(o.live & (sl.typ == 2) & index(w.n_user, tid), value_out, o.ev.value)


class _ErrAt(NamedTuple):
    """The first error, before the global checks."""

    code_d: object  # code * 64 + detail (0 = none)
    line: object
    col: object


def _finish(
    src, x: _Bytes, ln: _Lines, cnt: _Count, sl: _Slots, o: _Out, value_out, has_err, e: _ErrAt, T
):
    """Put the global checks first (the source too long, a non-ASCII byte, then the
    token limit) and cut the slots to T tokens."""
    N = x.N
    non_ascii = x.valid & (src.astype(I32) >= 0x80)
    na_any = jnp.any(non_ascii)
    na_i = jnp.argmax(non_ascii)
    too_long = x.length > N
    over, n_emit = cnt.over, cnt.n_emit
    code_d = jnp.where(over, Code.LIMIT * 64 + Limit.TOKENS, jnp.where(has_err, e.code_d, 0))
    e_line = jnp.where(over & (n_emit > T), o.over_line, e.line)
    e_col = jnp.where(over & (n_emit > T), o.over_col, e.col)
    code_d = jnp.where(na_any, Code.UNSUPPORTED * 64 + Unsupported.NON_ASCII, code_d)
    e_line = jnp.where(na_any, index(ln.line_no, na_i), e_line)
    e_col = jnp.where(na_any, index(ln.col, na_i), e_col)
    code_d = jnp.where(too_long, Code.LIMIT * 64 + Limit.SOURCE_BYTES, code_d)
    e_line = jnp.where(too_long, 1, e_line)
    e_col = jnp.where(too_long, 0, e_col)
    n_tokens = jnp.where(na_any | too_long, 0, o.n_tokens)

    keep = sl.slots[:T] < n_tokens
    fields = [jnp.where(keep, f[:T], 0) for f in o.ev]
    fields[7] = jnp.where(keep, value_out[:T], 0)
    toks = Tokens(*fields, n_tokens=n_tokens.astype(I32))
    error = Error(
        code=(code_d // 64).astype(I32),
        line=jnp.where(code_d == 0, 0, e_line).astype(I32),
        col=jnp.where(code_d == 0, 0, e_col).astype(I32),
        detail=(code_d % 64).astype(I32),
    )
    return toks, error


class _Front(NamedTuple):
    """What ``_lex_front`` hands to ``_lex_back``: every per-byte analysis up to the
    glued numbers (arrays only: ``_Bytes``, which has a static field, is recomputed)."""

    d: _Dfa
    tok: _Toks
    ln: _Lines
    c: _Kinds
    st: _Stmts
    ind: _Indent
    num: _Num
    w: _Words
    ops: _Ops
    se: _StrEnds
    s: _Str
    em: _Emit
    te: _TokErr
    g: _Glue


def _lex_one(src, length, tables, limits: Limits):
    """One program's tokens and first error: the steps above, in order. Per byte: the
    DFA's tokens, lines, token kinds, statement lines and their indentation, values,
    each kind of error; then the first error, the token count, and the T + 1 output
    slots filled from the events that cover them; last the global checks."""
    T = limits.max_tokens
    K = T + 2  # statement lines kept (each but the last ends with a NEWLINE token)
    x = _read_bytes(src, length)
    d = _dfa_tokens(x, tables)
    tok = _split_numbers(x, d)
    ln = _lines(x)
    c = _classify(x, tok)
    st = _statements(x, tok, ln)
    ind = _indentation(x, ln, st, limits, K)
    num = _number_values(x, d, tok)
    w = _keywords(x, c)
    ops = _operators(x, c)
    se = _string_ends(x, ln)
    s = _string_errors(x, tok, c, se)
    em = _token_kinds(tok, d, c, st, num, w, ops)
    te = _token_errors(x, d, c, st, num, w, ops, em.emit)
    g = _glued_numbers(x, d, c, num, w, te.num_err)
    key_str = jnp.where(c.t_quote, 4 * s.str_at + 2, _BIG)  # strings' error keys
    eof = _eof(x, tok, ln, st, ind)
    fe = _first_error(x, ln, ind, te, key_str, g, eof)
    e = _ErrAt(_error_code(fe, te, s, g, ind), *_error_position(x, ln, ind, se, s, fe, eof))
    cnt = _token_count(x, ind, te.emit, fe, eof, T)
    sl = _slot_events(x, ind, te.emit, cnt, fe, T)
    line_ev = _line_events(ind, sl, K)
    tid = jnp.clip(sl.eid, 0, x.N - 1)  # each slot's token byte (the name values read it too)
    tok_ev = _token_events(ln, em, tid)
    eof_ev = _eof_events(x, ind, eof, sl)
    o = _merge_events(sl, cnt.n_emit, line_ev, tok_ev, eof_ev, T)
    value_out = _name_values(x, tok, c, w, sl, o, tid, T, tables)
    return _finish(src, x, ln, cnt, sl, o, value_out, fe.has_err, e, T)


# _lex_one's steps split in two (``lex_front`` / ``lex_back``), for the GPU's split
# compile (jaxcc.compiler): the same steps in the same order (tests/test_lexer.py checks
# lex_back(lex_front(...)) == lex). _lex_one keeps its one body so that the one-jit
# lexer traces exactly as before.


def _lex_front(src, length, tables, limits: Limits) -> _Front:
    K = limits.max_tokens + 2  # statement lines kept (each but the last ends with a NEWLINE)
    x = _read_bytes(src, length)
    d = _dfa_tokens(x, tables)
    tok = _split_numbers(x, d)
    ln = _lines(x)
    c = _classify(x, tok)
    st = _statements(x, tok, ln)
    ind = _indentation(x, ln, st, limits, K)
    num = _number_values(x, d, tok)
    w = _keywords(x, c)
    ops = _operators(x, c)
    se = _string_ends(x, ln)
    s = _string_errors(x, tok, c, se)
    em = _token_kinds(tok, d, c, st, num, w, ops)
    te = _token_errors(x, d, c, st, num, w, ops, em.emit)
    g = _glued_numbers(x, d, c, num, w, te.num_err)
    return _Front(d, tok, ln, c, st, ind, num, w, ops, se, s, em, te, g)


def _lex_back(src, length, f: _Front, tables, limits: Limits):
    T = limits.max_tokens
    K = T + 2
    x = _read_bytes(src, length)
    d, tok, ln, c, st, ind, num, w, ops, se, s, em, te, g = f
    key_str = jnp.where(c.t_quote, 4 * s.str_at + 2, _BIG)  # strings' error keys
    eof = _eof(x, tok, ln, st, ind)
    fe = _first_error(x, ln, ind, te, key_str, g, eof)
    e = _ErrAt(_error_code(fe, te, s, g, ind), *_error_position(x, ln, ind, se, s, fe, eof))
    cnt = _token_count(x, ind, te.emit, fe, eof, T)
    sl = _slot_events(x, ind, te.emit, cnt, fe, T)
    line_ev = _line_events(ind, sl, K)
    tid = jnp.clip(sl.eid, 0, x.N - 1)  # each slot's token byte (the name values read it too)
    tok_ev = _token_events(ln, em, tid)
    eof_ev = _eof_events(x, ind, eof, sl)
    o = _merge_events(sl, cnt.n_emit, line_ev, tok_ev, eof_ev, T)
    value_out = _name_values(x, tok, c, w, sl, o, tid, T, tables)
    return _finish(src, x, ln, cnt, sl, o, value_out, fe.has_err, e, T)


class _Stack(NamedTuple):
    depth: object  # Int32[K]  indentation levels (above 0) after each statement line
    mismatch: object  # Bool[K]  (on a dedent) the line's column is not on the stack before it


def _indent_stack(c, ok, max_indent: int, col_hi: int | None = None):
    """tokenize's indentation stack, in parallel over the statement lines.

    Equivalent sequential Python (without the errors)::

        stack = [0]
        for k, col in enumerate(c):
            if col > stack[-1]: stack.append(col)
            mismatch[k] = col not in stack
            while col < stack[-1]: stack.pop()
            depth[k] = len(stack) - 1

    With no error before line k, the stack after k is the chain k -> prev_lt(k) -> ...
    where prev_lt(k) is the latest earlier line with a smaller column; so depth is the
    chain's length (pointer jumping, enough rounds to exceed max_indent), and a dedent
    to col is valid iff the latest earlier line with column <= col has column == col.
    prev_lt / prev_le come from a sparse table of window minima and binary lifting.

    col_hi (static): a bound on the columns of the lines in ``ok``; when it and K fit,
    the columns, pointers and depths are int16 (the sentinel for no line is then int16's
    max instead of _BIG: above every column either way), the results are the same.
    """
    K = c.shape[0]
    narrow = col_hi is not None and max(col_hi, K + 1) < _I16_TOP
    dt, big = (jnp.int16, _I16_TOP) if narrow else (I32, _BIG)
    c = jnp.where(ok, c, big).astype(dt)
    P = max(1, int(np.ceil(np.log2(K + 1))))
    mins = [c]
    for p in range(P - 1):
        m = mins[-1]
        sh = 1 << p
        mins.append(jnp.minimum(m, jnp.concatenate([jnp.full((sh,), big, dt), m[:-sh]])))
    kk = jnp.arange(K, dtype=dt)

    def prev_where(strict):
        posk = kk - 1
        for p in reversed(range(P)):
            w = gather(mins[p], posk, big)
            skip = (posk >= 0) & jnp.where(strict, w >= c, w > c)
            posk = jnp.where(skip, posk - (1 << p), posk)
        return jnp.maximum(posk, -1)

    plt = prev_where(True)
    ple = prev_where(False)
    c_ple = jnp.where(ple >= 0, gather(c, ple, 0), 0)
    mismatch = (c > 0) & (c_ple != c)
    acc = jnp.where(c > 0, 1, 0).astype(dt)
    ptr = jnp.where(c > 0, plt, -1)
    rounds = int(np.ceil(np.log2(max_indent + 2))) + 1
    for _ in range(rounds):
        has = ptr >= 0
        acc = acc + jnp.where(has, gather(acc, ptr, 0), 0)
        ptr = jnp.where(has, gather(ptr, ptr, -1), -1)
    return _Stack(depth=acc.astype(I32), mismatch=mismatch)


def _intern_key_bits(N: int, TS: int) -> tuple[int, int] | None:
    """(bits of a length in [0, N], bits of a slot in [0, TS)) where a user flag, a length
    and a slot pack into one non-negative int32, else None."""
    n_bits, s_bits = int(N).bit_length(), int(TS - 1).bit_length()
    return (n_bits, s_bits) if 1 + n_bits + s_bits <= 31 else None


def _intern(
    out, typ, eid, b, idx, is_start, user_start, tok_start, tok_end, tok_base, N, T, hash_tables
):
    """Interned ids of user names in the output slots: equal names get equal ids, dense
    from N_RESERVED_NAMES in order of first occurrence.

    Equivalent sequential Python::

        ids = {}
        for t in slots:
            if is_user_name[t]:
                value[t] = ids.setdefault(text[t], N_RESERVED_NAMES + len(ids))

    Names are sorted by (hash, user or not, length, slot); within a run of equal keys
    each name is compared byte by byte with the run's first unresolved name (rounds
    repeat only while two different names of one length share a hash), so collisions
    are resolved exactly. The sort carries two operands where the flag, length and slot
    fit one int32 beside the hash (``_intern_key_bits``; every corpus's limits), else
    three: on an H100 the five it had (two hashes) took 13.4 ms per 65,536 programs of
    the large corpus, the lexer's largest step (docs/benchmarks.md, twentieth run).
    """
    TS = T + 1
    tid = jnp.clip(eid, 0, N - 1)
    is_user = (typ == 2) & index(user_start, tid)
    # a polynomial hash of each token's bytes: sum b[i] * mul**i, scaled by mul**-start
    pw, inv = hash_tables[0:2]
    h = jnp.cumsum(
        jnp.where(idx < N, (b & 0xFF).astype(u32) * jnp.asarray(pw), 0).astype(u32), dtype=u32
    )
    h_before = _shift_right(h, _c(0, u32))
    e = index(tok_end, tid)
    hv = (gather(h, e - 1, 0).astype(u32) - index(h_before, tid)) * jnp.asarray(inv)[tid]
    hv = jnp.where(is_user, hv, _c(0, u32))
    nlen = jnp.where(is_user, out.end - out.start, 0)
    flag = jnp.where(is_user, 0, 1).astype(I32)
    slots = jnp.arange(TS, dtype=I32)
    bits = _intern_key_bits(N, TS)
    if bits is not None:  # (flag, length, slot) in one int32: a sort of two operands
        n_bits, s_bits = bits
        packed = (flag << (n_bits + s_bits)) | (jnp.clip(nlen, 0, N) << s_bits) | slots
        sh, sp = lax.sort((hv, packed), num_keys=2)
        perm = sp & ((1 << s_bits) - 1)
        rest = sp >> s_bits  # (flag, length): equal exactly where both are
        sf = rest >> n_bits
    else:
        sh, rest, perm = lax.sort((hv, (flag << 30) | jnp.clip(nlen, 0, N), slots), num_keys=3)
        sf = rest >> 30
    same_key = (
        (sf == 0)
        & (_shift_right(sf, 1) == 0)
        & (sh == _shift_right(sh, _c(0, u32)))
        & (rest == _shift_right(rest, -1))
    )
    run_start = _cummax(jnp.where(same_key, 0, slots))  # sorted: first of the equal keys
    rank = set_rows(jnp.zeros(TS, I32), perm, slots)  # perm: a permutation
    # every byte of a user name: its slot's sorted position
    s_of = tok_start
    slot_of = index(jnp.where(is_start, tok_base, TS), s_of)
    in_user = index(user_start, s_of) & (slot_of < TS) & (idx < index(tok_end, s_of))
    r_of = index(rank, jnp.clip(slot_of, 0, TS - 1))

    def resolve(state):
        # each unresolved name is compared byte by byte with the first unresolved name
        # of its key run (the earliest slot); equal ones take it as representative
        unresolved, rep = state
        first_u = _rcummin(jnp.where(unresolved, slots, _BIG))
        lead = jnp.clip(index(first_u, run_start), 0, TS - 1)  # Int32[TS] sorted positions
        other = index(out.start, index(perm, index(lead, r_of))) + (idx - s_of)
        mism = in_user & index(unresolved, r_of) & (gather(b, other, -1) != b)
        differs = set_at(jnp.zeros(TS, bool), jnp.where(mism, r_of, TS), True)
        # a lead always settles (it is its own representative): on a consistent input
        # it matches itself anyway, and forcing it bounds the loop by TS rounds even
        # where a malformed token's bytes and slot disagree (lexer-error programs)
        same = unresolved & (~differs | (lead == slots))
        return unresolved & ~same, jnp.where(same, lead, rep)

    # one round settles every name unless two different names share a key
    state = resolve((sf == 0, slots))
    _, rep_sorted = lax.while_loop(lambda st: jnp.any(st[0]), resolve, state)
    rep = index(perm, index(rep_sorted, rank))  # slot of the first occurrence of each slot's name
    first = is_user & (rep == slots)
    ids = N_RESERVED_NAMES + _cumsum(first, TS) - 1
    return index(ids, rep)


# --------------------------------------------------------------------------- API


@functools.cache
def _host_tables(n: int, hash_muls: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    hp = [x for m in hash_muls for x in LT.hash_powers(n, m)]
    return tuple(np.asarray(x) for x in (*LT.merge_tables(), *hp))


_DEVICE_TABLES: dict = {}


def dfa_tables(n: int, hash_muls: tuple[int, ...] = LT.HASH_MULS):
    """Arrays the jitted lexer takes as arguments (not constants: a multi-MB constant is
    copied into every level of a scan and compiles slowly): the DFA's merge tables
    (GEN_ID, MERGE, STATE_OF) and, for sources of n bytes, the powers m**i and m**-i
    mod 2**32 of the name hash's multiplier.

    Device copies are cached only when made outside a trace: under jit, jnp.asarray
    gives a tracer, and a cached tracer would leak into the next trace."""
    key = (n, tuple(hash_muls))
    if key in _DEVICE_TABLES:
        return _DEVICE_TABLES[key]
    dev = tuple(jnp.asarray(x) for x in _host_tables(*key))
    if not any(isinstance(x, jax.core.Tracer) for x in dev):
        _DEVICE_TABLES[key] = dev
    return dev


# A batch of more than CHUNK_BYTES // N programs (N bytes each) is lexed that many
# programs at a time, one chunk after another (lax.map): the lexer's temporaries (about
# 45 KB a small program: per-byte columns) then take a chunk's worth of memory, not the
# batch's, while each kernel still spans 2**24 bytes, enough to fill a GPU. On an H100
# (docs/benchmarks.md, "GPU results, tenth run") the lexer alone on 65,536
# programs held 50.4 -> 25.8 KB a small program and 117 -> 30.4 KB a medium one, and
# ran faster: 22.2 -> 16.4 ms small, 46.0 -> 33.4 ms medium (chunks of 2**22 or 2**23
# bytes were slower than 2**24).
CHUNK_BYTES = 1 << 24


def _chunk(chunk: int | None, n_bytes: int) -> int:
    return max(1, CHUNK_BYTES // n_bytes) if chunk is None else chunk


def _lex_batched(source, length, tables, limits, chunk: int = 0, widths: tuple = ()):
    if widths:
        return _lex_tiered(source, length, tables, limits, chunk, widths)
    return map_batch(lambda a: _lex_one(*a, tables, limits), (source, length), chunk)


# Two widths. A program's tokens and error do not depend on how far past its length its
# bytes are padded (tests/test_lexer.py checks it), so a program of at most W bytes can
# be lexed as UInt8[W]: the per-byte work, most of the lexer's, shrinks with W. With
# tiers the batch is sorted by length and lexed at the cheapest of the widths
# TIER_FRACTIONS of N (or N alone), counted in bytes lexed (``arrays.by_width``): all of
# it at width W (those longer come out wrong), then, from the long end of the sorted
# batch, LONG_CHUNK_BYTES // N programs at a time at width N, as many chunks as cover the
# programs longer than W (a while loop: none when all fit). The results go back in the
# batch's order. Each narrow width and the chunks of long programs are more copies of the
# lexer for XLA to compile, so tiers are used only for large batches on a GPU
# (``tier_widths``). 3/8 is there for the small corpus (programs of at most 146 bytes of
# N = 512: on an H200 the lexer took 9.4 ms at 192 bytes against 13.0 at 256); 1/2 for
# the medium one (99% of its programs fit N / 2, 63% fit 3 N / 8).
TIER_FRACTIONS = ((3, 8), (1, 2))
TIER_MIN_WIDTH = 128
TIER_MIN_BATCH = 4096
LONG_CHUNK_BYTES = 1 << 22  # bytes per chunk of long programs (fits in a GPU's L2)


def use_tiers(tiers: bool | None, batch: int) -> bool:
    """``tiers``, or for None: a GPU here and a batch of at least TIER_MIN_BATCH (the rule
    the middle end's two widths follow too)."""
    if tiers is not None:
        return tiers
    from jaxcc.vm_pallas import _interpret_here  # the VM's rule for "a GPU here"

    return batch >= TIER_MIN_BATCH and not _interpret_here()


def narrow_widths(n: int, least: int) -> tuple[int, ...]:
    """The widths TIER_FRACTIONS of ``n`` that are whole and at least ``least``."""
    return tuple(n * a // b for a, b in TIER_FRACTIONS if n * a % b == 0 and n * a // b >= least)


def tier_widths(n_bytes: int, batch: int, tiers: bool | None = None) -> tuple[int, ...]:
    """The widths ``lex`` chooses from, the narrower ones and N last (e.g. (192, 256, 512)),
    or () for one width (``use_tiers``)."""
    ws = narrow_widths(n_bytes, TIER_MIN_WIDTH)
    if not use_tiers(tiers, batch) or not ws:
        return ()
    return (*ws, n_bytes)


def _lex_tiered(source, length, tables, limits, chunk: int, widths: tuple):
    """``_lex_batched`` with the programs that fit one of the narrower ``widths`` (all but
    the last) lexed at the cheapest of them and the others at the full width (see
    TIER_FRACTIONS' comment)."""
    N = source.shape[-1]

    def one_at(w):
        tw = (*tables[:3], *(t[:w] for t in tables[3:]))  # hash powers of w bytes
        return lambda a: _lex_one(*a, tw, limits)

    return by_width(
        one_at,
        (source, length),
        length,
        N,
        widths[:-1],
        lambda a, w: (a[0][:, :w], a[1]),
        # in chunks of LONG_CHUNK_BYTES a batch of long programs only was 18% slower than
        # one width (large corpus), hence by_width's one-width branch
        (lambda w: _chunk(None, w), LONG_CHUNK_BYTES // N, chunk),
    )


_lex_jit = jax.jit(_lex_batched, static_argnames=("limits", "chunk", "widths"))


def lex(
    source, length, limits: Limits = DEFAULT, chunk: int | None = None, tiers: bool | None = None
) -> tuple[Tokens, Error]:
    """Tokens and the first error of each program.

    source: UInt8[B, N] (N = limits.max_source_bytes; bytes past length are ignored) or
    UInt8[N] for one program; length: Int32[B] (or a scalar). Works under jit and vmap.
    ``chunk`` (static): a batch of more than ``chunk`` programs is lexed ``chunk``
    programs at a time (``lax.map``), so its temporaries are ``chunk`` programs' (0: the
    whole batch at once; None: CHUNK_BYTES // N programs); the result is the same either
    way. ``tiers`` (static): lex the programs that fit a narrower width (3 N / 8 or N / 2,
    the cheaper: ``tier_widths``) at it (None: on a GPU for a batch of at least
    TIER_MIN_BATCH); the result is the same. Raises ValueError for limits beyond what its
    error keys hold (``Limits.check``).
    """
    limits.check()
    source = jnp.asarray(source)
    length = jnp.asarray(length, I32)
    if source.ndim == 1:
        toks, err = _lex_jit(source[None], length[None], dfa_tables(source.shape[-1]), limits)
        return jax.tree.map(lambda x: x[0], (toks, err))
    B, N = source.shape
    chunk = _chunk(chunk, N)
    widths = tier_widths(N, B, tiers)
    return _lex_jit(source, length, dfa_tables(N), limits, chunk, widths)


def lex_front(source, length, limits: Limits = DEFAULT) -> _Front:
    """The first half of ``lex`` on a batch (UInt8[B, N], Int32[B]): the per-byte
    analyses, for a caller that compiles the lexer as two jits (``jaxcc.compiler``'s
    split compile); ``lex_back(source, length, lex_front(source, length, limits),
    limits)`` equals ``lex(source, length, limits)``."""
    limits.check()
    front = functools.partial(_lex_front, limits=limits)
    tables = dfa_tables(source.shape[-1])
    return jax.vmap(front, in_axes=(0, 0, None))(source, jnp.asarray(length, I32), tables)


def lex_back(source, length, front: _Front, limits: Limits = DEFAULT) -> tuple[Tokens, Error]:
    """The second half of ``lex`` (see ``lex_front``): tokens and the first error."""
    back = functools.partial(_lex_back, limits=limits)
    tables = dfa_tables(source.shape[-1])
    return jax.vmap(back, in_axes=(0, 0, 0, None))(source, jnp.asarray(length, I32), front,
                                                   tables)  # fmt: skip


def encode(sources, limits: Limits = DEFAULT) -> tuple[np.ndarray, np.ndarray]:
    """Pad sources (str or bytes) to UInt8[B, max_source_bytes]; a source too long keeps
    its true length, so that lex reports Limit.SOURCE_BYTES instead of truncating it.
    A UTF-8 byte-order mark at the start is dropped, as CPython skips it (``lex`` itself
    takes it for non-ASCII bytes)."""
    N = limits.max_source_bytes
    out = np.zeros((len(sources), N), np.uint8)
    lengths = np.zeros(len(sources), np.int32)
    for i, s in enumerate(sources):
        s = without_bom(s)
        data = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s
        k = min(len(data), N)
        out[i, :k] = np.frombuffer(data[:k], np.uint8)
        lengths[i] = len(data)
    return out, lengths


# --------------------------------------------------------------------------- CLI


def format_tokens(data: bytes, toks, n: int, exact: bool = False) -> list[str]:
    """The lines `python -m tokenize [-e]` prints for one program's tokens (numpy)."""
    from jaxcc.tokens import tokenize_name

    lines = [f"{'0,0-0,0:':<20}{'ENCODING':<15}{'utf-8'!r:<15}"]
    text = data.decode("ascii", "replace")
    for t in range(n):
        k = int(toks.kind[t])
        s, e = int(toks.start[t]), int(toks.end[t])
        string = text[s:e]
        rng = f"{int(toks.line[t])},{int(toks.col[t])}-{int(toks.end_line[t])},{int(toks.end_col[t])}:"
        lines.append(f"{rng:<20}{tokenize_name(k, exact):<15}{string!r:<15}")
    return lines


def cli_limits(n_bytes: int) -> Limits:
    """Limits for one file of n_bytes: N the next power of two (>= 512), T = 2N. Every
    token but DEDENTs and the EOF ones covers a byte, and DEDENTs never outnumber the
    INDENTs (which cover bytes), so T = 2N never overflows; max_indent as CPython's 100."""
    from jaxcc.limits import CLI

    N = 512
    while N < n_bytes:
        N *= 2
    return Limits(max_source_bytes=N, max_tokens=2 * N, max_indent=CLI.max_indent)


def main(argv=None) -> int:
    import argparse

    from jaxcc.format import format_error

    ap = argparse.ArgumentParser(prog="python -m jaxcc.lexer")
    ap.add_argument("filename")
    ap.add_argument("-e", "--exact", action="store_true")
    args = ap.parse_args(argv)
    with open(args.filename, "rb") as f:
        data = without_bom(f.read())  # tokenize skips it too
    limits = cli_limits(len(data))
    src, length = encode([data], limits)
    toks, err = lex(src, length, limits)
    toks = jax.tree.map(lambda x: np.asarray(x[0]), toks)
    err = jax.tree.map(lambda x: int(np.asarray(x)[0]), err)
    if err.code != Code.OK:  # shown as jaxcc run shows it (jaxcc.format)
        sys.stderr.write(format_error(err, data, args.filename))
        return 1
    for line in format_tokens(data, toks, int(toks.n_tokens), args.exact):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
