"""Token arrays made on the host from CPython's ``tokenize``: the lexer's oracle, and the
parser's input in tests before (and besides) the JAX lexer.

``host_lex(source, limits)`` returns ``(Tokens, Error)`` of numpy arrays for ONE program,
in exactly the layout of ``jaxcc.tokens.Tokens`` (padded to ``limits.max_tokens``).
Errors are those of the subset: tokenize's own errors, bytes and tokens outside the
subset (UNSUPPORTED), int literals outside int32 and the limits. On an error the tokens
before it are kept and ``n_tokens`` counts them.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import NamedTuple

import numpy as np

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
from jaxcc.limits import DEFAULT, Limits
from jaxcc.tokens import (
    KEYWORDS,
    KEYWORDS_AFTER_NUMBER,
    OPERATORS,
    RESERVED_NAMES,
    UNSUPPORTED_KEYWORDS,
    UNSUPPORTED_OPERATORS,
    Tok,
    Tokens,
)

# tokenize also makes '.' and '...' OP tokens (the JAX lexer rejects them elsewhere)
_UNSUPPORTED_OPS = {
    **UNSUPPORTED_OPERATORS,
    ".": Unsupported.ATTRIBUTE,
    "...": Unsupported.ELLIPSIS,
}


class _Tok(NamedTuple):
    kind: int
    start: int
    end: int
    line: int
    col: int
    end_line: int
    end_col: int
    value: int


def _int(s: str) -> int:
    """The value of an int literal; zeros alone are 0 however many (int() refuses more
    than 4300 digits, CPython's compiler does not count leading zeros)."""
    return 0 if set(s) <= set("0_") else int(s, 0)


def _number(s: str) -> tuple[int, int, int] | None:
    """(code, detail, value) of a NUMBER token's text; None when it is a valid int32."""
    low = s.lower()
    if low.endswith("j"):
        return Code.UNSUPPORTED, Unsupported.IMAGINARY, 0
    if not low.startswith(("0x", "0o", "0b")) and any(c in low for c in ".e"):
        return Code.UNSUPPORTED, Unsupported.FLOAT, 0
    if not low.startswith(("0x", "0o", "0b")):
        digits = low.replace("_", "").lstrip("0")
        if len(digits) > INT_MAX_STR_DIGITS:  # CPython refuses to convert it
            return Code.SYNTAX, Syntax.INT_MAX_STR_DIGITS, 0
    try:
        v = _int(s)
    except ValueError:
        if s.replace("_", "").isdigit():
            return Code.SYNTAX, Syntax.INVALID_DECIMAL, 0
        return Code.SYNTAX, Syntax.INVALID_NUMBER, 0
    if v > 2**31:  # 2**31 itself is allowed: it is valid under unary minus
        return Code.LIMIT, Limit.INT_LITERAL, 0
    return None


def host_lex(source: str | bytes, limits: Limits = DEFAULT) -> tuple[Tokens, Error]:
    source = without_bom(source)
    if isinstance(source, str):
        data = source.encode("utf-8", "surrogateescape")
    else:
        data = source
    toks: list[_Tok] = []
    err = (Code.OK, 0, 0, 0)

    line_starts = [0]
    for i, b in enumerate(data):
        if b == 0x0A:
            line_starts.append(i + 1)

    def offset(row: int, col: int) -> int:
        if row - 1 < len(line_starts):
            return min(line_starts[row - 1] + col, len(data))
        return len(data)

    def fail(code, detail, row, col):
        nonlocal err
        err = (int(code), int(row), int(col), int(detail))

    if len(data) > limits.max_source_bytes:
        fail(Code.LIMIT, Limit.SOURCE_BYTES, 1, 0)
        return _pack([], limits), Error(*err)
    for i, b in enumerate(data):
        if b >= 0x80:
            row = data.count(b"\n", 0, i) + 1
            fail(Code.UNSUPPORTED, Unsupported.NON_ASCII, row, i - line_starts[row - 1])
            break
    text = data.decode("ascii", "replace")
    # `python FILE` rejects a NUL when it reads the line holding it: before that line's
    # first token (and any error there)
    nul_line = data.count(b"\n", 0, data.find(b"\0")) + 1 if b"\0" in data else 0

    def nul_first(row: int) -> bool:
        if nul_line and row >= nul_line:
            fail(Code.SYNTAX, Syntax.NULL_BYTES, nul_line, 0)
            return True
        return False

    names: dict[str, int] = {n: i for i, n in enumerate(RESERVED_NAMES)}
    depth = 0  # indentation levels open
    level = 0  # brackets open (tokenize lets it go below 0; CPython stops there anyway)
    try:
        for t in tokenize.generate_tokens(io.StringIO(text).readline):
            if err[0] != Code.OK:
                break
            (r0, c0), (r1, c1) = t.start, t.end
            if nul_first(r0):
                break
            value = 0
            if t.type == tokenize.NAME:
                if t.string in KEYWORDS:
                    kind = KEYWORDS[t.string]
                elif t.string in UNSUPPORTED_KEYWORDS:
                    fail(Code.UNSUPPORTED, Unsupported.KEYWORD, r0, c0)
                    break
                else:
                    kind = Tok.NAME
                    value = names.setdefault(t.string, len(names))
            elif t.type == tokenize.NUMBER:
                bad = _number(t.string)
                if bad is not None:
                    fail(bad[0], bad[1], r0, c0)
                    break
                kind = Tok.NUMBER
                value = int(np.array(_int(t.string) & 0xFFFFFFFF, np.uint32).view(np.int32))
            elif t.type == tokenize.OP:
                if t.string in "([{":
                    if level >= MAX_PAREN_LEVEL:
                        fail(Code.SYNTAX, Syntax.TOO_MANY_PARENS, r0, c0)
                        break
                    level += 1
                elif t.string in ")]}":
                    level -= 1
                if t.string in OPERATORS:
                    kind = OPERATORS[t.string]
                elif t.string in _UNSUPPORTED_OPS:
                    fail(Code.UNSUPPORTED, _UNSUPPORTED_OPS[t.string], r0, c0)
                    break
                else:
                    fail(Code.SYNTAX, Syntax.INVALID, r0, c0)
                    break
            elif t.type == tokenize.STRING or t.type in _FSTRING_TYPES:
                fail(Code.UNSUPPORTED, Unsupported.STRING, r0, c0)
                break
            elif t.type == tokenize.ERRORTOKEN:
                if t.string in ("'", '"'):
                    fail(Code.UNSUPPORTED, Unsupported.STRING, r0, c0)
                elif set(t.string) <= set(" \t\f"):
                    # trailing blanks at EOF; \v and \x1c-\x1f are no whitespace to
                    # CPython's tokenizer ("invalid non-printable character")
                    continue
                elif len(t.string) == 1 and "!" <= t.string <= "~" and t.string != "\\":
                    # `$ ? ! \``: CPython's parser says just "invalid syntax" there
                    fail(Code.SYNTAX, Syntax.INVALID, r0, c0)
                else:
                    fail(Code.SYNTAX, Syntax.INVALID_CHARACTER, r0, c0)
                break
            elif t.type in _PLAIN:
                kind = _PLAIN[t.type]
            else:  # ENCODING and anything unforeseen
                continue
            prev = toks[-1] if toks else None
            if (
                prev is not None
                and prev.kind == Tok.NUMBER
                and prev.end == offset(r0, c0)
                and _glued(kind, text[prev.start : prev.end])
            ):
                # `007`, `0x`, `1_`, `0b12`, `1while`: tokenize splits them, CPython rejects them
                fail(Code.SYNTAX, _glued_detail(text, prev.start, prev.end), prev.line, prev.col)
                break
            if len(toks) == limits.max_tokens:  # the first error in source order wins
                fail(Code.LIMIT, Limit.TOKENS, r0, c0)
                break
            depth += (kind == Tok.INDENT) - (kind == Tok.DEDENT)
            if depth > MAX_INDENT_LEVEL:  # CPython's IndentationError, at the line
                fail(Code.INDENTATION, Syntax.TOO_DEEP, r0, 0)
                break
            if depth > limits.max_indent:
                fail(Code.LIMIT, Limit.INDENT_DEPTH, r0, c0)
                break
            toks.append(_Tok(int(kind), offset(r0, c0), offset(r1, c1), r0, c0, r1, c1, value))
    except IndentationError as e:
        if not nul_first(e.lineno or 0):
            # CPython's compile() column: after the line's last byte (tokenize's offset
            # is the first non-blank one)
            text = e.text if isinstance(e.text, str) else ""
            fail(Code.INDENTATION, Syntax.UNINDENT_MISMATCH, e.lineno or 0,
                 len(text.rstrip("\r\n").encode("utf-8", "surrogateescape")))  # fmt: skip
    except tokenize.TokenError as e:
        row, col = e.args[1] if len(e.args) > 1 else (0, 0)
        if not nul_first(row):
            fail(Code.SYNTAX, Syntax.EOF_IN_MULTILINE, row, col)
    except SyntaxError as e:  # 3.12's tokenizer raises these directly
        if not nul_first(e.lineno or 0):
            fail(Code.SYNTAX, Syntax.INVALID, e.lineno or 0, max((e.offset or 1) - 1, 0))
    return _pack(toks[: limits.max_tokens], limits), Error(*err)


_AFTER_NUMBER = frozenset(KEYWORDS_AFTER_NUMBER)
_KEYWORD_KINDS = frozenset(KEYWORDS.values())
_LEADING_ZEROS = re.compile(r"_?[1-9](?:_?[0-9])*")


def _glued(kind: int, number: str) -> bool:
    """Whether a token of ``kind`` starting right where the NUMBER ``number`` ends makes
    the number invalid for CPython (tokenize splits such text without complaint)."""
    if kind in (Tok.NUMBER, Tok.NAME):
        return True
    if kind in _KEYWORD_KINDS:
        # `0or`: CPython reads `0o` as an octal prefix
        return kind not in _AFTER_NUMBER or (kind == Tok.KW_OR and number == "0")
    return False


def _glued_detail(text: str, start: int, end: int) -> Syntax:
    """INVALID_DECIMAL where CPython says "leading zeros in decimal integer literals are not
    permitted" (`007`, `0_7`, `01x`: zeros, then a well-formed run of decimal digits not
    followed by `_ . e j`), else INVALID_NUMBER ("invalid ... literal")."""
    if set(text[start:end]) <= set("0_"):
        m = _LEADING_ZEROS.match(text, end)
        if m and text[m.end() : m.end() + 1] not in tuple("_.eEjJ"):
            return Syntax.INVALID_DECIMAL
    return Syntax.INVALID_NUMBER


_PLAIN = {
    tokenize.NEWLINE: Tok.NEWLINE,
    tokenize.NL: Tok.NL,
    tokenize.INDENT: Tok.INDENT,
    tokenize.DEDENT: Tok.DEDENT,
    tokenize.COMMENT: Tok.COMMENT,
    tokenize.ENDMARKER: Tok.ENDMARKER,
}
_FSTRING_TYPES = tuple(
    getattr(tokenize, n)
    for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
    if hasattr(tokenize, n)
)


def _pack(toks: list[_Tok], limits: Limits) -> Tokens:
    T = limits.max_tokens
    cols = np.zeros((7, T), np.int32)
    kind = np.zeros(T, np.int32)
    for i, t in enumerate(toks):
        kind[i] = t.kind
        cols[:, i] = t[1:]
    return Tokens(kind, *cols, n_tokens=np.int32(len(toks)))


def host_lex_many(sources, limits: Limits = DEFAULT) -> tuple[Tokens, Error]:
    """``host_lex`` over a list, stacked along a leading batch axis."""
    pairs = [host_lex(s, limits) for s in sources]
    toks = Tokens(*[np.stack([p[0][i] for p in pairs]) for i in range(len(Tokens._fields))])
    err = Error(*[np.array([p[1][i] for p in pairs], np.int32) for i in range(4)])
    return toks, err
