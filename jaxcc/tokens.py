"""Token kinds and the token-array layout: the contract between lexer and parser.

Kinds are exact (each operator and each keyword its own kind). ``TOKENIZE_NAME`` maps a
kind to what ``python -m tokenize`` prints: keywords print as NAME, operators as OP (or
their exact name with ``-e``).
"""

from __future__ import annotations

import enum
import token as _pytoken
from typing import NamedTuple

from jaxcc.errors import Unsupported
from jaxcc.ops import RESERVED_NAMES


class Tok(enum.IntEnum):
    PAD = 0  # beyond n_tokens
    ENDMARKER = 1
    NAME = 2
    NUMBER = 3
    NEWLINE = 4
    INDENT = 5
    DEDENT = 6
    COMMENT = 7
    NL = 8
    # operators (names as in the `token` module)
    LPAR = 9
    RPAR = 10
    COLON = 11
    COMMA = 12
    SEMI = 13
    PLUS = 14
    MINUS = 15
    STAR = 16
    DOUBLESTAR = 17
    DOUBLESLASH = 18
    PERCENT = 19
    LEFTSHIFT = 20
    RIGHTSHIFT = 21
    AMPER = 22
    VBAR = 23
    CIRCUMFLEX = 24
    TILDE = 25
    LESS = 26
    GREATER = 27
    LESSEQUAL = 28
    GREATEREQUAL = 29
    EQEQUAL = 30
    NOTEQUAL = 31
    EQUAL = 32
    PLUSEQUAL = 33
    MINEQUAL = 34
    STAREQUAL = 35
    DOUBLESTAREQUAL = 36
    DOUBLESLASHEQUAL = 37
    PERCENTEQUAL = 38
    LEFTSHIFTEQUAL = 39
    RIGHTSHIFTEQUAL = 40
    AMPEREQUAL = 41
    VBAREQUAL = 42
    CIRCUMFLEXEQUAL = 43
    RARROW = 44
    # keywords of the subset (tokenize reports them as NAME)
    KW_FALSE = 45
    KW_NONE = 46
    KW_TRUE = 47
    KW_AND = 48
    KW_ASSERT = 49
    KW_BREAK = 50
    KW_CONTINUE = 51
    KW_DEF = 52
    KW_ELIF = 53
    KW_ELSE = 54
    KW_FOR = 55
    KW_IF = 56
    KW_IN = 57
    KW_NOT = 58
    KW_OR = 59
    KW_PASS = 60
    KW_RETURN = 61
    KW_WHILE = 62


N_TOK = len(Tok)

OPERATORS: dict[str, Tok] = {
    s: Tok[_pytoken.tok_name[_pytoken.EXACT_TOKEN_TYPES[s]]]
    for s in (
        "(",
        ")",
        ":",
        ",",
        ";",
        "+",
        "-",
        "*",
        "**",
        "//",
        "%",
        "<<",
        ">>",
        "&",
        "|",
        "^",
        "~",
        "<",
        ">",
        "<=",
        ">=",
        "==",
        "!=",
        "=",
        "+=",
        "-=",
        "*=",
        "**=",
        "//=",
        "%=",
        "<<=",
        ">>=",
        "&=",
        "|=",
        "^=",
        "->",
    )
}

# Python operators outside the subset: both lexers reject them as Code.UNSUPPORTED with
# this detail (an operator the subset gains moves from here to OPERATORS)
UNSUPPORTED_OPERATORS: dict[str, Unsupported] = {
    "/": Unsupported.TRUE_DIVISION,
    "/=": Unsupported.TRUE_DIVISION,
    "[": Unsupported.SUBSCRIPT,
    "]": Unsupported.SUBSCRIPT,
    "{": Unsupported.DICT_SET,
    "}": Unsupported.DICT_SET,
    "@": Unsupported.MATMUL,
    "@=": Unsupported.MATMUL,
    ":=": Unsupported.WALRUS,
}

KEYWORDS: dict[str, Tok] = {
    "False": Tok.KW_FALSE,
    "None": Tok.KW_NONE,
    "True": Tok.KW_TRUE,
    "and": Tok.KW_AND,
    "assert": Tok.KW_ASSERT,
    "break": Tok.KW_BREAK,
    "continue": Tok.KW_CONTINUE,
    "def": Tok.KW_DEF,
    "elif": Tok.KW_ELIF,
    "else": Tok.KW_ELSE,
    "for": Tok.KW_FOR,
    "if": Tok.KW_IF,
    "in": Tok.KW_IN,
    "not": Tok.KW_NOT,
    "or": Tok.KW_OR,
    "pass": Tok.KW_PASS,
    "return": Tok.KW_RETURN,
    "while": Tok.KW_WHILE,
}

# Python keywords outside the subset: the lexer rejects them as Code.UNSUPPORTED
# (detail Unsupported.KEYWORD). Soft keywords (match, case, type, _) are plain names.
# the keywords CPython's tokenizer lets follow a number directly (`1if x else 2`, with a
# warning); any other word glued to a number is an "invalid ... literal"
KEYWORDS_AFTER_NUMBER = (
    Tok.KW_AND, Tok.KW_ELSE, Tok.KW_FOR, Tok.KW_IF, Tok.KW_IN, Tok.KW_NOT, Tok.KW_OR,
)  # fmt: skip

UNSUPPORTED_KEYWORDS = (
    "as",
    "async",
    "await",
    "class",
    "del",
    "except",
    "finally",
    "from",
    "global",
    "import",
    "is",
    "lambda",
    "nonlocal",
    "raise",
    "try",
    "with",
    "yield",
)

# Names with reserved interned ids, the same in every program, so that later stages
# can recognise builtins and annotations without text: the builtins of jaxcc/ops.py, a
# name's id is its row's index (ops.BUILTIN_ID). User names get ids from
# N_RESERVED_NAMES upward, densely, in order of first occurrence.
N_RESERVED_NAMES = len(RESERVED_NAMES)


_KEYWORD_KINDS = frozenset(KEYWORDS.values())
_OPERATOR_KINDS = frozenset(OPERATORS.values())


def tokenize_name(kind: int, exact: bool = False) -> str:
    """What `python -m tokenize [-e]` prints as the type of a token of this kind."""
    k = Tok(kind)
    if k in _KEYWORD_KINDS:
        return "NAME"
    if k in _OPERATOR_KINDS:  # by set, not range: a token kind is appended, never inserted
        return k.name if exact else "OP"
    return k.name


class Tokens(NamedTuple):
    """Token arrays of a batch (leading axis B; none for one program). T = max_tokens.

    Every token of ``tokenize`` is present, COMMENT and NL included, in order; padding
    beyond ``n_tokens`` has kind PAD and zeros elsewhere. Positions follow tokenize:
    lines 1-based, columns 0-based byte offsets within the line; ``end`` positions are
    exclusive. DEDENT and the EOF NEWLINE/ENDMARKER are zero-width, as in tokenize.
    """

    kind: object  # Int32[Array, "B T"]  Tok
    start: object  # Int32[Array, "B T"]  byte offset of the first byte
    end: object  # Int32[Array, "B T"]  byte offset one past the last byte
    line: object  # Int32[Array, "B T"]
    col: object  # Int32[Array, "B T"]
    end_line: object  # Int32[Array, "B T"]
    end_col: object  # Int32[Array, "B T"]
    value: object  # Int32[Array, "B T"]  NUMBER: its value; NAME: interned id; else 0
    n_tokens: object  # Int32[Array, "B"]
