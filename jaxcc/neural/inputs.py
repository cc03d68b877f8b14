"""What the model reads of a program: its lexer tokens, compacted and described.

``source_features(tokens, nlimits)`` drops COMMENT, NL and PAD tokens (they carry no
meaning the compiler uses) and describes each remaining token by its kind, its interned
name id (NAME), its literal slot and a bucket of its value (NUMBER) and its line. The
model copies names and literals by these ids (``vocab.py``), so it never spells digits.

A program outside the neural path's bounds (too many tokens, names, literals or lines)
gets a nonzero ``error`` (``Bound``); the caller compiles it another way.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxcc.neural import vocab as V
from jaxcc.ops import BUILTIN_ID
from jaxcc.tokens import Tok

_PRINT_ID = BUILTIN_ID["print"]

N_BUCKETS = 67  # value buckets: 0..63 exact, 64: >= 64, 65: negative, 66: not a number


class Bound(enum.IntEnum):
    """Why a program is outside the neural path (0: inside)."""

    OK = 0
    TOKENS = 1  # more than max_src tokens (COMMENT and NL not counted)
    NAMES = 2  # a name id >= N_VARS
    LITERALS = 3  # more than N_LITS number literals
    LINES = 4  # a line > N_LINES
    FUNCS = 5  # more functions than the neural path holds
    OUTPUT = 6  # the sample did not finish (set by the sampler, never by the mask)


class Src(NamedTuple):
    """Model input for a batch (leading axis B; none for one program). S = max_src."""

    kind: object  # Int32[Array, "B S"]  Tok (PAD beyond n)
    name: object  # Int32[Array, "B S"]  name id of NAME tokens, else 0
    lit: object  # Int32[Array, "B S"]  literal slot of NUMBER tokens, else 0
    clit: object  # Int32[Array, "B S"]  canonical slot: the first NUMBER with this value
    indent: object  # Int32[Array, "B S"]  block depth (INDENTs minus DEDENTs so far), <= 15
    paren: object  # Int32[Array, "B S"]  bracket depth before the token, <= 15
    col: object  # Int32[Array, "B S"]  index of the token in its logical line, <= 63
    bucket: object  # Int32[Array, "B S"]  value bucket (66 for non-numbers)
    line: object  # Int32[Array, "B S"]  line, clipped to [0, N_LINES]
    n: object  # Int32[Array, "B"]  tokens kept
    lits: object  # Int32[Array, "B N_LITS"]  literal values (0 beyond n_lits)
    n_lits: object  # Int32[Array, "B"]
    n_lines: object  # Int32[Array, "B"]  the last token's line
    error: object  # Int32[Array, "B"]  Bound
    # Int32[Array, "B PF PP"]  the front end's print items (Debug.print_items), read by the
    # decoding mask only, never by the model; None: no typed mask
    print_items: object = None
    # Int32[Array, "B L"]  L = N_LINES + 1: for a line l where an ``if``, ``elif``,
    # ``while`` or ``for`` statement starts, the last line of its body with code (see
    # code_lines; ``pass`` lines left out: they make no instruction); 0 elsewhere. Read
    # by the typed mask only.
    block_end: object = None
    # Int32[Array, "B L"]  the same for the whole statement: for ``if`` and ``elif``, through
    # the ``elif`` and ``else`` parts that follow (for ``while`` and ``for``: block_end)
    stmt_end: object = None
    # Int32[Array, "B D"]  the front end's return type (isa.T_*) of each def, in source
    # order (Program.fn_rettype[:, 1:]); read by the typed mask only; None: not known
    ret_types: object = None
    # Int32[Array, "B L"]  1 for a line where a statement may start after another: a ``;``
    # or a ``:`` (outside brackets) with code after it. Read by the typed mask only
    multi_lines: object = None
    # Int32[Array, "B L"]  1 for a line where a logical line with a conditional expression
    # (``a if t else b``) starts. Read by the typed mask only
    cond_lines: object = None
    # Int32[Array, "B L"]  1 for each line of a logical line with an expression statement
    # in it (not a ``print`` call): where a POP_TOP may end a statement. Read by the typed
    # mask only
    expr_lines: object = None
    # Int32[Array, "B N_LITS"]  1 for a literal slot holding -2**31 (``-2147483648``, one
    # constant) where no such literal of the source is negated again: the code generator
    # then never writes NEG right after loading it. Read by the typed mask only
    lit_min: object = None
    # Int32[Array, "B L"]  for each line with a token, the first line of the last statement
    # with code (not ``pass``) of the body it belongs to (the module's or a def's); 0 on
    # lines without one. Read by the typed mask only: a body's implicit return comes after
    # that line is marked
    body_last: object = None
    # Int32[Array, "B L"]  1 for a line with a token that can start code (a name, a number,
    # a keyword other than ``else``, ``(`` or a unary operator): the only lines a line
    # marker can name (the labeller marks the line where an instruction's node starts,
    # and a function's implicit ``return`` with its last statement's line, ``pass``
    # included). Read by the typed mask only.
    code_lines: object = None


def _one(kind, value, line, n_tokens, max_src: int):
    t = kind.shape[0]
    idx = jnp.arange(t)
    keep = (idx < n_tokens) & (kind != Tok.COMMENT) & (kind != Tok.NL) & (kind != Tok.PAD)
    pos = jnp.cumsum(keep) - 1
    n = jnp.sum(keep).astype(jnp.int32)
    dst = jnp.where(keep & (pos < max_src), pos, max_src)  # dropped beyond the end

    def compact(x, fill):
        return jnp.full(max_src, fill, jnp.int32).at[dst].set(x.astype(jnp.int32), mode="drop")

    is_num = keep & (kind == Tok.NUMBER)
    is_name = keep & (kind == Tok.NAME)
    lit_idx = jnp.cumsum(is_num) - 1
    # canonical slot: the labeller names a constant by the FIRST literal of that value
    # (vocab.py), which a model cannot find from value buckets alone (values >= 64 share
    # a bucket): give it directly, so emitting LIT_i is a copy of the attended token
    same = (value[:, None] == value[None, :]) & is_num[:, None] & is_num[None, :]
    first = jnp.argmax(same, axis=1)  # first NUMBER token with the same value
    clit_idx = jnp.where(is_num, lit_idx[first], 0)
    i32 = lambda x: x.astype(jnp.int32)  # noqa: E731
    indent = jnp.cumsum(i32(kind == Tok.INDENT) - i32(kind == Tok.DEDENT))
    opener = i32(kind == Tok.LPAR) - i32(kind == Tok.RPAR)
    paren = jnp.cumsum(opener) - jnp.maximum(opener, 0)  # depth before the token
    is_nl = i32(keep & (kind == Tok.NEWLINE))
    line_start = jnp.cumsum(is_nl) - is_nl  # logical lines ended before this token
    kpos = i32(jnp.cumsum(keep)) - 1
    # kept position just after the j-th NEWLINE
    at = jnp.where(is_nl > 0, jnp.cumsum(is_nl), t)
    start_pos = jnp.zeros(t + 1, jnp.int32).at[at].set(kpos + 1, mode="drop")
    col = kpos - start_pos[line_start]
    n_lits = jnp.sum(is_num).astype(jnp.int32)
    bucket = jnp.where(value < 0, 65, jnp.minimum(value, 64))
    k = compact(jnp.where(keep, kind, Tok.PAD), Tok.PAD)
    src_line = jnp.where(keep, line, 0)
    lits = (
        jnp.zeros(V.N_LITS, jnp.int32)
        .at[jnp.where(is_num, lit_idx, V.N_LITS)]
        .set(value.astype(jnp.int32), mode="drop")
    )
    # the literal 2147483648 under a unary minus is one constant, -2**31 (stored as it);
    # negating it again overflows, which the code generator writes only for a source
    # that negates it again (a ``-`` or ``-(`` before its own ``-``: a binary minus
    # there too, which only lets the mask allow more)
    comp = jnp.full(t + 3, Tok.PAD).at[jnp.where(keep, pos + 3, t + 3)].set(kind, mode="drop")
    before = lambda j: comp[jnp.clip(pos + 3 - j, 0, t + 2)]  # noqa: E731
    is_min = is_num & (value == jnp.iinfo(jnp.int32).min)
    again = is_min & (before(1) == Tok.MINUS) & (
        (before(2) == Tok.MINUS) | ((before(2) == Tok.LPAR) & (before(3) == Tok.MINUS)))  # fmt: skip
    lit_min = (lits == jnp.iinfo(jnp.int32).min) & ~jnp.any(again)  # (0 beyond n_lits)
    err = jnp.select(
        [n > max_src, jnp.any(is_name & (value >= V.N_VARS)), n_lits > V.N_LITS,
         jnp.any(src_line > V.N_LINES)],
        [Bound.TOKENS, Bound.NAMES, Bound.LITERALS, Bound.LINES], Bound.OK,
    ).astype(jnp.int32)  # fmt: skip
    return Src(
        **_blocks(kind, value, line, indent, keep, paren),
        kind=k,
        name=compact(jnp.where(is_name, jnp.clip(value, 0, V.N_VARS - 1), 0), 0),
        lit=compact(jnp.where(is_num, jnp.clip(lit_idx, 0, V.N_LITS - 1), 0), 0),
        clit=compact(jnp.clip(clit_idx, 0, V.N_LITS - 1), 0),
        indent=compact(jnp.clip(indent, 0, 15), 0),
        paren=compact(jnp.clip(paren, 0, 15), 0),
        col=compact(jnp.clip(col, 0, 63), 0),
        bucket=compact(jnp.where(is_num, bucket, N_BUCKETS - 1), N_BUCKETS - 1),
        line=compact(jnp.clip(src_line, 0, V.N_LINES), 0),
        n=jnp.minimum(n, max_src),
        lits=lits,
        n_lits=jnp.minimum(n_lits, V.N_LITS),
        lit_min=lit_min.astype(jnp.int32),
        n_lines=jnp.clip(jnp.max(src_line), 0, V.N_LINES).astype(jnp.int32),
        error=err,
    )


_CODE = np.zeros(len(Tok) + 1, np.int32)  # token kinds a node can start with
_CODE[[Tok.NAME, Tok.NUMBER, Tok.LPAR, Tok.PLUS, Tok.MINUS, Tok.TILDE]] = 1
_CODE[Tok.KW_FALSE :] = 1
_CODE[Tok.KW_ELSE] = 0
_EXPR_START = np.zeros(len(Tok) + 1, bool)  # token kinds an expression statement starts with
_EXPR_START[[Tok.NAME, Tok.NUMBER, Tok.LPAR, Tok.PLUS, Tok.MINUS, Tok.TILDE, Tok.KW_FALSE,
             Tok.KW_NONE, Tok.KW_TRUE, Tok.KW_NOT]] = True  # fmt: skip
_HEADER = np.zeros(len(Tok) + 1, bool)  # statements with a body the mask bounds
_HEADER[[Tok.KW_IF, Tok.KW_ELIF, Tok.KW_WHILE, Tok.KW_FOR]] = True


def _blocks(kind, value, line, indent, keep, paren) -> dict:
    """Src.code_lines, Src.block_end, Src.stmt_end, Src.multi_lines, Src.cond_lines,
    Src.expr_lines and Src.body_last of one program (raw token arrays), from the
    tokens' layout: a statement's body is the
    lines up to the next statement that starts no deeper than it."""
    import jax

    t = kind.shape[0]
    idx = jnp.arange(t)
    n1 = V.N_LINES + 2
    ln = jnp.clip(line, 0, n1 - 1)
    kc = jnp.clip(kind, 0, len(Tok))
    code = keep & (jnp.asarray(_CODE)[kc] > 0) & (line >= 1) & (line <= V.N_LINES)
    code_lines = jnp.zeros(n1, jnp.int32).at[jnp.where(code, ln, n1)].set(1, mode="drop")
    # a body's last line with code leaves out ``pass`` (it makes no instruction: a body
    # that ends in it ends where the statement before it does)
    made = code & (kind != Tok.KW_PASS)
    made_lines = jnp.zeros(n1, jnp.int32).at[jnp.where(made, ln, n1)].set(1, mode="drop")
    layout = (kind == Tok.INDENT) | (kind == Tok.DEDENT) | (kind == Tok.NEWLINE)
    sig = keep & ~layout
    last_nl = jax.lax.cummax(jnp.where(keep & (kind == Tok.NEWLINE), idx, -1))
    last_sig = jax.lax.cummax(jnp.where(sig, idx, -1))
    last_sig = jnp.concatenate([jnp.full(1, -1, last_sig.dtype), last_sig[:-1]])
    start = sig & ((last_nl > last_sig) | (last_sig < 0))  # the first token of a logical line
    big = jnp.int32(1 << 20)
    at = jnp.where(start, ln, n1)
    depth = jnp.full(n1, big).at[at].min(indent.astype(jnp.int32), mode="drop")
    # a line that continues the statement before it at its depth (elif, else)
    cont = jnp.zeros(n1, bool).at[at].max((kind == Tok.KW_ELIF) | (kind == Tok.KW_ELSE),
                                         mode="drop")  # fmt: skip
    is_hdr = start & jnp.asarray(_HEADER)[kc]
    is_if = jnp.zeros(n1, bool).at[at].max((kind == Tok.KW_IF) | (kind == Tok.KW_ELIF),
                                          mode="drop")  # fmt: skip
    hdr_depth = jnp.full(n1, -1).at[jnp.where(is_hdr, ln, n1)].max(indent.astype(jnp.int32),
                                                                  mode="drop")  # fmt: skip
    lines = jnp.arange(n1)
    later = (lines[None, :] > lines[:, None]) & (depth[None, :] <= hdr_depth[:, None])
    body_next = jnp.min(jnp.where(later, lines[None, :], n1), axis=1)
    # an if's chain goes on through the elif and else lines at its own depth
    chain = cont[None, :] & (depth[None, :] == hdr_depth[:, None]) & is_if[:, None]
    stmt_next = jnp.min(jnp.where(later & ~chain, lines[None, :], n1), axis=1)

    def last_code(nxt):
        inside = (lines[None, :] >= lines[:, None]) & (lines[None, :] < nxt[:, None])
        last = jnp.max(jnp.where(inside & (made_lines[None, :] > 0), lines[None, :], 0), axis=1)
        return jnp.where(hdr_depth >= 0, jnp.maximum(last, lines), 0)[: V.N_LINES + 1]

    # the next kept token after each one (COMMENT and NL are not kept)
    ci = jnp.cumsum(keep) - 1  # each kept token's index in the compacted order
    nxt_kind = jnp.full(t + 1, Tok.PAD).at[jnp.where(keep, ci, t)].set(kind, mode="drop")
    kpos = ci + 1  # index of the next kept token in the compacted order
    after = nxt_kind[jnp.clip(kpos, 0, t)]
    inline = (kind == Tok.COLON) & (paren == 0) & (after != Tok.NEWLINE) & (after != Tok.PAD)
    split = keep & ((kind == Tok.SEMI) | inline)
    multi = jnp.zeros(n1, jnp.int32).at[jnp.where(split, ln, n1)].set(1, mode="drop")
    first = jax.lax.cummax(jnp.where(start, ln, 0))  # each token's logical line's first line
    cond = keep & (kind == Tok.KW_IF) & ~start
    conds = jnp.zeros(n1, jnp.int32).at[jnp.where(cond, first, n1)].set(1, mode="drop")
    # expression statements (the only code a POP_TOP ends): a statement (a logical line's
    # first token, or the one after a ``;`` or an inline body's ``:``) that starts as an
    # expression does, with no ``=`` or augmented assignment outside brackets, and not a
    # call of ``print`` (whose values the code generator pops itself); every line of a
    # logical line with one is marked
    split_c = jnp.zeros(t + 1, bool).at[jnp.where(keep, ci, t)].set(split, mode="drop")
    s_start = sig & (start | ((ci >= 1) & split_c[jnp.clip(ci - 1, 0, t)]))
    sid = jnp.cumsum(s_start)
    asg = keep & (kind >= Tok.EQUAL) & (kind <= Tok.CIRCUMFLEXEQUAL) & (paren == 0)
    has_asg = jnp.zeros(t + 2, bool).at[jnp.where(asg, sid, t + 1)].set(True, mode="drop")
    is_print = (kind == Tok.NAME) & (value == _PRINT_ID)
    ex = s_start & jnp.asarray(_EXPR_START)[kc] & ~has_asg[sid] & ~is_print
    ex_first = jnp.zeros(n1, bool).at[jnp.where(ex, first, n1)].set(True, mode="drop")
    on_line = sig & (kind != Tok.ENDMARKER) & (line >= 1) & (line <= V.N_LINES)
    ex_tok = on_line & ex_first[first]
    expr = jnp.zeros(n1, jnp.int32).at[jnp.where(ex_tok, ln, n1)].set(1, mode="drop")
    # the body (module 0, each def in turn) that each token belongs to: a def's body runs
    # to the next logical line at the left margin; and the first line of each body's
    # last statement with code (``pass`` makes none), given to every line of the body
    top = start & (indent == 0)
    n_def = jnp.cumsum(top & (kind == Tok.KW_DEF))
    at_top = jax.lax.cummax(jnp.where(top, idx, -1))
    owner = jnp.where(at_top >= 0, jnp.where(kind[jnp.clip(at_top, 0, t - 1)] == Tok.KW_DEF,
                                            n_def[jnp.clip(at_top, 0, t - 1)], 0), 0)  # fmt: skip
    stmt = s_start & (jnp.asarray(_CODE)[kc] > 0) & (kind != Tok.KW_PASS) & (kind != Tok.KW_DEF)
    last_of = jnp.zeros(t + 1, jnp.int32).at[jnp.where(stmt, owner, t)].max(ln, mode="drop")
    body_last = jnp.zeros(n1, jnp.int32).at[jnp.where(on_line, ln, n1)].max(
        last_of[owner], mode="drop")  # fmt: skip
    cut = lambda x: x[: V.N_LINES + 1].astype(jnp.int32)  # noqa: E731
    return dict(code_lines=cut(code_lines), block_end=last_code(body_next),
                stmt_end=last_code(stmt_next), multi_lines=cut(multi),
                cond_lines=cut(conds), expr_lines=cut(expr), body_last=cut(body_last))  # fmt: skip


def source_features(tokens, nlimits: V.NeuralLimits = V.NEURAL_DEFAULT) -> Src:
    """Src from ``jaxcc.tokens.Tokens`` (batched or one program)."""
    import jax

    f = lambda k, v, ln, n: _one(k, v, ln, n, nlimits.max_src)  # noqa: E731
    if jnp.ndim(tokens.kind) == 1:
        return f(tokens.kind, tokens.value, tokens.line, tokens.n_tokens)
    return jax.vmap(f)(tokens.kind, tokens.value, tokens.line, tokens.n_tokens)


def print_items(tokens, limits, lex_error=None):
    """Int32[B, PF, PP]: the deterministic front end's print items of each function
    (``debuginfo.Debug.print_items``: parse, resolve names, infer types), for the typed
    decoding mask (``sample.compile(..., print_items=...)``). Batched Tokens at
    ``limits``' shapes; a program the front end rejects gets -1 everywhere (no typing)."""
    return typing(tokens, limits, lex_error)[0]


def typing(tokens, limits, lex_error=None):
    """(print_items Int32[B, PF, PP], ret_types Int32[B, F - 1]): what the typed decoding
    mask reads of the deterministic front end: ``print_items`` above and each def's
    return type (``ret_types``: isa.T_*, in source order). -1 everywhere for a program
    the front end rejects."""
    from jaxcc import middle, parser

    ast, parse_error = parser.parse(tokens, limits, lex_error=lex_error)
    program, error, debug = middle.middle_end_debug(ast, tokens, limits, parse_error)
    ok = error.code == 0
    return (jnp.where(ok[:, None, None], debug.print_items, -1),
            jnp.where(ok[:, None], ret_types(program), -1))  # fmt: skip


def ret_types(program):
    """Int32[..., F - 1]: the return type of each def (function ids 1, 2, ..., in source
    order) from a Program's ``fn_rettype``; -1 beyond ``n_funcs``."""
    rt = jnp.asarray(program.fn_rettype)[..., 1:]
    f = jnp.arange(1, rt.shape[-1] + 1)
    n = jnp.asarray(program.n_funcs)[..., None]
    return jnp.where(jnp.broadcast_to(f, rt.shape) < n, rt, -1)
